//! The seed's conservation scenario (issue 18): 1,000 triggers run by a
//! real runner with controlled guests end as 760 succeeded, 80 failed, 70
//! paused, 40 waiting for manual handling, 30 waiting to retry and 20
//! running, after 1,180 attempts and 14 idempotent hits — and the
//! conservation checks balance (each trigger in exactly one state, every
//! started trigger has its attempts, every open lease its attempt).
//!
//! Every trigger runs the `gated` guest; its params say what it does, so
//! each count is built, not hoped for:
//!
//! | triggers | job      | params                     | attempts | ends as                    |
//! |---------:|----------|----------------------------|---------:|----------------------------|
//! | 620      | steady   | `{}`                       | 620      | succeeded                  |
//! | 126      | steady   | `fail_until 1`             | 252      | succeeded on its retry     |
//! | 14       | steady   | `effect`, `fail_until 1`   | 28       | succeeded; the retry's effect is an idempotent hit |
//! | 80       | fragile  | `fail_until 9` (2 allowed) | 160      | failed, budget spent       |
//! | 30       | slow     | `fail_until 1` (backoff 1 h) | 30     | retry_wait                 |
//! | 60       | held     | `fail_until 1` (backoff 1 h) | 60     | paused while waiting       |
//! | 10       | held     | `burn`                     | 10       | paused mid-run             |
//! | 20       | steady   | `gate_at 0`, gate held     | 20       | running                    |
//! | 40       | nightly  | cron, misfire `manual`     | 0        | manual (a missed night)    |
//!
//! 620 + 252 + 28 + 160 + 30 + 60 + 10 + 20 = 1,180 attempts.

use crate::ledger::{Ledger, connector, put};
use crate::procs::eventually;
use crate::reports::paddock;
use crate::{Db, TestHost};
use paddock::model::gates::GateScope;
use paddock::model::report::{self, Books};
use paddock::schedule::scanner::{Scanner, ScannerConfig};
use paddock::store::ConnectorRecord;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// A `gated` job in group `ops` with its retry budget.
async fn job(host: &TestHost, id: &str, retry: &str, schedule: &str) {
    let toml = format!(
        "id = \"{id}\"\ntenant = \"t1\"\ncomponent = \"{}\"\nresource_group = \"ops\"\n\
         connectors = [\"gate\"]\n[retry]\n{retry}\n{schedule}",
        crate::guest("gated").display(),
    );
    host.grant_connectors(&toml).await;
    host.registry
        .job_apply(&toml, std::path::Path::new("."), "test")
        .await
        .unwrap();
}

/// `n` manual triggers of `job` with `params`; their ids.
async fn create(host: &TestHost, job: &str, params: Value, n: usize) -> Vec<i64> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(host.trigger(job, params.clone()).await.id);
    }
    ids
}

