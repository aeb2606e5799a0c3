-- Quotas that bite, part 2 (issue 16); mirrors migrations/sqlite/0010_recovery_lane.sql.

-- The recovery lane: catch-up fires, backfills and retries (a trigger
-- claimed from `retry_wait` is marked when claimed) take at most a share of
-- their group's capacity, ramped up step by step (store/runner/claim.rs,
-- lease/governor.rs). 0 fresh work, 1 recovery.
ALTER TABLE triggers ADD COLUMN recovery SMALLINT NOT NULL DEFAULT 0 CHECK (recovery IN (0, 1));

-- A group's minimum share (slots its claims get before any other group's
-- beyond their own minimum), its recovery lane's share while fresh work
-- waits, and the ramp: the lane's current ceiling in percent of the
-- group's effective concurrency (10 → 25 → 50 → 100, one step per
-- `ramp_every_ms` while the group is healthy, one step back when its
-- failure rate or service time rises), moved by the governor.
ALTER TABLE resource_groups ADD COLUMN min_share BIGINT NOT NULL DEFAULT 0 CHECK (min_share >= 0);
ALTER TABLE resource_groups ADD COLUMN recovery_share_pct BIGINT NOT NULL DEFAULT 30
    CHECK (recovery_share_pct BETWEEN 1 AND 100);
ALTER TABLE resource_groups ADD COLUMN recovery_ramp_pct BIGINT NOT NULL DEFAULT 100
    CHECK (recovery_ramp_pct IN (10, 25, 50, 100));
ALTER TABLE resource_groups ADD COLUMN recovery_ramp_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE resource_groups ADD COLUMN ramp_every_ms BIGINT NOT NULL DEFAULT 30000
    CHECK (ramp_every_ms > 0);
-- Claims of the group stopped by a high-water mark (a downstream breaker
-- open): why (NULL: not held), by which serving process, until when unless
-- it renews the hold (so a hold outlives no crashed process), and how many
-- times the group was held.
ALTER TABLE resource_groups ADD COLUMN held TEXT;
ALTER TABLE resource_groups ADD COLUMN held_by TEXT;
ALTER TABLE resource_groups ADD COLUMN held_until BIGINT;
ALTER TABLE resource_groups ADD COLUMN holds BIGINT NOT NULL DEFAULT 0;

-- Tenant quotas: manual/API triggers created per minute (over it a new
-- trigger waits: its due time moves to when the window admits it) and
-- guest fuel per hour (over it the governor holds the tenant's claims:
-- `held` names why; NULL when not held).
ALTER TABLE tenants ADD COLUMN triggers_per_minute BIGINT CHECK (triggers_per_minute > 0);
ALTER TABLE tenants ADD COLUMN fuel_per_hour BIGINT CHECK (fuel_per_hour > 0);
ALTER TABLE tenants ADD COLUMN held TEXT;

-- Fuel burnt per tenant per minute, as serving processes report it.
CREATE TABLE tenant_fuel (
    tenant   TEXT    NOT NULL,
    minute   BIGINT NOT NULL,   -- ms at the start of the minute (database clock)
    fuel     BIGINT NOT NULL,
    PRIMARY KEY (tenant, minute)
);

-- The claim lanes: fresh work (pending, not recovery) and recovery
-- (retries and pending recovery triggers); the recovery lane's running
-- attempts are counted from their own small index.
DROP INDEX IF EXISTS triggers_pending;
DROP INDEX IF EXISTS triggers_retry;
CREATE INDEX triggers_pending ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'pending' AND recovery = 0;
CREATE INDEX triggers_recovery ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'retry_wait' OR (state = 'pending' AND recovery = 1);
CREATE INDEX triggers_recovering ON triggers (resource_group) WHERE state = 'running' AND recovery = 1;
-- A tenant's manual triggers by due time: the per-minute quota's window.
CREATE INDEX triggers_manual ON triggers (tenant, next_run_at) WHERE origin = 'manual';
