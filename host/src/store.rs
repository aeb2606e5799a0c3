//! The store: the database is the source of truth for every identity —
//! components, plan versions, triggers, attempts, checkpoints, effects and
//! the audit log.
//!
//! Invariants:
//! - every instant is integer milliseconds since the Unix epoch, taken from
//!   the database clock inside the statement that uses it (an optional
//!   injected `now` exists only for tests);
//! - every write made under a lease carries `fencing_token = $token` in the
//!   same statement; zero rows means the token is stale, and the write comes
//!   back as [`StoreError::LeaseLost`] with the token it expected and the one
//!   it found, and is counted in `stale_token_rejections`;
//! - a registration and its audit entry commit in one transaction.
//!
//! SQLite is the embedded default (`sqlite://paddock.db`); its SQL lives in
//! [`sqlite`]. Migrations are in `migrations/sqlite/`, applied at open.

mod model;
mod sqlite;
mod sqlite_effects;
mod sqlite_schedule;

pub use model::*;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::str::FromStr;
use std::time::Duration;

/// Migrations for the embedded store, compiled into the binary.
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// Store errors. `LeaseLost` is the fencing error; the rest are either the
/// caller's (not found, conflict) or the database's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "stale fencing token for trigger {trigger_id}: this attempt holds token {expected}, \
         the trigger is at {found:?}"
    )]
    LeaseLost {
        trigger_id: i64,
        expected: i64,
        found: Option<i64>,
    },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("unsupported database URL '{0}' (use sqlite://PATH or sqlite::memory:)")]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl StoreError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(self, StoreError::Database(_))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A handle on the database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Open (creating if needed) and migrate. `url` is `sqlite://PATH` or
    /// `sqlite::memory:`.
    pub async fn open(url: &str) -> StoreResult<Self> {
        if !url.starts_with("sqlite:") {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        // An in-memory database exists once per connection: keep one.
        let max = if url.contains(":memory:") { 1 } else { 8 };
        let pool = SqlitePoolOptions::new()
            .max_connections(max)
            .connect_with(options)
            .await?;
        SQLITE_MIGRATIONS.run(&pool).await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
