-- no-transaction
-- Gates: pause, resume and cancel at five scopes (issue 18); mirrors
-- migrations/postgres/0018_gates.sql. See host/src/model/gates.rs.
--
-- 1. A new trigger state, `paused` (held by a closed gate), in the CHECK
--    on triggers.state, and a `pause_requested` flag on a running trigger
--    (its heartbeat answers it: the guest sees `pause-requested` at its
--    next safe point, and the attempt's release or retry lands `paused`).
--    SQLite cannot alter a CHECK, so the table is rebuilt as in 0007/0008
--    (https://sqlite.org/lang_altertable.html, "making other kinds of table
--    schema changes"), carrying the AUTOINCREMENT sequence and re-creating
--    every index made since: 0008's triggers_job, 0010's triggers_pending,
--    triggers_recovery and triggers_manual, 0013's triggers_running, 0016's
--    triggers_succeeded and 0017's triggers_parked — plus triggers_paused.
-- 2. A manual run's request key (`trigger run --request-key K`, the plan
--    key's partition `manual-K`) deduplicates for as long as its trigger
--    is kept, not only within the same second: a run is looked up by job
--    and partition before it is created.
-- 3. A job type: the optional `type` label of a plan version.
-- 4. The gates themselves.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TEMP TABLE paddock_0018_sequence AS
    SELECT seq FROM sqlite_sequence WHERE name = 'triggers';

CREATE TABLE triggers_0018 (
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
                        OR state = 'skipped' OR state = 'manual' OR state = 'paused'),
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
    recovery        INTEGER NOT NULL DEFAULT 0 CHECK (recovery IN (0, 1)),
    pause_requested INTEGER NOT NULL DEFAULT 0 CHECK (pause_requested IN (0, 1)),
    FOREIGN KEY (job_id, plan_version) REFERENCES plan_versions (job_id, version)
);

INSERT INTO triggers_0018 (id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested, recovery)
SELECT id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested, recovery
FROM triggers;

DROP TABLE triggers;
ALTER TABLE triggers_0018 RENAME TO triggers;

UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM paddock_0018_sequence))
WHERE name = 'triggers' AND EXISTS (SELECT 1 FROM paddock_0018_sequence);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'triggers', seq FROM paddock_0018_sequence
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'triggers');
DROP TABLE paddock_0018_sequence;

CREATE INDEX triggers_job ON triggers (job_id, scheduled_at);
CREATE INDEX triggers_pending ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'pending' AND recovery = 0;
CREATE INDEX triggers_recovery ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'retry_wait' OR (state = 'pending' AND recovery = 1);
CREATE INDEX triggers_manual ON triggers (tenant, next_run_at) WHERE origin = 'manual';
CREATE INDEX triggers_running ON triggers (resource_group, tenant, recovery, lease_until)
    WHERE state = 'running' AND lease_until IS NOT NULL;
CREATE INDEX triggers_succeeded ON triggers (resource_group, finished_at, tenant)
    WHERE state = 'succeeded';
CREATE INDEX triggers_parked ON triggers (resource_group, tenant) WHERE state = 'manual';
-- Paused triggers per group and tenant: the metrics gauge and a resume's
-- walk; claims and commits never touch it.
CREATE INDEX triggers_paused ON triggers (resource_group, tenant) WHERE state = 'paused';
-- A manual run by its request key (written once, at creation).
CREATE INDEX triggers_request ON triggers (job_id, partition_key) WHERE origin = 'manual';

-- A job's type: the optional `type = "..."` label of its manifest, per
-- plan version (a gate of kind `type` covers the triggers of the versions
-- that carry it).
ALTER TABLE plan_versions ADD COLUMN job_type TEXT;

-- Gates, closed and reopened: one row per pause, kept after its resume
-- (history). At most one open gate per scope.
CREATE TABLE gates (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT    NOT NULL CHECK (kind IN ('job', 'type', 'tenant', 'group', 'global')),
    value         TEXT    NOT NULL,          -- '' for global
    reason        TEXT    NOT NULL,
    closed_by     TEXT    NOT NULL,
    closed_at     INTEGER NOT NULL,
    reopened_by   TEXT,
    reopened_at   INTEGER,
    reopen_reason TEXT,
    CHECK ((kind = 'global') = (value = ''))
);
CREATE UNIQUE INDEX gates_open ON gates (kind, value) WHERE reopened_at IS NULL;

COMMIT;
PRAGMA foreign_keys = ON;
