//! Drain at shutdown and heartbeats that nothing can starve.
//!
//! - A real `paddock serve` gets SIGTERM with 120 triggers outstanding
//!   (long ones mid-run, short ones flowing through): short attempts in
//!   flight finish, long ones checkpoint, pause and are released (no retry
//!   budget spent), the process prints the unfinished list and exits 0; a
//!   second process resumes them from their checkpoints with a new token
//!   and finishes all 120, each exactly once (the conservation query).
//!   "Long" and "in flight" are the test's to decide: those attempts wait at
//!   gates (the `gated` guest, held at the reference ledger) until the test
//!   opens them, each at the step of the drain it is about.
//! - Heartbeats run on their own runtime: with the main runtime's only
//!   worker blocked for three lease lengths and CPU-bound guests on every
//!   runner slot, leases keep being renewed and no rival can claim.

use crate::ledger::{Ledger, connector, effect, put, put_gate};
use crate::procs::{Proc, eventually};
use crate::{Db, TestHost};
use paddock::effects::EffectGateway;
use paddock::lease::{Heartbeats, Runner, RunnerConfig};
use paddock::store::Store;
use paddock::store::prelude::*;
use serde_json::json;
use std::time::{Duration, Instant};

const LONG: usize = 8;
const SHORT: usize = 112;
/// Short triggers held at a gate after their last step, so that some are
/// surely in flight at TERM.
const SHORT_IN_FLIGHT: usize = 4;
/// Steps of a long job: one before its gate, the rest after it (the
/// second process runs those).
const LONG_STEPS: i64 = 5;

async fn scalar(host: &TestHost, sql: &'static str) -> i64 {
    sqlx::query_scalar(host.store.sql(sql))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

/// Jobs `long` and `short` (the `gated` guest) in a group with room for
/// them; one attempt each, so a drain that spent the budget or took a pause
/// for a failure would leave a trigger failed. A long job waits at its gate
/// after one step; a short one runs three steps and, when its trigger says
/// `gate_at = 3`, waits at a gate after them (its last host call, so once
/// let through it can only finish).
async fn drain_jobs(host: &TestHost, ledger: &Ledger) {
    put_gate(&host.store, ledger).await;
    host.group("drain", i64::MAX, 64 << 20, Duration::from_secs(300))
        .await;
    let retry = "[retry]\nmax_attempts = 1\nbackoff = \"1s\"";
    let gated = "resource_group = \"drain\"\nconnectors = [\"gate\"]";
    host.job(
        "long",
        "gated",
        &format!("{gated}\n[params]\nsteps = {LONG_STEPS}\ngate_at = 1\n{retry}"),
    )
    .await;
    host.job(
        "short",
        "gated",
        &format!("{gated}\n[params]\nsteps = 3\n{retry}"),
    )
    .await;
}

fn serve_flags() -> Vec<&'static str> {
    vec![
        "--concurrency",
        "16",
        // Claims of four: the first ones take the long and the held short
        // triggers, and the rest still flow through the four slots left.
        "--claim-batch",
        "4",
        "--lease",
        "10s",
        "--poll",
        "50ms",
        "--drain-timeout",
        "1s",
        // Far beyond the test: nothing is interrupted, every long attempt
        // answers the pause itself once its gate opens.
        "--drain-grace",
        "120s",
    ]
}

/// Wait until `p` has logged `line`.
async fn logged(p: &Proc, line: &str) {
    eventually(
        Duration::from_secs(60),
        &format!("{} to log {line:?}", p.name),
        || async { p.stderr().contains(line).then_some(()) },
    )
    .await;
}

/// One line of the unfinished list: (trigger, job, state, attempts,
/// checkpoint, attempt outcome).
fn parse_unfinished(stdout: &str) -> Vec<(i64, String, String, i64, Option<i64>, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("unfinished trigger "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // unfinished trigger ID job J state S attempts N checkpoint C attempt O
            assert_eq!(
                (w[1], w[3], w[5], w[7], w[9], w[11]),
                (
                    "trigger",
                    "job",
                    "state",
                    "attempts",
                    "checkpoint",
                    "attempt"
                ),
                "{l}"
            );
            (
                w[2].parse().unwrap(),
                w[4].to_string(),
                w[6].to_string(),
                w[8].parse().unwrap(),
                w[10].parse().ok(),
                w[12].to_string(),
            )
        })
        .collect()
}