async fn count(host: &TestHost, sql: &'static str) -> i64 {
    sqlx::query_scalar(host.store.sql(sql))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

/// The states of `ids`, counted.
async fn states_of(host: &TestHost, ids: &[i64]) -> std::collections::BTreeMap<String, usize> {
    let mut states = std::collections::BTreeMap::new();
    for id in ids {
        let t = host.store.trigger_get(*id).await.unwrap();
        *states.entry(t.state.to_string()).or_default() += 1;
    }
    states
}

/// Wait until every trigger of `ids` is in `state`.
async fn all_in(host: &TestHost, ids: &[i64], state: &str, what: &str) {
    eventually(Duration::from_secs(600), what, || async {
        let states = states_of(host, ids).await;
        (states.get(state) == Some(&ids.len())).then_some(())
    })
    .await;
}

/// 40 fire times of a minutely cron job missed during an outage, under
/// misfire `manual`: the scanner parks each one for a person.
async fn a_missed_night(host: &TestHost) {
    job(
        host,
        "nightly",
        "max_attempts = 1",
        "[schedule]\nkind = \"cron\"\ncron = \"0 * * * * *\"\ntimezone = \"UTC\"\n\
         misfire = \"manual\"\nmisfire_threshold = \"1s\"\n",
    )
    .await;
    let active_from = count(host, "SELECT active_from FROM job_schedules").await;
    let first = (active_from / 60_000 + 1) * 60_000;
    // 39.5 minutes after the first fire time: 40 missed, the next one 30 s
    // ahead (and no lookahead).
    let now = first + 39 * 60_000 + 30_000;
    let scanner = Scanner::new(
        host.store.clone(),
        ScannerConfig {
            owner: "S".into(),
            initial_lookback: Duration::from_secs(60 * 60),
            lookahead: Duration::ZERO,
            ..ScannerConfig::default()
        },
    );
    let report = scanner.tick(Some(now)).await.unwrap();
    assert_eq!((report.created, report.parked), (40, 40), "{report:?}");
}

db_test!(
    the_seed_scenario_1000_triggers_end_in_one_state_each_and_the_books_balance,
    workers = 2
);
async fn the_seed_scenario_1000_triggers_end_in_one_state_each_and_the_books_balance(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    // The guests' gates and effects go to the reference ledger; permits for
    // every held gate at once.
    put(
        &host.store,
        ConnectorRecord {
            permits: 64,
            ..connector("gate", &ledger, Duration::from_secs(600), true)
        },
    )
    .await;
    host.group("ops", i64::MAX, 64 << 20, Duration::from_secs(600))
        .await;
    let quick = "max_attempts = 3\nbackoff = \"10ms\"";
    job(&host, "steady", quick, "").await;
    job(&host, "fragile", "max_attempts = 2\nbackoff = \"10ms\"", "").await;
    let late = "max_attempts = 3\nbackoff = \"1h\"\nbackoff_max = \"1h\"\njitter = false";
    job(&host, "slow", late, "").await;
    job(&host, "held", late, "").await;
    a_missed_night(&host).await;

    let first_time = create(&host, "steady", json!({}), 620).await;
    let retried = create(&host, "steady", json!({"fail_until": 1}), 126).await;
    let replayed = create(
        &host,
        "steady",
        json!({"effect": true, "fail_until": 1}),
        14,
    )
    .await;
    let failing = create(&host, "fragile", json!({"fail_until": 9}), 80).await;
    let waiting = create(&host, "slow", json!({"fail_until": 1}), 30).await;
    let to_pause = create(&host, "held", json!({"fail_until": 1}), 60).await;
    let running = create(&host, "steady", json!({"gate_at": 0}), 20).await;
    for id in &running {
        ledger.hold_gate(*id, 1).await;
    }

    let runner = paddock::lease::Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        paddock::lease::RunnerConfig {
            runner_id: "r".into(),
            lease: Duration::from_secs(30),
            // Pauses reach the burning guests within a quarter second.
            heartbeat_every: Duration::from_millis(250),
            poll_interval: Duration::from_millis(20),
            // Room for the 20 held and the 10 burning with some to
            // spare; a runner claims once a batch's worth of slots is
            // free, so the batch is small.
            max_concurrency: 48,
            claim_batch: 8,
            ..paddock::lease::RunnerConfig::default()
        },
    );
    let serving = TestHost::serve(&runner);

    for id in &running {
        ledger.at_gate(*id, 1).await;
    }
    let succeeded: Vec<i64> = [&first_time[..], &retried[..], &replayed[..]].concat();
    all_in(&host, &succeeded, "succeeded", "760 succeeded").await;
    all_in(&host, &failing, "failed", "80 failed").await;
    all_in(&host, &waiting, "retry_wait", "30 waiting to retry").await;
    all_in(
        &host,
        &to_pause,
        "retry_wait",
        "60 waiting to retry in `held`",
    )
    .await;

    // Ten more of `held`, busy until told to stop; then the job is paused:
    // the 60 waiting to retry are paused at once, the 10 at their next
    // safe point after the heartbeat delivers the request.
    let burning = create(&host, "held", json!({"steps": 1, "burn": true}), 10).await;
    all_in(&host, &burning, "running", "10 burning").await;
    let pause = host
        .store
        .gate_pause(
            &GateScope::Job("held".into()),
            "local:ops",
            "conservation scenario",
        )
        .await
        .unwrap();
    assert_eq!((pause.queued_paused, pause.running_asked), (60, 10));
    let paused: Vec<i64> = [&to_pause[..], &burning[..]].concat();
    all_in(&host, &paused, "paused", "70 paused").await;
    assert_eq!(
        states_of(&host, &running).await.get("running"),
        Some(&20),
        "the held gates keep 20 running"
    );

    let books = host.store.books().await.unwrap();
    let states: Vec<(&str, i64)> = books
        .by_state
        .iter()
        .map(|(s, n)| (s.as_str(), *n))
        .collect();
    assert_eq!(
        states,
        [
            ("failed", 80),
            ("manual", 40),
            ("paused", 70),
            ("retry_wait", 30),
            ("running", 20),
            ("succeeded", 760),
        ]
    );
    assert_eq!(
        (books.triggers, books.attempts, books.idempotency_hits),
        (1_000, 1_180, 14)
    );
    // Each retried trigger took two attempts; the 14 replayed effects were
    // performed once downstream.
    for id in retried.iter().chain(&replayed).chain(&failing) {
        assert_eq!(host.store.trigger_get(*id).await.unwrap().attempts, 2);
    }
    assert_eq!(
        count(
            &host,
            "SELECT count(*) FROM effects WHERE idempotency_key LIKE 'effect/%'"
        )
        .await,
        14
    );

    let checks = host.store.conservation().await.unwrap();
    assert!(report::differences(&checks).is_empty(), "{checks:#?}");
    // The same books, read by an operator.
    let (code, json_out, err) = paddock(&host.url, &["report", "conservation", "--format", "json"]);
    assert_eq!(code, 0, "{err}{json_out}");
    let v: Value = serde_json::from_str(&json_out).unwrap();
    let read: Books = serde_json::from_value(v["books"].clone()).unwrap();
    assert_eq!(read, books);
    assert_eq!(v["differences"], json!([]));
    let (code, text, err) = paddock(&host.url, &["report", "conservation"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(
            "triggers 1000: 80 failed, 40 manual, 70 paused, 30 retry_wait, 20 running, 760 succeeded"
        ) && text.contains("attempts 1180 (1.18 per trigger), idempotency hits 14")
            && text.contains("every check balances"),
        "{text}"
    );

    // A trigger counted in no attempt but holding one is found.
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET attempts = 0 WHERE id = ?"),
    )
    .bind(first_time[0])
    .execute(host.store.pool())
    .await
    .unwrap();
    let checks = host.store.conservation().await.unwrap();
    let names: Vec<&str> = report::differences(&checks)
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["attempts_vs_triggers", "started_triggers_have_attempts"]
    );

    // The 20 held gates would keep a drain waiting: stop without one.
    serving.abort();
    ledger.stop().await;
}
