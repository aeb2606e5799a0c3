-- The audit chain, keyed: each entry's HMAC-SHA256 of its hash under a key
-- kept outside the database (model/audit.rs, store/audit.rs). NULL for
-- entries written before keying (or by a process without a key): those are
-- checked as the hash chain only, and none may follow a keyed entry.
-- Adding a nullable column rewrites no row, so the append-only triggers
-- (0001) do not fire.
ALTER TABLE audit_log ADD COLUMN mac TEXT;
