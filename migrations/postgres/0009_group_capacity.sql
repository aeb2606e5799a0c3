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

-- A claim takes from each group only what it has room for, so each group's
-- due work is walked on its own: the claim lanes lead with the group. A
-- group at its limit costs its claim one index probe, not a walk of its
-- backlog; the groups with room are merged in claim order.
DROP INDEX IF EXISTS triggers_pending;
DROP INDEX IF EXISTS triggers_retry;
CREATE INDEX triggers_pending ON triggers (resource_group, priority, next_run_at, id)
    WHERE state = 'pending';
CREATE INDEX triggers_retry ON triggers (resource_group, priority, next_run_at, id)
    WHERE state = 'retry_wait';
-- The room: a group's running attempts, counted by the claim from this
-- index (as many entries as the group has running, so at most its limit
-- plus lapsed leases not yet taken over).
CREATE INDEX triggers_running ON triggers (resource_group) WHERE state = 'running';
