//! Paddock's integration tests: one binary, one file per feature. Every test
//! runs against a real database, real wasmtime and real guest components
//! built by `scripts/build-guests.sh`.
//!
//! Every test that touches the store runs once per database in the same
//! run, named for it: [`db_test!`] turns `async fn claim_skips_live_lease(db:
//! Db)` into `claim_skips_live_lease::sqlite` and
//! `claim_skips_live_lease::postgres`. SQLite is a fresh file per test;
//! PostgreSQL a fresh schema per test in the database named by
//! `PADDOCK_TEST_DATABASE_URL` (default: `paddock_test` on the local server,
//! created if missing). An unreachable server fails the PostgreSQL tests; it
//! never skips them. A test that only means something on one database lives
//! in a `sqlite` or `postgres` module of its file, so its name says so too.
//!
//! Count the tests per database with `bash scripts/test-counts.sh`.

/// The tenant of the jobs [`TestHost::job`] applies.
pub const TENANT: &str = "t1";

/// What the host sends a downstream as `Idempotency-Key` for a key of a
/// [`TestHost::job`]'s effect (keys are qualified by their tenant).
pub fn sent_key(key: &str) -> String {
    paddock::effects::classify::downstream_key(TENANT, key)
}

/// One test, once per database: `db_test!(name)` above `async fn name(db:
/// Db)` makes `name::sqlite` and `name::postgres`, each a `#[tokio::test]`
/// (on a multi-threaded runtime with `workers = N`). The function stays an
/// ordinary item, so rustfmt and the compiler see it as written.
macro_rules! db_test {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name($crate::Db::Sqlite).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name($crate::Db::Postgres).await
            }
        }
    };
    ($name:ident, workers = $n:literal) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = $n)]
            async fn sqlite() {
                super::$name($crate::Db::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = $n)]
            async fn postgres() {
                super::$name($crate::Db::Postgres).await
            }
        }
    };
}

mod api;
mod audit;
mod bad_input;
mod bounds;
mod capabilities;
mod cli_errors;
mod clock;
mod conformance;
mod conservation;
mod croner_policy;
mod drain;
mod effects;
mod effects_storm;
mod faults;
mod fuel;
mod gates;
mod group_commit;
mod guests;
mod hostile;
mod incident;
mod job_names;
mod layers;
mod leases;
mod ledger;
mod manual;
mod metrics;
mod migrations;
mod node;
mod origin;
mod output;
mod overlap;
mod procs;
mod quotas;
mod registration;
mod reports;
mod retry;
mod scheduler;
mod scheduler_fencing;
mod secrets;
mod shares;
mod status;
mod takeover;
mod tokens;
mod trigger_ids;
mod two_person;
mod wake;
mod walls;

use paddock::lease::{Runner, RunnerConfig};
use paddock::model::ResourceGroup;
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{NewTrigger, Store, TriggerRecord};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The built component for a guest crate.
pub fn guest(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/guests")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/build-guests.sh` (the test command does)",
        path.display()
    );
    path
}

/// The databases the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// A fresh database in its own folder, with a sandbox and a registry.
pub struct TestHost {
    /// The database URL, for processes started against the same store.
    pub url: String,
    pub store: Store,
    pub sandbox: Arc<Sandbox>,
    pub registry: Registry,
    pub dir: tempfile::TempDir,
}

/// The PostgreSQL database the suite's schemas live in:
/// `PADDOCK_TEST_DATABASE_URL`, or `paddock_test` on the local server
/// (`make test` sets the variable from `scripts/test-postgres.sh`, which
/// recreates that database first).
pub fn postgres_base_url() -> String {
    std::env::var("PADDOCK_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/paddock_test".into())
}

/// Connect to the test database, creating it the first time if the server
/// has no such database yet (a plain `cargo test` on a fresh machine).
async fn connect_postgres(base: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    match sqlx::PgConnection::connect(base).await {
        Ok(conn) => conn,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3D000") => {
            let (server, rest) = base.rsplit_once('/').expect("a URL with a database");
            let name = rest.split('?').next().unwrap_or(rest);
            let mut admin = sqlx::PgConnection::connect(&format!("{server}/postgres"))
                .await
                .unwrap_or_else(|e| panic!("PostgreSQL at {server} is unreachable: {e}"));
            // Another test may create it at the same moment.
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await;
            sqlx::PgConnection::connect(base)
                .await
                .unwrap_or_else(|e| panic!("PostgreSQL test database {base}: {e}"))
        }
        Err(e) => panic!(
            "PostgreSQL at {base} is unreachable ({e}); start it or set PADDOCK_TEST_DATABASE_URL"
        ),
    }
}

/// A database URL of its own for one test: a SQLite file in `dir`, or a new
/// schema in the PostgreSQL test database (selected through `search_path`,
/// so every process given this URL sees the same tables).
pub async fn fresh_database_url(db: Db, dir: &std::path::Path) -> String {
    if db == Db::Sqlite {
        return format!("sqlite://{}", dir.join("paddock.db").display());
    }
    let base = postgres_base_url();
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let schema = format!(
        "t{}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut conn = connect_postgres(&base).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options[search_path]={schema}")
}

