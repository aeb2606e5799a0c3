//! Leases and fencing: claims use the database clock and increment the
//! token; a live lease cannot be claimed twice; every write under a stale
//! token is refused and counted; a lost lease interrupts the guest.

use crate::ledger::{Ledger, put_gate};
use crate::procs::{Proc, eventually};
use crate::{Db, TestHost};
use paddock::model::{AttemptEnd, Claim};
use paddock::store::prelude::*;
use paddock::store::{ClaimRequest, StoreError};
use serde_json::json;
use std::time::{Duration, Instant};

fn success(result: &str) -> AttemptEnd {
    AttemptEnd {
        fuel_used: 1,
        peak_memory_bytes: 1,
        wall_ms: 1,
        ..AttemptEnd::succeeded(result.as_bytes().to_vec())
    }
}

const HOUR_MS: i64 = 3_600_000;

/// Claim the one due trigger as `owner`.
async fn claim_one(host: &TestHost, owner: &str, lease_ms: i64) -> Claim {
    let mut claims = host
        .store
        .trigger_claim_batch(owner, lease_ms, 1, None)
        .await
        .unwrap();
    assert_eq!(claims.len(), 1, "{owner} expected to claim one trigger");
    claims.remove(0)
}

/// Claim as `owner` an hour from now by the database's reckoning, when
/// every earlier lease has expired: a takeover.
async fn take_over(host: &TestHost, owner: &str, lease_ms: i64) -> Claim {
    let now = host.store.now_ms().await.unwrap();
    let mut claims = host
        .store
        .trigger_claim_batch(owner, lease_ms, 1, Some(now + HOUR_MS))
        .await
        .unwrap();
    assert_eq!(claims.len(), 1, "{owner} expected to take one trigger over");
    claims.remove(0)
}

db_test!(claim_skips_trigger_with_live_lease);
async fn claim_skips_trigger_with_live_lease(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "").await;
    let t = host.trigger("hello", json!({})).await;
    let a = host
        .store
        .trigger_claim_batch("A", 30_000, 10, None)
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].trigger_id, a[0].fencing_token.get(), a[0].attempt_no),
        (t.id, 1, 1)
    );
    let b = host
        .store
        .trigger_claim_batch("B", 30_000, 10, None)
        .await
        .unwrap();
    assert!(b.is_empty(), "a live lease must not be claimed again");
}

db_test!(the_lease_is_measured_on_the_database_clock);
async fn the_lease_is_measured_on_the_database_clock(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "").await;
    host.trigger("hello", json!({})).await;
    let before = host.store.now_ms().await.unwrap();
    let claim = claim_one(&host, "A", 30_000).await;
    let after = host.store.now_ms().await.unwrap();
    assert!(claim.lease_until >= before + 30_000 && claim.lease_until <= after + 30_000);
}

