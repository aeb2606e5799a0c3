//! Nodes started in-process (`paddock::node`), as `paddock serve` starts
//! one: two on one database share the work; one shuts down, drains and
//! reports what it left unfinished; the other finishes all of it.
//!
//! The barrier is the reference ledger's hold, not a timing window: every
//! first attempt sends its effect to a ledger that parks it, so no attempt
//! finishes until the test lets B's through or A's connector times out.
//! The one timing assumption: A's drain asks for the pause (at once)
//! within [`EFFECT_TIMEOUT`] of A's sends.

use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::eventually;
use crate::{Db, TestHost};
use paddock::node::{self, NodeConfig};
use paddock::store::prelude::*;
use std::time::{Duration, Instant};

/// Triggers, and keys held on their first attempt: two per node.
const N: usize = 4;
/// A's connector's timeout: how long A's effects parked at the ledger wait
/// before their outcome is unknown. A's drain asks for the pause at once;
/// this is how long that may take, with room to spare.
const EFFECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Two attempts at once per node, so four held attempts fill both; a
/// drain that asks for the pause at once.
fn config(host: &TestHost, id: &str) -> NodeConfig {
    let mut config = NodeConfig::new(&host.url).id(id);
    config.runner.max_concurrency = 2;
    config.runner.poll_interval = Duration::from_millis(20);
    config.runner.lease = Duration::from_secs(10);
    config.runner.heartbeat_every = Duration::from_millis(2500);
    config.runner.drain_timeout = Duration::ZERO;
    config.runner.drain_grace = Duration::from_secs(30);
    config.scanner.tick = Duration::from_millis(100);
    config
}

fn key(i: usize) -> String {
    format!("node-pay-{i}")
}

/// The triggers `owner` holds a lease on.
async fn leased_by(host: &TestHost, owner: &str) -> Vec<i64> {
    sqlx::query_scalar(
        host.store
            .sql("SELECT id FROM triggers WHERE state = 'running' AND lease_owner = ? ORDER BY id"),
    )
    .bind(owner)
    .fetch_all(host.store.pool())
    .await
    .unwrap()
}

/// Shards whose owner is `owner`.
async fn shards_of(host: &TestHost, owner: &str) -> usize {
    let shards = host.store.shards_list().await.unwrap();
    shards
        .iter()
        .filter(|s| s.owner.as_deref() == Some(owner))
        .count()
}

db_test!(
    two_nodes_share_work_and_one_that_shuts_down_leaves_the_rest_to_the_other,
    workers = 2
);
async fn two_nodes_share_work_and_one_that_shuts_down_leaves_the_rest_to_the_other(db: Db) {
    two_nodes_share_work(TestHost::new(db).await).await;
}

