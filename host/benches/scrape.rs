//! What one `/metrics` scrape costs as the database grows (issue 19:
//! "`/metrics` scrape time with 1,000 jobs and 100,000 triggers").
//!
//! For each database (SQLite file, PostgreSQL schema) and each size: 1,000
//! jobs across 20 tenants and 4 groups are registered through the
//! registry (the no-op component), then `triggers` rows arrive in one
//! `INSERT ... SELECT` in the mix a busy day leaves behind — 85%
//! succeeded, 5% failed, 1% cancelled, 5% pending (due), 2% waiting to
//! retry, 1% running (live lease), 1% parked for a person — each started
//! one with its attempt row, and `ANALYZE`. Then a `MetricsServer` (the
//! one `paddock serve --metrics` starts) is scraped over HTTP: 5 warm-up
//! scrapes, then `PADDOCK_SCRAPE_RUNS` (default 40) timed ones, each the
//! whole GET (one snapshot statement + rendering + HTTP). The snapshot
//! statement alone is timed the same way.
//!
//! Printed per database: p50 / p99 of the scrape and of the snapshot at
//! 1,000 triggers and at 100,000 (sizes: `PADDOCK_SCRAPE_SIZES`, default
//! `1000 100000`), the body's size, and the ratio of the largest size's
//! p50 to the smallest's. The snapshot reads the waiting and running rows
//! through their partial indexes and never the finished ones, so the
//! ratio follows the waiting backlog (5% + 2% + 1% + 1% of the rows here),
//! not the table.
//!
//! Run: `cargo bench -p paddock --bench scrape` (after
//! `bash scripts/build-guests.sh`). PostgreSQL: `PADDOCK_BENCH_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`) is the admin
//! connection; a database is created for the run and dropped at the end.
//! `PADDOCK_SCRAPE_DBS` (default `sqlite postgres`).

mod common;
use common::pg::Pg;
use common::{env_or, guest};
use paddock::lease::LeaseMetrics;
use paddock::observe::{Draining, MetricsServer, Observer};
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::{ReadStore, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS: usize = 1_000;
const TENANTS: usize = 20;
const GROUPS: usize = 4;

#[tokio::main]
async fn main() {
    let sizes: Vec<i64> = std::env::var("PADDOCK_SCRAPE_SIZES")
        .unwrap_or_else(|_| "1000 100000".into())
        .split_whitespace()
        .map(|s| s.parse().expect("PADDOCK_SCRAPE_SIZES: numbers"))
        .collect();
    let runs: usize = env_or("PADDOCK_SCRAPE_RUNS", 40);
    let dbs = std::env::var("PADDOCK_SCRAPE_DBS").unwrap_or_else(|_| "sqlite postgres".into());
    let sandbox = Arc::new(Sandbox::new(SandboxConfig::default()).unwrap());
    let admin = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let pg = if dbs.contains("postgres") {
        Some(Pg::create(&admin, "scrape").await)
    } else {
        None
    };
    println!(
        "scrape: {JOBS} jobs, {TENANTS} tenants, {GROUPS} groups; {runs} timed scrapes per row\n"
    );
    println!(
        "{:<9} {:>9} {:>11} {:>11} {:>12} {:>12} {:>9}",
        "db", "triggers", "scrape p50", "scrape p99", "snapshot p50", "snapshot p99", "body KiB"
    );
    for db in dbs.split_whitespace() {
        let mut p50s = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let url = match db {
                "sqlite" => format!("sqlite://{}", dir.path().join("scrape.db").display()),
                _ => {
                    pg.as_ref()
                        .expect("postgres")
                        .schema(&format!("s{i}"))
                        .await
                }
            };
            let row = measure(&url, &sandbox, size, runs).await;
            println!(
                "{:<9} {:>9} {:>11} {:>11} {:>12} {:>12} {:>9.1}",
                db,
                size,
                ms(row.scrape.0),
                ms(row.scrape.1),
                ms(row.snapshot.0),
                ms(row.snapshot.1),
                row.body_bytes as f64 / 1024.0
            );
            p50s.push(row.scrape.0);
        }
        if let (Some(first), Some(last)) = (p50s.first(), p50s.last()) {
            println!(
                "{db}: scrape p50 at {} triggers / at {} = {:.2}x\n",
                sizes.last().unwrap(),
                sizes.first().unwrap(),
                last.as_secs_f64() / first.as_secs_f64()
            );
        }
    }
    if let Some(pg) = pg {
        pg.drop().await;
    }
}

