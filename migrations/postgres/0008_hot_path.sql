-- The hot tables, shaped for the work each job does (issue 15): a claim
-- moves a trigger pending -> running and opens an attempt row; its end
-- moves the trigger on and closes the attempt. Measured per job before this
-- migration: ~16 index entries, 25 WAL records, 2.5 KB of WAL.
--
-- Triggers. A state change can never be a HOT update while any index
-- names `state` (PostgreSQL 15 treats a partial index's predicate columns
-- as indexed), and the claim must take a row out of the claimable set, so
-- the aim is the fewest index entries per row version instead:
--  * `triggers_claimable (state, next_run_at)` and `triggers_claim (state,
--    priority, next_run_at, id)` become two partial indexes holding only
--    claimable rows, in claim order: a running or finished version adds no
--    entry to either, and each lane's walk is an ordered scan that stops
--    after its batch — the two states are no longer interleaved in one
--    index, so no claim sorts the backlog, whatever the statistics say.
--  * `triggers_scheduled_at` goes: the scheduler's re-scan looks triggers
--    up by job and time, which `triggers_job (job_id, scheduled_at)` serves.
--  * Kept, each for a reason: the primary key; `plan_key` (the unique plan
--    key, the idempotence of every trigger insert); `triggers_job` (a job's
--    triggers by time: overlap checks, re-scans, `trigger list --job`);
--    `triggers_lease` (lapsed leases, longest lapsed first; running
--    versions only; re-created below).
-- A claimed version now adds 4 entries (pkey, plan_key, job, lease), a
-- finished one 3 (pkey, plan_key, job).
DROP INDEX IF EXISTS triggers_claimable;
DROP INDEX IF EXISTS triggers_claim;
DROP INDEX IF EXISTS triggers_scheduled_at;
CREATE INDEX triggers_pending ON triggers (priority, next_run_at, id) WHERE state = 'pending';
CREATE INDEX triggers_retry ON triggers (priority, next_run_at, id) WHERE state = 'retry_wait';
-- The lapsed-lease walk's index, its predicate narrowed to what only that
-- walk implies: `lease_until < now` implies `lease_until IS NOT NULL`, a
-- fenced write's `state = 'running'` does not. A running trigger always has
-- a lease, so the index holds the same rows as before; but a fenced group
-- commit can no longer be planned as a walk of every running trigger
-- filtered by id (chosen while statistics said few were running, it reads
-- them all) — only the primary key reaches its rows.
DROP INDEX IF EXISTS triggers_lease;
CREATE INDEX triggers_lease ON triggers (lease_until)
    WHERE state = 'running' AND lease_until IS NOT NULL;

-- Statistics kept right by design: after a burst the planner must know
-- the hot tables' sizes within a minute (autovacuum's nap), not after 10-20%
-- of the table changed. Vacuum early too, so dead versions left by claims
-- and ends are reclaimed before they spread the table.
-- Every row of `triggers` is updated at least twice (claim, end): a page
-- filled to 85% leaves the new versions room on their own page, so a
-- claim and an end dirty one page, not two.
ALTER TABLE triggers SET (
    fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_threshold = 1000
);

-- Attempts. An attempt row is written twice: opened by its claim (so a
-- takeover and an operator see the running attempt), closed at its end.
-- The close changes no indexed column (outcome, ended_at, measurements),
-- so it is a HOT update when the new version fits on the row's page: the
-- claim fills pages with a batch of new rows at once, so half of each page
-- is kept for their closes. A HOT close adds no index entry.
ALTER TABLE attempts SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_threshold = 1000
);