db_test!(
    sigterm_drains_short_work_parks_long_work_and_a_new_process_finishes_all_exactly_once,
    workers = 2
);
async fn sigterm_drains_short_work_parks_long_work_and_a_new_process_finishes_all_exactly_once(
    db: Db,
) {
    let started = Instant::now();
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    drain_jobs(&host, &ledger).await;
    // Long ones first, then the short ones, the first few held after
    // their last step.
    let mut long = Vec::new();
    for _ in 0..LONG {
        let id = host.trigger("long", json!({})).await.id;
        ledger.hold_gate(id, 1).await;
        long.push(id);
    }
    let mut held_short = Vec::new();
    for i in 0..SHORT {
        if i < SHORT_IN_FLIGHT {
            let id = host.trigger("short", json!({"gate_at": 3})).await.id;
            ledger.hold_gate(id, 1).await;
            held_short.push(id);
        } else {
            host.trigger("short", json!({})).await;
        }
    }
    assert_eq!(host.count("triggers").await, 120);

    let mut a = Proc::serve("drain-a", &host.url, host.dir.path(), &serve_flags());
    // TERM once every long job is mid-run (a checkpoint saved, waiting at
    // its gate), the held short ones are in flight and others flowing.
    for id in long.iter().chain(&held_short) {
        ledger.at_gate(*id, 1).await;
    }
    eventually(
        Duration::from_secs(60),
        "short ones flowing past the held ones",
        || async {
            let done = scalar(
                &host,
                "SELECT count(*) FROM triggers WHERE job_id = 'short' AND state = 'succeeded'",
            )
            .await;
            (done >= 4).then_some(())
        },
    )
    .await;
    let long_mid_run = scalar(
        &host,
        "SELECT count(*) FROM triggers t JOIN checkpoints c ON c.trigger_id = t.id \
         WHERE t.job_id = 'long' AND t.state = 'running' AND c.seq >= 1",
    )
    .await;
    assert_eq!(long_mid_run, LONG as i64);
    a.signal("TERM");
    logged(&a, "runner stopping: no new claims").await;
    // Counted after the runner stopped claiming: every short trigger
    // running now was in flight at TERM.
    // One statement, so a short one finishing meanwhile is counted once.
    let (short_done_at_term, short_running_at_term): (i64, i64) = sqlx::query_as(host.store.sql(
        "SELECT count(CASE WHEN state = 'succeeded' THEN 1 END), \
         count(CASE WHEN state = 'running' THEN 1 END) FROM triggers WHERE job_id = 'short'",
    ))
    .fetch_one(host.store.pool())
    .await
    .unwrap();
    assert!(short_running_at_term >= SHORT_IN_FLIGHT as i64);
    // The held short attempts go on during the drain and finish.
    for id in &held_short {
        ledger.open_gate(*id, 1).await;
    }
    // The long ones are asked to pause at the drain timeout; only then do
    // they leave their gates and reach a safe point to answer it.
    logged(&a, "drain timeout: asking attempts to checkpoint and pause").await;
    for id in &long {
        ledger.open_gate(*id, 1).await;
    }
    let status = a
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("A did not exit after TERM\n{}", a.stderr()));
    let out = a.stdout();
    assert!(status.success(), "A exited {status}\n{out}\n{}", a.stderr());
    assert!(
        out.contains("pause requested"),
        "long jobs outlast the drain timeout, so A asked them to pause:\n{out}"
    );

    // The unfinished list: long jobs only, released to pending from a
    // checkpoint part-way through.
    let unfinished = parse_unfinished(&out);
    assert_eq!(unfinished.len(), LONG, "every long job was parked:\n{out}");
    for (id, job, state, attempts, checkpoint, outcome) in &unfinished {
        assert_eq!(
            (job.as_str(), state.as_str(), *attempts, outcome.as_str()),
            ("long", "pending", 1, "released"),
            "trigger {id}:\n{out}"
        );
        let seq = checkpoint.unwrap_or_else(|| panic!("trigger {id} parked without a checkpoint"));
        assert_eq!(seq, 2, "trigger {id}: one step before the gate, one after");
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!((t.state.as_str(), t.lease_owner), ("pending", None));
        let attempts = host.store.attempts_for(*id).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(
            (
                attempts[0].outcome.as_deref(),
                attempts[0].error_class.as_deref()
            ),
            (Some("released"), Some("drained"))
        );
    }
    // Short attempts in flight at TERM finished: A released none of them,
    // and every one running at TERM succeeded during the drain.
    let short_released = scalar(
        &host,
        "SELECT count(*) FROM attempts a JOIN triggers t ON t.id = a.trigger_id \
         WHERE t.job_id = 'short' AND (a.outcome IS NULL OR a.outcome <> 'succeeded')",
    )
    .await;
    assert_eq!(short_released, 0, "short attempts finish during the drain");
    let short_done_after = scalar(
        &host,
        "SELECT count(*) FROM triggers WHERE job_id = 'short' AND state = 'succeeded'",
    )
    .await;
    assert_eq!(
        short_done_after,
        short_done_at_term + short_running_at_term,
        "short attempts in flight at TERM finished ({short_done_at_term} done and \
         {short_running_at_term} running → {short_done_after} done)"
    );
    for id in &held_short {
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!((t.state.as_str(), t.attempts), ("succeeded", 1), "{id}");
    }
    assert_eq!(
        scalar(
            &host,
            "SELECT count(*) FROM triggers WHERE state = 'running'"
        )
        .await,
        0,
        "A left no lease behind"
    );

    // A second process resumes the parked ones (token + 1, from their
    // checkpoint) and runs what A never claimed.
    let mut b = Proc::serve("drain-b", &host.url, host.dir.path(), &serve_flags());
    eventually(
        Duration::from_secs(120),
        "all 120 triggers succeeded",
        || async {
            let done = scalar(
                &host,
                "SELECT count(*) FROM triggers WHERE state = 'succeeded'",
            )
            .await;
            let failed = scalar(
            &host,
            "SELECT count(*) FROM triggers WHERE state NOT IN ('succeeded', 'pending', 'running')",
        )
        .await;
            assert_eq!(failed, 0, "no trigger may fail or wait to retry");
            (done == 120).then_some(())
        },
    )
    .await;
    b.signal("TERM");
    let status = b.wait_exit(Duration::from_secs(60)).expect("B exits");
    assert!(status.success(), "{}", b.stderr());
    assert!(
        parse_unfinished(&b.stdout()).is_empty(),
        "B finished everything:\n{}",
        b.stdout()
    );

    // Resumed from the checkpoint A printed, under a new token.
    for (id, _, _, _, checkpoint, _) in &unfinished {
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!((t.attempts, t.fencing_token), (2, 2), "trigger {id}");
        let result: serde_json::Value = serde_json::from_slice(&t.result.unwrap()).unwrap();
        assert_eq!(result["steps"], LONG_STEPS, "trigger {id}");
        assert_eq!(result["resumed_from"], checkpoint.unwrap(), "trigger {id}");
    }

    // Conservation.
    let q = |sql| scalar(&host, sql);
    assert_eq!(q("SELECT count(*) FROM triggers").await, 120);
    assert_eq!(
        q("SELECT count(*) FROM triggers WHERE state = 'succeeded' AND result IS NOT NULL").await,
        120,
        "every trigger succeeded, with its result"
    );
    let committed = q("SELECT count(*) FROM attempts WHERE outcome = 'succeeded'").await;
    assert_eq!(committed, 120, "one committed result per trigger");
    assert_eq!(
        q(
            "SELECT count(*) FROM (SELECT trigger_id FROM attempts WHERE outcome = 'succeeded' \
           GROUP BY trigger_id HAVING count(*) > 1) AS twice"
        )
        .await,
        0,
        "no trigger has two successful attempts"
    );
    let released = q("SELECT count(*) FROM attempts WHERE outcome = 'released'").await;
    assert_eq!(released, unfinished.len() as i64);
    let attempts = q("SELECT count(*) FROM attempts").await;
    assert_eq!(
        attempts,
        committed + released,
        "every attempt committed or released"
    );
    assert_eq!(
        q("SELECT CAST(coalesce(sum(attempts), 0) AS BIGINT) FROM triggers").await,
        attempts,
        "the triggers' attempt counts sum to the attempt rows"
    );
    assert_eq!(
        q("SELECT count(*) FROM triggers WHERE job_id = 'short' AND attempts <> 1").await,
        0
    );
    assert_eq!(q("SELECT count(*) FROM triggers t WHERE t.job_id = 'long' AND t.id NOT IN (SELECT trigger_id FROM attempts WHERE outcome = 'released') AND t.attempts <> 1").await, 0);
    assert_eq!(
        host.store.counter("stale_token_rejections").await.unwrap(),
        0
    );
    eprintln!(
        "drain test: {} parked and resumed, {short_done_at_term} short done at TERM, {:?}",
        unfinished.len(),
        started.elapsed()
    );
    ledger.stop().await;
}

