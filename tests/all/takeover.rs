//! Takeovers with real processes, on both databases: every overlap policy
//! holds through a SIGKILL of the holder, and — liveness bound to the
//! holder's process (a database session's advisory lock on PostgreSQL, a
//! file lock on SQLite) — a holder whose process is gone is taken over
//! while its lease still runs, and one that is only stopped keeps its
//! lock and its leases, and goes on when it continues.

use crate::ledger::{Ledger, put_gate};
use crate::procs::{Proc, eventually, eventually_or};
use crate::{Db, TestHost};
use paddock::model::LeaseRef;
use paddock::store::prelude::*;
use paddock::store::{ClaimRequest, NewTrigger, StoreError};
use serde_json::json;
use std::time::Duration;

/// A scheduled fire of job `solo` due now, running the `gated` guest at a
/// gate named `gate`; the ledger key of its first attempt's gate.
async fn fire(host: &TestHost, at: i64, gate: &str) -> (i64, String) {
    let new = NewTrigger {
        origin: paddock::model::TriggerOrigin::Schedule,
        scheduled_at: Some(at),
        // Plan keys have whole seconds: each fire its own key, whatever the
        // second it falls in.
        partition_key: Some(gate.to_string()),
        ..NewTrigger::manual("solo", json!({ "gate_name": gate, "gate_at": 0 }), None)
    };
    let (t, _) = host.store.trigger_create(&new).await.unwrap();
    let key = paddock::effects::classify::downstream_key(crate::TENANT, &format!("gate/{gate}/1"));
    (t.id, key)
}

/// The attempts of job `solo` that ran its guest — those that reached its
/// gate, whose effect the gateway recorded under the attempt — as
/// (trigger, the guest's first effect, the attempt's end) on the database
/// clock: never two at once is what every policy promises. (An attempt
/// refused by the rule, or whose holder died before the rule answered,
/// never ran the guest; one claimed while another ran may start its guest
/// only once the rule admits it.)
async fn runs(host: &TestHost) -> Vec<(i64, i64, i64)> {
    sqlx::query_as(host.store.sql(
        "SELECT a.trigger_id, (SELECT min(e.created_at) FROM effects e WHERE e.attempt_id = a.id), \
             a.ended_at FROM attempts a \
         JOIN triggers t ON t.id = a.trigger_id \
         WHERE t.job_id = 'solo' AND a.ended_at IS NOT NULL \
           AND EXISTS (SELECT 1 FROM effects e WHERE e.attempt_id = a.id) \
         ORDER BY 2",
    ))
    .fetch_all(host.store.pool())
    .await
    .unwrap()
}

/// `policy` with `max_in_flight = 1`, rounds of: an older fire claimed by
/// a process `A` that waits at its gate, a newer fire created before or
/// after A is SIGKILLed, and process `B` left to take the older over and
/// judge the newer. On every round, no two runs overlap in time.
async fn no_two_runs_at_once_through_kills(db: Db, policy: &str) {
    const ROUNDS: usize = 4;
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    host.job(
        "solo",
        "gated",
        &format!(
            "connectors = [\"gate\"]\n[retry]\nmax_attempts = 5\n\
             [schedule]\nkind = \"cron\"\ncron = \"0 0 0 1 1 *\"\ntimezone = \"UTC\"\n\
             overlap = \"{policy}\"\nmax_in_flight = 1"
        ),
    )
    .await;
    let flags = [
        "--lease",
        "2s",
        "--heartbeat",
        "500ms",
        "--poll",
        "100ms",
        "--concurrency",
        "2",
    ];
    let b = Proc::serve("B", &host.url, host.dir.path(), &flags);
    for round in 0..ROUNDS {
        let now = host.store.now_ms().await.unwrap();
        let gate = format!("older-{round}");
        let held =
            paddock::effects::classify::downstream_key(crate::TENANT, &format!("gate/{gate}/1"));
        ledger.hold_sent(&held).await;
        // B would take the older fire at once: A gets it alone, B waits
        // (stopped outside a transaction: on SQLite a stopped writer would
        // keep the one write lock).
        b.stop_outside_a_transaction(&host.store, &[-1]).await;
        let mut a = Proc::serve(&format!("A{round}"), &host.url, host.dir.path(), &flags);
        let (older, _) = fire(&host, now - 2_000, &gate).await;
        eventually_or(
            Duration::from_secs(60),
            "A waits at the older fire's gate",
            || format!("A:\n{}{}\nB:\n{}", a.stdout(), a.stderr(), b.stderr()),
            || async { (ledger.waiting_sent(&held).await >= 1).then_some(()) },
        )
        .await;
        let newer_first = round % 2 == 0;
        let mut newer = None;
        if newer_first {
            newer = Some(fire(&host, now - 1_000, &format!("newer-{round}")).await.0);
        }
        a.kill();
        b.signal("CONT");
        if !newer_first {
            newer = Some(fire(&host, now - 1_000, &format!("newer-{round}")).await.0);
        }
        let newer = newer.unwrap();
        for id in [older, newer] {
            eventually(Duration::from_secs(60), "both fires end", || async {
                let t = host.store.trigger_get(id).await.unwrap();
                matches!(
                    t.state.as_str(),
                    "succeeded" | "failed" | "skipped" | "cancelled"
                )
                .then_some(())
            })
            .await;
        }
        let runs = runs(&host).await;
        for pair in runs.windows(2) {
            let ((t1, _, end1), (t2, start2, _)) = (pair[0], pair[1]);
            assert!(
                end1 <= start2,
                "{policy}, round {round}: trigger {t2} started at {start2} while trigger {t1} ran until {end1}: {runs:?}"
            );
        }
        println!("{policy}, round {round}: {} runs, none at once", runs.len());
    }
    drop(b);
    ledger.stop().await;
}

