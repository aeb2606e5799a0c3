-- Which tenants a component belongs to (issue 18, the HTTP API's tenant
-- isolation). Components are content-addressed and shared, so a component
-- has no single owner: a team token's push adds its tenant here (the same
-- bytes pushed by two tenants belong to both). A team token sees the
-- components its tenant pushed or its jobs' plan versions use; admins,
-- operators, reviewers and the local command line see all of them.
CREATE TABLE component_tenants (
    digest  TEXT NOT NULL REFERENCES components (digest),
    tenant  TEXT NOT NULL,
    PRIMARY KEY (digest, tenant)
);
CREATE INDEX component_tenants_tenant ON component_tenants (tenant, digest);
