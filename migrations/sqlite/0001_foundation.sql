-- Paddock's embedded store (SQLite).
--
-- Every instant is INTEGER milliseconds since the Unix epoch, UTC, taken from
-- the database clock inside the statement that uses it (see store::sqlite).
-- The PostgreSQL migrations mirror these by number and name.

-- Resource groups: the limits an attempt runs under, and the capabilities
-- (extra imports beyond paddock:job) its components may be granted.
CREATE TABLE resource_groups (
    name              TEXT PRIMARY KEY,
    fuel_per_attempt  INTEGER NOT NULL CHECK (fuel_per_attempt > 0),
    memory_bytes      INTEGER NOT NULL CHECK (memory_bytes > 0),
    deadline_ms       INTEGER NOT NULL CHECK (deadline_ms > 0),
    max_concurrency   INTEGER NOT NULL CHECK (max_concurrency > 0),
    grants            TEXT    NOT NULL DEFAULT '[]',   -- JSON array of granted import names
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

-- Components: content-addressed, immutable. The manifest is what a security
-- reviewer audits: every import and export, read from the binary at upload.
CREATE TABLE components (
    digest      TEXT PRIMARY KEY,              -- sha256 hex of the bytes
    size_bytes  INTEGER NOT NULL,
    bytes       BLOB    NOT NULL,
    manifest    TEXT    NOT NULL,              -- JSON capability manifest
    pushed_by   TEXT    NOT NULL,
    pushed_at   INTEGER NOT NULL
);

-- Jobs: a name, its tenant, and the newest plan version.
CREATE TABLE jobs (
    job_id          TEXT PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    latest_version  INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

-- Immutable plan versions. Re-applying the latest version's digest is an
-- idempotent hit; the same content as an *older* version is a new version
-- (a rollback is a new fact, not a rewrite).
CREATE TABLE plan_versions (
    job_id            TEXT    NOT NULL REFERENCES jobs (job_id),
    version           INTEGER NOT NULL CHECK (version > 0),
    digest            TEXT    NOT NULL,        -- sha256 of the canonical JSON spec
    spec              TEXT    NOT NULL,        -- canonical JSON spec
    component_digest  TEXT    NOT NULL REFERENCES components (digest),
    resource_group    TEXT    NOT NULL REFERENCES resource_groups (name),
    created_by        TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (job_id, version)
);

-- Triggers: one intention to run, identified by its plan key.
CREATE TABLE triggers (
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
    state           TEXT    NOT NULL,
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
    FOREIGN KEY (job_id, plan_version) REFERENCES plan_versions (job_id, version)
);
CREATE INDEX triggers_claimable ON triggers (state, next_run_at);
CREATE INDEX triggers_job ON triggers (job_id, scheduled_at);

-- Attempts: one claim of a trigger by one runner, with its fencing token.
CREATE TABLE attempts (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_id         INTEGER NOT NULL REFERENCES triggers (id),
    attempt_no         INTEGER NOT NULL,
    runner_id          TEXT    NOT NULL,
    fencing_token      INTEGER NOT NULL,
    started_at         INTEGER NOT NULL,
    lease_until        INTEGER NOT NULL,
    heartbeat_at       INTEGER,
    progress_seq       INTEGER NOT NULL DEFAULT 0,
    ended_at           INTEGER,
    outcome            TEXT,        -- succeeded | failed | lease_lost | expired | abandoned
    error_class        TEXT,
    error_message      TEXT,
    fuel_used          INTEGER,
    peak_memory_bytes  INTEGER,
    wall_ms            INTEGER,
    log                TEXT,
    UNIQUE (trigger_id, fencing_token)
);

-- Checkpoints: the last state saved for a trigger, by whichever attempt held
-- the lease when it was saved.
CREATE TABLE checkpoints (
    trigger_id     INTEGER PRIMARY KEY REFERENCES triggers (id),
    seq            INTEGER NOT NULL,
    data           BLOB    NOT NULL,
    fencing_token  INTEGER NOT NULL,
    saved_at       INTEGER NOT NULL
);

-- Effects: one side effect per idempotency key (the side-effect plane).
CREATE TABLE effects (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    trigger_id       INTEGER NOT NULL REFERENCES triggers (id),
    attempt_id       INTEGER REFERENCES attempts (id),
    connector        TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    params_digest    TEXT    NOT NULL,
    request_id       TEXT    NOT NULL,
    fencing_token    INTEGER NOT NULL,
    state            TEXT    NOT NULL,   -- intent | succeeded | failed | unknown
    response         BLOB,
    error            TEXT,
    compensates      TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- Append-only, hash-chained audit log.
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    detail     TEXT    NOT NULL,   -- canonical JSON
    prev_hash  TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;

-- Monotonic counters (stale-token rejections, idempotent hits, ...).
CREATE TABLE counters (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
);

INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms, max_concurrency, grants, created_at, updated_at)
VALUES ('default', 10000000000, 67108864, 60000, 16, '[]',
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER));
