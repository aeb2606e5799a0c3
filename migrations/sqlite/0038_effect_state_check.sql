-- An effect's state is one of the effect state machine's states
-- (host/src/model/effect_state.rs, `EffectState::ALL`; the conformance
-- suite checks the database accepts each and refuses any other).
-- Mirrors migrations/postgres/0038_effect_state_check.sql.
--
-- SQLite cannot add a CHECK to a table, so `effects` is rebuilt as in 0026
-- (no table references it), keeping every row, id and index, and the id
-- sequence: an id once handed out is never handed out again.
CREATE TABLE paddock_0038_sequence AS
    SELECT seq FROM sqlite_sequence WHERE name = 'effects';
CREATE TABLE effects_0038 (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant           TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL,
    downstream_key   TEXT    NOT NULL,
    trigger_id       INTEGER NOT NULL REFERENCES triggers (id),
    attempt_id       INTEGER REFERENCES attempts (id),
    connector        TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    params_digest    TEXT    NOT NULL,
    request_id       TEXT    NOT NULL,
    fencing_token    INTEGER NOT NULL,
    state            TEXT    NOT NULL CONSTRAINT effects_state_known CHECK (state IN (
                         'intent', 'unknown', 'retryable', 'succeeded', 'failed')),
    response         BLOB,
    error            TEXT,
    compensates      TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    sends            INTEGER NOT NULL DEFAULT 0,
    last_status      INTEGER,
    resolved_by      TEXT,
    unknown_at       INTEGER,
    UNIQUE (tenant, idempotency_key)
);
INSERT INTO effects_0038 (id, tenant, idempotency_key, downstream_key, trigger_id, attempt_id,
    connector, action, params_digest, request_id, fencing_token, state, response, error,
    compensates, created_at, updated_at, sends, last_status, resolved_by, unknown_at)
SELECT id, tenant, idempotency_key, downstream_key, trigger_id, attempt_id,
    connector, action, params_digest, request_id, fencing_token, state, response, error,
    compensates, created_at, updated_at, sends, last_status, resolved_by, unknown_at
FROM effects;
DROP TABLE effects;
ALTER TABLE effects_0038 RENAME TO effects;
CREATE INDEX effects_trigger ON effects (trigger_id);
CREATE INDEX effects_state ON effects (state);
CREATE INDEX effects_compensates ON effects (tenant, compensates);
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM paddock_0038_sequence))
WHERE name = 'effects' AND EXISTS (SELECT 1 FROM paddock_0038_sequence);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'effects', seq FROM paddock_0038_sequence
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'effects');
DROP TABLE paddock_0038_sequence;