/// Wait until `owner` holds every one of `n` triggers' leases.
async fn all_leased(host: &TestHost, n: i64) {
    eventually(Duration::from_secs(60), "every trigger leased", || async {
        (scalar(
            host,
            "SELECT count(*) FROM triggers WHERE state = 'running'",
        )
        .await
            == n)
            .then_some(())
    })
    .await;
}

/// What a rival saw while the main runtime was blocked.
#[derive(Debug, Default)]
struct RivalView {
    claims: usize,
    expired_seen: i64,
    first_lease_until: Option<i64>,
    last_lease_until: Option<i64>,
    polls: usize,
}

/// For `for_how_long`, from a thread and a runtime and a pool of its own:
/// try to claim (only expired leases could be), and watch the leases.
fn rival(url: String, for_how_long: Duration) -> std::thread::JoinHandle<RivalView> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let store = Store::open_with(&url, Some(2)).await.unwrap();
            let mut view = RivalView::default();
            let until = Instant::now() + for_how_long;
            while Instant::now() < until {
                view.claims += store
                    .trigger_claim_batch("rival", 60_000, 10, None)
                    .await
                    .unwrap()
                    .len();
                let (expired, min_until): (i64, Option<i64>) = sqlx::query_as(store.sql(
                    "SELECT count(CASE WHEN lease_until < CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN 1 END), min(lease_until) \
                     FROM triggers WHERE state = 'running'",
                ))
                .fetch_one(store.pool())
                .await
                .unwrap();
                view.expired_seen += expired;
                if view.first_lease_until.is_none() {
                    view.first_lease_until = min_until;
                }
                if min_until.is_some() {
                    view.last_lease_until = min_until;
                }
                view.polls += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            store.close().await;
            view
        })
    })
}

