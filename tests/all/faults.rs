//! Fault injection with real processes and real signals (issue 4): a stale
//! writer paused mid-run, a runner killed mid-job, a scheduler killed while
//! it owns shards, and a database restart. Every `paddock serve` here is a
//! separate process started by `procs::Proc` (killed on drop); the test
//! process only creates work, injects the fault and reads the database.
//!
//! Timing assertions are deliberately loose (the machine is shared): each
//! figure that matters is printed (`cargo test ... -- --nocapture`) and
//! asserted only against a generous bound.

use crate::ledger::put_gate;
use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::{PgServer, Proc, eventually, eventually_or};
use crate::{Db, TestHost};
use paddock::store::prelude::*;
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

pub(crate) async fn scalar(host: &TestHost, sql: &'static str) -> i64 {
    sqlx::query_scalar(host.store.sql(sql))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

pub(crate) async fn counter(host: &TestHost, name: &str) -> i64 {
    host.store.counter(name).await.unwrap()
}

/// (seq, data as u32, fencing_token) of a trigger's checkpoint.
pub(crate) async fn checkpoint(host: &TestHost, trigger_id: i64) -> Option<(i64, u32, i64)> {
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

pub(crate) fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

/// The effect recorded under `key` has this (state, fencing token, sends).
pub(crate) async fn assert_effect(host: &TestHost, key: &str, expected: (&str, i64, i64)) {
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no effect recorded under {key}"));
    assert_eq!(
        (rec.state.as_str(), rec.fencing_token, rec.sends),
        expected,
        "the effect under {key}"
    );
}

/// Requests parked at the ledger's hold for `key`.
pub(crate) async fn held(ledger: &Ledger, key: &str) -> u64 {
    let key = crate::sent_key(key);
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

/// A trigger of job `release` (5 checkpointed steps, then one effect on
/// `resource` at the ledger under the key `<resource>/release/v1`) whose
/// next claim holds token `token`, and the ledger holding the effect sent
/// under that token until the test releases it.
pub(crate) async fn held_release(
    host: &TestHost,
    ledger: &Ledger,
    resource: &str,
    token: i64,
) -> paddock::store::TriggerRecord {
    // Long enough that a parked request does not time out while its
    // sender is stopped.
    put(
        &host.store,
        connector("ledger", ledger, Duration::from_secs(120), true),
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
    let key = format!("{resource}/release/v1");
    let mut params = effect("ledger", resource, "release", &key, 10);
    params["steps"] = json!(5);
    let t = host.trigger("release", params).await;
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET fencing_token = ? WHERE id = ?"),
    )
    .bind(token - 1)
    .bind(t.id)
    .execute(host.store.pool())
    .await
    .unwrap();
    ledger.hold(&key, token).await;
    t
}

fn logs(procs: &[&Proc]) -> String {
    procs
        .iter()
        .map(|p| {
            format!(
                "--- {} stdout ---\n{}--- {} stderr ---\n{}",
                p.name,
                p.stdout(),
                p.name,
                p.stderr()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

db_test!(
    a_paused_stale_writer_is_refused_everywhere_and_the_result_is_the_takeovers,
    workers = 2
);
/// Fault 1, the stale writer. A claims the trigger (token 77), checkpoints five
/// steps and sends its effect, which the ledger parks; A is SIGSTOPped.
/// B claims after the lease lapses (78), resumes from A's checkpoint,
/// sends the effect again under 78 and commits. A is SIGCONTed: its
/// heartbeat is refused, then the ledger answers its parked request with
/// a stale-token refusal, A's effect outcome write is refused by the store,
/// its checkpoint and its commit are stopped at the closed gate. Every
/// refusal is counted, and none of A's writes landed: the checkpoint, the
/// effect row and the trigger's result are B's, and the ledger applied one
/// effect.
async fn a_paused_stale_writer_is_refused_everywhere_and_the_result_is_the_takeovers(db: Db) {
    stale_writer(db, &flags("1"), &flags("2")).await;
}

db_test!(
    the_seeds_scenario_5_at_a_tenth_of_its_times_refuses_the_paused_runner_everywhere,
    workers = 2
);
/// The seed's scenario 5 with its own flags' ratios at a tenth of the
/// time: lease 6 s, a heartbeat every 1.5 s, the commit gate after 2
/// missed heartbeats (`--max-missed-heartbeats 2`). A is stopped once its
/// effect is parked, B takes the trigger over when A's lease has run out
/// (token + 1: a stopped process keeps its database session, so nothing
/// ends its lease early), and when A continues every write it attempts is
/// refused and counted, as in fault 1.
async fn the_seeds_scenario_5_at_a_tenth_of_its_times_refuses_the_paused_runner_everywhere(db: Db) {
    let seed = |concurrency: &'static str| {
        [
            "--lease",
            "6s",
            "--heartbeat",
            "1500ms",
            "--max-missed-heartbeats",
            "2",
            "--poll",
            "100ms",
            "--concurrency",
            concurrency,
        ]
    };
    stale_writer(db, &seed("1"), &seed("2")).await;
}

/// Fault 1 with `a_flags` for the stale writer A and `b_flags` for B.
async fn stale_writer(db: Db, a_flags: &[&str], b_flags: &[&str]) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let key = "RES-77/release/v1";
    let t = held_release(&host, &ledger, "RES-77", 77).await;

    // One slot, which A's parked attempt keeps: A cannot claim the trigger
    // a second time itself. (Stopping A while it holds a lock, as
    // `Proc::stop_outside_a_transaction` may, can outlast its lease; with a free
    // slot A once took its own lapsed trigger back as attempt 78 and
    // finished it before B started.)
    let a = Proc::serve("A", &host.url, host.dir.path(), a_flags);
    eventually(
        Duration::from_secs(60),
        "A's effect parked at the ledger",
        || async { (held(&ledger, key).await >= 1).then_some(()) },
    )
    .await;
    let tr = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (
            tr.state.as_str(),
            tr.lease_owner.as_deref(),
            tr.fencing_token
        ),
        ("running", Some("A"), 77)
    );
    assert_eq!(
        checkpoint(&host, t.id).await,
        Some((5, 5, 77)),
        "A checkpointed its 5 steps"
    );
    assert_effect(&host, key, ("intent", 77, 1)).await;

    // A sleeps with its request in flight (outside a transaction: see
    // `Proc::stop_outside_a_transaction`).
    let retries = a.stop_outside_a_transaction(&host.store, &[t.id]).await;
    println!("stale writer: A stopped outside a transaction after {retries} retries");
    let paused = Instant::now();
    let b = Proc::serve("B", &host.url, host.dir.path(), b_flags);
    let done = eventually_or(
        Duration::from_secs(60),
        "B completes the trigger",
        || logs(&[&a, &b]),
        || async {
            let tr = host.store.trigger_get(t.id).await.unwrap();
            (tr.state == "succeeded").then_some(tr)
        },
    )
    .await;
    println!(
        "stale writer: B committed {:?} after A's pause",
        paused.elapsed()
    );
    assert_eq!(done.fencing_token, 78);
    let out = result(&done);
    assert_eq!(out["outcome"], "done", "{out}");
    assert_eq!(out["attempt"], 2, "{out}");
    assert_eq!(
        out["resumed_from"], 5,
        "B resumed from A's checkpoint: {out}"
    );
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["fencing_token"], 78, "{body}");
    assert_eq!(checkpoint(&host, t.id).await, Some((6, 6, 78)));
    assert_effect(&host, key, ("succeeded", 78, 2)).await;
    assert_eq!(ledger.stat("applied").await, 1);
    assert_eq!(
        counter(&host, "stale_token_rejections").await,
        0,
        "nothing stale was written yet"
    );

    // A wakes up. Its request is still parked, so the attempt is still in
    // its effect call: the first write it makes is its heartbeat.
    a.signal("CONT");
    eventually_or(
        Duration::from_secs(30),
        "A's heartbeat is refused",
        || logs(&[&a, &b]),
        || async { (counter(&host, "stale_token_rejections").await >= 1).then_some(()) },
    )
    .await;
    // Now the parked request (token 77) reaches the ledger, which has seen
    // 78 for this resource: refused, and A's outcome write is refused too.
    ledger.release(key).await;
    eventually_or(
        Duration::from_secs(30),
        "A gives up its attempt",
        || logs(&[&a, &b]),
        || async {
            a.stderr()
                .contains("commit gate closed; result discarded")
                .then_some(())
        },
    )
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
    assert_eq!(
        stats["applied"], 1,
        "exactly one effect downstream: {stats}"
    );
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
    assert_effect(&host, key, ("succeeded", 78, 2)).await;
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

db_test!(
    a_killed_runners_trigger_is_finished_by_another_process_from_its_checkpoint,
    workers = 2
);
/// Fault 2, a runner SIGKILLed mid-job: another process takes the trigger over
/// from the last checkpoint once the lease lapses (lease + one poll, plus
/// slack for a loaded machine); two attempts, one result. A's attempt waits
/// at its gate after three checkpoints, so it is mid-job when killed
/// whatever the machine's speed; B's attempt has a gate of its own, open.
async fn a_killed_runners_trigger_is_finished_by_another_process_from_its_checkpoint(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    host.group("faults", i64::MAX, 64 << 20, Duration::from_secs(120))
        .await;
    host.job(
        "long",
        "gated",
        "resource_group = \"faults\"\nconnectors = [\"gate\"]\n\
         [params]\nsteps = 6\ngate_at = 3",
    )
    .await;
    let t = host.trigger("long", json!({})).await;
    ledger.hold_gate(t.id, 1).await;
    let mut a = Proc::serve("A", &host.url, host.dir.path(), &flags("2"));
    eventually(Duration::from_secs(60), "A claims the trigger", || async {
        let tr = host.store.trigger_get(t.id).await.unwrap();
        (tr.lease_owner.as_deref() == Some("A")).then_some(())
    })
    .await;
    // B is up and polling before the crash.
    let b = Proc::serve("B", &host.url, host.dir.path(), &flags("2"));
    ledger.at_gate(t.id, 1).await;
    let saved = checkpoint(&host, t.id).await.expect("A saved checkpoints");
    assert_eq!(saved.0, 3, "A waits at its gate after three checkpoints");
    let before = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (before.state.as_str(), before.lease_owner.as_deref()),
        ("running", Some("A")),
        "A is mid-job when killed"
    );
    a.kill();
    let killed_at = host.store.now_ms().await.unwrap();
    // B's attempt row, not its lease: B may run the rest and finish between
    // two looks, and the row stays.
    let takeover = eventually(
        Duration::from_secs(30),
        "B takes the trigger over",
        || async {
            let attempts = host.store.attempts_for(t.id).await.unwrap();
            let b = attempts.iter().find(|a| a.runner_id == "B")?;
            Some(Duration::from_millis(
                (b.started_at - killed_at).max(0) as u64
            ))
        },
    )
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
    let done = eventually(
        Duration::from_secs(60),
        "B finishes the trigger",
        || async {
            let tr = host.store.trigger_get(t.id).await.unwrap();
            matches!(tr.state.as_str(), "succeeded" | "failed").then_some(tr)
        },
    )
    .await;
    assert_eq!(done.state, "succeeded", "{:?}", done.error_message);
    let out = result(&done);
    let resumed = out["resumed_from"].as_u64().unwrap();
    println!(
        "crash: B resumed from step {resumed} (checkpoint seq {} at takeover)",
        last.0
    );
    assert!(resumed > 0 && resumed >= saved.1 as u64, "{out}");
    assert_eq!(out["steps"], 6);
    assert_eq!(out["gated"], true, "B passed its own gate: {out}");
    assert_eq!(done.attempts, 2);
    assert_eq!(done.fencing_token, 2);
    assert_eq!(host.count("attempts").await, 2);
    assert_eq!(
        scalar(
            &host,
            "SELECT count(*) FROM triggers WHERE result IS NOT NULL"
        )
        .await,
        1
    );
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    let summary: Vec<_> = attempts
        .iter()
        .map(|a| (a.runner_id.as_str(), a.fencing_token, a.outcome.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [("A", 1, Some("expired")), ("B", 2, Some("succeeded"))]
    );
    // The survivor drains on SIGTERM and exits cleanly.
    let mut b = b;
    b.signal("TERM");
    let status = b.wait_exit(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        b.stderr()
    );
    assert!(b.stderr().contains("paddock serve: stopped"));
    ledger.stop().await;
}

db_test!(
    a_killed_scheduler_leaves_no_gap_and_no_duplicate_in_one_second_crons,
    workers = 2
);
/// Fault 3, a scheduler killed while it owns shards. Three `serve` processes
/// share the 16 shards and 20 jobs firing every second (misfire `all`, a
/// 2 s threshold so the outage's times count as missed and are caught up
/// within a 1 min window). The process owning the most job-bearing shards
/// is SIGKILLed, stays dead until another process has taken over every
/// shard it owned (after their 10 s leases lapse), then is started again.
/// Over the window every fire time of every job exists exactly once and
/// ran exactly once: no gap, no duplicate.
async fn a_killed_scheduler_leaves_no_gap_and_no_duplicate_in_one_second_crons(db: Db) {
    const JOBS: usize = 20;
    let host = TestHost::new(db).await;
    let schedule = "[schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"\n\
                    misfire = \"all\"\nmisfire_threshold = \"2s\"\ncatchup_window = \"1m\"\n\
                    max_catchup = 1000\nmax_in_flight = 1000\noverlap = \"allow\"";
    let mut jobs = Vec::new();
    for i in 0..JOBS {
        let id = format!("tick-{i:02}");
        host.job(&id, "noop", schedule).await;
        jobs.push(id);
    }
    let shards = host.store.shard_count().await.unwrap();
    let shard_of: BTreeMap<String, u32> = jobs
        .iter()
        .map(|j| (j.clone(), paddock::schedule::shard_of(j, shards)))
        .collect();
    let active_from = scalar(&host, "SELECT max(active_from) FROM job_schedules").await;
    let dir = host.dir.path();
    let mut procs: Vec<Proc> = ["S1", "S2", "S3"]
        .iter()
        .map(|name| Proc::serve(name, &host.url, dir, &flags("8")))
        .collect();
    let all = |procs: &[Proc]| logs(&procs.iter().collect::<Vec<_>>());

    // Every shard owned, and a steady state: every job has fired and run,
    // and every process has run something.
    let owners = eventually(Duration::from_secs(60), "all shards owned", || async {
        let list = host.store.shards_list().await.unwrap();
        list.iter().all(|s| s.owner.is_some()).then(|| {
            list.iter()
                .map(|s| (s.shard as u32, s.owner.clone().unwrap()))
                .collect::<BTreeMap<u32, String>>()
        })
    })
    .await;
    eventually(Duration::from_secs(60), "a steady state", || async {
        let jobs_run: i64 = scalar(
            &host,
            "SELECT count(DISTINCT job_id) FROM triggers WHERE state = 'succeeded'",
        )
        .await;
        let runners: i64 = scalar(
            &host,
            "SELECT count(DISTINCT runner_id) FROM attempts WHERE outcome = 'succeeded'",
        )
        .await;
        (jobs_run == JOBS as i64 && runners == 3).then_some(())
    })
    .await;
    let owners_now: BTreeMap<u32, String> = host
        .store
        .shards_list()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|s| Some((s.shard as u32, s.owner?)))
        .collect();
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for shard in shard_of.values() {
        if let Some(owner) = owners_now.get(shard) {
            *load.entry(owner.as_str()).or_default() += 1;
        }
    }
    let (victim_owner, victim_jobs) = load
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(o, n)| (o.to_string(), *n))
        .expect("some shard with jobs is owned");
    let victim = procs
        .iter()
        .position(|p| victim_owner == format!("{}-scheduler", p.name))
        .expect("the owner is one of ours");
    println!(
        "scheduler crash: owners at start {owners:?}; jobs per owner {load:?}; killing {}",
        procs[victim].name
    );
    let name = procs[victim].name.clone();
    let victim_shards: BTreeSet<u32> = owners_now
        .iter()
        .filter(|(_, owner)| **owner == victim_owner)
        .map(|(shard, _)| *shard)
        .collect();
    procs[victim].kill();
    let killed_at = host.store.now_ms().await.unwrap();
    // The outage lasts until the survivors own every shard the victim had:
    // its leases lapsed and the fire times it missed were caught up.
    eventually(
        Duration::from_secs(60),
        "the survivors to take over the victim's shards",
        || async {
            let list = host.store.shards_list().await.unwrap();
            list.iter()
                .filter(|s| victim_shards.contains(&(s.shard as u32)))
                .all(|s| s.owner.as_ref().is_some_and(|o| *o != victim_owner))
                .then_some(())
        },
    )
    .await;
    procs[victim] = Proc::serve(&name, &host.url, dir, &flags("8"));
    // Started again: it runs work of its own before the window closes.
    let restarted_at = host.store.now_ms().await.unwrap();
    eventually(
        Duration::from_secs(60),
        "the restarted process to run a trigger",
        || async {
            let n: i64 = sqlx::query_scalar(host.store.sql(
                "SELECT count(*) FROM attempts WHERE runner_id = ? AND started_at > ? \
                 AND outcome = 'succeeded'",
            ))
            .bind(&name)
            .bind(restarted_at)
            .fetch_one(host.store.pool())
            .await
            .unwrap();
            (n > 0).then_some(())
        },
    )
    .await;

    // The window: whole seconds after activation up to now; wait until every
    // shard has scanned past it and every fire time in it has run.
    let end = host.store.now_ms().await.unwrap() / 1000 * 1000;
    let start = (active_from / 1000 + 1) * 1000;
    eventually(
        Duration::from_secs(30),
        "every shard scanned past the window",
        || async {
            let list = host.store.shards_list().await.unwrap();
            list.iter()
                .all(|s| s.watermark.is_some_and(|w| w > end))
                .then_some(())
        },
    )
    .await;
    let unfinished = || async {
        sqlx::query_scalar::<_, i64>(host.store.sql(
            "SELECT count(*) FROM triggers WHERE scheduled_at <= ? AND state NOT IN ('succeeded', 'failed', 'skipped', 'cancelled')",
        ))
        .bind(end)
        .fetch_one(host.store.pool())
        .await
        .unwrap()
    };
    let drained = Instant::now();
    let left = eventually(
        Duration::from_secs(60),
        "every fire time in the window ran",
        || async {
            let n = unfinished().await;
            (n == 0).then_some(n)
        },
    )
    .await;
    println!(
        "scheduler crash: window {} s, drained {:?} after its end",
        (end - start) / 1000 + 1,
        drained.elapsed()
    );
    assert_eq!(left, 0);

    // (job, time) → (triggers, succeeded attempts, state, created late).
    let rows: Vec<(String, i64, String, i64)> = sqlx::query_as(host.store.sql(
        "SELECT t.job_id, t.scheduled_at, t.state, t.created_at FROM triggers t \
         WHERE t.origin = 'schedule' AND t.scheduled_at >= ? AND t.scheduled_at <= ?",
    ))
    .bind(start)
    .bind(end)
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    let mut seen: BTreeMap<(String, i64), usize> = BTreeMap::new();
    let mut late = 0;
    let mut late_after_kill = 0;
    for (job, at, state, created) in &rows {
        *seen.entry((job.clone(), *at)).or_default() += 1;
        assert_eq!(state, "succeeded", "{job} @ {at}\n{}", all(&procs));
        if created - at > 2_000 {
            late += 1;
            if *at >= killed_at {
                late_after_kill += 1;
            }
        }
    }
    let expected: BTreeSet<(String, i64)> = jobs
        .iter()
        .flat_map(|j| (start..=end).step_by(1000).map(move |s| (j.clone(), s)))
        .collect();
    let found: BTreeSet<(String, i64)> = seen.keys().cloned().collect();
    let gaps: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        gaps.is_empty(),
        "missing fire times: {gaps:?}\n{}",
        all(&procs)
    );
    assert!(extra.is_empty(), "unexpected fire times: {extra:?}");
    assert!(doubled.is_empty(), "duplicate fire times: {doubled:?}");
    // Each fire time ran to exactly one success.
    let succeeded_attempts: Vec<(i64, i64)> = sqlx::query_as(host.store.sql(
        "SELECT t.id, count(a.id) FROM triggers t JOIN attempts a ON a.trigger_id = t.id \
         AND a.outcome = 'succeeded' WHERE t.origin = 'schedule' AND t.scheduled_at >= ? \
         AND t.scheduled_at <= ? GROUP BY t.id",
    ))
    .bind(start)
    .bind(end)
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(succeeded_attempts.len(), expected.len());
    assert!(succeeded_attempts.iter().all(|(_, n)| *n == 1));
    println!(
        "scheduler crash: {} fire times ({} jobs x {} s), {late} created late (caught up), \
         {late_after_kill} of them after the kill; victim owned {victim_jobs} job(s)",
        expected.len(),
        JOBS,
        expected.len() / JOBS
    );
    assert!(
        late_after_kill > 0,
        "the outage's fire times must have been caught up by another owner"
    );
    drop(procs);
}

/// A `TestHost` on a database URL of the test's choosing.
async fn host_at(url: String) -> TestHost {
    TestHost::on(url, tempfile::tempdir().unwrap()).await
}

/// Whether any of `procs` logged that it discarded the result of an
/// attempt at `trigger_id` because its commit gate was closed.
fn discarded_by(procs: &[&Proc], trigger_id: i64) -> bool {
    procs.iter().any(|p| {
        p.stderr().lines().any(|l| {
            l.contains("commit gate closed; result discarded")
                && l.contains(&format!("trigger_id={trigger_id} "))
        })
    })
}

/// Whether any of `procs` logged that it closed the commit gate of
/// `trigger_id`.
fn closed_gate_of(procs: &[&Proc], trigger_id: i64) -> bool {
    procs
        .iter()
        .any(|p| crate::leases::closed_gate_of(p, trigger_id))
}

db_test!(
    a_database_outage_closes_the_gates_loses_no_trigger_and_doubles_no_result,
    workers = 2
);
/// Fault 4, the database goes away under two runners with long jobs in flight
/// and a one-second cron job. On PostgreSQL the server is really stopped
/// (`pg_ctl -m fast`, every connection cut) and started again once both
/// runners have given up every lease; it is a throwaway server of this
/// test's own, never the shared one. On SQLite, which is embedded and
/// cannot be restarted under its processes, the outage is modelled by
/// holding the write lock as long: every write (renewals, checkpoints,
/// claims, scans) waits, which is what a runner sees of a database it
/// cannot reach. The long jobs wait at their gates through the outage, so
/// they are all in flight however fast the machine; the test opens the
/// gates after it. Either way the runners fail their
/// renewals and close their gates, nothing they ran counts, and once the
/// database is back the system converges: every trigger ran to exactly one
/// result, the interrupted ones resumed from their checkpoints, and every
/// fire time of the cron job exists once.
async fn a_database_outage_closes_the_gates_loses_no_trigger_and_doubles_no_result(db: Db) {
    const LONG: usize = 6;
    let pg = (db == Db::Postgres).then(PgServer::start);
    let host = match &pg {
        Some(pg) => host_at(pg.create_database("paddock").await).await,
        None => {
            println!(
                "database outage on SQLite: modelled by holding the write lock \
                 (an embedded database cannot be restarted under its processes)"
            );
            TestHost::new(db).await
        }
    };
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    host.group("faults", i64::MAX, 64 << 20, Duration::from_secs(120))
        .await;
    // Two checkpoints, then the gate.
    host.job(
        "long",
        "gated",
        "resource_group = \"faults\"\nconnectors = [\"gate\"]\n\
         [params]\nsteps = 4\ngate_at = 2",
    )
    .await;
    host.job(
        "tick",
        "noop",
        "[schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"\n\
         misfire = \"all\"\nmisfire_threshold = \"2s\"\ncatchup_window = \"1m\"\n\
         max_catchup = 1000\nmax_in_flight = 1000\noverlap = \"allow\"",
    )
    .await;
    let active_from = scalar(&host, "SELECT max(active_from) FROM job_schedules").await;
    let mut long = Vec::new();
    for _ in 0..LONG {
        let id = host.trigger("long", json!({})).await.id;
        ledger.hold_gate(id, 1).await;
        long.push(id);
    }
    let dir = host.dir.path();
    let r1 = Proc::serve("R1", &host.url, dir, &flags("4"));
    let r2 = Proc::serve("R2", &host.url, dir, &flags("4"));
    let procs = [&r1, &r2];

    // Every long trigger running, past its second checkpoint, at its gate.
    for id in &long {
        ledger.at_gate(*id, 1).await;
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!(t.state, "running");
        assert_eq!(checkpoint(&host, *id).await.map(|(seq, _, _)| seq), Some(2));
    }
    let outage_started = Instant::now();
    // The outage lasts until every attempt in flight has been given up by
    // its runner (three renewals in a row that could not be confirmed).
    let every_gate_closed = || async {
        eventually(
            Duration::from_secs(60),
            "both runners to close the gate of every long trigger",
            || async {
                long.iter()
                    .all(|id| closed_gate_of(&procs, *id))
                    .then_some(())
            },
        )
        .await
    };
    match &pg {
        Some(pg) => {
            pg.stop();
            every_gate_closed().await;
            pg.start_again();
        }
        None => {
            use sqlx::{Connection, Executor};
            let mut lock = sqlx::SqliteConnection::connect(&host.url).await.unwrap();
            lock.execute("BEGIN IMMEDIATE").await.unwrap();
            every_gate_closed().await;
            lock.execute("COMMIT").await.unwrap();
            lock.close().await.unwrap();
        }
    }
    println!("database outage: {:?}", outage_started.elapsed());
    // The first attempts go on from their gates, to find their results
    // discarded; the second ones pass gates of their own.
    for id in &long {
        ledger.open_gate(*id, 1).await;
    }

    let done = eventually(
        Duration::from_secs(90),
        "every long trigger finishes and every attempt at it ends",
        || async {
            let mut finished = Vec::new();
            for id in &long {
                // The test's own pool may still be reconnecting.
                let Ok(t) = host.store.trigger_get(*id).await else {
                    return None;
                };
                if !matches!(t.state.as_str(), "succeeded" | "failed") {
                    return None;
                }
                // A first attempt leaves its gate only when the test opens
                // it, and may end (and say so) after its successor
                // committed, or after the successor's claim closed its row.
                if !discarded_by(&procs, *id) {
                    return None;
                }
                let Ok(attempts) = host.store.attempts_for(*id).await else {
                    return None;
                };
                if attempts.iter().any(|a| a.outcome.is_none()) {
                    return None;
                }
                finished.push(t);
            }
            Some(finished)
        },
    )
    .await;
    let converged = outage_started.elapsed();
    let end = host.store.now_ms().await.unwrap() / 1000 * 1000 - 1000;
    let start = (active_from / 1000 + 1) * 1000;
    // Every tick of the window exists (the scanner may still be catching up
    // to its end) and none is left unfinished.
    let window = (end - start) / 1000 + 1;
    eventually(
        Duration::from_secs(30),
        "every tick in the window ran",
        || async {
            let (unfinished, created): (i64, i64) = sqlx::query_as(host.store.sql(
                "SELECT count(CASE WHEN state <> 'succeeded' THEN 1 END), \
                 count(DISTINCT CASE WHEN scheduled_at >= ? THEN scheduled_at END) \
                 FROM triggers WHERE job_id = 'tick' AND scheduled_at <= ?",
            ))
            .bind(start)
            .bind(end)
            .fetch_one(host.store.pool())
            .await
            .ok()?;
            (unfinished == 0 && created == window).then_some(())
        },
    )
    .await;

    // The runners lost their leases and said so.
    let mut all_logs = logs(&procs);
    if let Some(pg) = &pg {
        all_logs.push_str(&format!("--- throwaway PostgreSQL log ---\n{}", pg.log()));
    }
    let said: Vec<(&str, usize)> = [
        "heartbeat failed",
        "heartbeat timed out",
        "cannot confirm lease; closing commit gate",
        "checkpoint save failed",
        "commit gate closed; result discarded",
        "claim failed",
        "scan failed",
    ]
    .into_iter()
    .map(|m| (m, all_logs.matches(m).count()))
    .collect();
    println!("database outage: runner log lines {said:?}");
    // Every attempt in flight lost its lease (no renewal for three
    // heartbeats), closed its gate and discarded its result.
    assert!(
        all_logs.contains("cannot confirm lease; closing commit gate"),
        "{all_logs}"
    );
    assert!(
        all_logs
            .matches("commit gate closed; result discarded")
            .count()
            >= LONG,
        "{all_logs}"
    );
    assert!(
        all_logs.contains("heartbeat failed") || all_logs.contains("heartbeat timed out"),
        "{all_logs}"
    );

    // No trigger lost, none doubled: one success each, committed by the
    // attempt holding the trigger's current token.
    let mut resumed = Vec::new();
    for t in &done {
        assert_eq!(t.state, "succeeded", "{t:?}\n{all_logs}");
        let out = result(t);
        assert_eq!(out["steps"], 4, "{out}");
        resumed.push(out["resumed_from"].as_u64().unwrap());
        let attempts = host.store.attempts_for(t.id).await.unwrap();
        let wins: Vec<_> = attempts
            .iter()
            .filter(|a| a.outcome.as_deref() == Some("succeeded"))
            .collect();
        assert_eq!(wins.len(), 1, "{attempts:?}");
        assert_eq!(wins[0].fencing_token, t.fencing_token);
        assert_eq!(t.attempts as usize, attempts.len());
    }
    let attempts_total = host.count("attempts").await;
    let retried = done.iter().filter(|t| t.attempts > 1).count();
    println!(
        "database outage: converged {converged:?} after the outage began; {retried}/{LONG} \
         long triggers re-run, resumed from {resumed:?}; {attempts_total} attempts in all"
    );
    assert_eq!(retried, LONG, "every attempt in flight was interrupted");
    assert!(
        done.iter()
            .zip(&resumed)
            .any(|(t, r)| t.attempts > 1 && *r > 0),
        "an interrupted trigger resumed from its checkpoint"
    );
    assert_eq!(
        scalar(&host, "SELECT count(*) FROM attempts WHERE outcome IS NULL AND trigger_id IN (SELECT id FROM triggers WHERE state = 'succeeded')").await,
        0,
        "every attempt of a finished trigger is closed"
    );

    // The cron job: every second of the window exactly once, run once.
    let ticks: Vec<(i64, i64)> = sqlx::query_as(host.store.sql(
        "SELECT t.scheduled_at, (SELECT count(*) FROM attempts a WHERE a.trigger_id = t.id \
         AND a.outcome = 'succeeded') FROM triggers t WHERE t.job_id = 'tick' \
         AND t.scheduled_at >= ? AND t.scheduled_at <= ? ORDER BY t.scheduled_at",
    ))
    .bind(start)
    .bind(end)
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    let times: Vec<i64> = ticks.iter().map(|(at, _)| *at).collect();
    let expected: Vec<i64> = (start..=end).step_by(1000).collect();
    assert_eq!(times, expected, "fire times of the cron job\n{all_logs}");
    assert!(ticks.iter().all(|(_, wins)| *wins == 1), "{ticks:?}");
    println!(
        "database outage: cron job fired {} times over the window, each once",
        ticks.len()
    );
    drop((r1, r2));
    ledger.stop().await;
    host.store.close().await;
    if let Some(pg) = pg {
        drop(pg);
    }
}

mod postgres {
    use super::*;
    use sqlx::{Connection, Executor};

    /// A connection of the test's own, inside a transaction, and its
    /// backend's pid (to find who waits on the locks it takes).
    async fn open_transaction(url: &str) -> (sqlx::PgConnection, i32) {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        conn.execute("BEGIN").await.unwrap();
        (conn, pid)
    }

    /// A claim sends its `BEGIN` and the groups' lock as one query (one
    /// round trip less per claim). If the lock then fails — here the claim
    /// is cancelled while it waits — the `BEGIN` has taken and the session
    /// is left in an aborted transaction that no transaction guard rolls
    /// back. That connection must not go back to the pool: with one hot
    /// connection, every later claim would fail with "current transaction
    /// is aborted" (this test fails so when the claim hands it back).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_cancelled_at_the_groups_lock_does_not_pool_an_aborted_session() {
        let host = TestHost::new(Db::Postgres).await;
        host.job("solo", "noop", "").await;
        let t = host.trigger("solo", json!({})).await;
        // One connection per pool, so the next claim gets this claim's.
        let store = paddock::store::Store::open_with(&host.url, Some(1))
            .await
            .unwrap();

        let (mut blocker, blocker_pid) = open_transaction(&host.url).await;
        sqlx::query("SELECT name FROM resource_groups FOR UPDATE")
            .fetch_all(&mut blocker)
            .await
            .unwrap();
        let claiming = {
            let store = store.clone();
            tokio::spawn(async move { store.trigger_claim_batch("A", 60_000, 10, None).await })
        };
        let waiting: i32 = eventually(
            Duration::from_secs(60),
            "the claim to wait on the groups' lock",
            || async {
                sqlx::query_scalar::<_, i32>(
                    "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                )
                .bind(blocker_pid)
                .fetch_optional(host.store.pool())
                .await
                .unwrap()
            },
        )
        .await;
        sqlx::query("SELECT pg_cancel_backend($1)")
            .bind(waiting)
            .execute(host.store.pool())
            .await
            .unwrap();
        let cancelled = claiming.await.unwrap();
        assert!(
            cancelled.is_err(),
            "the cancelled claim claimed {cancelled:?}"
        );
        blocker.execute("ROLLBACK").await.unwrap();

        let claims = store
            .trigger_claim_batch("A", 60_000, 10, None)
            .await
            .expect("the claim after a cancelled one");
        assert_eq!(
            claims.iter().map(|c| c.trigger_id).collect::<Vec<_>>(),
            vec![t.id]
        );
    }

    /// A claim of 10 triggers for `owner`, leased for a minute, run beside
    /// the test.
    fn spawn_claim(
        host: &TestHost,
        owner: &'static str,
    ) -> tokio::task::JoinHandle<paddock::store::StoreResult<Vec<paddock::model::Claim>>> {
        let store = host.store.clone();
        tokio::spawn(async move { store.trigger_claim_batch(owner, 60_000, 10, None).await })
    }

    /// The pids waiting, directly or behind another waiter, on a lock
    /// that backend `holder` holds.
    async fn waiting_on(host: &TestHost, holder: i32) -> Vec<i32> {
        sqlx::query_scalar(
            "WITH first AS (SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))) \
             SELECT pid FROM first UNION SELECT pid FROM pg_stat_activity \
             WHERE pg_blocking_pids(pid) && ARRAY(SELECT pid FROM first)",
        )
        .bind(holder)
        .fetch_all(host.store.pool())
        .await
        .unwrap()
    }

    /// A claim reads its candidates and claims its batch without the
    /// claims' lock (the groups' rows), and takes it only to check that
    /// the batch left its group and tenant within their limits, and
    /// commit. Two claims side by side — here both have claimed a full
    /// batch of a group of 10 they each saw empty, and wait at the lock,
    /// which the test holds — must not both commit: the one that checks
    /// second finds the group over its limit, rolls back, and claims again
    /// under the lock, where it finds no room. Without the check both
    /// commit and 20 run in a group of 10.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_made_side_by_side_never_pass_their_groups_limit() {
        let host = TestHost::new(Db::Postgres).await;
        crate::quotas::plain_group(&host, "tight", 10).await;
        crate::quotas::tenant_job(&host, "solo", "acme", "tight").await;
        crate::quotas::triggers(&host, "solo", 30).await;

        let (mut blocker, blocker_pid) = open_transaction(&host.url).await;
        sqlx::query("SELECT name FROM resource_groups FOR UPDATE")
            .fetch_all(&mut blocker)
            .await
            .unwrap();
        let claiming = [spawn_claim(&host, "A"), spawn_claim(&host, "B")];
        eventually(
            Duration::from_secs(60),
            "both claims to wait at the groups' lock, each with its batch claimed",
            || async { (waiting_on(&host, blocker_pid).await.len() == 2).then_some(()) },
        )
        .await;
        blocker.execute("ROLLBACK").await.unwrap();

        let mut claimed = Vec::new();
        for claim in claiming {
            claimed.push(claim.await.unwrap().expect("a claim").len());
        }
        claimed.sort();
        assert_eq!(claimed, vec![0, 10], "claims of A and B in a group of 10");
        assert_eq!(
            host.store.claims_refused(),
            1,
            "the second claim's check refused its batch"
        );
        let running: i64 =
            sqlx::query_scalar("SELECT count(*) FROM triggers WHERE state = 'running'")
                .fetch_one(host.store.pool())
                .await
                .unwrap();
        assert_eq!(running, 10);
    }

    /// A pause runs beside claims and does not take the claims' lock: a
    /// claim holds its triggers' rows while it waits for that lock (to
    /// check and commit), so a pause that held the lock while it waited for
    /// those rows would deadlock with the claim — one of the two would fail
    /// after `deadlock_timeout`. Here the claim is stopped between its
    /// claim and its check (the test holds the attempts table, where the
    /// claim inserts), the pause is seen waiting for the claim's triggers,
    /// then the claim is let go: both must succeed, and the triggers the
    /// claim started must be asked to pause (the pause's last statement).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pause_beside_a_claim_neither_deadlocks_nor_misses_its_triggers() {
        let host = TestHost::new(Db::Postgres).await;
        // The claim's connection is opened first: a hot session prepares
        // the claim's statements when it opens, and preparing the claim
        // waits for the lock on `attempts` this test takes below.
        let none = host.store.trigger_claim_batch("A", 60_000, 10, None).await;
        assert!(none.unwrap().is_empty());
        host.job("solo", "noop", "").await;
        for i in 0..30 {
            host.trigger("solo", json!({ "i": i })).await;
        }

        let (mut blocker, blocker_pid) = open_transaction(&host.url).await;
        blocker
            .execute("LOCK TABLE attempts IN SHARE MODE")
            .await
            .unwrap();
        let claiming = spawn_claim(&host, "A");
        let claimer = eventually(
            Duration::from_secs(60),
            "the claim to wait at the attempts table",
            || async { waiting_on(&host, blocker_pid).await.first().copied() },
        )
        .await;
        let pausing = {
            let store = host.store.clone();
            tokio::spawn(async move {
                store
                    .gate_pause(
                        &paddock::model::gates::GateScope::Job("solo".into()),
                        "local:ops",
                        "bad deploy",
                    )
                    .await
            })
        };
        eventually(
            Duration::from_secs(60),
            "the pause to wait for the claim's triggers",
            || async { (!waiting_on(&host, claimer).await.is_empty()).then_some(()) },
        )
        .await;
        blocker.execute("ROLLBACK").await.unwrap();

        let claims = claiming.await.unwrap().expect("the claim beside the pause");
        assert_eq!(claims.len(), 10);
        let report = pausing.await.unwrap().expect("the pause beside the claim");
        assert_eq!((report.running_asked, report.queued_paused), (10, 20));
        let asked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM triggers WHERE state = 'running' AND pause_requested = 1",
        )
        .fetch_one(host.store.pool())
        .await
        .unwrap();
        assert_eq!(asked, 10);
    }

    /// A runner frozen (SIGSTOP, a VM pause, a long GC) *inside* its
    /// heartbeat transaction (BEGIN; UPDATE triggers; UPDATE attempts;
    /// COMMIT: four round trips) keeps the trigger's row lock on
    /// PostgreSQL, and the claim's `FOR UPDATE SKIP LOCKED` skips the row:
    /// its lease expires but nobody can take the trigger over until the
    /// frozen process runs again. The store sets
    /// `idle_in_transaction_session_timeout` (1 s) on its PostgreSQL
    /// connections, so the server aborts a frozen transaction and releases
    /// its locks; this test failed before that (B's claim came back empty).
    /// On SQLite the same freeze holds the database's write lock and stalls
    /// every writer; an embedded database shared by several processes
    /// cannot avoid that, so this test is PostgreSQL's alone.
    ///
    /// The freeze is placed, not hoped for: the test locks the attempt's
    /// row, so A's next renewal stops between its two updates, holding the
    /// trigger's row; the test sees it waiting there, stops A, and lets the
    /// renewal's second update through. A's transaction is then open and
    /// idle, with nobody to end it but the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runner_frozen_inside_its_heartbeat_transaction_does_not_block_the_takeover() {
        let host = TestHost::new(Db::Postgres).await;
        let ledger = Ledger::start().await;
        put_gate(&host.store, &ledger).await;
        host.group("faults", i64::MAX, 64 << 20, Duration::from_secs(600))
            .await;
        host.job(
            "long",
            "gated",
            "resource_group = \"faults\"\nconnectors = [\"gate\"]\n[params]\ngate_at = 0",
        )
        .await;
        let t = host.trigger("long", json!({})).await;
        ledger.hold_gate(t.id, 1).await;
        // A renewal gives up after one heartbeat period: 2 s is the time
        // the test has to stop A once it sees the renewal waiting.
        let a = Proc::serve(
            "A",
            &host.url,
            host.dir.path(),
            &["--lease", "60s", "--heartbeat", "2s", "--poll", "100ms"],
        );
        ledger.at_gate(t.id, 1).await;

        let mut frozen = false;
        for round in 0..5 {
            // A connection of the test's own (the store's would be cut by
            // the idle timeout while it holds the row).
            let (mut blocker, blocker_pid) = open_transaction(&host.url).await;
            sqlx::query("SELECT id FROM attempts WHERE trigger_id = $1 FOR UPDATE")
                .bind(t.id)
                .fetch_all(&mut blocker)
                .await
                .unwrap();
            let timeouts_before = a.stderr().matches("heartbeat timed out").count();
            let waiting: i32 = eventually(
                Duration::from_secs(60),
                "A's renewal to wait on the attempt's row",
                || async {
                    sqlx::query_scalar::<_, i32>(
                        "SELECT pid FROM pg_stat_activity \
                         WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE 'UPDATE attempts%'",
                    )
                    .bind(blocker_pid)
                    .fetch_optional(host.store.pool())
                    .await
                    .unwrap()
                },
            )
            .await;
            a.signal("STOP");
            // Had the renewal given up before the stop, A would have said
            // so (its log line follows the timeout at once) and might have
            // sent its ROLLBACK: try again with the next renewal.
            if a.stderr().matches("heartbeat timed out").count() > timeouts_before {
                println!("frozen heartbeat: round {round}: A gave up first; again");
                a.signal("CONT");
                blocker.execute("ROLLBACK").await.unwrap();
                continue;
            }
            println!("frozen heartbeat: A (backend {waiting}) stopped inside its renewal");
            // The renewal's second update goes through; its COMMIT never
            // comes while A is stopped.
            blocker.execute("ROLLBACK").await.unwrap();
            frozen = true;
            break;
        }
        assert!(frozen, "A gave up every renewal before it could be stopped");
        // A stays frozen, its lease long by the clock of a takeover an hour
        // from now: only the row lock could keep B out.
        let claimed = eventually(
            Duration::from_secs(30),
            "B takes over the frozen runner's trigger",
            || async {
                let now = host.store.now_ms().await.unwrap();
                let claims = host
                    .store
                    .trigger_claim_batch("B", 60_000, 1, Some(now + 3_600_000))
                    .await
                    .unwrap();
                (!claims.is_empty()).then_some(claims)
            },
        )
        .await;
        assert_eq!(claimed[0].trigger_id, t.id);
        drop(a);
        ledger.stop().await;
    }
}
