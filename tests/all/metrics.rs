//! `/metrics`, `/healthz` and `/readyz` of a real node, scraped over HTTP:
//! every metric appears with its type, and each moves in a scenario that
//! should move it — real guest jobs against the reference ledger, a lease
//! taken over under a running attempt (stale writes refused by the host
//! and by the downstream), replays, a key conflict ticketed, a
//! compensation, an unknown outcome, a breaker opened. `/readyz` answers
//! 503 once the node drains, in-process and from `paddock serve
//! --metrics`.
//!
//! Barriers, not timing: attempts wait at the ledger's holds until the
//! test releases them; the node's listener address is known when
//! `node::start` returns (in-process) or from the line `paddock serve`
//! prints (a process). Values that a background loop moves (a heartbeat,
//! the scanner) are awaited with [`eventually`] on the scrape itself.

use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::{Proc, eventually};
use crate::{Db, TestHost};
use paddock::model::ResourceGroup;
use paddock::node::{self, NodeConfig};
use paddock::store::NewTrigger;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;

/// Every metric `/metrics` exports, with its type (the `# TYPE` name:
/// counters end in `_total`).
const EXPORTED: &[(&str, &str)] = &[
    ("paddock_trigger_delay_seconds", "histogram"),
    ("paddock_claims_total", "counter"),
    ("paddock_attempts_started_total", "counter"),
    ("paddock_triggers_started_total", "counter"),
    ("paddock_retry_amplification", "gauge"),
    ("paddock_lease_renewal_seconds", "histogram"),
    ("paddock_missed_heartbeats_total", "counter"),
    ("paddock_lease_conflicts_total", "counter"),
    ("paddock_lost_lease_stop_seconds", "histogram"),
    ("paddock_claims_refused_total", "counter"),
    ("paddock_breaker_state", "gauge"),
    ("paddock_database_up", "gauge"),
    ("paddock_triggers", "gauge"),
    ("paddock_oldest_due_age_seconds", "gauge"),
    ("paddock_stale_token_rejections_total", "counter"),
    ("paddock_stale_shard_generation_rejections_total", "counter"),
    ("paddock_scanner_lag_seconds", "gauge"),
    ("paddock_effect_idempotency_hits_total", "counter"),
    ("paddock_effect_unknown_outcomes_total", "counter"),
    ("paddock_effect_key_conflicts_total", "counter"),
    ("paddock_exceptions_opened_total", "counter"),
    ("paddock_effects_unknown", "gauge"),
    ("paddock_effects_unknown_oldest_age_seconds", "gauge"),
    ("paddock_compensations_total", "counter"),
    ("paddock_exceptions_open", "gauge"),
    ("paddock_exceptions_open_oldest_age_seconds", "gauge"),
    ("paddock_effective_concurrency", "gauge"),
];

/// A sample: its name, labels and value.
type Sample = (String, Vec<(String, String)>, f64);

/// One scrape, parsed: `# TYPE` lines and samples.
struct Scrape {
    text: String,
    types: Vec<(String, String)>,
    samples: Vec<Sample>,
}

impl Scrape {
    fn parse(text: String) -> Self {
        let mut types = Vec::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                types.push((name.to_string(), kind.to_string()));
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (k, v) = l.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            samples.push((name.to_string(), labels, value.parse().unwrap()));
        }
        Self {
            text,
            types,
            samples,
        }
    }

    fn type_of(&self, name: &str) -> Option<&str> {
        self.types
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }

    /// The sum of `name`'s samples whose labels include every one of
    /// `labels` (`None` if there is none).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching: Vec<f64> = self
            .samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| *v)
            .collect();
        (!matching.is_empty()).then(|| matching.iter().sum())
    }

    /// As [`Scrape::get`], 0 when absent.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn scrape(addr: SocketAddr) -> Scrape {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    Scrape::parse(response.text().await.unwrap())
}

/// Scrape until `check` holds (a heartbeat, the scanner or an attempt in
/// the background moves the value); the last scrape.
async fn scrape_until(addr: SocketAddr, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    eventually(Duration::from_secs(60), what, || async {
        let s = scrape(addr).await;
        check(&s).then_some(s)
    })
    .await
}

