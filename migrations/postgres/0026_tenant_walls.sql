-- Mirrors migrations/sqlite/0026_tenant_walls.sql: an effect's idempotency
-- key, a compensation's target and a ticket's subject are names in the
-- tenant's own namespace. See the SQLite file for the reasons.
ALTER TABLE effects ADD COLUMN tenant TEXT;
ALTER TABLE effects ADD COLUMN downstream_key TEXT;
UPDATE effects e SET tenant = t.tenant, downstream_key = e.idempotency_key
    FROM triggers t WHERE t.id = e.trigger_id;
ALTER TABLE effects ALTER COLUMN tenant SET NOT NULL;
ALTER TABLE effects ALTER COLUMN downstream_key SET NOT NULL;
ALTER TABLE effects DROP CONSTRAINT effects_idempotency_key_key;
ALTER TABLE effects ADD CONSTRAINT effects_tenant_key UNIQUE (tenant, idempotency_key);
DROP INDEX effects_compensates;
CREATE INDEX effects_compensates ON effects (tenant, compensates);

ALTER TABLE exceptions ADD COLUMN tenant TEXT;
UPDATE exceptions x SET tenant = t.tenant FROM triggers t WHERE t.id = x.trigger_id;
DROP INDEX exceptions_open_subject;
CREATE UNIQUE INDEX exceptions_open_subject ON exceptions (kind, coalesce(tenant, ''), subject)
    WHERE state = 'open';
CREATE INDEX exceptions_tenant ON exceptions (tenant, id);

ALTER TABLE component_tenants ADD COLUMN pushed_by TEXT;
ALTER TABLE component_tenants ADD COLUMN pushed_at BIGINT;