db_test!(commit_with_stale_token_is_rejected_and_counted);
async fn commit_with_stale_token_is_rejected_and_counted(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "").await;
    let t = host.trigger("hello", json!({})).await;
    let a = claim_one(&host, "A", 30_000).await;
    let a_lease = a.lease("A");
    // B claims an hour later by the database's reckoning: A's lease expired.
    let now = host.store.now_ms().await.unwrap();
    let b = take_over(&host, "B", 30_000).await;
    assert_eq!(b.fencing_token, a.fencing_token.next());
    assert_eq!(b.attempt_no, 2);
    // The total-time retry budget counts from the first attempt.
    assert_eq!(b.first_started_at, a.started_at);
    assert_eq!(a.first_started_at, a.started_at);
    let b_lease = b.lease("B");

    // Every write A tries now is refused, with both tokens named.
    let err = host
        .store
        .checkpoint_save(&a_lease, b"a-state")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::LeaseLost { expected, found: Some(found), .. }
                if expected == 1 && found == 2
        ),
        "{err}"
    );
    let err = host
        .store
        .lease_renew(&a_lease, 30_000, 0)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }));
    let err = host
        .store
        .attempt_finish(&a_lease, &success("from A"))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::LeaseLost { expected, found: Some(found), .. }
            if expected == 1 && found == 2
    ));
    assert_eq!(
        host.store.counter("stale_token_rejections").await.unwrap(),
        3
    );

    // B's writes count.
    host.store
        .checkpoint_save(&b_lease, b"b-state")
        .await
        .unwrap();
    host.store
        .attempt_finish(&b_lease, &success("from B"))
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "succeeded");
    assert_eq!(t.result.as_deref(), Some(&b"from B"[..]));
    assert_eq!(
        host.store.checkpoint_load(t.id).await.unwrap().unwrap().1,
        b"b-state"
    );
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    let outcomes: Vec<_> = attempts
        .iter()
        .map(|a| a.outcome.as_deref().unwrap())
        .collect();
    assert_eq!(outcomes, ["expired", "succeeded"]);

    // A completed trigger is never claimed or rewritten again.
    assert!(
        host.store
            .trigger_claim_batch("C", 30_000, 1, Some(now + 2 * HOUR_MS))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        host.store
            .attempt_finish(&b_lease, &success("again"))
            .await
            .is_err()
    );
}

db_test!(a_takeover_reads_the_last_checkpoint_as_input);
async fn a_takeover_reads_the_last_checkpoint_as_input(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "[params]\nsteps = 5").await;
    let t = host.trigger("hello", json!({})).await;
    let a = claim_one(&host, "A", 30_000).await;
    // A saved step 2 (little-endian u32) and then vanished.
    host.store
        .checkpoint_save(&a.lease("A"), &2u32.to_le_bytes())
        .await
        .unwrap();
    let b = take_over(&host, "B", 30_000).await;
    let runner = host.runner("B", Duration::from_secs(30));
    let summary = runner.execute(b).await;
    assert!(summary.outcome.committed(), "{summary:?}");
    let t = host.store.trigger_get(t.id).await.unwrap();
    let out: serde_json::Value = serde_json::from_slice(t.result.as_ref().unwrap()).unwrap();
    assert_eq!(out["resumed_from"], 2);
    assert_eq!(t.attempts, 2);
}

/// Wait until `owner` holds the trigger's lease.
async fn leased_by(host: &TestHost, trigger_id: i64, owner: &str) {
    eventually(
        Duration::from_secs(60),
        &format!("{owner} to claim trigger {trigger_id}"),
        || async {
            let t = host.store.trigger_get(trigger_id).await.unwrap();
            (t.state == "running" && t.lease_owner.as_deref() == Some(owner)).then_some(())
        },
    )
    .await;
}

db_test!(
    heartbeats_keep_a_long_attempt_leased_past_its_lease_length,
    workers = 2
);
async fn heartbeats_keep_a_long_attempt_leased_past_its_lease_length(db: Db) {
    // Long enough that a renewal is not missed on a loaded CI machine
    // (400 ms was once); the attempt lasts as long as the test holds it.
    const LEASE: Duration = Duration::from_millis(1500);
    let lease_ms = LEASE.as_millis() as i64;
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    // One step, then the gate: the attempt runs until the test opens it.
    host.job(
        "long",
        "gated",
        "connectors = [\"gate\"]\n[params]\nsteps = 2\ngate_at = 1",
    )
    .await;
    let t = host.trigger("long", json!({})).await;
    ledger.hold_gate(t.id, 1).await;
    let runner = host.runner("A", LEASE);
    let run = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run_until_idle().await.unwrap() }
    });
    ledger.at_gate(t.id, 1).await;
    let first_until = host.store.trigger_get(t.id).await.unwrap().lease_until;
    let first_until = first_until.expect("a running trigger has a lease");
    // A rival keeps trying to claim until the lease has been renewed past
    // two of its lengths: proof that it was renewed, not merely long.
    let mut rival_claims = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        rival_claims += host
            .store
            .trigger_claim_batch("B", lease_ms, 1, None)
            .await
            .unwrap()
            .len();
        let until = host.store.trigger_get(t.id).await.unwrap().lease_until;
        if until.is_some_and(|until| until > first_until + 2 * lease_ms) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease was not renewed past two lengths (from {first_until} to {until:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ledger.open_gate(t.id, 1).await;
    let summaries = run.await.unwrap();
    assert_eq!(
        rival_claims, 0,
        "the lease was renewed, so no rival could claim"
    );
    assert_eq!(summaries.len(), 1);
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (t.state.as_str(), t.attempts),
        ("succeeded", 1),
        "{:?}",
        t.error_message
    );
    assert!(
        host.store.attempts_for(t.id).await.unwrap()[0]
            .heartbeat_at
            .is_some()
    );
    ledger.stop().await;
}