db_test!(
    forbid_never_runs_two_at_once_through_a_killed_holder,
    workers = 2
);
async fn forbid_never_runs_two_at_once_through_a_killed_holder(db: Db) {
    no_two_runs_at_once_through_kills(db, "forbid").await;
}

db_test!(
    allow_with_one_in_flight_never_runs_two_through_a_killed_holder,
    workers = 2
);
async fn allow_with_one_in_flight_never_runs_two_through_a_killed_holder(db: Db) {
    no_two_runs_at_once_through_kills(db, "allow").await;
}

db_test!(
    replace_never_runs_two_at_once_through_a_killed_holder,
    workers = 2
);
async fn replace_never_runs_two_at_once_through_a_killed_holder(db: Db) {
    no_two_runs_at_once_through_kills(db, "replace").await;
}

/// Lease 30 s, heartbeat 7.5 s, poll 100 ms.
const FLAGS: [&str; 8] = [
    "--lease",
    "30s",
    "--heartbeat",
    "7500ms",
    "--poll",
    "100ms",
    "--concurrency",
    "2",
];

/// A host with job `long` (the gated guest, waiting at its gate after
/// one step) and one trigger of it, its gate held.
async fn gated_trigger(db: Db) -> (TestHost, Ledger, i64) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    host.group("slow", i64::MAX, 64 << 20, Duration::from_secs(300))
        .await;
    host.job(
        "long",
        "gated",
        "resource_group = \"slow\"\nconnectors = [\"gate\"]\n[params]\nsteps = 2\ngate_at = 1",
    )
    .await;
    let t = host.trigger("long", json!({})).await;
    ledger.hold_gate(t.id, 1).await;
    (host, ledger, t.id)
}

db_test!(
    a_killed_holders_trigger_is_taken_over_while_its_lease_still_runs,
    workers = 2
);
async fn a_killed_holders_trigger_is_taken_over_while_its_lease_still_runs(db: Db) {
    let (host, ledger, id) = gated_trigger(db).await;
    let mut a = Proc::serve("A", &host.url, host.dir.path(), &FLAGS);
    ledger.at_gate(id, 1).await;
    let b = Proc::serve("B", &host.url, host.dir.path(), &FLAGS);
    let held = host.store.trigger_get(id).await.unwrap();
    assert_eq!(held.lease_owner.as_deref(), Some("A"));
    a.kill();
    let killed_at = host.store.now_ms().await.unwrap();
    let lease_end = held.lease_until.unwrap();
    let started = eventually(Duration::from_secs(60), "B takes over", || async {
        let attempts = host.store.attempts_for(id).await.unwrap();
        attempts
            .iter()
            .find(|a| a.runner_id == "B")
            .map(|b| b.started_at)
    })
    .await;
    println!(
        "takeover after SIGKILL: {} ms (lease 30 s; A's lease ran until {} ms after the kill)",
        started - killed_at,
        lease_end - killed_at
    );
    assert!(
        started < lease_end,
        "B started at {started}, A's lease ran until {lease_end}: taken over on its session, not its lease"
    );
    // B's attempt has a gate of its own, open.
    let done = eventually(Duration::from_secs(60), "B finishes", || async {
        let t = host.store.trigger_get(id).await.unwrap();
        (t.state == "succeeded").then_some(t)
    })
    .await;
    assert_eq!((done.attempts, done.fencing_token), (2, 2));
    drop(b);
    ledger.stop().await;
}

