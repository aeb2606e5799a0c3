//! The store: the database is the source of truth for every identity —
//! components, plan versions, triggers, attempts, checkpoints, effects and
//! the audit log.
//!
//! Invariants:
//! - every instant is integer milliseconds since the Unix epoch, taken from
//!   the database clock inside the transaction that uses it (an optional
//!   injected `now` exists only for tests);
//! - every write made under a lease carries `fencing_token = $token` in the
//!   same statement; zero rows means the token is stale, and the write comes
//!   back as [`StoreError::LeaseLost`] with the token it expected and the one
//!   it found, and is counted in `stale_token_rejections`;
//! - a registration and its audit entry commit in one transaction.
//!
//! Two databases, one store. SQLite is the embedded default
//! (`sqlite://paddock.db`, one process); PostgreSQL (`postgres://...`) lets
//! any number of processes share one database. Each plane reaches the
//! store through its role trait (`roles.rs`: [`ReadStore`], [`Counters`],
//! [`RunnerStore`], [`SchedulerStore`], [`EffectStore`], [`ControlStore`]),
//! and the conformance suite runs each role on both databases.
//!
//! Most statements are one text run through sqlx's `Any` driver on either
//! database: [`dialect`] translates the few spellings that differ. The
//! writes every job pays for have a path per database: on SQLite, claims
//! and group commits run on [`sqlite_writer`] (rusqlite, each transaction
//! whole on one thread); on PostgreSQL, on a native pool in PostgreSQL's
//! own spelling (`runner/postgres.rs`: one round trip each). Fenced writes
//! take their guard from `fence.rs`; trigger states, effect states and
//! origins are spelt in SQL only through their `model/` macros.
//! Migrations are in `migrations/sqlite/` and `migrations/postgres/`
//! (mirrors of each other), applied at open.

mod audit;
mod backfill;
mod backlog;
mod columns;
mod control;
pub mod dialect;
mod effects;
mod fence;
mod fence_log;
mod gates;
mod group_tenants;
mod groups;
#[cfg(test)]
mod guards;
mod held;
mod liveness;
mod metrics;
mod model;
mod overlap;
mod quotas;
mod read;
mod reports;
mod requests;
mod retry;
mod roles;
mod runner;
mod scoped;
#[doc(hidden)]
pub use runner::hot_statements;
mod scheduler;
mod secret_key;
mod secrets;
mod sqlite_writer;
mod state_log;
mod tickets;
mod tokens;
pub mod trigger_ids;
mod wake;

#[doc(hidden)]
pub use async_trait::async_trait;
pub use audit::{AuditConfig, AuditVerdict};
pub use backfill::Backfilled;
pub use backlog::{
    GroupStatus, ID_ORDER_SLACK_MS, StatusQuery, StatusReport, status_settings, status_statements,
};
pub use dialect::Dialect;
pub use gates::GateRecord;
pub use groups::{GroupLoad, WINDOW_ATTEMPTS, capacity_now};
pub use held::HoldingTicket;
pub use liveness::Liveness;
pub use metrics::{
    ExceptionGauge, MetricsSnapshot, STALE_TOKEN_KIND_PREFIX, SchemaState, TriggerGauge,
};
pub use model::*;
pub use overlap::Admission;
pub use quotas::{RampNow, TenantHoldMove};
pub use reports::{CostBy, ReportQuery};
pub use retry::Retried;
pub use secret_key::{KEY_FILE_VAR as SECRET_KEY_FILE_VAR, SecretKeyConfig};
pub use secrets::{KeyRotation, SecretView};
pub use tokens::{AuthError, IssuedToken, MAX_TOKEN_VALIDITY_MS, NewToken, TokenView};

/// The role traits, for code that uses the concrete [`Store`] directly (the
/// CLI, tests, benchmarks): `use paddock::store::prelude::*;`.
pub mod prelude {
    pub use super::roles::{
        ControlStore, Counters, EffectStore, ReadStore, RunnerStore, SchedulerStore,
    };
}

pub use roles::{
    ClaimRequest, ControlStore, Counters, EffectStore, ReadStore, Renewal, RunnerStore, ScanCommit,
    ScanWritten, SchedulerStore,
};

use crate::model::{FencingToken, ShardGeneration, TriggerState};
pub use wake::{WAKE_CHANNEL, WakeListener};

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Executor, Transaction};

/// A transaction on either database.
pub(crate) type Tx = Transaction<'static, Any>;

