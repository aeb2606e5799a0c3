//! Manual handling as a state: an exception ticket that owns a trigger
//! holds it in `manual` — no claim takes it, no retry time wakes it — and
//! resolving the ticket moves it on once, in the resolution's transaction
//! (`host/src/store/held.rs`, the state machine in `model/state.rs`).

use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::{Proc, eventually, eventually_or};
use crate::{Db, TestHost};
use paddock::effects::EffectGateway;
use paddock::model::TriggerState;
use paddock::store::prelude::*;
use paddock::store::{ExceptionRecord, StatusQuery, TriggerRecord};
use serde_json::{Value, json};
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;

const PAY: &str =
    "connectors = [\"ledger\"]\n[retry]\nmax_attempts = 3\nbackoff = \"10ms\"\njitter = false\n";

/// A trigger of job `pay` whose charge under `key` went to the ledger,
/// which committed it and lost its answer: through a connector that cannot
/// be queried by key, its outcome is unknown and a ticket opens in the
/// attempt — whose end would have been a retry.
async fn held_trigger(db: Db, key: &str) -> (TestHost, Ledger, TriggerRecord, ExceptionRecord) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), false),
    )
    .await;
    host.job("pay", "effector", PAY).await;
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-M", "charge", key, 5))
        .await;
    host.runner("A", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    let tickets = host.store.exceptions_list(Some("open")).await.unwrap();
    assert_eq!(tickets.len(), 1, "{tickets:?}");
    assert_eq!(
        (tickets[0].kind.as_str(), tickets[0].trigger_id),
        ("unknown_outcome", Some(t.id))
    );
    (host, ledger, t, tickets.into_iter().next().unwrap())
}

fn paddock(url: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(["--database-url", url])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

db_test!(
    a_ticket_holds_its_running_trigger_in_manual_past_its_retry_time,
    workers = 4
);
async fn a_ticket_holds_its_running_trigger_in_manual_past_its_retry_time(db: Db) {
    let (host, ledger, t, ticket) = held_trigger(db, "order-m1/charge").await;
    // The attempt's end would have been a retry: it is held instead.
    assert_eq!(t.state, TriggerState::Manual, "{t:?}");
    assert_eq!(t.error_class.as_deref(), Some("unknown"));
    assert_eq!(t.finished_at, None);
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    assert_eq!(attempts.len(), 1);

    // An hour past its retry time on the database's clock, no claim takes
    // it; a runner finds nothing to do.
    let now = host.store.now_ms().await.unwrap();
    assert!(t.next_run_at <= now + HOUR_MS);
    let claimed = host
        .store
        .trigger_claim_batch("B", 30_000, 10, Some(now + HOUR_MS))
        .await
        .unwrap();
    assert!(claimed.is_empty(), "{claimed:?}");
    host.runner("C", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let still = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (still.state, still.fencing_token),
        (TriggerState::Manual, t.fencing_token)
    );
    assert_eq!(host.store.attempts_for(t.id).await.unwrap().len(), 1);

    // `trigger show` names the ticket; approval is not the way out.
    let (ok, shown) = paddock(&host.url, &["trigger", "show", &t.id.to_string()]);
    assert!(ok, "{shown}");
    assert!(shown.contains("state         manual"), "{shown}");
    assert!(
        shown.contains(&format!(
            "held by exception {} (unknown_outcome)",
            ticket.id
        )),
        "{shown}"
    );
    let refused = host
        .store
        .trigger_approve(t.id, "token:alice", "let it run")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("held by exception {}", ticket.id)),
        "{refused}"
    );

    // Status, metrics and the conservation report count it as manual:
    // not backlog, and every trigger in exactly one state.
    let report = host
        .store
        .status_report(&StatusQuery {
            window_ms: HOUR_MS,
            ..Default::default()
        })
        .await
        .unwrap();
    let line = report.groups.iter().find(|g| g.manual > 0).unwrap();
    assert_eq!((line.manual, line.backlog, line.open_tickets), (1, 0, 1));
    let (ok, status) = paddock(&host.url, &["status", "--format", "json"]);
    assert!(ok, "{status}");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert!(
        status["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["manual"] == 1),
        "{status}"
    );
    let metrics = host.store.metrics_snapshot().await.unwrap();
    let manual: i64 = metrics
        .triggers
        .iter()
        .filter(|g| g.state == "manual")
        .map(|g| g.count)
        .sum();
    assert_eq!(manual, 1, "{:?}", metrics.triggers);
    let (ok, books) = paddock(&host.url, &["report", "conservation", "--format", "json"]);
    assert!(ok, "the books balance: {books}");
    let books: Value = serde_json::from_str(&books).unwrap();
    assert_eq!(books["differences"], json!([]), "{books}");
    assert_eq!(books["books"]["triggers"], 1);
    assert!(
        books["books"]["by_state"]
            .as_array()
            .unwrap()
            .contains(&json!(["manual", 1])),
        "{books}"
    );
    assert_eq!(ledger.stat("applied").await, 1);
    ledger.stop().await;
}