db_test!(
    a_runner_that_loses_its_lease_interrupts_the_guest_and_its_result_does_not_count,
    workers = 2
);
async fn a_runner_that_loses_its_lease_interrupts_the_guest_and_its_result_does_not_count(db: Db) {
    let host = TestHost::new(db).await;
    host.group("slow", i64::MAX, 64 << 20, Duration::from_secs(60))
        .await;
    // One checkpoint, then busy until the host says stop: the guest is
    // still running whenever the takeover comes, however fast the machine.
    host.job(
        "busy",
        "gated",
        "resource_group = \"slow\"\n[params]\nsteps = 1\nburn = true",
    )
    .await;
    let t = host.trigger("busy", json!({})).await;
    let runner = host.runner("A", Duration::from_millis(400));
    let run = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run_until_idle().await.unwrap() }
    });
    eventually(Duration::from_secs(60), "A's guest running", || async {
        let saved: Option<i64> = sqlx::query_scalar(
            host.store
                .sql("SELECT seq FROM checkpoints WHERE trigger_id = ?"),
        )
        .bind(t.id)
        .fetch_optional(host.store.pool())
        .await
        .unwrap();
        saved.map(|_| ())
    })
    .await;
    // Another runner takes the trigger over (as after a partition): by the
    // database's reckoning A's lease is long gone.
    // On PostgreSQL the claim skips a row A's heartbeat has locked for the
    // moment; the next poll would take it, so try again like one.
    let b = eventually(Duration::from_secs(5), "B's takeover", || async {
        let now = host.store.now_ms().await.unwrap();
        let b = host
            .store
            .trigger_claim_batch("B", 60_000, 1, Some(now + HOUR_MS))
            .await
            .unwrap();
        (!b.is_empty()).then_some(b)
    })
    .await;
    assert_eq!(b.len(), 1);
    let started = Instant::now();
    let summaries = run.await.unwrap();
    assert_eq!(summaries[0].outcome, paddock::model::RunOutcome::LeaseLost);
    assert!(!summaries[0].outcome.committed());
    // Interrupted promptly (within a heartbeat or two); it would never
    // have ended on its own.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "running", "B's attempt owns the trigger now");
    assert_eq!(t.fencing_token, b[0].fencing_token.get());
    assert!(t.result.is_none());
    assert!(host.store.counter("stale_token_rejections").await.unwrap() >= 1);
}

