-- no-transaction
-- The CHECK of 0007 on triggers.state, written as an OR of equalities
-- instead of `state IN (...)`. SQLite evaluates a constant IN list of this
-- size through an ephemeral table built at every execution of the
-- statement, and every claim and commit writes `state`: measured on
-- benches/throughput (store calls), claims of 64 took 0.9-1.0 ms with the
-- IN list against 0.65-0.8 ms, as before the CHECK, with the ORs. The
-- claim's own state guard (store/runner/claim.rs) is written the same way.
-- The states are the same (a unit test, store/guards.rs, checks them against
-- `TriggerState::ALL`); SQLite cannot alter a CHECK, so the table is rebuilt
-- as in 0007 (https://sqlite.org/lang_altertable.html, "making other kinds
-- of table schema changes"), keeping the AUTOINCREMENT sequence.
-- 0007 is left as it landed: sqlx refuses a database whose applied
-- migration's checksum changed.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TEMP TABLE paddock_0008_sequence AS
    SELECT seq FROM sqlite_sequence WHERE name = 'triggers';

CREATE TABLE triggers_0008 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_key        TEXT    NOT NULL UNIQUE,   -- job@scheduled_at@vN[#partition]
    job_id          TEXT    NOT NULL,
    plan_version    INTEGER NOT NULL,
    tenant          TEXT    NOT NULL,
    resource_group  TEXT    NOT NULL,
    origin          TEXT    NOT NULL,          -- schedule | manual | backfill | event
    scheduled_at    INTEGER NOT NULL,
    partition_key   TEXT,
    params          TEXT    NOT NULL DEFAULT '{}',  -- trigger-level params (JSON object)
    state           TEXT    NOT NULL CONSTRAINT triggers_state_known CHECK (
                        state = 'pending' OR state = 'running' OR state = 'retry_wait'
                        OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled'
                        OR state = 'skipped' OR state = 'manual'),
    priority        INTEGER NOT NULL DEFAULT 0,     -- lower runs first
    next_run_at     INTEGER NOT NULL,
    fencing_token   INTEGER NOT NULL DEFAULT 0,     -- incremented by every claim
    lease_owner     TEXT,
    lease_until     INTEGER,
    attempts        INTEGER NOT NULL DEFAULT 0,
    generation      INTEGER NOT NULL DEFAULT 0,
    result          BLOB,
    error_class     TEXT,
    error_message   TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (job_id, plan_version) REFERENCES plan_versions (job_id, version)
);

INSERT INTO triggers_0008 (id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested)
SELECT id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested
FROM triggers;

DROP TABLE triggers;
ALTER TABLE triggers_0008 RENAME TO triggers;

UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM paddock_0008_sequence))
WHERE name = 'triggers' AND EXISTS (SELECT 1 FROM paddock_0008_sequence);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'triggers', seq FROM paddock_0008_sequence
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'triggers');
DROP TABLE paddock_0008_sequence;

-- The indexes of postgres/0008_hot_path.sql (see there why each is kept):
-- the claimable rows in two partial indexes in claim order instead of
-- `triggers_claimable` and `triggers_claim`, and no `triggers_scheduled_at`
-- (re-scans look triggers up by job and time through `triggers_job`).
CREATE INDEX triggers_job ON triggers (job_id, scheduled_at);
CREATE INDEX triggers_pending ON triggers (priority, next_run_at, id) WHERE state = 'pending';
CREATE INDEX triggers_retry ON triggers (priority, next_run_at, id) WHERE state = 'retry_wait';
CREATE INDEX triggers_lease ON triggers (lease_until)
    WHERE state = 'running' AND lease_until IS NOT NULL;

COMMIT;
PRAGMA foreign_keys = ON;
