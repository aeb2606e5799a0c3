-- A tenant's backfill triggers not yet run, counted by every backfill
-- against the per-tenant limit (model/bounds.rs,
-- BACKFILL_PENDING_PER_TENANT): only those rows are in the index.
CREATE INDEX triggers_backfill_waiting ON triggers (tenant)
    WHERE origin = 'backfill' AND state IN ('pending', 'retry_wait');
