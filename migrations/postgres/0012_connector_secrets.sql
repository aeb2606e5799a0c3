-- Connector credentials (issue 17), apart from the connector's record so
-- that no read of connectors can print them: the header the host adds to
-- every call, its value, and the value's fingerprint (what commands, logs
-- and audit entries show). Set and rotated by an admin, audited.
CREATE TABLE connector_secrets (
    connector   TEXT PRIMARY KEY,
    header      TEXT NOT NULL,
    value       TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    set_by      TEXT NOT NULL,
    set_at      BIGINT NOT NULL
);
