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

use super::{StoreError, StoreResult};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The handle on the writer thread; the thread ends when this is dropped.
pub(crate) struct SqliteWriter {
    jobs: mpsc::Sender<Job>,
}

impl SqliteWriter {
    /// Open a connection to the (already migrated) database file at `path`
    /// with the pool's settings, and start its thread.
    pub(crate) fn open(path: &Path) -> StoreResult<Self> {
        let mut conn = Connection::open(path)?;
        // As the pool's connections (see `Store::open_with`): WAL, a writer
        // waits for the lock instead of failing at once, foreign keys on.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 30000;",
        )?;
        conn.set_prepared_statement_cache_capacity(32);
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("paddock-sqlite-writer".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                }
            })
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

/// The writer thread is gone (it panicked): a database error, retriable by
/// the callers' usual paths (the lease lapses and the trigger is taken over).
fn writer_gone() -> StoreError {
    StoreError::Database(sqlx::Error::WorkerCrashed)
}