/// Migrations, compiled into the binary.
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Store errors. `LeaseLost` is the fencing error; the rest are either the
/// caller's (not found, conflict) or the database's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write under a trigger lease that is no longer current: the
    /// trigger is gone, at another token, or no longer running.
    #[error("{}", lease_lost_message(*trigger_id, *expected, *found, *state))]
    LeaseLost {
        trigger_id: i64,
        /// The token the writer holds.
        expected: FencingToken,
        /// The trigger's token now (`None`: no such trigger).
        found: Option<FencingToken>,
        /// The trigger's state now.
        state: Option<TriggerState>,
    },
    /// A write under a shard lease that is no longer current: another
    /// scheduler took the shard over (or it lapsed and was released).
    #[error(
        "stale shard generation for shard {shard}: this scheduler holds generation {expected}, \
         the shard is at {}", found.map_or("no such shard".to_string(), |g| format!("generation {g} (owner {})", owner.as_deref().unwrap_or("none")))
    )]
    ShardLost {
        shard: i64,
        expected: ShardGeneration,
        found: Option<ShardGeneration>,
        owner: Option<String>,
    },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A value a person sent is outside its documented limit
    /// ([`crate::model::bounds`]); nothing was stored.
    #[error("{0}")]
    OutOfBounds(String),
    #[error(
        "unsupported database URL '{0}' (use sqlite://PATH, sqlite::memory: or postgres://USER@HOST/DB)"
    )]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// From SQLite's writer connection (see [`sqlite_writer`]).
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// The audit key or anchor file (outside the database) is unusable.
    #[error("{0}")]
    Audit(String),
    /// The key file that seals connector secrets is missing, unreadable or
    /// does not hold the key a secret was sealed under.
    #[error("{0}")]
    SecretKey(String),
}

// The database errors are wrapped by hand, not with `#[from]`: each message
// above already shows the driver's text, and sqlx's own text repeats its
// source (`error communicating with database: {io error}`), so returning
// the driver error as `source()` would print every cause two or three
// times. The rule: a store error's message is whole; it has no `source()`.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(error)
    }
}

fn lease_lost_message(
    trigger_id: i64,
    expected: FencingToken,
    found: Option<FencingToken>,
    state: Option<TriggerState>,
) -> String {
    match (found, state) {
        (None, _) => {
            format!("trigger {trigger_id} does not exist (the writer holds token {expected})")
        }
        (Some(found), Some(state)) if found == expected => format!(
            "trigger {trigger_id} is {state} at token {found}: a write under token {expected} is refused once the attempt has ended"
        ),
        (Some(found), state) => format!(
            "stale fencing token for trigger {trigger_id}: this attempt holds token {expected}, \
             the trigger is at token {found}{}",
            state.map(|s| format!(" ({s})")).unwrap_or_default()
        ),
    }
}

impl StoreError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(self, StoreError::Database(_) | StoreError::Sqlite(_))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A turn at a store's write gate (see [`Store::write_turn`]); the next
/// writer goes when it is dropped.
pub(crate) type WriteTurn = Option<tokio::sync::OwnedMutexGuard<()>>;

/// A handle on the database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    /// PostgreSQL only: the native driver's pool for the hot path — every
    /// claim and group commit (see [`runner`]'s `postgres` module). Native,
    /// not `Any`: the hot statements bind arrays (which `Any` cannot), and
    /// rows decode without `Any`'s conversion layer.
    hot: Option<sqlx::PgPool>,
    /// PostgreSQL only: how this store's claims fared — refusals, and how
    /// many of the next claims take the claims' lock before they read
    /// (see [`runner`]'s `postgres` module, `claim_on`).
    claim_path: std::sync::Arc<runner::ClaimPath>,
    /// SQLite only: write transactions of this process take turns here, in
    /// arrival order, instead of colliding on the database's one write
    /// lock. A collision costs far more than waiting: the loser sleeps in
    /// SQLite's busy handler (1 ms, then 2, 5, ...) while the lock is
    /// usually free again within a fraction of that — measured on the
    /// throughput bench, a one-row group commit that met a claim took
    /// 2.7 ms instead of 0.3 ms, and the runner idled meanwhile.
    write_gate: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// SQLite only: the connection claims and group commits run on, each
    /// transaction whole on its thread (see [`sqlite_writer`]).
    writer: Option<std::sync::Arc<sqlite_writer::SqliteWriter>>,
    /// `sqlite::memory:` only: the private file standing in for it.
    _scratch: Option<std::sync::Arc<ScratchFile>>,
    /// Kept for connections outside the pool (the wake listener).
    url: std::sync::Arc<str>,
    /// The audit key and anchor file (see [`audit`]).
    audit: std::sync::Arc<audit::Seal>,
    /// The key file that seals connector secrets (see [`secret_key`]).
    secrets: std::sync::Arc<secret_key::Keyring>,
}

/// The file behind a `sqlite::memory:` store, removed with the store. An
/// in-memory SQLite database exists once per connection, and the store
/// needs two (the pool and the writer) to see the same one.
struct ScratchFile(std::path::PathBuf);

