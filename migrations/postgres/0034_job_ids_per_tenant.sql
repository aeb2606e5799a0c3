-- Job ids are names inside a tenant: the same id in two tenants is two
-- jobs, each with its own plan versions, schedule, skipped fire times and
-- plan keys. Mirrors migrations/sqlite/0034_job_ids_per_tenant.sql.
--
-- 1. `jobs` is keyed by (tenant, job_id); `plan_versions` gains the
--    tenant (from its job) and is keyed by (tenant, job_id, version);
--    `job_schedules` and `skipped_fires` are keyed with the tenant first.
-- 2. A trigger's plan key is unique within its tenant, and its plan
--    version is looked up under its tenant.
-- 3. A job gate names its job as `tenant/job` (the job's qualified name).
-- Constraint names are PostgreSQL's defaults from 0001 and 0002.

ALTER TABLE triggers DROP CONSTRAINT triggers_job_id_plan_version_fkey;
ALTER TABLE job_schedules DROP CONSTRAINT job_schedules_job_id_fkey;
ALTER TABLE plan_versions DROP CONSTRAINT plan_versions_job_id_fkey;

ALTER TABLE jobs DROP CONSTRAINT jobs_pkey;
ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (tenant, job_id);

ALTER TABLE plan_versions ADD COLUMN tenant TEXT;
UPDATE plan_versions p SET tenant = j.tenant FROM jobs j WHERE j.job_id = p.job_id;
ALTER TABLE plan_versions ALTER COLUMN tenant SET NOT NULL;
ALTER TABLE plan_versions DROP CONSTRAINT plan_versions_pkey;
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_pkey PRIMARY KEY (tenant, job_id, version);
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_job_fkey
    FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id);

ALTER TABLE job_schedules DROP CONSTRAINT job_schedules_pkey;
ALTER TABLE job_schedules ADD CONSTRAINT job_schedules_pkey PRIMARY KEY (tenant, job_id);
ALTER TABLE job_schedules ADD CONSTRAINT job_schedules_job_fkey
    FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id);

ALTER TABLE skipped_fires ADD COLUMN tenant TEXT;
UPDATE skipped_fires s SET tenant = j.tenant FROM jobs j WHERE j.job_id = s.job_id;
DELETE FROM skipped_fires WHERE tenant IS NULL;
ALTER TABLE skipped_fires ALTER COLUMN tenant SET NOT NULL;
ALTER TABLE skipped_fires DROP CONSTRAINT skipped_fires_pkey;
ALTER TABLE skipped_fires ADD CONSTRAINT skipped_fires_pkey
    PRIMARY KEY (tenant, job_id, plan_version, scheduled_at);

ALTER TABLE triggers DROP CONSTRAINT triggers_plan_key_key;
ALTER TABLE triggers ADD CONSTRAINT triggers_plan_key_key UNIQUE (tenant, plan_key);
ALTER TABLE triggers ADD CONSTRAINT triggers_plan_fkey
    FOREIGN KEY (tenant, job_id, plan_version) REFERENCES plan_versions (tenant, job_id, version);

DROP INDEX triggers_job;
CREATE INDEX triggers_job ON triggers (tenant, job_id, scheduled_at);
DROP INDEX triggers_request;
CREATE INDEX triggers_request ON triggers (tenant, job_id, request_key) WHERE request_key IS NOT NULL;

UPDATE gates g SET value = j.tenant || '/' || g.value
FROM jobs j WHERE g.kind = 'job' AND j.job_id = g.value AND strpos(g.value, '/') = 0;
