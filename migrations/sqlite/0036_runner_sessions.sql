-- Runners whose liveness is a file lock (host/src/store/liveness.rs):
-- each holds an exclusive lock on a file of its own beside the database
-- (`<database>.runners/`) for as long as its process lives. A lease whose
-- owner is registered here and whose file nobody holds belongs to a
-- process that is gone — the operating system released its lock when it
-- died — and is taken over at once instead of when the lease runs out. A
-- stopped process keeps its lock and its leases. Owners not registered
-- here (older versions, tools) keep the lease alone. Mirrors
-- migrations/postgres/0036_runner_sessions.sql, where the lock is an
-- advisory lock held by a database session.
CREATE TABLE runner_sessions (
    owner          TEXT    PRIMARY KEY,
    registered_at  INTEGER NOT NULL
);
