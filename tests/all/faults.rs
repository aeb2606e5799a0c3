//! Fault injection with real processes and real signals (issue 4): a stale
//! writer paused mid-run, a runner killed mid-job, a scheduler killed while
//! it owns shards, and a database restart. Every `paddock serve` here is a
//! separate process started by `procs::Proc` (killed on drop); the test
//! process only creates work, injects the fault and reads the database.
//!
//! Timing assertions are deliberately loose (the machine is shared): each
//! figure that matters is printed (`cargo test ... -- --nocapture`) and
//! asserted only against a generous bound.

use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::{PgServer, Proc, eventually};
use crate::{TestHost, postgres_base_url};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Lease 2 s, heartbeat 0.5 s, poll 0.1 s.
const LEASE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(100);
fn flags(concurrency: &'static str) -> [&'static str; 8] {
    [
        "--lease",
        "2s",
        "--heartbeat",
        "500ms",
        "--poll",
        "100ms",
        "--concurrency",
        concurrency,
    ]
}

async fn scalar(host: &TestHost, sql: &'static str) -> i64 {
    sqlx::query_scalar(host.store.sql(sql))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

async fn counter(host: &TestHost, name: &str) -> i64 {
    host.store.counter(name).await.unwrap()
}

/// (seq, data as u32, fencing_token) of a trigger's checkpoint.
async fn checkpoint(host: &TestHost, trigger_id: i64) -> Option<(i64, u32, i64)> {
    let row: Option<(i64, Vec<u8>, i64)> = sqlx::query_as(
        host.store
            .sql("SELECT seq, data, fencing_token FROM checkpoints WHERE trigger_id = ?"),
    )
    .bind(trigger_id)
    .fetch_optional(host.store.pool())
    .await
    .unwrap();
    row.map(|(seq, data, token)| {
        (
            seq,
            u32::from_le_bytes(data.as_slice().try_into().unwrap()),
            token,
        )
    })
}

fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

/// Requests parked at the ledger's hold for `key`.
async fn held(ledger: &Ledger, key: &str) -> u64 {
    let holds: Value = reqwest::get(format!("{}/admin/holds", ledger.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    holds["holds"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["hold_key"] == key)
        .and_then(|h| h["waiting"].as_u64())
        .unwrap_or(0)
}

fn logs(procs: &[&Proc]) -> String {
    procs
        .iter()
        .map(|p| format!("--- {} stderr ---\n{}", p.name, p.stderr()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// 1. The stale writer. A claims the trigger (token 77), checkpoints five
/// steps and sends its effect, which the ledger parks; A is SIGSTOPped.
/// B claims after the lease lapses (78), resumes from A's checkpoint,
/// sends the effect again under 78 and commits. A is SIGCONTed: its
/// heartbeat is refused, then the ledger answers its parked request with
/// a stale-token refusal, A's effect outcome write is refused by the store,
/// its checkpoint and its commit are stopped at the closed gate. Every
/// refusal is counted, and none of A's writes landed: the checkpoint, the
/// effect row and the trigger's result are B's, and the ledger applied one
/// effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_stale_writer_is_refused_everywhere_and_the_result_is_the_takeovers() {
    let host = TestHost::new().await;
    let ledger = Ledger::start().await;
    // Long enough that A's parked request does not time out while A sleeps.
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(120), true),
    )
    .await;
    host.group("faults", i64::MAX, 64 << 20, Duration::from_secs(120))
        .await;
    host.job(
        "release",
        "effector",
        "resource_group = \"faults\"\nconnectors = [\"ledger\"]\n\
         [retry]\nmax_attempts = 5\nbackoff = \"100ms\"\njitter = false",
    )
    .await;
    let key = "RES-77/release/v1";
    let mut params = effect("ledger", "RES-77", "release", key, 10);
    params["steps"] = json!(5);
    params["spin_per_step"] = json!(1_000_000);
    let t = host.trigger("release", params).await;
    // Bring the trigger to token 76 so A's claim holds 77.
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET fencing_token = 76 WHERE id = ?"),
    )
    .bind(t.id)
    .execute(host.store.pool())
    .await
    .unwrap();
    ledger.hold(key, 77).await;

    let a = Proc::serve("A", &host.url, host.dir.path(), &flags("2"));
    eventually(Duration::from_secs(60), "A's effect parked at the ledger", || async {
        (held(&ledger, key).await >= 1).then_some(())
    })
    .await;
    let tr = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (tr.state.as_str(), tr.lease_owner.as_deref(), tr.fencing_token),
        ("running", Some("A"), 77)
    );
    assert_eq!(
        checkpoint(&host, t.id).await,
        Some((5, 5, 77)),
        "A checkpointed its 5 steps"
    );
    let rec = host.store.effect_get(key).await.unwrap().unwrap();
    assert_eq!(
        (rec.state.as_str(), rec.fencing_token, rec.sends),
        ("intent", 77, 1)
    );

    // A sleeps with its request in flight.
    a.signal("STOP");
    let paused = Instant::now();
    let b = Proc::serve("B", &host.url, host.dir.path(), &flags("2"));
    let done = eventually(Duration::from_secs(60), "B completes the trigger", || async {
        let tr = host.store.trigger_get(t.id).await.unwrap();
        (tr.state == "succeeded").then_some(tr)
    })
    .await;
    println!("stale writer: B committed {:?} after A's pause", paused.elapsed());
    assert_eq!(done.fencing_token, 78);
    let out = result(&done);
    assert_eq!(out["outcome"], "done", "{out}");
    assert_eq!(out["attempt"], 2, "{out}");
    assert_eq!(out["resumed_from"], 5, "B resumed from A's checkpoint: {out}");
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["fencing_token"], 78, "{body}");
    assert_eq!(checkpoint(&host, t.id).await, Some((6, 6, 78)));
    let rec = host.store.effect_get(key).await.unwrap().unwrap();
    assert_eq!(
        (rec.state.as_str(), rec.fencing_token, rec.sends),
        ("succeeded", 78, 2)
    );
    assert_eq!(ledger.stat("applied").await, 1);
    assert_eq!(
        counter(&host, "stale_token_rejections").await,
        0,
        "nothing stale was written yet"
    );

    // A wakes up. Its request is still parked, so the attempt is still in
    // its effect call: the first write it makes is its heartbeat.
    a.signal("CONT");
    eventually(Duration::from_secs(30), "A's heartbeat is refused", || async {
        (counter(&host, "stale_token_rejections").await >= 1).then_some(())
    })
    .await;
    // Now the parked request (token 77) reaches the ledger, which has seen
    // 78 for this resource: refused, and A's outcome write is refused too.
    ledger.release(key).await;
    eventually(Duration::from_secs(30), "A gives up its attempt", || async {
        a.stderr()
            .contains("commit gate closed; result discarded")
            .then_some(())
    })
    .await;
    let a_log = a.stderr();
    assert!(a_log.contains("stale heartbeat rejected"), "{a_log}");
    assert!(
        a_log.contains("downstream refused the fencing token"),
        "{a_log}"
    );
    assert!(a_log.contains("stale effect outcome rejected"), "{a_log}");

    // Counted on both sides: host = heartbeat + effect outcome.
    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 1, "exactly one effect downstream: {stats}");
    assert_eq!(stats["stale_token_rejections"], 1, "{stats}");
    assert_eq!(ledger.resource("RES-77").await["balance"], 110);
    assert_eq!(counter(&host, "downstream_stale_token_rejections").await, 1);
    assert_eq!(counter(&host, "stale_effect_writes").await, 1);
    assert_eq!(counter(&host, "stale_token_rejections").await, 2);

    // None of A's writes landed: checkpoint, effect and result are B's.
    let after = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (
            after.state.as_str(),
            after.fencing_token,
            &after.result,
            after.updated_at,
            after.finished_at
        ),
        (
            "succeeded",
            78,
            &done.result,
            done.updated_at,
            done.finished_at
        )
    );
    assert_eq!(checkpoint(&host, t.id).await, Some((6, 6, 78)));
    let rec = host.store.effect_get(key).await.unwrap().unwrap();
    assert_eq!(
        (rec.state.as_str(), rec.fencing_token, rec.sends),
        ("succeeded", 78, 2)
    );
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    let summary: Vec<_> = attempts
        .iter()
        .map(|a| (a.runner_id.as_str(), a.fencing_token, a.outcome.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [("A", 77, Some("expired")), ("B", 78, Some("succeeded"))]
    );
    assert_eq!(scalar(&host, "SELECT count(*) FROM effects").await, 1);
    assert_eq!(host.count("triggers").await, 1);
    drop((a, b));
    ledger.stop().await;
}

