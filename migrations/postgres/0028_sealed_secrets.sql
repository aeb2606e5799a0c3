-- Connector secrets sealed at rest (host/src/model/envelope.rs): `value`
-- holds the value's ciphertext under a data key of its own, `data_key`
-- that data key wrapped under the host key named by `key_id`, kept in a
-- file outside the database. A migration cannot encrypt (the key is not in
-- the database): rows from before stay in plain text, `key_id` NULL, until
-- the host's next start seals them in one transaction and keys their
-- fingerprints (host/src/store/secrets.rs).
ALTER TABLE connector_secrets ADD COLUMN key_id TEXT;
ALTER TABLE connector_secrets ADD COLUMN data_key TEXT;