impl TestHost {
    pub async fn new(db: Db) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = fresh_database_url(db, dir.path()).await;
        Self::on(url, dir).await
    }

    /// A host on the database at `url` (`dir` holds its files, if any).
    pub async fn on(url: String, dir: tempfile::TempDir) -> Self {
        // At most 8 pooled connections (16 by default on PostgreSQL): two
        // tests run at once on one server, each beside up to three
        // `paddock serve` processes (see `procs::SERVE_DB_CONNECTIONS`).
        let store = Store::open_with(&url, Some(8)).await.unwrap();
        // One compiled-code cache for every test host: the Python and
        // JavaScript components (12-18 MB) compile once per run, not once
        // per test.
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: Some(
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-wasm-cache"),
            ),
            ..SandboxConfig::default()
        })
        .unwrap();
        let registry = Registry::new(store.clone(), sandbox.clone());
        Self {
            url,
            store,
            sandbox,
            registry,
            dir,
        }
    }

    /// A resource group with these limits and room for 64 attempts at once
    /// (claims enforce it; the tests of quotas set their own).
    pub async fn group(&self, name: &str, fuel: i64, memory_bytes: i64, deadline: Duration) {
        self.group_sized(name, fuel, memory_bytes, deadline, 64)
            .await;
    }

    /// [`TestHost::group`] with room for `max_concurrency` attempts.
    pub async fn group_sized(
        &self,
        name: &str,
        fuel: i64,
        memory_bytes: i64,
        deadline: Duration,
        max_concurrency: i64,
    ) {
        self.registry
            .group_put(
                ResourceGroup {
                    name: name.into(),
                    // `i64::MAX` asks for as much as a group may have.
                    fuel_per_attempt: fuel.min(paddock::model::bounds::FUEL.max),
                    memory_bytes,
                    deadline_ms: deadline.as_millis() as i64,
                    max_concurrency,
                    grants: "[]".into(),
                    caps: Default::default(),
                    capacity: Default::default(),
                    aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                    shares: Default::default(),
                },
                "test",
            )
            .await
            .unwrap();
        // The tests' groups admit every tenant; `walls.rs` tests bindings.
        self.registry
            .group_tenants(name, &["*".into()], &[], "test")
            .await
            .unwrap();
    }

    /// A group with small limits for misbehaving guests.
    pub async fn tight_group(&self) {
        self.group("tight", 100_000_000, 16 << 20, Duration::from_secs(5))
            .await;
    }

    /// Apply a job running guest `name` with extra manifest lines. The
    /// connectors the manifest asks for are granted to its group first, as
    /// an admin would (`paddock group grant G connector:NAME`).
    pub async fn job(&self, id: &str, name: &str, extra: &str) -> u32 {
        let toml = format!(
            "id = \"{id}\"\ntenant = \"{TENANT}\"\ncomponent = \"{}\"\n{extra}\n",
            guest(name).display()
        );
        self.grant_connectors(&toml).await;
        let (_, outcome) = self
            .registry
            .job_apply(&toml, std::path::Path::new("."), "test")
            .await
            .unwrap();
        outcome.version()
    }

    /// Create a trigger of `job` and run every due trigger to its end; the
    /// trigger as it ended.
    pub async fn run_one(&self, job: &str, params: serde_json::Value) -> TriggerRecord {
        let t = self.trigger(job, params).await;
        self.runner("r", Duration::from_secs(60))
            .run_until_idle()
            .await
            .unwrap();
        self.store.trigger_get(t.id).await.unwrap()
    }

    /// Grant a manifest's connectors to its resource group, and admit its
    /// tenant there, as an admin would.
    pub async fn grant_connectors(&self, toml: &str) {
        let manifest = paddock::registry::manifest::JobManifest::parse(toml).unwrap();
        self.registry
            .group_tenants(
                &manifest.resource_group,
                &[manifest.tenant.clone()],
                &[],
                "admin",
            )
            .await
            .unwrap();
        let grants: Vec<String> = manifest
            .connectors
            .iter()
            .map(|c| format!("connector:{c}"))
            .collect();
        if !grants.is_empty() {
            self.registry
                .group_grant(&manifest.resource_group, &grants, &[], "admin")
                .await
                .unwrap();
        }
    }

    pub async fn trigger(&self, job: &str, params: serde_json::Value) -> TriggerRecord {
        self.store
            .trigger_create(&NewTrigger::manual(job, params, None))
            .await
            .unwrap()
            .0
    }

    /// Run `runner` in the background until the returned handle stops it.
    pub fn serve(runner: &Arc<Runner>) -> Serving {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runner = runner.clone();
        let task = tokio::spawn(async move {
            runner
                .run(async {
                    let _ = stopped.await;
                })
                .await
        });
        Serving { stop, task }
    }

    pub fn runner(&self, id: &str, lease: Duration) -> Arc<Runner> {
        Runner::new(
            self.store.clone(),
            self.sandbox.clone(),
            RunnerConfig {
                runner_id: id.into(),
                lease,
                heartbeat_every: lease / 4,
                poll_interval: Duration::from_millis(20),
                ..RunnerConfig::default()
            },
        )
    }

    pub async fn count(&self, table: &str) -> i64 {
        let sql = match table {
            "components" => "SELECT count(*) FROM components",
            "jobs" => "SELECT count(*) FROM jobs",
            "plan_versions" => "SELECT count(*) FROM plan_versions",
            "triggers" => "SELECT count(*) FROM triggers",
            "attempts" => "SELECT count(*) FROM attempts",
            "audit_log" => "SELECT count(*) FROM audit_log",
            other => panic!("no count for {other}"),
        };
        sqlx::query_scalar(self.store.sql(sql))
            .fetch_one(self.store.pool())
            .await
            .unwrap()
    }
}

/// A runner running in the background ([`TestHost::serve`]).
pub struct Serving {
    stop: tokio::sync::oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Serving {
    /// Ask the runner to stop (it drains) and wait until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }

    /// Stop at once, without a drain (attempts in flight are dropped).
    pub fn abort(self) {
        self.task.abort();
    }
}