/// 2. A runner SIGKILLed mid-job: another process takes the trigger over
/// from the last checkpoint once the lease lapses (lease + one poll, plus
/// slack for a loaded machine); two attempts, one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runners_trigger_is_finished_by_another_process_from_its_checkpoint() {
    let host = TestHost::new().await;
    host.group("faults", i64::MAX, 64 << 20, Duration::from_secs(120))
        .await;
    host.job(
        "long",
        "hello",
        "resource_group = \"faults\"\n[params]\nsteps = 60\nspin_per_step = 50000000",
    )
    .await;
    let t = host.trigger("long", json!({})).await;
    let mut a = Proc::serve("A", &host.url, host.dir.path(), &flags("2"));
    eventually(Duration::from_secs(60), "A claims the trigger", || async {
        let tr = host.store.trigger_get(t.id).await.unwrap();
        (tr.lease_owner.as_deref() == Some("A")).then_some(())
    })
    .await;
    // B is up and polling before the crash.
    let b = Proc::serve("B", &host.url, host.dir.path(), &flags("2"));
    let saved = eventually(Duration::from_secs(60), "A saves 3 checkpoints", || async {
        checkpoint(&host, t.id)
            .await
            .filter(|(seq, _, _)| *seq >= 3)
    })
    .await;
    let before = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (before.state.as_str(), before.lease_owner.as_deref()),
        ("running", Some("A")),
        "A must still be mid-job when killed (make the steps slower)"
    );
    a.kill();
    let killed = Instant::now();
    let takeover = eventually(Duration::from_secs(30), "B takes the trigger over", || async {
        let tr = host.store.trigger_get(t.id).await.unwrap();
        (tr.lease_owner.as_deref() == Some("B")).then(|| killed.elapsed())
    })
    .await;
    let last = checkpoint(&host, t.id).await.unwrap();
    println!(
        "crash: killed A after checkpoint {} was seen; B took over after {takeover:?} \
         (lease {LEASE:?} + poll {POLL:?})",
        saved.0
    );
    // The lease was renewed at most one heartbeat before the kill, so the
    // takeover is due within lease + poll; 5 s of slack for the load.
    assert!(
        takeover <= LEASE + POLL + Duration::from_secs(5),
        "takeover took {takeover:?}"
    );
    let done = eventually(Duration::from_secs(60), "B finishes the trigger", || async {
        let tr = host.store.trigger_get(t.id).await.unwrap();
        matches!(tr.state.as_str(), "succeeded" | "failed").then_some(tr)
    })
    .await;
    assert_eq!(done.state, "succeeded", "{:?}", done.error_message);
    let out = result(&done);
    let resumed = out["resumed_from"].as_u64().unwrap();
    println!("crash: B resumed from step {resumed} (checkpoint seq {} at takeover)", last.0);
    assert!(resumed > 0 && resumed >= saved.1 as u64, "{out}");
    assert_eq!(out["steps"], 60);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.fencing_token, 2);
    assert_eq!(host.count("attempts").await, 2);
    assert_eq!(
        scalar(&host, "SELECT count(*) FROM triggers WHERE result IS NOT NULL").await,
        1
    );
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    let summary: Vec<_> = attempts
        .iter()
        .map(|a| (a.runner_id.as_str(), a.fencing_token, a.outcome.as_deref()))
        .collect();
    assert_eq!(summary, [("A", 1, Some("expired")), ("B", 2, Some("succeeded"))]);
    drop(b);
}
