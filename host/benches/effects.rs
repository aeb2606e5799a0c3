//! Effect overhead: p50/p99 of `EffectGateway::invoke` end to end against
//! the reference ledger (key lookup, fenced intent, HTTP call, fenced
//! outcome), next to (a) a direct HTTP call to the ledger with the same
//! headers and (b) the two durable writes (intent, outcome) alone — all in
//! the same run, interleaved so machine noise hits all three alike. Prints
//! the ratio invoke / (direct HTTP + writes); the target is <= 1.2.
//!
//! Run: `cargo bench --bench effects` (after `bash scripts/build-guests.sh`).
//! Env: `PADDOCK_BENCH_RUNS` (default 2000); `PADDOCK_BENCH_STORE_URL` runs
//! the host's store on that database instead of a fresh SQLite file (give
//! it an empty PostgreSQL database, e.g. `postgres://postgres@127.0.0.1/pb`).

use paddock::Store;
use paddock::effects::{Caller, EffectGateway};
use paddock::model::RetryPolicy;
use paddock::registry::Registry;
use paddock::sandbox::wit::effects::{Outcome, Request};
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::{
    ConnectorRecord, ControlStore, EffectOutcome, EffectStore, NewEffect, NewTrigger, RunnerStore,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn pct(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let runs: usize = std::env::var("PADDOCK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(runs));
}

async fn bench(runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    // The downstream, in process on 127.0.0.1:0.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let ledger_db = dir.path().join("ledger.db");
    let ledger = tokio::spawn(async move {
        paddock_ledger::serve(listener, ledger_db, async {
            let _ = stopped.await;
        })
        .await
        .unwrap()
    });
    let base = format!("http://{addr}/v1");

    // The host: a store, a connector, a job granted it, one claimed trigger.
    let url = std::env::var("PADDOCK_BENCH_STORE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("paddock.db").display()));
    println!("store: {}", url.split('?').next().unwrap_or(&url));
    let store = Store::open(&url).await.unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let registry = Registry::new(store.clone(), sandbox);
    let noop = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/guests/noop.wasm");
    assert!(noop.exists(), "run scripts/build-guests.sh first");
    registry
        .job_apply(
            &format!(
                "id = \"bench\"\ntenant = \"t\"\ncomponent = \"{}\"\nconnectors = [\"ledger\"]\n",
                noop.display()
            ),
            std::path::Path::new("."),
            "bench",
        )
        .await
        .unwrap();
    store
        .connector_put(
            &ConnectorRecord {
                name: "ledger".into(),
                kind: "http".into(),
                base_url: base.clone(),
                timeout_ms: 10_000,
                permits: 16,
                rate_per_sec: 0.0,
                compares_tokens: true,
                queryable: true,
                idempotent: true,
                breaker_failure_rate: 0.5,
                breaker_min_calls: 10,
                breaker_window_ms: 10_000,
                breaker_open_ms: 5_000,
            },
            "bench",
        )
        .await
        .unwrap();
    store
        .trigger_create(&NewTrigger::manual("bench", serde_json::json!({}), None))
        .await
        .unwrap();
    let claim = store
        .trigger_claim_batch("bench", 3_600_000, 1, None)
        .await
        .unwrap()
        .remove(0);
    let lease = claim.lease("bench");
    let gateway = EffectGateway::new(store.clone());
    let granted = vec!["ledger".to_string()];
    let retry = RetryPolicy {
        max_attempts: 3,
        backoff_ms: 100,
        backoff_max_ms: 1000,
        jitter: true,
        max_age_ms: None,
        max_elapsed_ms: None,
    };
    let caller = Caller {
        response_cap: paddock::effects::http::MAX_BODY,
        lease: &lease,
        tenant: "t",
        granted: &granted,
        retry: &retry,
        stop: None,
        park: None,
    };
    let client = reqwest::Client::new();
    let payload = br#"{"amount":1}"#.to_vec();

    let (mut invoke, mut direct, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let warmup = runs / 10;
    for i in 0..runs + warmup {
        // invoke, end to end
        let request = Request {
            connector: "ledger".into(),
            action: "R-invoke/release".into(),
            idempotency_key: format!("bench-invoke-{i}"),
            payload: payload.clone(),
            compensates: None,
        };
        let t = Instant::now();
        let out = gateway.invoke(&caller, request).await.unwrap();
        let d_invoke = t.elapsed();
        assert!(matches!(out, Outcome::Done(_)));

        // a direct HTTP call with the same headers
        let t = Instant::now();
        let r = client
            .post(format!("{base}/R-direct/release"))
            .header("content-type", "application/json")
            .header("idempotency-key", format!("bench-direct-{i}"))
            .header("fencing-token", lease.fencing_token.to_string())
            .header("x-request-id", format!("req-{i}"))
            .body(payload.clone())
            .send()
            .await
            .unwrap();
        let _ = r.bytes().await.unwrap();
        let d_direct = t.elapsed();

        // the two durable writes alone
        let key = format!("bench-writes-{i}");
        let t = Instant::now();
        store
            .effect_intent(
                &lease,
                &NewEffect {
                    tenant: "t".into(),
                    downstream_key: format!("t/{key}"),
                    idempotency_key: key.clone(),
                    connector: "ledger".into(),
                    action: "R-writes/release".into(),
                    params_digest: "x".into(),
                    request_id: format!("req-w-{i}"),
                    compensates: None,
                },
            )
            .await
            .unwrap();
        store
            .effect_settle(
                &lease,
                &key,
                &EffectOutcome {
                    state: "succeeded",
                    response: Some(b"{}".to_vec()),
                    error: None,
                    last_status: Some(200),
                    resolved_by: "gateway",
                },
            )
            .await
            .unwrap();
        let d_writes = t.elapsed();
        if i >= warmup {
            invoke.push(d_invoke);
            direct.push(d_direct);
            writes.push(d_writes);
        }
    }
    println!("effects.invoke overhead, {runs} runs (after {warmup} warm-up), interleaved");
    println!("{:<34} {:>10} {:>10}", "", "p50 (us)", "p99 (us)");
    let mut rows = Vec::new();
    for (name, samples) in [
        ("effects.invoke end to end", &mut invoke),
        ("direct HTTP call to the ledger", &mut direct),
        ("intent + outcome writes alone", &mut writes),
    ] {
        let (p50, p99) = (pct(samples, 0.5), pct(samples, 0.99));
        println!("{name:<34} {:>10.0} {:>10.0}", us(p50), us(p99));
        rows.push((p50, p99));
    }
    let sum50 = us(rows[1].0) + us(rows[2].0);
    let sum99 = us(rows[1].1) + us(rows[2].1);
    println!(
        "{:<34} {:>10.0} {:>10.0}",
        "direct HTTP + writes (sum)", sum50, sum99
    );
    println!(
        "ratio invoke / sum: p50 {:.2}x, p99 {:.2}x (target <= 1.2x)",
        us(rows[0].0) / sum50,
        us(rows[0].1) / sum99
    );
    let _ = stop.send(());
    let _ = ledger.await;
}
