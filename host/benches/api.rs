//! The admin API's read latency under concurrent clients: `GET
//! /v1/triggers/{id}` (a trigger with its attempts) and `GET
//! /v1/triggers?limit=50` (a list page), each from C clients at once, every
//! client sending R requests back to back over keep-alive connections, as
//! a team token (so every query carries its tenant). Prints p50 / p99 /
//! max and requests per second; asserts nothing.
//!
//! Run: `cargo bench -p paddock --bench api` (needs the guests:
//! `bash scripts/build-guests.sh`). Env: `PADDOCK_BENCH_TRIGGERS` (default
//! 2000), `PADDOCK_BENCH_CLIENTS` (100), `PADDOCK_BENCH_REQUESTS` (per
//! client, 50), `PADDOCK_BENCH_DATABASE_URL` (default: a fresh SQLite file).

use paddock::api::{ApiServer, ApiState};
use paddock::model::identity::Role;
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{NewToken, NewTrigger, Store};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let triggers: usize = env_or("PADDOCK_BENCH_TRIGGERS", 2000);
    let clients: usize = env_or("PADDOCK_BENCH_CLIENTS", 100);
    let requests: usize = env_or("PADDOCK_BENCH_REQUESTS", 50);
    let dir = tempfile::tempdir().unwrap();
    let url = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let store = Store::open(&url).await.unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let registry = Registry::new(store.clone(), sandbox);
    let noop = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/guests/noop.wasm");
    assert!(noop.exists(), "run `bash scripts/build-guests.sh` first");
    registry
        .job_apply(
            &format!(
                "id = \"bench\"\ntenant = \"t\"\ncomponent = \"{}\"\n",
                noop.display()
            ),
            std::path::Path::new("."),
            "bench",
        )
        .await
        .unwrap();
    let mut ids = Vec::with_capacity(triggers);
    for _ in 0..triggers {
        let new = NewTrigger::manual("bench", serde_json::json!({}), None);
        ids.push(store.trigger_create(&new).await.unwrap().0.id);
    }
    let token = store
        .token_create(
            &NewToken {
                name: "bench".into(),
                role: Role::Team,
                tenant: Some("t".into()),
                valid_for_ms: 3_600_000,
            },
            "bench",
        )
        .await
        .unwrap()
        .text;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = ApiServer::start(listener, ApiState { store, registry }).unwrap();
    let base = format!("http://{}", server.addr());
    println!(
        "admin API reads: {triggers} triggers, {clients} clients x {requests} requests, {}",
        url.split(':').next().unwrap_or("?")
    );
    for (what, list) in [
        ("GET /v1/triggers/{id}", false),
        ("GET /v1/triggers?limit=50", true),
    ] {
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let http = reqwest::Client::new();
            let base = base.clone();
            let token = token.clone();
            let ids = ids.clone();
            tasks.push(tokio::spawn(async move {
                let mut took = Vec::with_capacity(requests);
                for r in 0..requests {
                    let path = if list {
                        "/v1/triggers?limit=50".to_string()
                    } else {
                        format!("/v1/triggers/{}", ids[(c * 7919 + r * 104_729) % ids.len()])
                    };
                    let t = Instant::now();
                    let response = http
                        .get(format!("{base}{path}"))
                        .bearer_auth(&token)
                        .send()
                        .await
                        .unwrap();
                    assert!(response.status().is_success(), "{}", response.status());
                    response.bytes().await.unwrap();
                    took.push(t.elapsed());
                }
                took
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        let wall = started.elapsed();
        all.sort();
        println!(
            "{what:<28} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  {:>7.0} req/s",
            percentile(&all, 0.50).as_secs_f64() * 1e3,
            percentile(&all, 0.99).as_secs_f64() * 1e3,
            all.last().unwrap().as_secs_f64() * 1e3,
            all.len() as f64 / wall.as_secs_f64()
        );
    }
}
