-- An effect's state is one of the effect state machine's states
-- (host/src/model/effect_state.rs, `EffectState::ALL`; the conformance
-- suite checks the database accepts each and refuses any other).
-- Mirrors migrations/sqlite/0038_effect_state_check.sql.
ALTER TABLE effects ADD CONSTRAINT effects_state_known CHECK (state IN (
    'intent', 'unknown', 'retryable', 'succeeded', 'failed'));
