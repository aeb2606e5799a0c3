-- Mirrors migrations/sqlite/0004_connector_idempotent.sql; the two files must change together.
-- Whether a connector's downstream honours Idempotency-Key (1, the default:
-- a resend under the same key is applied at most once). With 0, an effect
-- whose send budget is spent becomes an exception ticket for a person
-- instead of a plain failure: any of its sends may have half-happened.
ALTER TABLE connectors ADD COLUMN idempotent BIGINT NOT NULL DEFAULT 1;
