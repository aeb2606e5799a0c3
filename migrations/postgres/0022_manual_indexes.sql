-- The two indexes on manual runs narrowed to the runs that are looked up
-- in them (issue 16); mirrors migrations/sqlite/0022_manual_indexes.sql.
--
-- Both were partial on origin = 'manual', so every manual run had an
-- entry in each, and on PostgreSQL every state change of one (claim,
-- finish: updates that cannot be HOT, `state` being indexed) added one
-- more to each: four entries per manual run that no query reads.
--
-- 1. `triggers_request` (0018): a run by its request key. Every manual
--    run has a partition (`manual-` and a random key when none was
--    given), but only runs given a key are looked up. The key now has a
--    column of its own, NULL when none was given.
ALTER TABLE triggers ADD COLUMN request_key TEXT;
--    Runs made before this migration cannot tell a given key from a
--    random one: all of them keep their key, so each stays findable.
UPDATE triggers SET request_key = substr(partition_key, 8)
    WHERE origin = 'manual' AND partition_key LIKE 'manual-%';
DROP INDEX triggers_request;
CREATE INDEX triggers_request ON triggers (job_id, request_key) WHERE request_key IS NOT NULL;

-- 2. `triggers_manual` (0010): a tenant's manual runs by due time, the
--    window of its per-minute quota. Only a tenant with that quota reads
--    it. The time a run counts in that window now has a column of its own,
--    set when the tenant had a per-minute quota at the run's creation:
--    its due time then. (The window used to read `next_run_at`, which a
--    retry moves: a retried run counted again in a later minute.)
ALTER TABLE triggers ADD COLUMN quota_due_at BIGINT;
UPDATE triggers SET quota_due_at = next_run_at
    WHERE origin = 'manual'
      AND tenant IN (SELECT tenant FROM tenants WHERE triggers_per_minute IS NOT NULL);
DROP INDEX triggers_manual;
CREATE INDEX triggers_manual ON triggers (tenant, quota_due_at) WHERE quota_due_at IS NOT NULL;