db_test!(
    heartbeats_keep_renewing_while_the_main_runtime_is_blocked_and_guests_are_busy,
    workers = 1
);
async fn heartbeats_keep_renewing_while_the_main_runtime_is_blocked_and_guests_are_busy(db: Db) {
    let host = TestHost::new(db).await;
    host.group("busy", i64::MAX, 64 << 20, Duration::from_secs(300))
        .await;
    // CPU-bound guests, one per runner slot, that burn until they are
    // told to stop (the test cancels them after the block below).
    host.job(
        "busy",
        "gated",
        "resource_group = \"busy\"\n[params]\nsteps = 0\nburn = true",
    )
    .await;
    const N: i64 = 2;
    let mut ids = Vec::new();
    for _ in 0..N {
        ids.push(host.trigger("busy", json!({})).await.id);
    }
    let lease = Duration::from_secs(2);
    let config = RunnerConfig {
        runner_id: "A".into(),
        lease,
        heartbeat_every: lease / 5,
        max_concurrency: N as usize,
        poll_interval: Duration::from_millis(20),
        ..RunnerConfig::default()
    };
    let heartbeats = Heartbeats::dedicated(&host.url, 2).await.unwrap();
    let runner = Runner::with_parts(
        std::sync::Arc::new(host.store.clone()),
        host.sandbox.clone(),
        config,
        EffectGateway::new(host.store.clone()),
        heartbeats,
    );
    let run = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run_until_idle().await.unwrap() }
    });
    all_leased(&host, N).await;

    // Block the main runtime's only worker for three lease lengths (as a
    // task that blocks instead of awaiting would), while a rival with its
    // own runtime tries to claim and watches the leases.
    let blocked_for = lease * 3;
    let watcher = rival(host.url.clone(), blocked_for);
    let hog = tokio::spawn(async move { std::thread::sleep(blocked_for) });
    let view = tokio::task::spawn_blocking(move || watcher.join().unwrap())
        .await
        .unwrap();
    hog.await.unwrap();
    // The guests would burn forever: end them through the cancel path,
    // which the runner commits under the token it claimed with.
    for id in &ids {
        assert!(
            host.store
                .trigger_request_cancel(*id, "test", "")
                .await
                .unwrap()
        );
    }
    let summaries = run.await.unwrap();

    assert!(view.polls >= 10, "{view:?}");
    assert_eq!(
        view.claims, 0,
        "no lease lapsed, so no rival could claim: {view:?}"
    );
    assert_eq!(view.expired_seen, 0, "{view:?}");
    // Renewed while the runtime was blocked: the leases moved forward.
    let (Some(first), Some(last)) = (view.first_lease_until, view.last_lease_until) else {
        panic!("the rival saw no lease: {view:?}");
    };
    assert!(
        last > first + lease.as_millis() as i64,
        "leases were renewed during the block: {view:?}"
    );
    // Each attempt kept its lease to the end: its cancel committed.
    assert_eq!(summaries.len(), N as usize);
    for s in &summaries {
        assert_eq!(
            s.outcome,
            paddock::model::RunOutcome::Committed(paddock::model::TriggerState::Cancelled),
            "{s:?}"
        );
    }
    assert_eq!(
        scalar(
            &host,
            "SELECT count(*) FROM triggers WHERE state = 'cancelled' AND attempts = 1"
        )
        .await,
        N
    );
    assert_eq!(
        host.store.counter("stale_token_rejections").await.unwrap(),
        0
    );
}

