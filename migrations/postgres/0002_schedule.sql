-- Mirrors migrations/sqlite/0002_schedule.sql; the two files must change together.
--
-- Trigger control: sharded scanning with watermarks, job schedules, skipped
-- fire times, and cancel requests (used by the overlap policy `replace`).

-- A person or the overlap policy asked the running attempt to stop; the
-- owning runner sees it at its next heartbeat.
ALTER TABLE triggers ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;

-- Logical shards, leased to scheduler loops. `generation` increases every
-- time ownership changes (or a lease lapsed); the watermark only advances
-- under the generation that read it.
-- (shard numbers are always given explicitly, so a plain BIGINT key.)
CREATE TABLE schedule_shards (
    shard              BIGINT PRIMARY KEY,
    owner              TEXT,
    generation         BIGINT NOT NULL DEFAULT 0,
    lease_until        BIGINT,
    watermark          BIGINT,         -- every fire time before it has been decided
    last_scan_at       BIGINT,
    triggers_created   BIGINT NOT NULL DEFAULT 0,
    triggers_existing  BIGINT NOT NULL DEFAULT 0
);
-- The number of rows is the number of logical shards (16).
WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 15)
INSERT INTO schedule_shards (shard) SELECT i FROM n;

-- The schedule of each job's latest plan version (jobs with a time-based
-- schedule only), kept in step with plan_versions by the registry.
CREATE TABLE job_schedules (
    job_id          TEXT   PRIMARY KEY REFERENCES jobs (job_id),
    plan_version    BIGINT NOT NULL,
    shard           BIGINT NOT NULL,      -- shard_of(job_id, number of shards)
    spec            TEXT   NOT NULL,      -- canonical ScheduleSpec JSON
    tenant          TEXT   NOT NULL,
    resource_group  TEXT   NOT NULL,
    priority        BIGINT NOT NULL,
    active_from     BIGINT NOT NULL,      -- no fire time before the version existed
    updated_at      BIGINT NOT NULL
);
CREATE INDEX job_schedules_shard ON job_schedules (shard);

-- Re-scans after a takeover look up what exists in a time range.
CREATE INDEX triggers_scheduled_at ON triggers (scheduled_at);

-- Fire times that were decided not to run (misfire `skip`/`latest`/`all`
-- beyond the window, overlap `forbid`): counted and visible, once each.
CREATE TABLE skipped_fires (
    job_id        TEXT   NOT NULL,
    plan_version  BIGINT NOT NULL,
    scheduled_at  BIGINT NOT NULL,
    reason        TEXT   NOT NULL,
    recorded_at   BIGINT NOT NULL,
    PRIMARY KEY (job_id, plan_version, scheduled_at)
);
