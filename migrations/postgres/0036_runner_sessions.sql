-- Runners whose liveness is their database session (host/src/store/
-- liveness.rs): each holds an advisory lock on a connection of its own for
-- as long as it runs, keyed by its schema and owner name. A lease whose
-- owner is registered here and whose lock nobody holds belongs to a
-- process that is gone — its session ended when it died — and is taken
-- over at once instead of when the lease runs out. A stopped process
-- keeps its session, its lock and its leases. Owners not registered here
-- (older versions, tools) keep the lease alone. PostgreSQL only: SQLite
-- has no sessions to watch.
CREATE TABLE runner_sessions (
    owner          TEXT   PRIMARY KEY,
    registered_at  BIGINT NOT NULL
);