db_test!(a_retry_backlog_and_fresh_triggers_each_get_their_share_of_a_claim);
async fn a_retry_backlog_and_fresh_triggers_each_get_their_share_of_a_claim(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "").await;
    // 20 retries due (older), then 5 fresh triggers.
    for _ in 0..20 {
        host.trigger("hello", json!({})).await;
    }
    let now = host.store.now_ms().await.unwrap();
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET state = 'retry_wait', next_run_at = ?"),
    )
    .bind(now - 60_000)
    .execute(host.store.pool())
    .await
    .unwrap();
    for _ in 0..5 {
        host.trigger("hello", json!({})).await;
    }
    // (retries, fresh) claimed by one batch of 10 with `retry_slots`.
    let batch = |retry_slots: i64, at: i64| {
        let store = host.store.clone();
        async move {
            let claims = store
                .claim(&ClaimRequest {
                    owner: "A",
                    lease_ms: 30_000,
                    limit: 10,
                    retry_slots,
                    now: Some(at),
                })
                .await
                .unwrap();
            let retries = claims.iter().filter(|c| c.trigger_id <= 20).count();
            (retries, claims.len() - retries)
        }
    };
    // Half of a batch of 10 for retries, half for fresh work.
    assert_eq!(batch(5, now + 60_000).await, (5, 5));
    // Fresh work is exhausted: the next batch's fresh slots go to retries.
    assert_eq!(batch(5, now + 60_001).await, (10, 0));
    // And a share of 0 still lets retries use slots nobody else wants.
    assert_eq!(batch(0, now + 60_002).await, (5, 0));
}

/// Whether `p` logged that it closed the commit gate of `trigger_id`.
pub fn closed_gate_of(p: &Proc, trigger_id: i64) -> bool {
    p.stderr().lines().any(|l| {
        l.contains("cannot confirm lease; closing commit gate")
            && l.contains(&format!("trigger_id={trigger_id} "))
    })
}

db_test!(
    a_runner_that_cannot_confirm_its_lease_closes_the_gate_and_commits_nothing,
    workers = 2
);
async fn a_runner_that_cannot_confirm_its_lease_closes_the_gate_and_commits_nothing(db: Db) {
    let host = TestHost::new(db).await;
    host.group("slow", i64::MAX, 16 << 20, Duration::from_secs(60))
        .await;
    host.job("spin", "spin", "resource_group = \"slow\"").await;
    let t = host.trigger("spin", json!({})).await;
    // A lease far longer than the test, so only the runner's own verdict
    // (three renewals in a row that cannot be confirmed) ends the attempt.
    let mut a = Proc::serve(
        "A",
        &host.url,
        host.dir.path(),
        &["--lease", "60s", "--heartbeat", "100ms", "--poll", "20ms"],
    );
    leased_by(&host, t.id, "A").await;
    // Hold the database's write lock on triggers: every renewal now times
    // out, although the lease itself is still A's and its token current.
    let mut lock = host
        .store
        .pool()
        .begin_with(host.store.dialect().begin_write())
        .await
        .unwrap();
    if host.store.dialect() == paddock::store::Dialect::Postgres {
        // This transaction idles on purpose: exempt it from the store's
        // idle-in-transaction timeout.
        sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0")
            .execute(&mut *lock)
            .await
            .unwrap();
        sqlx::query("LOCK TABLE triggers IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *lock)
            .await
            .unwrap();
    }
    // Until A says it gave up on its lease.
    eventually(Duration::from_secs(60), "A to close its gate", || async {
        closed_gate_of(&a, t.id).then_some(())
    })
    .await;
    lock.rollback().await.unwrap();
    let attempt = eventually(
        Duration::from_secs(60),
        "A to record its attempt",
        || async {
            let attempts = host.store.attempts_for(t.id).await.unwrap();
            attempts[0].outcome.is_some().then(|| attempts[0].clone())
        },
    )
    .await;
    a.kill();
    assert_eq!(
        attempt.outcome.as_deref(),
        Some("lease_lost"),
        "{}",
        a.stderr()
    );
    assert!(a.stderr().contains("commit gate closed; result discarded"));
    // The gate decided: nothing was committed although the token is current.
    let after = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(after.state, "running");
    assert_eq!(after.fencing_token, 1);
    assert!(after.result.is_none() && after.error_class.is_none());
    assert_eq!(host.store.attempts_for(t.id).await.unwrap().len(), 1);
}
