-- API tokens (issue 18): created by an admin, each with one role and, for
-- a team token, one tenant (host/src/model/identity.rs). The token's text
-- is shown once, when created; what is kept is its SHA-256 (the lookup
-- key) and a fingerprint for people. Revoked and expired tokens stay, so
-- the audit log's `token:NAME` actors keep meaning something.
CREATE TABLE api_tokens (
    name         TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    fingerprint  TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('team', 'operator', 'admin', 'reviewer')),
    tenant       TEXT,
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    revoked_by   TEXT,
    revoked_at   BIGINT,
    CHECK ((role = 'team') = (tenant IS NOT NULL))
);
