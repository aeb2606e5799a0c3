-- Tenants are walls: every name a tenant gives is a name in its own
-- namespace. An effect's idempotency key, a compensation's target and an
-- exception ticket's subject belong to the tenant of the trigger that wrote
-- them; the same key in two tenants is two effects.
--
-- effects.tenant is the tenant of the effect's trigger (the statement that
-- writes an intent takes it from the fenced trigger row, never from the
-- guest). effects.downstream_key is what the host sends as
-- `Idempotency-Key` and asks the downstream by: `tenant/key` for effects
-- written from now on, so two tenants' equal keys stay two operations at a
-- downstream they share; the key itself for effects recorded before, so a
-- query by key still finds what was sent under it.
--
-- SQLite cannot drop the old UNIQUE (idempotency_key), so the table is
-- rebuilt; no table references effects.
CREATE TABLE effects_walled (
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
    state            TEXT    NOT NULL,
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
INSERT INTO effects_walled (id, tenant, idempotency_key, downstream_key, trigger_id, attempt_id,
    connector, action, params_digest, request_id, fencing_token, state, response, error,
    compensates, created_at, updated_at, sends, last_status, resolved_by, unknown_at)
SELECT e.id, t.tenant, e.idempotency_key, e.idempotency_key, e.trigger_id, e.attempt_id,
    e.connector, e.action, e.params_digest, e.request_id, e.fencing_token, e.state, e.response,
    e.error, e.compensates, e.created_at, e.updated_at, e.sends, e.last_status, e.resolved_by,
    e.unknown_at
FROM effects e JOIN triggers t ON t.id = e.trigger_id;
DROP TABLE effects;
ALTER TABLE effects_walled RENAME TO effects;
CREATE INDEX effects_trigger ON effects (trigger_id);
CREATE INDEX effects_state ON effects (state);
CREATE INDEX effects_compensates ON effects (tenant, compensates);

-- A ticket belongs to the tenant of the trigger it is about; at most one
-- open ticket per kind and subject *within a tenant*.
ALTER TABLE exceptions ADD COLUMN tenant TEXT;
UPDATE exceptions SET tenant = (SELECT t.tenant FROM triggers t WHERE t.id = exceptions.trigger_id);
DROP INDEX exceptions_open_subject;
CREATE UNIQUE INDEX exceptions_open_subject ON exceptions (kind, coalesce(tenant, ''), subject)
    WHERE state = 'open';
CREATE INDEX exceptions_tenant ON exceptions (tenant, id);

-- Who pushed a component, per tenant: the same bytes pushed by two tenants
-- belong to both, and each sees only its own pusher.
ALTER TABLE component_tenants ADD COLUMN pushed_by TEXT;
ALTER TABLE component_tenants ADD COLUMN pushed_at INTEGER;