db_test!(
    a_stopped_holder_keeps_its_leases_and_goes_on_when_continued,
    workers = 2
);
async fn a_stopped_holder_keeps_its_leases_and_goes_on_when_continued(db: Db) {
    let (host, ledger, id) = gated_trigger(db).await;
    let a = Proc::serve("A", &host.url, host.dir.path(), &FLAGS);
    ledger.at_gate(id, 1).await;
    // Stopped outside a transaction: on SQLite a stopped writer would keep
    // the one write lock.
    a.stop_outside_a_transaction(&host.store, &[id]).await;
    // While A is stopped its session is alive: a sweep sets nothing
    // free, however often it runs.
    for _ in 0..3 {
        let freed = host.store.expire_dead_holders("sweeper").await.unwrap();
        assert_eq!(freed, Vec::<i64>::new(), "A is stopped, not gone");
    }
    let t = host.store.trigger_get(id).await.unwrap();
    assert_eq!((t.lease_owner.as_deref(), t.fencing_token), (Some("A"), 1));
    a.signal("CONT");
    ledger.open_gate(id, 1).await;
    let done = eventually(Duration::from_secs(60), "A finishes", || async {
        let t = host.store.trigger_get(id).await.unwrap();
        (t.state == "succeeded").then_some(t)
    })
    .await;
    assert_eq!(
        (done.attempts, done.fencing_token),
        (1, 1),
        "A went on unharmed"
    );
    ledger.stop().await;
}

db_test!(a_lease_ends_early_only_when_its_owners_lock_is_gone);
/// The rule itself, in one process: a lease whose owner's lock (session
/// or file) is held is never ended early; let go, it is ended by the next
/// sweep, and the stale holder's writes are refused as after any takeover.
async fn a_lease_ends_early_only_when_its_owners_lock_is_gone(db: Db) {
    let host = TestHost::new(db).await;
    host.job("solo", "noop", "").await;
    let t = host.trigger("solo", json!({})).await;
    let owner = host
        .store
        .liveness_hold("A")
        .await
        .unwrap()
        .expect("a session");
    let claims = host
        .store
        .claim(&ClaimRequest {
            owner: "A",
            lease_ms: 3_600_000,
            limit: 1,
            retry_slots: 0,
            now: None,
        })
        .await
        .unwrap();
    let lease: LeaseRef = claims[0].lease("A");
    assert_eq!(lease.trigger_id, t.id);
    assert!(
        host.store
            .expire_dead_holders("B")
            .await
            .unwrap()
            .is_empty()
    );
    // A second hold of the same name while A's session lives is not
    // granted (that session covers the name).
    assert!(host.store.liveness_hold("A").await.unwrap().is_none());
    // A's process is gone: its session closes.
    drop(owner);
    let freed = eventually(Duration::from_secs(30), "A's session to end", || async {
        let freed = host.store.expire_dead_holders("B").await.unwrap();
        (!freed.is_empty()).then_some(freed)
    })
    .await;
    assert_eq!(freed, vec![t.id]);
    // B's claim takes the trigger over with the next token.
    let taken = host
        .store
        .claim(&ClaimRequest {
            owner: "B",
            lease_ms: 60_000,
            limit: 1,
            retry_slots: 0,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(taken[0].fencing_token.get(), 2);
    let refused = host
        .store
        .checkpoint_save(&lease, b"stale")
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::LeaseLost { .. }), "{refused}");
}