db_test!(
    a_guest_that_never_reaches_a_safe_point_is_interrupted_after_the_grace_and_released,
    workers = 2
);
async fn a_guest_that_never_reaches_a_safe_point_is_interrupted_after_the_grace_and_released(
    db: Db,
) {
    let host = TestHost::new(db).await;
    host.group("forever", i64::MAX, 64 << 20, Duration::from_secs(300))
        .await;
    // `spin` never calls the host: it cannot answer a pause.
    host.job(
        "spin",
        "spin",
        "resource_group = \"forever\"\n[retry]\nmax_attempts = 1\nbackoff = \"1s\"",
    )
    .await;
    let t = host.trigger("spin", json!({})).await;
    let runner = Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        RunnerConfig {
            runner_id: "A".into(),
            poll_interval: Duration::from_millis(20),
            drain_timeout: Duration::from_millis(300),
            drain_grace: Duration::from_millis(700),
            ..RunnerConfig::default()
        },
    );
    let store = host.store.clone();
    let id = t.id;
    let shutdown = async move {
        // Shut down once the attempt is running.
        while store.trigger_get(id).await.unwrap().state != "running" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let started = Instant::now();
    let report = runner.run_and_drain(shutdown).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(report.paused && report.interrupted, "{report:?}");
    assert_eq!(report.released(), 1, "{report:?}");
    assert_eq!(report.unfinished.len(), 1);
    let u = &report.unfinished[0];
    assert_eq!(
        (
            u.trigger_id,
            u.job_id.as_str(),
            u.state.as_str(),
            u.attempts,
            u.checkpoint_seq
        ),
        (t.id, "spin", "pending", 1, None)
    );
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    assert_eq!(
        (
            attempts[0].outcome.as_deref(),
            attempts[0].error_class.as_deref()
        ),
        (Some("released"), Some("drained"))
    );
    assert!(
        attempts[0]
            .error_message
            .as_deref()
            .unwrap_or_default()
            .contains("shutting down"),
        "{:?}",
        attempts[0].error_message
    );
    // Released, not failed (one attempt allowed), and claimable at once by
    // another runner with the next token.
    let claims = host
        .store
        .trigger_claim_batch("B", 60_000, 10, None)
        .await
        .unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(
        (
            claims[0].trigger_id,
            claims[0].fencing_token.get(),
            claims[0].attempt_no
        ),
        (t.id, 2, 2)
    );
}