db_test!(
    resolving_the_ticket_moves_its_trigger_on_once_to_a_new_attempt,
    workers = 4
);
async fn resolving_the_ticket_moves_its_trigger_on_once_to_a_new_attempt(db: Db) {
    let (host, ledger, t, ticket) = held_trigger(db, "order-m2/charge").await;
    assert_eq!(t.state, TriggerState::Manual);
    // A proposal moves nothing; the approval resolves the ticket and, in
    // the same transaction, makes the trigger due again.
    host.store
        .exception_resolve(ticket.id, "resend", "token:alice", "ledger shows no charge")
        .await
        .unwrap();
    assert_eq!(
        host.store.trigger_get(t.id).await.unwrap().state,
        TriggerState::Manual
    );
    let done = host
        .store
        .exception_approve(ticket.id, "token:bob", "checked the console")
        .await
        .unwrap();
    assert_eq!(done.state, "resolved");
    let due = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (due.state, due.fencing_token),
        (TriggerState::Pending, t.fencing_token)
    );
    assert!(due.next_run_at <= host.store.now_ms().await.unwrap());
    let entry = host.store.audit_list().await.unwrap().pop().unwrap();
    assert_eq!(
        (entry.actor.as_str(), entry.action.as_str()),
        ("token:bob", "exception.approve")
    );
    let detail: Value = serde_json::from_str(&entry.detail).unwrap();
    assert_eq!(
        detail["trigger"],
        json!({"id": t.id, "from": "manual", "to": "pending"})
    );
    assert_eq!(detail["reason"], "checked the console");

    // A second resolution is refused and moves nothing.
    for again in [
        host.store
            .exception_resolve(ticket.id, "mark_failed", "token:carol", "again")
            .await,
        host.store
            .exception_approve(ticket.id, "token:carol", "again")
            .await,
    ] {
        assert!(again.is_err(), "{again:?}");
    }
    let after = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!((after.state, after.updated_at), (due.state, due.updated_at));

    // The new attempt takes token + 1; the resend under the same key is
    // answered from the ledger's record, applied once.
    host.runner("A", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let ended = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(ended.state, TriggerState::Succeeded, "{ended:?}");
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1].fencing_token, t.fencing_token + 1);
    assert_eq!(ledger.stat("applied").await, 1);
    ledger.stop().await;
}

db_test!(a_ticket_marked_failed_fails_its_trigger_once, workers = 4);
async fn a_ticket_marked_failed_fails_its_trigger_once(db: Db) {
    let (host, ledger, t, ticket) = held_trigger(db, "order-m3/charge").await;
    host.store
        .exception_resolve(ticket.id, "mark_failed", "token:alice", "refunded by hand")
        .await
        .unwrap();
    let failed = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(failed.state, TriggerState::Failed);
    assert!(failed.finished_at.is_some());
    assert!(
        host.store
            .exception_resolve(ticket.id, "mark_failed", "token:alice", "again")
            .await
            .is_err()
    );
    let after = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (after.state, after.updated_at, after.finished_at),
        (failed.state, failed.updated_at, failed.finished_at)
    );
    let (ok, books) = paddock(&host.url, &["report", "conservation", "--format", "json"]);
    assert!(ok, "{books}");
    ledger.stop().await;
}