/// Each metric of `names` is there with its type. A family with no
/// series yet (no claim so far, no connector loaded) has no `# TYPE` line
/// either, so the full list is checked once the scenario moved them all.
fn assert_types(s: &Scrape, names: &[&str]) {
    for (name, kind) in EXPORTED.iter().filter(|(n, _)| names.contains(n)) {
        assert_eq!(s.type_of(name), Some(*kind), "{name} in:\n{}", s.text);
    }
}

/// Every metric but the unfinished triggers' two, which have no series
/// once every trigger ended (checked while one waits).
fn all_exported() -> Vec<&'static str> {
    EXPORTED
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !WAITING.contains(n))
        .collect()
}

const WAITING: &[&str] = &["paddock_triggers", "paddock_oldest_due_age_seconds"];

/// What a node exports before it has run anything.
const ALWAYS: &[&str] = &[
    "paddock_lease_renewal_seconds",
    "paddock_lost_lease_stop_seconds",
    "paddock_claims_refused_total",
    "paddock_database_up",
    "paddock_stale_token_rejections_total",
    "paddock_stale_shard_generation_rejections_total",
    "paddock_effect_idempotency_hits_total",
    "paddock_effect_unknown_outcomes_total",
    "paddock_effects_unknown",
    "paddock_compensations_total",
    "paddock_exceptions_open_oldest_age_seconds",
    "paddock_effective_concurrency",
];

/// A group that runs one attempt at a time, so a second trigger of it
/// waits, due, while the first runs.
async fn narrow_group(host: &TestHost) {
    host.registry
        .group_put(
            ResourceGroup {
                name: "narrow".into(),
                fuel_per_attempt: 10_000_000_000,
                memory_bytes: 64 << 20,
                deadline_ms: 60_000,
                max_concurrency: 1,
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
}

fn manifest(connector: &str, group: &str, max_attempts: u32) -> String {
    format!(
        "resource_group = \"{group}\"\nconnectors = [\"{connector}\"]\n[retry]\nmax_attempts = {max_attempts}\nbackoff = \"10ms\"\njitter = false\n"
    )
}

/// Three connectors on one ledger: `ledger` (a minute to answer),
/// `slow` (300 ms, then the outcome is unknown) and `flaky` (its breaker
/// opens on the first failure and stays open); job `pay` in group
/// `narrow`, `slow-pay` and `flaky-pay` each in a group of their own so a
/// held group holds nothing else.
async fn setup(db: Db) -> (TestHost, Ledger) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(60), true),
    )
    .await;
    put(
        &host.store,
        connector("slow", &ledger, Duration::from_millis(300), true),
    )
    .await;
    let mut flaky = connector("flaky", &ledger, Duration::from_secs(60), true);
    flaky.breaker_min_calls = 1;
    flaky.breaker_open_ms = 600_000;
    put(&host.store, flaky).await;
    narrow_group(&host).await;
    host.group("slow", 10_000_000_000, 64 << 20, Duration::from_secs(60))
        .await;
    host.group("brittle", 10_000_000_000, 64 << 20, Duration::from_secs(60))
        .await;
    host.job("pay", "effector", &manifest("ledger", "narrow", 3))
        .await;
    host.job("slow-pay", "effector", &manifest("slow", "slow", 1))
        .await;
    host.job("flaky-pay", "effector", &manifest("flaky", "brittle", 1))
        .await;
    (host, ledger)
}

/// A node with metrics on an ephemeral port, heartbeats every 100 ms, no
/// background recovery of unknown outcomes (the test watches one stay
/// unknown).
fn node_config(host: &TestHost) -> NodeConfig {
    let mut config = NodeConfig::new(&host.url).id("m");
    config.metrics = Some("127.0.0.1:0".parse().unwrap());
    config.runner.poll_interval = Duration::from_millis(20);
    config.runner.lease = Duration::from_secs(10);
    config.runner.heartbeat_every = Duration::from_millis(100);
    config.runner.drain_timeout = Duration::ZERO;
    config.scanner.tick = Duration::from_millis(100);
    config.recovery_every = Duration::from_secs(3600);
    config
}

/// A trigger of `job` due `ago_ms` ago.
async fn due(host: &TestHost, job: &str, ago_ms: i64, params: Value) -> i64 {
    let now = host.store.now_ms().await.unwrap();
    let new = NewTrigger {
        job_id: job.into(),
        plan_version: None,
        origin: paddock::model::TriggerOrigin::Schedule,
        scheduled_at: Some(now - ago_ms),
        partition_key: None,
        request_key: None,
        params,
        requested_by: None,
    };
    host.store.trigger_create(&new).await.unwrap().0.id
}