db_test!(
    an_effect_in_flight_at_drain_is_left_unknown_not_lost_and_the_resumed_attempt_queries_it,
    workers = 4
);
/// The effect is held at the ledger while the drain asks for a pause; let
/// go after that, the ledger applies it and loses the answer, so the host
/// cannot know it happened.
async fn an_effect_in_flight_at_drain_is_left_unknown_not_lost_and_the_resumed_attempt_queries_it(
    db: Db,
) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(120), true),
    )
    .await;
    host.job(
        "pay",
        "effector",
        "connectors = [\"ledger\"]\n[retry]\nmax_attempts = 3\nbackoff = \"10ms\"",
    )
    .await;
    let key = "drain-pay/reserve/v1";
    ledger.hold(key, 1).await;
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-D", "reserve", key, 5))
        .await;
    let mut a = Proc::serve(
        "A",
        &host.url,
        host.dir.path(),
        &[
            "--poll",
            "20ms",
            "--drain-timeout",
            "100ms",
            "--drain-grace",
            "120s",
        ],
    );
    // Shut down while the effect is in flight (its intent is written).
    ledger.wait_held(key, 1).await;
    let e = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((e.state.as_str(), e.sends), ("intent", 1));
    a.signal("TERM");
    logged(&a, "drain timeout: asking attempts to checkpoint and pause").await;
    ledger.release(key).await;
    let status = a
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("A did not exit after TERM\n{}", a.stderr()));
    let out = a.stdout();
    assert!(status.success(), "A exited {status}\n{out}\n{}", a.stderr());
    assert!(
        out.contains(
            "1 attempt(s) ended, 1 released from their checkpoint, pause requested; 1 unfinished"
        ),
        "paused, released and not interrupted:\n{out}"
    );
    assert!(
        out.lines().any(|l| l
            == format!(
                "unfinished trigger {} job pay state pending attempts 1 checkpoint - \
                 attempt released unknown_effects {key}",
                t.id
            )),
        "{out}"
    );
    let e = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((e.state.as_str(), e.sends), ("unknown", 1));
    assert_eq!(ledger.stat("applied").await, 1, "the ledger applied it");

    // The next attempt asks the ledger by key before anything else: found,
    // so it replays instead of sending again.
    let b = host.runner("B", Duration::from_secs(30));
    let summaries = b.run_until_idle().await.unwrap();
    assert_eq!(summaries.len(), 1);
    assert!(summaries[0].outcome.committed(), "{:?}", summaries[0]);
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (t.state.as_str(), t.attempts, t.fencing_token),
        ("succeeded", 2, 2),
        "{:?}",
        t.error_message
    );
    let e = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((e.state.as_str(), e.sends), ("succeeded", 1));
    assert_eq!(ledger.stat("applied").await, 1, "performed once");
    ledger.stop().await;
}
