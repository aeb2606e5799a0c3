-- Successes counted per group commit instead of indexed per trigger
-- (issue 16); mirrors migrations/sqlite/0024_success_counts.sql.
--
-- `paddock status` counts each group's successes in a window (issue 19,
-- migration 0016). It read them from `triggers_succeeded`, a partial
-- index with one entry per trigger that succeeded, written by the group
-- commit that finished it: one more index entry per job on the hottest
-- path (measured with the throughput bench: ~3-4% of no-op jobs/s with
-- `paddock serve`, server CPU ~7 us a job). Now the group commit writes
-- one row per (group, tenant) it ended triggers of as succeeded, with how
-- many and when (its clock, the triggers' `finished_at`): a commit of 30
-- jobs writes one row where it wrote 30 index entries, and the count in a
-- window is one range of `success_counts_at` per group, as before.
--
-- Rows are never rewritten. Like the triggers they count, they are kept.
CREATE TABLE success_counts (
    resource_group TEXT   NOT NULL,
    tenant         TEXT   NOT NULL,
    at             BIGINT NOT NULL,
    n              BIGINT NOT NULL CHECK (n > 0)
);
CREATE INDEX success_counts_at ON success_counts (resource_group, at, tenant);

-- The successes a status window can still reach (at most 24 hours back,
-- with an hour to spare), counted from the index this replaces.
INSERT INTO success_counts (resource_group, tenant, at, n)
    SELECT resource_group, tenant, finished_at, count(*) FROM triggers
    WHERE state = 'succeeded'
      AND finished_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT - 90000000
    GROUP BY resource_group, tenant, finished_at;

DROP INDEX triggers_succeeded;
