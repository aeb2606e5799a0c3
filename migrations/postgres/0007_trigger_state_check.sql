-- A trigger's state is one of the state machine's states
-- (host/src/model/state.rs, `TriggerState::ALL`; a unit test checks this
-- list against it). Mirrors migrations/sqlite/0007_trigger_state_check.sql.
ALTER TABLE triggers ADD CONSTRAINT triggers_state_known CHECK (state IN (
    'pending', 'running', 'retry_wait', 'succeeded', 'failed',
    'cancelled', 'skipped', 'manual'));
