-- Each tenant's block of trigger ids (issue 16; see
-- host/src/store/trigger_ids.rs): a new trigger takes the next id of its
-- tenant's block, so one tenant's triggers lie together in the table —
-- SQLite stores a table in rowid order, and a fair-share claim takes each
-- tenant's queue at its own pace. Ids `next_id .. end_id` are still free;
-- the block started at `start_id` (a block far behind the newest trigger
-- is left for a new one). PostgreSQL has no such table: its heap keeps
-- rows in insertion order whatever their ids (migrations/postgres/0025).
CREATE TABLE trigger_id_blocks (
    tenant   TEXT    PRIMARY KEY,
    start_id INTEGER NOT NULL,
    next_id  INTEGER NOT NULL,
    end_id   INTEGER NOT NULL,
    CHECK (start_id <= next_id AND next_id <= end_id)
);
