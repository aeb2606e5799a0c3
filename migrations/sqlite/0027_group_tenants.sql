-- Which tenants may run in a resource group: an admin's binding, checked
-- when a job is applied into the group and again when its attempt starts
-- (a binding taken back later stops new attempts). A group's grants —
-- connectors with their credentials, env values, scratch space — and its
-- capacity are for the tenants it admits only. `*` admits every tenant.
--
-- Existing installations keep running: every tenant with a job in a group
-- is admitted to it, and the `default` group (which grants nothing until
-- an admin grants it something) admits every tenant. Groups created from
-- now on admit none until `paddock group allow G --tenant T`.
CREATE TABLE group_tenants (
    resource_group  TEXT    NOT NULL REFERENCES resource_groups (name),
    tenant          TEXT    NOT NULL,   -- a tenant name, or '*' for every tenant
    allowed_by      TEXT    NOT NULL,
    allowed_at      INTEGER NOT NULL,
    PRIMARY KEY (resource_group, tenant)
);
CREATE INDEX group_tenants_tenant ON group_tenants (tenant, resource_group);

INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at)
SELECT DISTINCT p.resource_group, j.tenant, 'migration', CAST(unixepoch('subsec') * 1000 AS INTEGER)
FROM plan_versions p JOIN jobs j ON j.job_id = p.job_id
WHERE true ON CONFLICT DO NOTHING;
INSERT INTO group_tenants (resource_group, tenant, allowed_by, allowed_at)
SELECT name, '*', 'migration', CAST(unixepoch('subsec') * 1000 AS INTEGER)
FROM resource_groups WHERE name = 'default'
ON CONFLICT DO NOTHING;
