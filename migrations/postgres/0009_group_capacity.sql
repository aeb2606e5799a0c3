-- Quotas that bite (issue 16): a group's effective concurrency is computed
-- from the inputs below (host/src/model/group.rs, `effective_concurrency`)
-- and enforced by every claim, across processes.
ALTER TABLE resource_groups ADD COLUMN connector_rate_per_s DOUBLE PRECISION
    CHECK (connector_rate_per_s > 0);
ALTER TABLE resource_groups ADD COLUMN service_time_ms BIGINT CHECK (service_time_ms > 0);
ALTER TABLE resource_groups ADD COLUMN db_connections BIGINT CHECK (db_connections > 0);
ALTER TABLE resource_groups ADD COLUMN memory_budget_bytes BIGINT CHECK (memory_budget_bytes > 0);
ALTER TABLE resource_groups ADD COLUMN working_set_bytes BIGINT CHECK (working_set_bytes > 0);
-- What claims enforce: the minimum of the inputs as last computed (when the
-- group is set, and by each serving process as observed service times and
-- peaks move), and which input binds.
ALTER TABLE resource_groups ADD COLUMN effective_concurrency BIGINT;
ALTER TABLE resource_groups ADD COLUMN effective_binding TEXT NOT NULL DEFAULT 'configured max';
-- Before 0009 no claim read a group's concurrency, so the `default`
-- group's seeded 16 limited nothing; enforced, it would cap every
-- deployment's default group at 16 attempts across all its processes. The
-- seeded value (if no admin changed it) becomes 1024; groups admins made
-- keep theirs, which claims now enforce.
UPDATE resource_groups SET max_concurrency = 1024
    WHERE name = 'default' AND max_concurrency = 16 AND created_at = updated_at;
UPDATE resource_groups SET effective_concurrency = max_concurrency;
ALTER TABLE resource_groups ALTER COLUMN effective_concurrency SET NOT NULL;
ALTER TABLE resource_groups ADD CONSTRAINT resource_groups_effective_positive
    CHECK (effective_concurrency > 0);

-- A claim takes from each group only what it has room for, and shares it
-- between the group's tenants, so each (group, tenant) queue is walked on
-- its own: the claim lanes lead with the group and the tenant. A group at
-- its limit costs its claim nothing, a tenant's flood costs it one walk of
-- at most the group's room; the queues are merged by fair share.
DROP INDEX IF EXISTS triggers_pending;
DROP INDEX IF EXISTS triggers_retry;
CREATE INDEX triggers_pending ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'pending';
CREATE INDEX triggers_retry ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'retry_wait';
-- The room and the shares: a group's (and each of its tenants') running
-- attempts, counted by the claim from this index (as many entries as the
-- group has running, so at most its limit plus lapsed leases not yet
-- taken over).
CREATE INDEX triggers_running ON triggers (resource_group, tenant) WHERE state = 'running';

-- Fair shares inside a group: tenants share its room by weight (a tenant
-- without a row weighs 1), and a tenant's head gains up to one slot's worth
-- of priority as it waits (`aging_ms` per group): see
-- store/runner/claim.rs, `fair_order`.
CREATE TABLE tenants (
    tenant      TEXT PRIMARY KEY,
    weight      BIGINT NOT NULL DEFAULT 1 CHECK (weight > 0),
    -- Attempts of the tenant running at once, across groups, at most
    -- (NULL: no tenant limit; each group's still applies).
    max_in_flight BIGINT CHECK (max_in_flight > 0),
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
ALTER TABLE resource_groups ADD COLUMN aging_ms BIGINT NOT NULL DEFAULT 60000 CHECK (aging_ms > 0);
