-- Mirrors migrations/postgres/0023_claim_refusal.sql, which adds the
-- function a PostgreSQL claim refuses its batch with. SQLite needs none:
-- its claim holds the database's write lock from its first read, so it
-- never chooses a batch it might have to refuse.
SELECT 1;
