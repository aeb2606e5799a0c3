-- Reports (issue 19 item 4); mirrors migrations/postgres/0020_reports.sql.
--
-- Fenced writes refused, one row each: the incident report attributes
-- them to triggers within a window (the counters of `stale_token_rejections`
-- cannot). Written by `Store::lease_lost` (store/fence.rs), the translator
-- every zero-row fenced write goes through, in the statement after the one
-- that bumps the counters: only on a refusal, never on a write that
-- succeeds. `kind` is the write refused (`heartbeat`, `checkpoint`,
-- `result_commit`, `release`, `effect_intent`, `effect_outcome`);
-- `fencing_token` the token the writer held, `found_token` the trigger's
-- then (NULL: no such trigger); `idempotency_key` for an effect write.
CREATE TABLE stale_writes (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_id       INTEGER NOT NULL,
    attempt_id       INTEGER,
    kind             TEXT    NOT NULL,
    fencing_token    INTEGER NOT NULL,
    found_token      INTEGER,
    idempotency_key  TEXT,
    at               INTEGER NOT NULL
);
CREATE INDEX stale_writes_at ON stale_writes (at);
CREATE INDEX stale_writes_trigger ON stale_writes (trigger_id);

-- When an effect's outcome first became unknown: its answer was lost
-- (settled `unknown`), or it was settled later by a query by key or by the
-- recovery scanner (an `intent` left by an attempt that is gone). Kept
-- through a later resend and settle, so the incident report counts an
-- unknown that was resolved by resending it. NULL: never unknown (or
-- settled before 0020). Written in the settle/recover statements that
-- already write the row; no index (the report reaches effects by trigger).
ALTER TABLE effects ADD COLUMN unknown_at INTEGER;

-- Unit prices for `paddock report cost`, set by an admin (`paddock price
-- set`, audited `price.set`). One row per priced unit; a unit without a row
-- costs 0. `fuel_per_cpu_second` is not a price but the conversion of
-- guest fuel into CPU seconds (default when unset: 1e9, see
-- model/report.rs `DEFAULT_FUEL_PER_CPU_SECOND`).
CREATE TABLE unit_prices (
    name    TEXT PRIMARY KEY CHECK (name IN ('fuel_per_cpu_second', 'cpu_second', 'gb_second',
                'storage_gb', 'downstream_call', 'retry', 'compensation', 'manual_touch')),
    value   REAL    NOT NULL CHECK (value >= 0),
    set_by  TEXT    NOT NULL,
    set_at  INTEGER NOT NULL
);