struct Row {
    scrape: (Duration, Duration),
    snapshot: (Duration, Duration),
    body_bytes: usize,
}

async fn measure(url: &str, sandbox: &Arc<Sandbox>, triggers: i64, runs: usize) -> Row {
    let store = Store::open(url).await.unwrap();
    seed(&store, sandbox, triggers).await;
    let observer = Arc::new(Observer::new(
        store.clone(),
        LeaseMetrics::default(),
        None,
        Draining::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = MetricsServer::start(listener, observer).unwrap();
    let client = reqwest::Client::new();
    let target = format!("http://{}/metrics", server.addr());
    let mut body_bytes = 0;
    let mut scrapes = Vec::new();
    for i in 0..runs + 5 {
        let started = Instant::now();
        let body = client
            .get(&target)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if i >= 5 {
            scrapes.push(started.elapsed());
        }
        assert!(body.contains("paddock_database_up 1"), "{body}");
        body_bytes = body.len();
    }
    let mut snapshots = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        store.metrics_snapshot().await.unwrap();
        snapshots.push(started.elapsed());
    }
    Row {
        scrape: p50_p99(scrapes),
        snapshot: p50_p99(snapshots),
        body_bytes,
    }
}

/// 1,000 jobs through the registry, then `triggers` rows (and an attempt
/// for each started one) in one statement each; `ANALYZE`.
async fn seed(store: &Store, sandbox: &Arc<Sandbox>, triggers: i64) {
    let registry = Registry::new(store.clone(), sandbox.clone());
    let mut default = store.group_get("default").await.unwrap().unwrap();
    default.max_concurrency = paddock::model::bounds::CONCURRENCY.max;
    for g in 0..GROUPS {
        default.name = format!("g{g}");
        registry.group_put(default.clone(), "bench").await.unwrap();
    }
    let component = guest("noop");
    for j in 0..JOBS {
        let manifest = format!(
            "id = \"job-{j}\"\ntenant = \"t{}\"\nresource_group = \"g{}\"\ncomponent = \"{}\"\n",
            j % TENANTS,
            j % GROUPS,
            component.display()
        );
        registry
            .job_apply(&manifest, std::path::Path::new("."), "bench")
            .await
            .unwrap();
    }
    let insert = store.sql(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) \
         INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, origin, \
             scheduled_at, state, next_run_at, fencing_token, lease_owner, lease_until, attempts, \
             created_at, updated_at, finished_at) \
         SELECT j.job_id || '@' || CAST(n.i AS TEXT) || '@v1', j.job_id, 1, j.tenant, \
             j.resource_group, 'schedule', 1700000000000 + n.i, \
             CASE WHEN n.i % 100 < 85 THEN 'succeeded' WHEN n.i % 100 < 90 THEN 'failed' \
                  WHEN n.i % 100 < 91 THEN 'cancelled' WHEN n.i % 100 < 96 THEN 'pending' \
                  WHEN n.i % 100 < 98 THEN 'retry_wait' WHEN n.i % 100 < 99 THEN 'running' \
                  ELSE 'manual' END, \
             1700000000000 + n.i, \
             CASE WHEN n.i % 100 < 91 OR n.i % 100 IN (96, 97, 98) THEN 1 ELSE 0 END, \
             CASE WHEN n.i % 100 = 98 THEN 'bench-runner' END, \
             CASE WHEN n.i % 100 = 98 THEN 4000000000000 END, \
             CASE WHEN n.i % 100 < 91 OR n.i % 100 IN (96, 97, 98) THEN 1 ELSE 0 END, \
             1700000000000, 1700000000000, \
             CASE WHEN n.i % 100 < 91 THEN 1700000000000 + n.i END \
         FROM n JOIN (SELECT p.job_id, b.tenant, p.resource_group, \
             row_number() OVER (ORDER BY p.job_id) - 1 AS k \
             FROM plan_versions p JOIN jobs b ON b.tenant = p.tenant AND b.job_id = p.job_id) j \
             ON j.k = n.i % ?",
    );
    sqlx::query(insert)
        .bind(triggers)
        .bind(JOBS as i64)
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query(store.sql(
        "INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, started_at, \
             lease_until, ended_at, outcome, fuel_used, peak_memory_bytes, wall_ms) \
         SELECT id, 1, 'bench-runner', 1, created_at, created_at + 30000, finished_at, \
             CASE state WHEN 'succeeded' THEN 'succeeded' WHEN 'failed' THEN 'failed' END, \
             1000, 65536, 2 \
         FROM triggers WHERE fencing_token = 1",
    ))
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
}

fn p50_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
