-- Mirrors migrations/sqlite/0027_group_tenants.sql: which tenants may run
-- in a resource group (`*`: every tenant). See the SQLite file for why.
CREATE TABLE group_tenants (
    resource_group  TEXT   NOT NULL REFERENCES resource_groups (name),
    tenant          TEXT   NOT NULL,
    allowed_by      TEXT   NOT NULL,
    allowed_at      BIGINT NOT NULL,
    PRIMARY KEY (resource_group, tenant)
);
CREATE INDEX group_tenants_tenant ON group_tenants (tenant, resource_group);

INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at)
SELECT DISTINCT p.resource_group, j.tenant, 'migration',
       CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)
FROM plan_versions p JOIN jobs j ON j.job_id = p.job_id
ON CONFLICT DO NOTHING;
INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at)
SELECT name, '*', 'migration', CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)
FROM resource_groups WHERE name = 'default'
ON CONFLICT DO NOTHING;