db_test!(
    a_ticket_opened_by_recovery_holds_a_trigger_waiting_to_retry,
    workers = 4
);
/// The recovery scanner opens a ticket for a trigger between attempts
/// (`retry_wait`): the ticket's transaction holds it at once.
async fn a_ticket_opened_by_recovery_holds_a_trigger_waiting_to_retry(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let key = "order-m4/charge";
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), true),
    )
    .await;
    host.job("pay", "effector", PAY).await;
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-M4", "charge", key, 5))
        .await;
    let now = host.store.now_ms().await.unwrap();
    let claim = host
        .store
        .trigger_claim_batch("A", 30_000, 1, None)
        .await
        .unwrap();
    host.runner("A", Duration::from_secs(30))
        .execute(claim.into_iter().next().unwrap())
        .await;
    // Queryable, so no ticket yet: the next attempt would query first.
    let waiting = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(waiting.state, TriggerState::RetryWait);
    assert!(host.store.exceptions_list(None).await.unwrap().is_empty());

    // The connector can no longer be asked: recovery tickets the effect.
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), false),
    )
    .await;
    let report = EffectGateway::new(host.store.clone())
        .recover(10)
        .await
        .unwrap();
    assert_eq!(report.tickets, 1, "{report:?}");
    let held = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (held.state, held.fencing_token),
        (TriggerState::Manual, waiting.fencing_token)
    );
    assert!(
        host.store
            .trigger_claim_batch("B", 30_000, 10, Some(now + HOUR_MS))
            .await
            .unwrap()
            .is_empty()
    );
    let ticket = &host.store.exceptions_list(Some("open")).await.unwrap()[0];
    host.store
        .exception_resolve(ticket.id, "mark_failed", "token:alice", "written off")
        .await
        .unwrap();
    assert_eq!(
        host.store.trigger_get(t.id).await.unwrap().state,
        TriggerState::Failed
    );
    ledger.stop().await;
}

db_test!(
    a_ticket_holds_its_trigger_across_two_serve_processes_until_it_is_resolved,
    workers = 2
);
/// Two `paddock serve` processes on one database: the ticket holds its
/// trigger while both keep claiming other work past its retry time, and
/// the resolution (proposed by one person, approved by another) gives it
/// one new attempt at token + 1.
async fn a_ticket_holds_its_trigger_across_two_serve_processes_until_it_is_resolved(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let key = "order-m5/charge";
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), false),
    )
    .await;
    host.job("pay", "effector", PAY).await;
    host.job("tick", "noop", "").await;
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-M5", "charge", key, 5))
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
    let a = Proc::serve("A", &host.url, host.dir.path(), &flags);
    let b = Proc::serve("B", &host.url, host.dir.path(), &flags);
    let logs = || format!("--- A ---\n{}\n--- B ---\n{}", a.stderr(), b.stderr());
    let held = eventually_or(
        Duration::from_secs(60),
        "the ticket holds the trigger",
        logs,
        || async {
            let tr = host.store.trigger_get(t.id).await.unwrap();
            (tr.state == TriggerState::Manual).then_some(tr)
        },
    )
    .await;
    // Once the database's clock is past the retry time, both processes
    // claim and finish fresh work; neither touches the held trigger.
    eventually(Duration::from_secs(10), "the retry time passes", || async {
        (host.store.now_ms().await.unwrap() > held.next_run_at).then_some(())
    })
    .await;
    let mut ticks = Vec::new();
    for _ in 0..4 {
        ticks.push(host.trigger("tick", json!({})).await.id);
    }
    eventually_or(
        Duration::from_secs(60),
        "the fresh work is done",
        logs,
        || async {
            for id in &ticks {
                if host.store.trigger_get(*id).await.unwrap().state != TriggerState::Succeeded {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let still = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (still.state, still.fencing_token),
        (TriggerState::Manual, held.fencing_token)
    );
    assert_eq!(host.store.attempts_for(t.id).await.unwrap().len(), 1);

    let ticket = &host.store.exceptions_list(Some("open")).await.unwrap()[0];
    host.store
        .exception_resolve(
            ticket.id,
            "resend",
            "token:alice",
            "no charge at the ledger",
        )
        .await
        .unwrap();
    host.store
        .exception_approve(ticket.id, "token:bob", "agreed")
        .await
        .unwrap();
    let done = eventually_or(
        Duration::from_secs(60),
        "the new attempt succeeds",
        logs,
        || async {
            let tr = host.store.trigger_get(t.id).await.unwrap();
            (tr.state == TriggerState::Succeeded).then_some(tr)
        },
    )
    .await;
    assert_eq!(done.fencing_token, held.fencing_token + 1);
    assert_eq!(host.store.attempts_for(t.id).await.unwrap().len(), 2);
    assert_eq!(ledger.stat("applied").await, 1);
    drop((a, b));
    ledger.stop().await;
}
