-- Backlog and drain ETA per group (issue 19); mirrors
-- migrations/sqlite/0016_backlog.sql.
--
-- `paddock status` counts each group's successes in a window: triggers
-- that reached `succeeded` with `finished_at` inside it. No index reaches
-- them by finish time, and neither a trigger's id nor its attempt's bounds
-- when it finishes (a guest may wait for an instance slot, heartbeats may
-- renew a lease for hours), so without this index the count reads every
-- trigger. With it, one range per group, as long as the window's
-- successes. `tenant` last: a tenant's count is read from the index too.
--
-- Cost: one entry per trigger that succeeds, written by the commit that
-- finishes it (succeeded is final: never rewritten, never removed); no
-- entry for a pending, running, retrying or failed version.
CREATE INDEX triggers_succeeded ON triggers (resource_group, finished_at, tenant)
    WHERE state = 'succeeded';
-- Built in the migration's transaction: on a database that already holds
-- millions of succeeded triggers the build holds writes to `triggers`
-- while it reads them (CREATE INDEX CONCURRENTLY would need a
-- no-transaction migration of its own).