impl ScratchFile {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        Self(std::env::temp_dir().join(format!(
            "paddock-memory-{}-{n}-{nanos}.db",
            std::process::id()
        )))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Store {
    /// Open (creating a SQLite file if needed) and migrate. `url` is
    /// `sqlite://PATH`, `sqlite::memory:` or `postgres://...`.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, None).await
    }

    /// As [`Store::open`], with at most `max_connections` pooled
    /// connections (the default suits one process).
    pub async fn open_with(url: &str, max_connections: Option<u32>) -> StoreResult<Self> {
        install_default_drivers();
        let dialect = if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Dialect::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(
                crate::model::dburl::redacted_url(url),
            ));
        };
        // `sqlite::memory:` is a private file removed with the store.
        let audit = audit::Seal::new(AuditConfig::from_env(url));
        let scratch = (dialect == Dialect::Sqlite && url.contains(":memory:"))
            .then(|| std::sync::Arc::new(ScratchFile::new()));
        let url = match &scratch {
            Some(file) => format!("sqlite://{}", file.0.display()),
            None => url.to_string(),
        };
        let pool = open_pool(dialect, &url, max_connections).await?;
        let migrations = match dialect {
            Dialect::Sqlite => &SQLITE_MIGRATIONS,
            Dialect::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrations.run(&pool).await?;
        let writer = match dialect {
            Dialect::Sqlite => {
                use std::str::FromStr;
                let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url)?;
                Some(std::sync::Arc::new(sqlite_writer::SqliteWriter::open(
                    options.get_filename(),
                )?))
            }
            Dialect::Postgres => None,
        };
        let hot = match dialect {
            Dialect::Postgres => Some(open_hot_pool(&url, max_connections)?),
            Dialect::Sqlite => None,
        };
        let store = Self {
            pool,
            dialect,
            hot,
            write_gate: (dialect == Dialect::Sqlite).then(Default::default),
            writer,
            _scratch: scratch,
            claim_path: Default::default(),
            url: url.into(),
            audit,
            secrets: std::sync::Arc::new(secret_key::Keyring::new(SecretKeyConfig::from_env())),
        };
        // Refuses to open when sealed secrets' key is missing; seals
        // plain-text ones.
        store.secrets_start().await?;
        Ok(store)
    }

    /// The pool, for tests and benchmarks that read tables directly. Run
    /// query texts through [`Store::sql`] so they work on both databases.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// `template` (SQLite spelling) as this database needs it.
    pub fn sql(&self, template: &'static str) -> &'static str {
        self.dialect.sql(template)
    }

    /// A transaction that will write what it reads (see
    /// [`Dialect::begin_write`]), and the turn at this process's write gate
    /// that goes with it (see [`Store::write_turn`]); keep the turn until the
    /// transaction has ended.
    pub(crate) async fn begin_write(&self) -> StoreResult<(Tx, WriteTurn)> {
        let turn = self.write_turn().await;
        Ok((
            self.pool.begin_with(self.dialect.begin_write()).await?,
            turn,
        ))
    }

    /// Wait for this process's turn to write (SQLite; PostgreSQL writers
    /// need no turn: row locks keep them apart). FIFO, so no writer starves.
    pub(crate) async fn write_turn(&self) -> WriteTurn {
        match &self.write_gate {
            Some(gate) => Some(gate.clone().lock_owned().await),
            None => None,
        }
    }

    /// SQLite: run `work` as one write transaction on the writer thread
    /// (see [`sqlite_writer`]), at this process's write turn.
    pub(crate) async fn sqlite_write<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> StoreResult<T> + Send + 'static,
    {
        let writer = self
            .writer
            .as_ref()
            .expect("only a SQLite store has a writer");
        let _turn = self.write_turn().await;
        writer.transaction(work).await
    }

    pub async fn close(&self) {
        if let Some(hot) = &self.hot {
            hot.close().await;
        }
        self.pool.close().await;
    }

    /// PostgreSQL's hot-path pool (see [`Store::hot`]'s field).
    pub(crate) fn hot(&self) -> &sqlx::PgPool {
        self.hot
            .as_ref()
            .expect("the hot-path pool exists on PostgreSQL, the only caller")
    }
}

