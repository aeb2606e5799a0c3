-- The side-effect plane: connectors, the effect protocol's bookkeeping, and
-- exception tickets (the only way a person changes an effect's outcome).

-- Connectors: admin-configured downstreams a job may be granted by name.
CREATE TABLE connectors (
    name                  TEXT PRIMARY KEY,
    kind                  TEXT    NOT NULL CHECK (kind IN ('http')),
    base_url              TEXT    NOT NULL,
    timeout_ms            INTEGER NOT NULL CHECK (timeout_ms > 0),
    permits               INTEGER NOT NULL CHECK (permits > 0),   -- calls in flight at once (per host process)
    rate_per_sec          REAL    NOT NULL DEFAULT 0 CHECK (rate_per_sec >= 0),  -- 0 = unlimited
    compares_tokens       INTEGER NOT NULL DEFAULT 0,   -- the downstream rejects lower fencing tokens
    queryable             INTEGER NOT NULL DEFAULT 0,   -- GET {base_url}/operations/{key} answers 200/404
    breaker_failure_rate  REAL    NOT NULL DEFAULT 0.5 CHECK (breaker_failure_rate > 0 AND breaker_failure_rate <= 1),
    breaker_min_calls     INTEGER NOT NULL DEFAULT 10 CHECK (breaker_min_calls > 0),
    breaker_window_ms     INTEGER NOT NULL DEFAULT 10000 CHECK (breaker_window_ms > 0),
    breaker_open_ms       INTEGER NOT NULL DEFAULT 5000 CHECK (breaker_open_ms > 0),
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

-- Effect states (0001 created the table; this adds the bookkeeping):
--   intent     written, fenced, just before a send; found later = outcome unknown
--   succeeded  the downstream applied it (terminal; replayed to later callers)
--   failed     the downstream refused it for good (terminal; replayed)
--   unknown    sent, answer lost (timeout, reset): query by key before anything else
--   retryable  the downstream said nothing was committed (5xx, connect error,
--              or a query found no record): safe to resend with the same key
-- Who moves an effect out of a state: the gateway under the current fencing
-- token (intent/unknown/retryable → anything), the recovery scanner by
-- compare-and-set on the recorded token (intent/unknown → succeeded/failed/
-- retryable), and an exception ticket's resolution (audited).
ALTER TABLE effects ADD COLUMN sends INTEGER NOT NULL DEFAULT 0;      -- sends across all attempts (the budget)
ALTER TABLE effects ADD COLUMN last_status INTEGER;                   -- the downstream's last HTTP status
ALTER TABLE effects ADD COLUMN resolved_by TEXT;                      -- gateway | query | recovery | ticket:N
CREATE INDEX effects_trigger ON effects (trigger_id);
CREATE INDEX effects_state ON effects (state);
CREATE INDEX effects_compensates ON effects (compensates);

-- Exception tickets.
CREATE TABLE exceptions (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL CHECK (kind IN ('unknown_outcome', 'key_conflict', 'budget_exhausted', 'evidence_conflict')),
    subject          TEXT    NOT NULL,      -- what it is about (usually the idempotency key)
    trigger_id       INTEGER REFERENCES triggers (id),
    effect_key       TEXT,
    evidence         TEXT    NOT NULL,      -- canonical JSON: trigger, attempts, tokens, effect, downstream answers
    allowed_actions  TEXT    NOT NULL,      -- JSON array
    state            TEXT    NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'resolved')),
    resolution       TEXT,                  -- the action taken
    resolved_by      TEXT,
    reason           TEXT,
    before_digest    TEXT,                  -- sha256 of the effect row before / after resolution
    after_digest     TEXT,
    created_at       INTEGER NOT NULL,
    resolved_at      INTEGER
);
-- At most one open ticket per kind and subject: a re-detected problem adds nothing.
CREATE UNIQUE INDEX exceptions_open_subject ON exceptions (kind, subject) WHERE state = 'open';