async fn two_nodes_share_work(host: TestHost) {
    let started = Instant::now();
    let ledger = Ledger::start().await;
    // A's effects time out soon after A shuts down; B's wait until the
    // test lets them through.
    put(
        &host.store,
        connector("ledger-a", &ledger, EFFECT_TIMEOUT, true),
    )
    .await;
    put(
        &host.store,
        connector("ledger-b", &ledger, Duration::from_secs(60), true),
    )
    .await;
    // One checkpoint, the effect, one more checkpoint. Two attempts, so
    // two sends: the parked one and the resend after it was not found (a
    // released attempt does not count; the send budget is max_attempts).
    for node in ["a", "b"] {
        let manifest = format!(
            "connectors = [\"ledger-{node}\"]\n[retry]\nmax_attempts = 2\nbackoff = \"1s\""
        );
        host.job(&format!("pay-{node}"), "effector", &manifest)
            .await;
    }
    let mut keys = std::collections::HashMap::new();
    // Two triggers of `pay-{node}`, each effect parked at the ledger on
    // its first attempt (token 1).
    let mut work_for = async |node: &str, first: usize| {
        for i in first..first + 2 {
            // One resource per trigger: the ledger compares tokens per
            // resource.
            let connector = format!("ledger-{node}");
            let mut params = effect(&connector, &format!("RES-N{i}"), "reserve", &key(i), 5);
            params["steps"] = serde_json::json!(1);
            let t = host.trigger(&format!("pay-{node}"), params).await;
            keys.insert(t.id, key(i));
            ledger.hold(&key(i), 1).await;
        }
    };

    // `start` returns once the node's loops run. A takes the first two
    // triggers and is full (two slots) with both parked at the ledger; B
    // then takes the next two, parked the same way.
    work_for("a", 0).await;
    let a = node::start(config(&host, "node-a")).await.unwrap();
    for i in 0..2 {
        ledger.wait_held(&key(i), 1).await;
    }
    work_for("b", 2).await;
    let b = node::start(config(&host, "node-b")).await.unwrap();
    for i in 2..4 {
        ledger.wait_held(&key(i), 1).await;
    }
    let (on_a, on_b) = (
        leased_by(&host, "node-a").await,
        leased_by(&host, "node-b").await,
    );
    assert_eq!((on_a.len(), on_b.len()), (2, 2), "{on_a:?} {on_b:?}");
    assert_eq!(a.config().scanner.owner, "node-a-scheduler");
    let shards = a.shards() as usize;
    assert!(shards > 0);
    eventually(Duration::from_secs(30), "every shard owned", || async {
        (shards_of(&host, "node-a-scheduler").await + shards_of(&host, "node-b-scheduler").await
            == shards)
            .then_some(())
    })
    .await;

    // A shuts down with its two attempts parked at the ledger: they are
    // asked to pause at once, and when their effects time out (outcome
    // unknown) they stop at their next checkpoint and are released.
    let report = a.shutdown().await.unwrap().drain;
    assert!(report.paused && !report.interrupted, "{report:?}");
    assert_eq!(report.ended.len(), 2, "{report:?}");
    assert_eq!(report.released(), 2, "{report:?}");
    let mut unfinished: Vec<_> = report
        .unfinished
        .iter()
        .map(|u| {
            assert!(
                u.checkpoint_seq.is_some(),
                "released from a checkpoint: {u}"
            );
            (
                u.trigger_id,
                u.job_id.as_str(),
                u.state.as_str(),
                u.attempts,
                u.attempt_outcome.as_str(),
                u.unknown_effects.clone(),
            )
        })
        .collect();
    unfinished.sort();
    // B is full, so nothing moved since A released them.
    let expected: Vec<_> = on_a
        .iter()
        .map(|id| {
            (
                *id,
                "pay-a",
                "pending",
                1,
                "released",
                vec![keys[id].clone()],
            )
        })
        .collect();
    assert_eq!(unfinished, expected, "{report:?}");
    assert_eq!(
        shards_of(&host, "node-a-scheduler").await,
        0,
        "A gave its shards back"
    );
    let a_stopped = started.elapsed();
    // B's effects go through; its attempts succeed and it is free.
    for id in &on_b {
        ledger.release(&keys[id]).await;
    }

    // B finishes the rest: A's triggers from their checkpoints, under the
    // next token, asking the ledger by key first (not found: the parked
    // requests were never applied) and then sending once.
    eventually(
        Duration::from_secs(60),
        "every trigger succeeded",
        || async {
            let mut done = 0;
            for id in keys.keys() {
                let t = host.store.trigger_get(*id).await.unwrap();
                assert!(
                    matches!(t.state.as_str(), "succeeded" | "pending" | "running"),
                    "trigger {id} is {}: {:?}",
                    t.state,
                    t.error_message
                );
                done += usize::from(t.state == "succeeded");
            }
            (done == N).then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "B took over every shard",
        || async { (shards_of(&host, "node-b-scheduler").await == shards).then_some(()) },
    )
    .await;
    let report = b.shutdown().await.unwrap().drain;
    assert!(report.unfinished.is_empty(), "{report:?}");

    for id in &on_a {
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!((t.attempts, t.fencing_token), (2, 2), "trigger {id}");
        let out: serde_json::Value = serde_json::from_slice(&t.result.unwrap()).unwrap();
        assert_eq!(
            (out["outcome"].as_str(), out["attempt"].as_i64()),
            (Some("done"), Some(2)),
            "{out}"
        );
        assert!(out["resumed_from"].as_i64() >= Some(1), "{out}");
        let attempts = host.store.attempts_for(*id).await.unwrap();
        assert_eq!(
            attempts
                .iter()
                .map(|a| (a.runner_id.as_str(), a.outcome.as_deref()))
                .collect::<Vec<_>>(),
            vec![("node-a", Some("released")), ("node-b", Some("succeeded"))],
            "trigger {id}"
        );
    }
    for id in &on_b {
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!((t.attempts, t.fencing_token), (1, 1), "trigger {id}");
    }
    assert_eq!(ledger.stat("applied").await, N as u64, "each effect once");
    assert_eq!(
        host.store.counter("stale_token_rejections").await.unwrap(),
        0
    );
    eprintln!(
        "node test: A stopped after {a_stopped:?}, B finished all after {:?}",
        started.elapsed()
    );
    // A's parked first sends may go now: the ledger refuses them (token 1
    // is below the resource's 2).
    for id in &on_a {
        ledger.release(&keys[id]).await;
    }
    ledger.stop().await;
}
