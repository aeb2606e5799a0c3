-- Claims walk one lane per state in claim order and stop after the batch:
-- (state, priority, next_run_at, id) serves `WHERE state = ? ... ORDER BY
-- priority, next_run_at, id LIMIT n` without sorting the backlog.
CREATE INDEX triggers_claim ON triggers (state, priority, next_run_at, id);
