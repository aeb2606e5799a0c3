-- Quotas that bite (issue 16); mirrors migrations/postgres/0009_group_capacity.sql.
ALTER TABLE resource_groups ADD COLUMN connector_rate_per_s REAL
    CHECK (connector_rate_per_s > 0);
ALTER TABLE resource_groups ADD COLUMN service_time_ms INTEGER CHECK (service_time_ms > 0);
ALTER TABLE resource_groups ADD COLUMN db_connections INTEGER CHECK (db_connections > 0);
ALTER TABLE resource_groups ADD COLUMN memory_budget_bytes INTEGER CHECK (memory_budget_bytes > 0);
ALTER TABLE resource_groups ADD COLUMN working_set_bytes INTEGER CHECK (working_set_bytes > 0);
-- SQLite cannot add a NOT NULL column without a constant default: 0 marks
-- "not computed yet" for a moment, and is replaced at once.
ALTER TABLE resource_groups ADD COLUMN effective_concurrency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resource_groups ADD COLUMN effective_binding TEXT NOT NULL DEFAULT 'configured max';
-- Before 0009 no claim read a group's concurrency, so the `default`
-- group's seeded 16 limited nothing; enforced, it would cap every
-- deployment's default group at 16 attempts across all its processes. The
-- seeded value (if no admin changed it) becomes 1024; groups admins made
-- keep theirs, which claims now enforce.
UPDATE resource_groups SET max_concurrency = 1024
    WHERE name = 'default' AND max_concurrency = 16 AND created_at = updated_at;
UPDATE resource_groups SET effective_concurrency = max_concurrency;

DROP INDEX IF EXISTS triggers_pending;
DROP INDEX IF EXISTS triggers_retry;
CREATE INDEX triggers_pending ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'pending';
CREATE INDEX triggers_retry ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'retry_wait';
CREATE INDEX triggers_running ON triggers (resource_group, tenant) WHERE state = 'running';

-- Fair shares inside a group: tenants share its room by weight (a tenant
-- without a row weighs 1), and a tenant's head gains up to one slot's worth
-- of priority as it waits (`aging_ms` per group): see
-- store/runner/claim.rs, `fair_order`.
CREATE TABLE tenants (
    tenant      TEXT PRIMARY KEY,
    weight      INTEGER NOT NULL DEFAULT 1 CHECK (weight > 0),
    -- Attempts of the tenant running at once, across groups, at most
    -- (NULL: no tenant limit; each group's still applies).
    max_in_flight INTEGER CHECK (max_in_flight > 0),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
ALTER TABLE resource_groups ADD COLUMN aging_ms INTEGER NOT NULL DEFAULT 60000 CHECK (aging_ms > 0);
