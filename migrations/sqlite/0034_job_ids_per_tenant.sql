-- no-transaction
-- Job ids are names inside a tenant: the same id in two tenants is two
-- jobs, each with its own plan versions, schedule, skipped fire times and
-- plan keys. Mirrors migrations/postgres/0034_job_ids_per_tenant.sql.
--
-- 1. `jobs` is keyed by (tenant, job_id); `plan_versions` gains the
--    tenant (from its job) and is keyed by (tenant, job_id, version);
--    `job_schedules` and `skipped_fires` are keyed with the tenant first.
-- 2. A trigger's plan key is unique within its tenant, and its plan
--    version is looked up under its tenant: two tenants' jobs named alike
--    with the same schedule each get their own trigger.
-- 3. A job gate names its job as `tenant/job` (the job's qualified name).
--
-- SQLite cannot change a primary key or a UNIQUE constraint in place, so
-- each table is rebuilt as in 0018 (https://sqlite.org/lang_altertable.html,
-- "making other kinds of table schema changes"), keeping every row, the
-- trigger id sequence and every index.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE jobs_0034 (
    job_id          TEXT    NOT NULL,
    tenant          TEXT    NOT NULL,
    latest_version  INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant, job_id)
);
INSERT INTO jobs_0034 (job_id, tenant, latest_version, created_at, updated_at)
SELECT job_id, tenant, latest_version, created_at, updated_at FROM jobs;

CREATE TABLE plan_versions_0034 (
    tenant            TEXT    NOT NULL,
    job_id            TEXT    NOT NULL,
    version           INTEGER NOT NULL CHECK (version > 0),
    digest            TEXT    NOT NULL,        -- sha256 of the canonical JSON spec
    spec              TEXT    NOT NULL,        -- canonical JSON spec
    component_digest  TEXT    NOT NULL REFERENCES components (digest),
    resource_group    TEXT    NOT NULL REFERENCES resource_groups (name),
    created_by        TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    job_type          TEXT,
    PRIMARY KEY (tenant, job_id, version),
    FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id)
);
INSERT INTO plan_versions_0034 (tenant, job_id, version, digest, spec, component_digest,
    resource_group, created_by, created_at, job_type)
SELECT j.tenant, p.job_id, p.version, p.digest, p.spec, p.component_digest,
    p.resource_group, p.created_by, p.created_at, p.job_type
FROM plan_versions p JOIN jobs j ON j.job_id = p.job_id;

CREATE TABLE job_schedules_0034 (
    tenant          TEXT    NOT NULL,
    job_id          TEXT    NOT NULL,
    plan_version    INTEGER NOT NULL,
    shard           INTEGER NOT NULL,     -- shard_of(job_id, number of shards)
    spec            TEXT    NOT NULL,     -- canonical ScheduleSpec JSON
    resource_group  TEXT    NOT NULL,
    priority        INTEGER NOT NULL,
    active_from     INTEGER NOT NULL,     -- no fire time before the version existed
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant, job_id),
    FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id)
);
INSERT INTO job_schedules_0034 (tenant, job_id, plan_version, shard, spec, resource_group,
    priority, active_from, updated_at)
SELECT tenant, job_id, plan_version, shard, spec, resource_group, priority, active_from, updated_at
FROM job_schedules;

CREATE TABLE skipped_fires_0034 (
    tenant        TEXT    NOT NULL,
    job_id        TEXT    NOT NULL,
    plan_version  INTEGER NOT NULL,
    scheduled_at  INTEGER NOT NULL,
    reason        TEXT    NOT NULL,
    recorded_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, job_id, plan_version, scheduled_at)
);
INSERT INTO skipped_fires_0034 (tenant, job_id, plan_version, scheduled_at, reason, recorded_at)
SELECT j.tenant, s.job_id, s.plan_version, s.scheduled_at, s.reason, s.recorded_at
FROM skipped_fires s JOIN jobs j ON j.job_id = s.job_id;

CREATE TEMP TABLE paddock_0034_sequence AS
    SELECT seq FROM sqlite_sequence WHERE name = 'triggers';

CREATE TABLE triggers_0034 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_key        TEXT    NOT NULL,          -- job@scheduled_at@vN[#partition], unique per tenant
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
    request_key     TEXT,
    quota_due_at    INTEGER,
    UNIQUE (tenant, plan_key),
    FOREIGN KEY (tenant, job_id, plan_version) REFERENCES plan_versions (tenant, job_id, version)
);

INSERT INTO triggers_0034 (id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested, recovery, pause_requested,
    request_key, quota_due_at)
SELECT id, plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, partition_key, params, state, priority, next_run_at, fencing_token,
    lease_owner, lease_until, attempts, generation, result, error_class, error_message,
    created_at, updated_at, finished_at, cancel_requested, recovery, pause_requested,
    request_key, quota_due_at
FROM triggers;

DROP TABLE triggers;
DROP TABLE skipped_fires;
DROP TABLE job_schedules;
DROP TABLE plan_versions;
DROP TABLE jobs;
ALTER TABLE jobs_0034 RENAME TO jobs;
ALTER TABLE plan_versions_0034 RENAME TO plan_versions;
ALTER TABLE job_schedules_0034 RENAME TO job_schedules;
ALTER TABLE skipped_fires_0034 RENAME TO skipped_fires;
ALTER TABLE triggers_0034 RENAME TO triggers;

UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM paddock_0034_sequence))
WHERE name = 'triggers' AND EXISTS (SELECT 1 FROM paddock_0034_sequence);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'triggers', seq FROM paddock_0034_sequence
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'triggers');
DROP TABLE paddock_0034_sequence;

CREATE INDEX job_schedules_shard ON job_schedules (shard);
CREATE INDEX triggers_job ON triggers (tenant, job_id, scheduled_at);
CREATE INDEX triggers_pending ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'pending' AND recovery = 0;
CREATE INDEX triggers_recovery ON triggers (resource_group, tenant, priority, next_run_at, id)
    WHERE state = 'retry_wait' OR (state = 'pending' AND recovery = 1);
CREATE INDEX triggers_running ON triggers (resource_group, tenant, recovery, lease_until)
    WHERE state = 'running' AND lease_until IS NOT NULL;
CREATE INDEX triggers_parked ON triggers (resource_group, tenant) WHERE state = 'manual';
CREATE INDEX triggers_paused ON triggers (resource_group, tenant) WHERE state = 'paused';
CREATE INDEX triggers_request ON triggers (tenant, job_id, request_key) WHERE request_key IS NOT NULL;
CREATE INDEX triggers_manual ON triggers (tenant, quota_due_at) WHERE quota_due_at IS NOT NULL;
CREATE INDEX triggers_backfill_waiting ON triggers (tenant)
    WHERE origin = 'backfill' AND state IN ('pending', 'retry_wait');

-- A job gate's value becomes the job's qualified name.
UPDATE gates SET value = (SELECT j.tenant FROM jobs j WHERE j.job_id = gates.value) || '/' || value
WHERE kind = 'job' AND instr(value, '/') = 0
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = gates.value);

COMMIT;
PRAGMA foreign_keys = ON;
