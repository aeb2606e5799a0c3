//! A victim tenant's latency while a hostile guest runs (issue 17): tenant
//! `evil` starts 4 attempts of one hostile guest (group `hostile`: 4
//! slots, 256 MiB, 4·10⁹ fuel, 10 s deadline, the default size caps), then
//! tenant `good` enqueues 200 no-op triggers (`PADDOCK_BENCH_VICTIMS`) (group `default`); one
//! in-process runner with 12 slots drains both. Printed per hostile guest:
//! the victims' p50 / p99 latency (end of its attempt − creation, on the
//! database clock), the ratio of the p99 to the run without a hostile
//! guest, and what the hostile attempts ended as. SQLite, one fresh
//! database per row, after a warm-up run.
//!
//! Run: `cargo bench -p paddock --bench hostile` (after
//! `bash scripts/build-guests.sh`).

mod common;
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::ResourceGroup;
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{NewTrigger, Store};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const HOSTILE: usize = 4;

async fn job(registry: &Registry, id: &str, tenant: &str, group: &str, guest: &str) {
    let toml = format!(
        "id = \"{id}\"\ntenant = \"{tenant}\"\nresource_group = \"{group}\"\ncomponent = \"{}\"\n",
        common::guest(guest).display()
    );
    registry
        .job_apply(&toml, std::path::Path::new("."), "bench")
        .await
        .unwrap();
}

/// One row: (victims' p50, p99 in ms, how the hostile attempts ended).
async fn run(
    url: &str,
    sandbox: &Arc<Sandbox>,
    hostile: Option<(&str, Value)>,
) -> (f64, f64, String) {
    let store = Store::open(url).await.unwrap();
    let registry = Registry::new(store.clone(), sandbox.clone());
    registry
        .group_put(
            ResourceGroup {
                name: "hostile".into(),
                fuel_per_attempt: 4_000_000_000,
                memory_bytes: 256 << 20,
                deadline_ms: 10_000,
                max_concurrency: HOSTILE as i64,
                grants: "[]".into(),
                caps: Default::default(),
                capacity: Default::default(),
                aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            "bench",
        )
        .await
        .unwrap();
    job(&registry, "victim", "good", "default", "noop").await;
    if let Some((guest, params)) = &hostile {
        job(&registry, "hostile", "evil", "hostile", guest).await;
        for _ in 0..HOSTILE {
            let new = NewTrigger::manual("hostile", params.clone(), None);
            store.trigger_create(&new).await.unwrap();
        }
    }
    for i in 0..victims() {
        let new = NewTrigger::manual("victim", json!({ "i": i }), None);
        store.trigger_create(&new).await.unwrap();
    }
    let runner = Runner::new(
        store.clone(),
        sandbox.clone(),
        RunnerConfig {
            runner_id: "bench".into(),
            max_concurrency: HOSTILE + 8,
            claim_batch: 12,
            poll_interval: Duration::from_millis(10),
            ..Default::default()
        },
    );
    runner.run_until_idle().await.unwrap();
    let mut latencies: Vec<i64> = sqlx::query_scalar(store.sql(
        "SELECT a.ended_at - t.created_at FROM triggers t JOIN attempts a \
         ON a.trigger_id = t.id WHERE t.job_id = 'victim'",
    ))
    .fetch_all(store.pool())
    .await
    .unwrap();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize] as f64;
    let ended: Vec<(String, i64)> = sqlx::query_as(store.sql(
        "SELECT COALESCE(error_class, state), count(*) FROM triggers WHERE job_id = 'hostile' \
         GROUP BY 1 ORDER BY 1",
    ))
    .fetch_all(store.pool())
    .await
    .unwrap();
    let ended = ended
        .iter()
        .map(|(c, n)| format!("{n}× {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    store.close().await;
    (at(0.5), at(0.99), ended)
}

/// `PADDOCK_BENCH_VICTIMS`, default 200.
fn victims() -> usize {
    common::env_or("PADDOCK_BENCH_VICTIMS", 200)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = |name: &str| {
        format!(
            "sqlite://{}",
            dir.path().join(format!("{name}.db")).display()
        )
    };
    run(&url("warm"), &sandbox, Some(("flood", json!({})))).await;
    let mb = 1 << 20;
    let rows: [(&str, Option<(&str, Value)>); 10] = [
        ("none", None),
        ("endless loop", Some(("spin", json!({})))),
        ("memory bomb", Some(("hog", json!({})))),
        ("table bomb", Some(("tablegrow", json!({})))),
        ("deep recursion", Some(("flood", json!({ "recurse": 1 })))),
        (
            "tight poll() loop",
            Some(("flood", json!({ "poll_loop": 1 }))),
        ),
        (
            "100 MB result",
            Some(("flood", json!({ "result_bytes": 100 * mb }))),
        ),
        (
            "100 MB checkpoint",
            Some(("flood", json!({ "checkpoint_bytes": 100 * mb }))),
        ),
        (
            "1M log lines",
            Some(("flood", json!({ "log_lines": 1_000_000 }))),
        ),
        (
            "10k effect calls",
            Some(("flood", json!({ "effects": 10_000, "connector": "none" }))),
        ),
    ];
    println!(
        "victim latency (attempt end - creation, ms): {} no-op triggers of tenant `good` \
         while {HOSTILE} attempts of a hostile guest of tenant `evil` run",
        victims()
    );
    println!(
        "{:<20} {:>8} {:>8} {:>10}  hostile attempts ended as",
        "hostile guest", "p50", "p99", "p99 ratio"
    );
    let mut floor = None;
    for (i, (name, hostile)) in rows.into_iter().enumerate() {
        let (p50, p99, ended) = run(&url(&format!("h{i}")), &sandbox, hostile).await;
        let base = *floor.get_or_insert(p99);
        println!(
            "{name:<20} {p50:>8.0} {p99:>8.0} {:>9.2}x  {ended}",
            p99 / base.max(1.0)
        );
    }
}