/// The store's main pool (through `Any`): everything but SQLite's writer
/// and PostgreSQL's hot path.
async fn open_pool(
    dialect: Dialect,
    url: &str,
    max_connections: Option<u32>,
) -> StoreResult<AnyPool> {
    Ok(match dialect {
        Dialect::Sqlite => {
            // `mode=rwc` creates the file.
            let url = if url.contains("mode=") {
                url.to_string()
            } else if url.contains('?') {
                format!("{url}&mode=rwc")
            } else {
                format!("{url}?mode=rwc")
            };
            AnyPoolOptions::new()
                .max_connections(max_connections.unwrap_or(8))
                // A pooled connection to an embedded file cannot have
                // died behind our back, so skip the ping that would
                // otherwise cost a round trip to its worker thread on
                // every acquire (measured: ~1/5 of a claim).
                .test_before_acquire(false)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute(sqlite_writer::CONNECTION_PRAGMAS).await?;
                        Ok(())
                    })
                })
                .connect(&url)
                .await?
        }
        Dialect::Postgres => {
            AnyPoolOptions::new()
                .max_connections(max_connections.unwrap_or(16))
                // No ping before every acquire: it is a round trip on
                // every query. A connection the server dropped fails its
                // next query, and the pool discards it.
                .test_before_acquire(false)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        // A process frozen mid-transaction (SIGSTOP, a
                        // VM pause) would keep its row locks, and claims
                        // skip locked rows: its triggers could not be
                        // taken over when their leases expire. The
                        // server aborts such a transaction after 1 s
                        // idle and frees the rows. Our transactions never
                        // wait between statements (no I/O but the
                        // database's), so a live one is never cut.
                        conn.execute("SET idle_in_transaction_session_timeout = 1000")
                            .await?;
                        Ok(())
                    })
                })
                .connect(url)
                .await?
        }
    })
}

/// Connections of the hot-path pool: one claim and a few group commits in
/// flight per process (see `lease::group_commit`), plus room for a
/// straggler.
const HOT_CONNECTIONS: u32 = 6;

/// The sessions of PostgreSQL's hot-path pool. The settings travel in the
/// startup packet, not as a statement after connecting:
/// - `idle_in_transaction_session_timeout`, as on the main pool (a frozen
///   process must not keep row locks);
/// - the planner may not choose a sequential scan, a bitmap scan, a merge
///   join or a sort it can avoid, and never compiles with JIT. Only the
///   claim and the group commit run on this pool, and the right plan for
///   both is known and the same at any size: ordered walks of the partial
///   indexes that stop after the batch, and key lookups (`id = ANY(array)`)
///   from a handful of rows. Left to statistics, the planner picked
///   otherwise where they were stale or the table was small
///   (`benches/claim_plans.rs`): right after a burst of 50,000 triggers the
///   claim took a bitmap scan and an external sort of the whole backlog
///   (67 ms instead of 6), a generic plan cached while the tables were
///   small walked a million rows to join a batch of 100 (2.4 s), and after
///   `ANALYZE` the generic plan hashed 100,000 rows. With these settings
///   every plan is index-driven whatever the statistics, so the pool's
///   prepared statements may keep a cached generic plan — and must be told
///   to (`plan_cache_mode = force_generic_plan`): left on `auto`, the
///   planner kept choosing a custom plan, and planning the claim afresh
///   cost 1.5–1.7 ms per batch of 100 (15 µs per job; with the fair-share
///   claim of migration 0009), more than the claim's own execution saved.
///   JIT: the disabled nodes' cost penalty would put these tiny statements
///   over `jit_above_cost`, and compiling the claim took 1.3 s.
///
/// A connection pooler in between must pass these startup parameters
/// (PgBouncer: `ignore_startup_parameters` must not drop them).
pub const HOT_SESSION: &[(&str, &str)] = &[
    ("idle_in_transaction_session_timeout", "1000"),
    ("enable_seqscan", "off"),
    ("enable_bitmapscan", "off"),
    ("enable_mergejoin", "off"),
    ("enable_sort", "off"),
    ("jit", "off"),
    ("plan_cache_mode", "force_generic_plan"),
    // The claim writes the runner's id into its text as a literal
    // (`store/runner/postgres/literal.rs`): quoting it is doubling its
    // quotes only while this is on (the default since PostgreSQL 9.1).
    ("standard_conforming_strings", "on"),
];

/// PostgreSQL's hot-path pool, its sessions set up by [`HOT_SESSION`]: at
/// most [`HOT_CONNECTIONS`], and no more than the main pool's cap when one
/// is given. Lazy: a connection is opened on the first claim or group
/// commit, so stores that never run one (the heartbeats', the audit
/// anchoring's, a command's) hold none of the server's connections. Each
/// session prepares the claim's statements ([`runner::prepare_claim`])
/// when it opens.
fn open_hot_pool(url: &str, max_connections: Option<u32>) -> StoreResult<sqlx::PgPool> {
    use std::str::FromStr;
    let options =
        sqlx::postgres::PgConnectOptions::from_str(url)?.options(HOT_SESSION.iter().copied());
    Ok(sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections.map_or(HOT_CONNECTIONS, |n| n.min(HOT_CONNECTIONS)))
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::raw_sql(sqlx::AssertSqlSafe(runner::prepare_claim()))
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect_lazy_with(options))
}
