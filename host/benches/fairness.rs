//! A victim tenant's wait under a flood (issue 16): tenant `a` enqueues a
//! flood of no-op triggers (default 10,000), then tenant `b` 100, in one
//! group of 8 slots, and one in-process runner with 8 slots drains them.
//! The victim's wait is each trigger's first start minus its creation, on
//! the database clock; p50 / p99 are printed for
//!
//! - `alone`: the victim's 100 with no flood (the floor);
//! - `flood, fair`: behind the flood, as another tenant (fair shares);
//! - `flood, same tenant`: behind the flood as the flood's own tenant —
//!   what first-in-first-out would give everyone;
//!
//! and the drain's jobs/s. Each wait counts from the victim's creation,
//! just before the runner starts (so `alone` is the runner's start-up and
//! first claims). Same run, SQLite and PostgreSQL, after a warm-up run. Env: `PADDOCK_BENCH_FLOOD` (default 10000),
//! `PADDOCK_BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; a database is created
//! for the run and dropped), `PADDOCK_BENCH_ONLY` (`sqlite` or `pg`).
//!
//! Run: `cargo bench -p paddock --bench fairness` (after
//! `bash scripts/build-guests.sh`).

mod common;
use common::env_or;
use common::pg::Pg;
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::ResourceGroup;
use paddock::model::group::{CapacityInputs, DEFAULT_AGING_MS};
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{NewTrigger, Store};
use std::sync::Arc;
use std::time::Duration;

const VICTIMS: usize = 100;
const SLOTS: i64 = 8;

/// The scenario: the flood's size, and the victim's tenant.
struct Scenario {
    name: &'static str,
    flood: usize,
    victim_tenant: &'static str,
}

async fn job(registry: &Registry, id: &str, tenant: &str) {
    let toml = format!(
        "id = \"{id}\"\ntenant = \"{tenant}\"\nresource_group = \"shared\"\ncomponent = \"{}\"\n",
        common::guest("noop").display()
    );
    registry
        .job_apply(&toml, std::path::Path::new("."), "bench")
        .await
        .unwrap();
}

/// Run one scenario on a fresh database; (p50, p99) of the victim's wait in
/// ms, and jobs/s of the whole drain.
async fn run(url: &str, sandbox: &Arc<Sandbox>, s: &Scenario) -> (f64, f64, f64) {
    let store = Store::open(url).await.unwrap();
    let registry = Registry::new(store.clone(), sandbox.clone());
    registry
        .group_put(
            ResourceGroup {
                name: "shared".into(),
                fuel_per_attempt: 1_000_000_000,
                memory_bytes: 64 << 20,
                deadline_ms: 60_000,
                max_concurrency: SLOTS,
                grants: "[]".into(),
                caps: Default::default(),
                capacity: CapacityInputs::default(),
                aging_ms: DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            "bench",
        )
        .await
        .unwrap();
    job(&registry, "flood", "a").await;
    job(&registry, "victim", s.victim_tenant).await;
    for i in 0..s.flood {
        let new = NewTrigger::manual("flood", serde_json::json!({ "i": i }), None);
        store.trigger_create(&new).await.unwrap();
    }
    for i in 0..VICTIMS {
        let new = NewTrigger::manual("victim", serde_json::json!({ "i": i }), None);
        store.trigger_create(&new).await.unwrap();
    }
    let runner = Runner::new(
        store.clone(),
        sandbox.clone(),
        RunnerConfig {
            runner_id: "bench".into(),
            max_concurrency: SLOTS as usize,
            claim_batch: SLOTS,
            poll_interval: Duration::from_millis(10),
            ..Default::default()
        },
    );
    let started = std::time::Instant::now();
    let done = runner.run_until_idle().await.unwrap().len();
    let rate = done as f64 / started.elapsed().as_secs_f64();
    assert_eq!(done, s.flood + VICTIMS);
    let mut waits: Vec<i64> = sqlx::query_scalar(store.sql(
        "SELECT a.started_at - t.created_at FROM triggers t JOIN attempts a \
         ON a.trigger_id = t.id AND a.attempt_no = 1 WHERE t.job_id = 'victim'",
    ))
    .fetch_all(store.pool())
    .await
    .unwrap();
    waits.sort_unstable();
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q).round() as usize] as f64;
    store.close().await;
    (at(0.5), at(0.99), rate)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let flood = env_or("PADDOCK_BENCH_FLOOD", 10_000usize);
    let only = std::env::var("PADDOCK_BENCH_ONLY").unwrap_or_default();
    let admin = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let scenarios = [
        Scenario {
            name: "alone",
            flood: 0,
            victim_tenant: "b",
        },
        Scenario {
            name: "flood, fair",
            flood,
            victim_tenant: "b",
        },
        Scenario {
            name: "flood, same tenant",
            flood,
            victim_tenant: "a",
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let pg = if only == "sqlite" {
        None
    } else {
        Some(Pg::create(&admin, "fairness").await)
    };
    // Warm-up, not printed: the first run compiles the guest and opens
    // the databases' caches; every measured run then finds them warm.
    let warm = Scenario {
        name: "warm-up",
        flood: 0,
        victim_tenant: "b",
    };
    if only != "pg" {
        let url = format!("sqlite://{}", dir.path().join("warm.db").display());
        run(&url, &sandbox, &warm).await;
    }
    if let Some(pg) = &pg {
        run(&pg.schema("warm").await, &sandbox, &warm).await;
    }
    println!(
        "victim tenant's wait (first start - creation, ms): {VICTIMS} victims behind a flood of {flood}, {SLOTS} slots"
    );
    println!(
        "{:<10} {:<20} {:>10} {:>10} {:>12}",
        "database", "scenario", "p50 ms", "p99 ms", "drain jobs/s"
    );
    for (i, s) in scenarios.iter().enumerate() {
        if only != "pg" {
            let url = format!("sqlite://{}", dir.path().join(format!("f{i}.db")).display());
            let (p50, p99, rate) = run(&url, &sandbox, s).await;
            println!(
                "{:<10} {:<20} {p50:>10.0} {p99:>10.0} {rate:>12.0}",
                "SQLite", s.name
            );
        }
        if let Some(pg) = &pg {
            let url = pg.schema(&format!("f{i}")).await;
            let (p50, p99, rate) = run(&url, &sandbox, s).await;
            println!(
                "{:<10} {:<20} {p50:>10.0} {p99:>10.0} {rate:>12.0}",
                "PostgreSQL", s.name
            );
        }
    }
    if let Some(pg) = pg {
        pg.drop().await;
    }
}