/// A manual run of `job` (manual runs never share a plan key).
async fn run(host: &TestHost, job: &str, params: Value) -> i64 {
    host.trigger(job, params).await.id
}

async fn ended(host: &TestHost, id: i64) -> String {
    eventually(Duration::from_secs(60), "the trigger ended", || async {
        let t = host.store.trigger_get(id).await.unwrap();
        t.state.is_terminal().then(|| t.state.to_string())
    })
    .await
}

db_test!(
    every_metric_appears_with_its_type_and_moves_when_jobs_run,
    workers = 4
);
async fn every_metric_appears_with_its_type_and_moves_when_jobs_run(db: Db) {
    let (host, ledger) = setup(db).await;
    let node = node::start(node_config(&host)).await.unwrap();
    let addr = node.metrics_addr().expect("metrics are on");
    assert_eq!(get(addr, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(get(addr, "/readyz").await, (200, "ready\n".into()));
    let first = scrape(addr).await;
    assert_types(&first, ALWAYS);
    assert_eq!(first.value("paddock_database_up", &[]), 1.0);
    assert_eq!(first.get("paddock_claims_total", &[]), None);

    claims_delay_and_running(&host, &ledger, addr).await;
    stale_writes_and_lost_lease(&host, &ledger, addr).await;
    replays_conflicts_and_compensations(&host, addr).await;
    unknown_outcome_and_open_breaker(&host, &ledger, addr).await;
    capacity_and_scanner(&node, addr).await;
    assert_types(&scrape(addr).await, &all_exported());

    // Draining: not ready from the moment the drain begins; still alive,
    // still scraped.
    node.begin_drain();
    let (status, body) = get(addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (503, "draining\n"));
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_types(&scrape(addr).await, &all_exported());
    node.shutdown().await.unwrap();
    ledger.stop().await;
}

/// A real guest, claimed 5 s after its scheduled time, runs and waits at
/// the ledger: the claim, the trigger delay, the attempt and a running
/// trigger are seen; the heartbeat renews.
async fn claims_delay_and_running(host: &TestHost, ledger: &Ledger, addr: SocketAddr) {
    ledger.hold("pay/1", 1).await;
    due(
        host,
        "pay",
        5_000,
        effect("ledger", "RES-1", "reserve", "pay/1", 5),
    )
    .await;
    ledger.wait_held("pay/1", 1).await;
    let s = scrape(addr).await;
    let narrow = [("group", "narrow")];
    let running = [("state", "running"), ("group", "narrow"), ("tenant", "t1")];
    assert_eq!(s.value("paddock_triggers", &running), 1.0, "{}", s.text);
    assert_eq!(s.value("paddock_claims_total", &narrow), 1.0);
    assert_eq!(s.value("paddock_trigger_delay_seconds_count", &narrow), 1.0);
    assert!(s.value("paddock_trigger_delay_seconds_sum", &narrow) >= 5.0);
    let pay = [("job", "pay")];
    assert_eq!(s.value("paddock_attempts_started_total", &pay), 1.0);
    assert_eq!(s.value("paddock_triggers_started_total", &pay), 1.0);
    assert_eq!(s.value("paddock_retry_amplification", &pay), 1.0);
    // The gateway loaded the connector: its breaker is closed.
    assert_eq!(
        s.get("paddock_breaker_state", &[("connector", "ledger")]),
        Some(0.0)
    );
    scrape_until(addr, "a heartbeat renewed", |s| {
        s.value("paddock_lease_renewal_seconds_count", &[]) >= 1.0
    })
    .await;
}

/// Another runner takes the trigger over (token 2) while the node's
/// attempt (token 1) waits at the ledger: the node's heartbeat is refused
/// (host side, `heartbeat`) and gives the lease up; a second trigger of
/// the full group waits, due a minute ago; the new holder's send commits
/// first, so token 1's delayed send is refused by the ledger (downstream
/// side) and the node's guest stops.
async fn stale_writes_and_lost_lease(host: &TestHost, ledger: &Ledger, addr: SocketAddr) {
    let now = host.store.now_ms().await.unwrap();
    let taken = host
        .store
        .trigger_claim_batch("thief", 30_000, 1, Some(now + HOUR_MS))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(taken.fencing_token.get(), 2);
    scrape_until(addr, "the node's heartbeat found its lease lost", |s| {
        s.value("paddock_lease_conflicts_total", &[("reason", "lost")]) >= 1.0
    })
    .await;
    // The refusal is counted in the database (cluster-wide), read by the
    // scrape's snapshot: waited for, since a scrape on a loaded server may
    // serve the process's figures alone (`paddock_database_up 0`).
    let host_side = [("side", "host")];
    scrape_until(addr, "the host's stale write was counted", |s| {
        s.value("paddock_stale_token_rejections_total", &host_side) >= 1.0
    })
    .await;

    // The group's one slot is the thief's: a second trigger waits, due.
    due(
        host,
        "pay",
        60_000,
        effect("ledger", "RES-2", "reserve", "pay/2", 5),
    )
    .await;
    let s = scrape(addr).await;
    assert_types(&s, WAITING);
    let pending = [("state", "pending"), ("group", "narrow")];
    assert_eq!(s.value("paddock_triggers", &pending), 1.0, "{}", s.text);
    assert!(s.value("paddock_oldest_due_age_seconds", &[("group", "narrow")]) >= 60.0);

    let done = host
        .runner("thief", Duration::from_secs(30))
        .execute(taken)
        .await;
    assert!(done.outcome.committed(), "{done:?}");
    ledger.release("pay/1").await;
    let s = scrape_until(addr, "the node's stale attempt stopped", |s| {
        s.value("paddock_lost_lease_stop_seconds_count", &[]) >= 1.0
    })
    .await;
    let downstream = [("side", "downstream"), ("kind", "effect")];
    assert_eq!(
        s.value("paddock_stale_token_rejections_total", &downstream),
        1.0
    );
    assert_eq!(ledger.stat("stale_token_rejections").await, 1);
    // The waiting trigger ran once the thief let the slot go.
    scrape_until(addr, "the second trigger ran", |s| {
        s.value("paddock_triggers", &pending) == 0.0
            && s.value("paddock_triggers_started_total", &[("job", "pay")]) == 2.0
    })
    .await;
}

/// The same effect again (answered from its record), the same key with
/// other params (a conflict, ticketed), and a compensation of the first.
async fn replays_conflicts_and_compensations(host: &TestHost, addr: SocketAddr) {
    let again = run(
        host,
        "pay",
        effect("ledger", "RES-1", "reserve", "pay/1", 5),
    )
    .await;
    assert_eq!(ended(host, again).await, "succeeded");
    let s = scrape(addr).await;
    assert!(s.value("paddock_effect_idempotency_hits_total", &[]) >= 1.0);
    assert_eq!(s.value("paddock_exceptions_open", &[]), 0.0);

    let other = run(
        host,
        "pay",
        effect("ledger", "RES-1", "reserve", "pay/1", 7),
    )
    .await;
    // Failed, and held in `manual` by its ticket: counted by state.
    eventually(Duration::from_secs(60), "the ticket holds it", || async {
        let t = host.store.trigger_get(other).await.unwrap();
        (t.state == "manual").then_some(())
    })
    .await;
    let s = scrape(addr).await;
    assert_eq!(
        s.value("paddock_triggers", &[("state", "manual")]),
        1.0,
        "{}",
        s.text
    );
    assert_eq!(
        s.value("paddock_exceptions_open", &[("kind", "key_conflict")]),
        1.0,
        "{}",
        s.text
    );
    assert!(s.value("paddock_effect_key_conflicts_total", &[]) >= 1.0);
    assert_eq!(s.value("paddock_exceptions_opened_total", &[]), 1.0);
    assert!(
        s.get("paddock_exceptions_open_oldest_age_seconds", &[])
            .is_some()
    );

    assert_eq!(s.value("paddock_compensations_total", &[]), 0.0);
    let mut undo = effect("ledger", "RES-1", "release", "pay/1/undo", 5);
    undo["compensates"] = json!("pay/1");
    let undo = run(host, "pay", undo).await;
    assert_eq!(ended(host, undo).await, "succeeded");
    assert_eq!(
        scrape(addr).await.value("paddock_compensations_total", &[]),
        1.0
    );
}

/// A send the downstream never answers in time (unknown, and stays so:
/// one attempt, no background recovery), and a connector whose breaker
/// opens on its first failure.
async fn unknown_outcome_and_open_breaker(host: &TestHost, ledger: &Ledger, addr: SocketAddr) {
    assert_eq!(
        scrape(addr).await.value("paddock_effects_unknown", &[]),
        0.0
    );
    ledger.hold("slow/1", 1).await;
    let lost = run(
        host,
        "slow-pay",
        effect("slow", "RES-9", "reserve", "slow/1", 5),
    )
    .await;
    // Its one send spent and the answer unknown: a ticket holds it.
    eventually(Duration::from_secs(60), "the ticket holds it", || async {
        let t = host.store.trigger_get(lost).await.unwrap();
        (t.state == "manual").then_some(())
    })
    .await;
    let s = scrape(addr).await;
    assert_eq!(s.value("paddock_effects_unknown", &[]), 1.0, "{}", s.text);
    assert!(s.value("paddock_effect_unknown_outcomes_total", &[]) >= 1.0);
    assert!(
        s.get("paddock_effects_unknown_oldest_age_seconds", &[])
            .is_some()
    );
    ledger.release("slow/1").await;

    ledger
        .fault(json!({"error_rate": 1.0, "error_status": 503, "seed": 3,
                      "scope": {"idempotency_key": crate::sent_key("flaky/1")}}))
        .await;
    run(
        host,
        "flaky-pay",
        effect("flaky", "RES-F", "charge", "flaky/1", 5),
    )
    .await;
    scrape_until(addr, "the flaky connector's breaker open", |s| {
        s.get("paddock_breaker_state", &[("connector", "flaky")]) == Some(2.0)
    })
    .await;
    ledger.clear_faults().await;
}

/// The groups' effective concurrency, and every shard's scanner lag once
/// the node's scanner has scanned them all.
async fn capacity_and_scanner(node: &node::Node, addr: SocketAddr) {
    let s = scrape(addr).await;
    assert_eq!(
        s.value("paddock_effective_concurrency", &[("group", "narrow")]),
        1.0
    );
    assert!(s.value("paddock_effective_concurrency", &[("group", "default")]) >= 1.0);
    let shards = node.shards() as usize;
    scrape_until(addr, "every shard scanned", |s| {
        s.samples
            .iter()
            .filter(|(n, _, _)| n == "paddock_scanner_lag_seconds")
            .count()
            == shards
    })
    .await;
}

db_test!(
    paddock_serve_with_metrics_answers_not_ready_while_it_drains,
    workers = 2
);
/// `paddock serve --metrics 127.0.0.1:0` prints where it listens; ready
/// while it runs; once SIGTERM starts the drain (an attempt still waits at
/// the ledger), `/readyz` answers 503 and `/healthz` 200 until it exits.
async fn paddock_serve_with_metrics_answers_not_ready_while_it_drains(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(60), true),
    )
    .await;
    host.job("pay", "effector", &manifest("ledger", "default", 1))
        .await;
    ledger.hold("serve/1", 1).await;
    run(
        &host,
        "pay",
        effect("ledger", "RES-S", "reserve", "serve/1", 5),
    )
    .await;
    let flags = [
        "--metrics",
        "127.0.0.1:0",
        "--poll",
        "20ms",
        "--drain-timeout",
        "60s",
    ];
    let mut serve = Proc::serve("metrics", &host.url, host.dir.path(), &flags);
    let addr: SocketAddr = eventually(Duration::from_secs(60), "the metrics address", || async {
        let err = serve.stderr();
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix("paddock serve: metrics and health on http://"))?;
        Some(line.trim().parse().unwrap())
    })
    .await;
    ledger.wait_held("serve/1", 1).await;
    assert_eq!(get(addr, "/readyz").await, (200, "ready\n".into()));
    let s = scrape(addr).await;
    assert_types(&s, ALWAYS);
    assert_types(&s, &["paddock_claims_total", "paddock_triggers"]);
    assert_eq!(
        s.value("paddock_claims_total", &[("group", "default")]),
        1.0
    );

    serve.signal("TERM");
    eventually(Duration::from_secs(60), "the drain began", || async {
        serve
            .stderr()
            .contains("paddock serve: draining")
            .then_some(())
    })
    .await;
    assert_eq!(get(addr, "/readyz").await, (503, "draining\n".into()));
    assert_eq!(get(addr, "/healthz").await.0, 200);
    ledger.release("serve/1").await;
    let status = serve.wait_exit(Duration::from_secs(60)).expect("exited");
    assert!(status.success(), "{}", serve.stderr());
    ledger.stop().await;
}
