-- Successes counted per group commit instead of indexed per trigger
-- (issue 16); mirrors migrations/postgres/0024_success_counts.sql (see
-- there for why).
CREATE TABLE success_counts (
    resource_group TEXT    NOT NULL,
    tenant         TEXT    NOT NULL,
    at             INTEGER NOT NULL,
    n              INTEGER NOT NULL CHECK (n > 0)
);
CREATE INDEX success_counts_at ON success_counts (resource_group, at, tenant);

INSERT INTO success_counts (resource_group, tenant, at, n)
    SELECT resource_group, tenant, finished_at, count(*) FROM triggers
    WHERE state = 'succeeded'
      AND finished_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) - 90000000
    GROUP BY resource_group, tenant, finished_at;

DROP INDEX triggers_succeeded;
