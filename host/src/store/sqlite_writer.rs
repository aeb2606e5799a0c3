//! SQLite's hot write transactions — claims and group commits — each run
//! whole on one thread that owns its own connection to the database file.
//!
//! Why not through the pool like every other query: sqlx's SQLite driver
//! runs each connection on a worker thread and hands it every statement,
//! and every result row, through a channel, so a transaction of five
//! statements is five round trips between threads, each a futex wake-up on
//! both sides. A claim or a group commit is the one write every job pays
//! for, and with thousands of jobs a second those hand-offs, not SQLite,
//! were the store's cost (measured with `perf` on `benches/throughput`: the
//! worker thread spent two thirds of its time in futex calls). Here a
//! transaction is one closure sent to the writer thread: one hand-off in,
//! one out, and the statements in between are plain calls into SQLite on
//! prepared, cached statements.
//!
//! The writer is one more connection to the same WAL database, so it is
//! kept apart from the pool's writers the same way they are kept apart from
//! each other: callers take the store's write turn first (see
//! [`super::Store::write_turn`]), and `BEGIN IMMEDIATE` takes SQLite's write
//! lock for anything outside this process.
//!
//! WAL checkpoints — copying the log's pages back into the database file —
//! run on a thread of their own, not in the commit that crosses SQLite's
//! threshold: left to `wal_autocheckpoint`, one claim or group commit in
//! every few dozen paid 5–10 ms for everyone's pages while every runner
//! waited on it (measured on `benches/throughput`'s store calls: 5
//! checkpoints were a fifth of the writer's time). A `PASSIVE` checkpoint
//! does not take the write lock, so the writer goes on appending while the
//! other core copies. SQLite's own threshold stays, raised to 10,000 pages
//! ([`CONNECTION_PRAGMAS`]), so the log stays bounded even if the
//! checkpointer falls behind.

use super::{StoreError, StoreResult};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// How long the checkpointer lets commits gather after the first one it
/// hears of before it checkpoints them all: one `fsync` of the database
/// file per round, not per commit.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Every connection to a SQLite store, the pool's and the writer's: WAL,
/// so readers run beside the one writer; `synchronous = NORMAL` (WAL is
/// safe with it); foreign keys on; a writer waits up to 30 s for the lock
/// instead of failing at once; and a commit checkpoints the log itself
/// only past 10,000 pages (SQLite's default is 1,000) — the fallback if
/// the checkpointer falls behind.
pub(crate) const CONNECTION_PRAGMAS: &str = "PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 30000; \
     PRAGMA wal_autocheckpoint = 10000;";

/// The writer's own settings, beyond [`CONNECTION_PRAGMAS`]: temporary
/// files in memory — above all the statement journal, which SQLite keeps
/// for a statement that writes many rows (a claim's `UPDATE` and
/// attempts' `INSERT`, a group commit's) so it can undo that statement
/// alone. Past 64 KiB of pages it spilled to a temporary file, written
/// with a system call per page: a claim whose rows lay in four places —
/// four tenants' queues — paid that on every batch. The writer
/// sorts only bounded sets, so its temporary data stays small.
const WRITER_PRAGMAS: &str = "PRAGMA temp_store = MEMORY;";

/// The database clock, read with a cached statement (the writer's
/// transactions all start with it).
pub(crate) fn db_now(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<i64> {
    tx.prepare_cached(concat!("SELECT ", super::dialect::now_ms!()))?
        .query_row([], |row| row.get(0))
}

/// The handle on the writer thread; the thread ends when this is dropped.
pub(crate) struct SqliteWriter {
    jobs: mpsc::Sender<Job>,
}

impl SqliteWriter {
    /// Open a connection to the (already migrated) database file at `path`
    /// with the pool's settings, and start its thread.
    pub(crate) fn open(path: &Path) -> StoreResult<Self> {
        let mut conn = Connection::open(path)?;
        conn.execute_batch(CONNECTION_PRAGMAS)?;
        conn.execute_batch(WRITER_PRAGMAS)?;
        conn.set_prepared_statement_cache_capacity(32);
        let checkpoints = Connection::open(path)?;
        checkpoints.execute_batch(CONNECTION_PRAGMAS)?;
        let (commits, heard) = mpsc::channel::<()>();
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("paddock-sqlite-writer".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                    let _ = commits.send(());
                }
            })
            .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        std::thread::Builder::new()
            .name("paddock-sqlite-checkpoint".into())
            .spawn(move || checkpointer(&checkpoints, &heard))
            .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        Ok(Self { jobs })
    }

    /// Run `work` in one `BEGIN IMMEDIATE` transaction on the writer
    /// thread: committed if it returns `Ok`, rolled back if it returns an
    /// error. The caller holds the store's write turn.
    pub(crate) async fn transaction<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let result = (|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let value = work(&tx)?;
                tx.commit()?;
                Ok(value)
            })();
            let _ = reply.send(result);
        });
        self.jobs.send(job).map_err(|_| writer_gone())?;
        answer.await.map_err(|_| writer_gone())?
    }
}

/// The checkpointer's loop: after a commit, wait [`CHECKPOINT_EVERY`] for
/// more, then checkpoint the log passively (readers and the writer go on).
/// It ends with the writer (its sender dropped), after one last round for
/// the commits it heard of.
fn checkpointer(conn: &Connection, commits: &mpsc::Receiver<()>) {
    while commits.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        while commits.try_recv().is_ok() {}
        // A failed round (the file gone, a busy lock past its timeout) is
        // retried at the next commit; the writer's own threshold is the
        // backstop.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(error = %crate::model::text::Esc(&e), "WAL checkpoint failed; retried after the next commit");
        }
    }
}

/// The writer thread is gone (it panicked): a database error, retriable by
/// the callers' usual paths (the lease lapses and the trigger is taken over).
fn writer_gone() -> StoreError {
    StoreError::Database(sqlx::Error::WorkerCrashed)
}

#[cfg(test)]
mod tests {
    use super::SqliteWriter;
    use std::time::{Duration, Instant};

    /// The checkpointer copies the writer's commits into the database file
    /// on its own: 250 pages of commits stay far below the writer's
    /// fallback threshold, so without it they would wait in the log.
    #[tokio::test]
    async fn commits_reach_the_database_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v BLOB);")
            .unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        let writer = SqliteWriter::open(&path).unwrap();
        writer
            .transaction(|tx| {
                let mut insert = tx.prepare("INSERT INTO t (v) VALUES (zeroblob(1000))")?;
                for _ in 0..1000 {
                    insert.execute([])?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::metadata(&path).unwrap().len() < before + 900_000 {
            assert!(
                Instant::now() < deadline,
                "the commit never left the WAL: no checkpoint ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
