-- no-transaction
-- A trigger's state is one of the state machine's states
-- (host/src/model/state.rs, `TriggerState::ALL`; a unit test checks this
-- list against it). SQLite cannot add a CHECK to an existing table, so the
-- table is rebuilt the documented way (https://sqlite.org/lang_altertable.html,
-- "making other kinds of table schema changes"): foreign keys off, then in
-- one transaction create the new table, copy, drop, rename, re-create the
-- indexes; the AUTOINCREMENT sequence is carried over so no id is reused.
-- Mirrors migrations/postgres/0007_trigger_state_check.sql.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TEMP TABLE paddock_0007_sequence AS
    SELECT seq FROM sqlite_sequence WHERE name = 'triggers';

CREATE TABLE triggers_0007 (
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
    state           TEXT    NOT NULL CONSTRAINT triggers_state_known CHECK (state IN (
                        'pending', 'running', 'retry_wait', 'succeeded', 'failed',
                        'cancelled', 'skipped', 'manual')),
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

INSERT INTO triggers_0007 (id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested)
SELECT id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested
FROM triggers;

DROP TABLE triggers;
ALTER TABLE triggers_0007 RENAME TO triggers;

UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM paddock_0007_sequence))
WHERE name = 'triggers' AND EXISTS (SELECT 1 FROM paddock_0007_sequence);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'triggers', seq FROM paddock_0007_sequence
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'triggers');
DROP TABLE paddock_0007_sequence;

CREATE INDEX triggers_claimable ON triggers (state, next_run_at);
CREATE INDEX triggers_job ON triggers (job_id, scheduled_at);
CREATE INDEX triggers_scheduled_at ON triggers (scheduled_at);
CREATE INDEX triggers_claim ON triggers (state, priority, next_run_at, id);
CREATE INDEX triggers_lease ON triggers (lease_until) WHERE state = 'running';

COMMIT;
PRAGMA foreign_keys = ON;
