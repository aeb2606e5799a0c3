//! The side-effect gateway against the real reference downstream: duplicate
//! delivery, the stale writer, key conflicts, unknowns at drain, and the
//! retry storm. One trigger per ledger resource, because the ledger compares
//! fencing tokens per resource while Paddock's are per trigger.

use crate::ledger::{Ledger, connector, effect, put};
use crate::{Db, TestHost};
use paddock::effects::EffectGateway;
use paddock::lease::{Runner, RunnerConfig};
use paddock::store::NewTrigger;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;

fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

async fn scalar(host: &TestHost, sql: &'static str) -> i64 {
    sqlx::query_scalar(host.store.sql(sql))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

/// A host with the reference ledger as connector `ledger` (queryable, tokens
/// compared, calls time out after `timeout`) and job `pay` (the effector
/// guest) with `manifest` (grants and retry policy, from [`job_toml`]).
async fn pay_setup(db: Db, timeout: Duration, manifest: &str) -> (TestHost, Ledger) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(&host.store, connector("ledger", &ledger, timeout, true)).await;
    host.job("pay", "effector", manifest).await;
    (host, ledger)
}

fn job_toml(connectors: &[&str], max_attempts: u32, backoff: &str, jitter: bool) -> String {
    format!(
        "connectors = {connectors:?}\n[retry]\nmax_attempts = {max_attempts}\nbackoff = \"{backoff}\"\njitter = {jitter}\n"
    )
}

db_test!(
    duplicate_delivery_performs_one_effect_and_the_second_attempt_replays_after_querying,
    workers = 4
);
async fn duplicate_delivery_performs_one_effect_and_the_second_attempt_replays_after_querying(
    db: Db,
) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["ledger"], 3, "10ms", true),
    )
    .await;
    let key = "order-1/reserve/v1";
    let now = host.store.now_ms().await.unwrap();
    let new = NewTrigger {
        job_id: "pay".into(),
        plan_version: None,
        origin: paddock::model::TriggerOrigin::Schedule,
        scheduled_at: Some(now - 1000),
        partition_key: None,
        request_key: None,
        params: effect("ledger", "RES-1", "reserve", key, 5),
        requested_by: None,
    };
    // Four re-scans create the same trigger: the plan key absorbs three.
    let mut inserted = 0;
    for _ in 0..4 {
        inserted += host.store.trigger_create(&new).await.unwrap().1 as i32;
    }
    assert_eq!(inserted, 1);
    // The first claimer's response is lost after the downstream commits.
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let a = host
        .store
        .trigger_claim_batch("A", 30_000, 10, None)
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    // Woken three times while A holds the lease: nothing to claim.
    for _ in 0..3 {
        assert!(
            host.store
                .trigger_claim_batch("B", 30_000, 10, None)
                .await
                .unwrap()
                .is_empty()
        );
    }
    let sa = host
        .runner("A", Duration::from_secs(30))
        .execute(a.into_iter().next().unwrap())
        .await;
    assert_eq!(
        sa.error_class.as_deref(),
        Some("unknown"),
        "{sa:?} {:?}",
        host.store
            .trigger_get(sa.trigger_id)
            .await
            .unwrap()
            .error_message
    );
    assert_eq!(
        sa.outcome,
        paddock::model::RunOutcome::Committed(paddock::model::TriggerState::RetryWait)
    );
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, "unknown");
    assert_eq!(ledger.stat("applied").await, 1, "the downstream committed");

    // The second claim queries by key and replays; nothing is resent.
    let b = host
        .store
        .trigger_claim_batch("B", 30_000, 10, Some(now + HOUR_MS))
        .await
        .unwrap();
    assert_eq!(b.len(), 1);
    let sb = host
        .runner("B", Duration::from_secs(30))
        .execute(b.into_iter().next().unwrap())
        .await;
    assert!(sb.outcome.committed(), "{sb:?}");
    let t = host.store.trigger_get(sb.trigger_id).await.unwrap();
    assert_eq!(t.state, "succeeded");
    assert_eq!(result(&t)["outcome"], "replayed");
    assert_eq!(host.count("triggers").await, 1);
    assert_eq!(host.count("attempts").await, 2);
    assert_eq!(scalar(&host, "SELECT count(*) FROM effects").await, 1);
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.state.as_str(), rec.sends), ("succeeded", 1));
    assert_eq!(rec.resolved_by.as_deref(), Some("query"));
    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 1);
    assert_eq!(stats["requests_received"], 1, "{stats}");
    assert_eq!(stats["replayed"], 0);
    ledger.stop().await;
}

db_test!(
    a_stale_writer_is_refused_by_the_downstream_and_by_the_host,
    workers = 4
);
async fn a_stale_writer_is_refused_by_the_downstream_and_by_the_host(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(20), true),
    )
    .await;
    host.job(
        "release",
        "effector",
        &job_toml(&["ledger"], 3, "10ms", true),
    )
    .await;
    let key = "RES-900/release/v1";
    let t = host
        .trigger("release", effect("ledger", "RES-900", "release", key, 10))
        .await;
    // Bring the trigger to token 76 so the first claim holds 77.
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET fencing_token = 76 WHERE id = ?"),
    )
    .bind(t.id)
    .execute(host.store.pool())
    .await
    .unwrap();
    ledger.hold(key, 77).await;
    let a = host
        .store
        .trigger_claim_batch("A", 30_000, 1, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(a.fencing_token, 77);
    let runner_a = host.runner("A", Duration::from_secs(30));
    let attempt_a = tokio::spawn(async move { runner_a.execute(a).await });
    ledger.wait_held(key, 1).await;

    // 77's lease expires; 78 queries the key, finds nothing, sends.
    let now = host.store.now_ms().await.unwrap();
    let b = host
        .store
        .trigger_claim_batch("B", 30_000, 1, Some(now + HOUR_MS))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(b.fencing_token, 78);
    let sb = host.runner("B", Duration::from_secs(30)).execute(b).await;
    assert!(sb.outcome.committed(), "{sb:?}");
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "succeeded");
    assert_eq!(result(&t)["outcome"], "done");
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.state.as_str(), rec.fencing_token, rec.sends),
        ("succeeded", 78, 2)
    );

    // 77's delayed request arrives now.
    ledger.release(key).await;
    let sa = attempt_a.await.unwrap();
    assert_eq!(sa.outcome, paddock::model::RunOutcome::LeaseLost, "{sa:?}");
    assert!(!sa.outcome.committed());

    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 1, "exactly one release: {stats}");
    assert_eq!(stats["stale_token_rejections"], 1);
    assert_eq!(ledger.resource("RES-900").await["balance"], 110);
    assert_eq!(
        host.store
            .counter("downstream_stale_token_rejections")
            .await
            .unwrap(),
        1
    );
    assert_eq!(host.store.counter("stale_effect_writes").await.unwrap(), 1);
    assert!(host.store.counter("stale_token_rejections").await.unwrap() >= 1);
    // The record still says what 78 did.
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.state.as_str(), rec.fencing_token), ("succeeded", 78));
    // `paddock report incident`: 77's effect was in flight when 78 took
    // over, found not committed by 78's query and re-sent — an unknown
    // outcome resolved succeeded, which comes before the stale writes in
    // the report's order; 77's refused outcome write is in its facts.
    let everything = paddock::store::ReportQuery {
        since: 0,
        until: i64::MAX,
        tenant: None,
        group: None,
    };
    let facts = host.store.incident_facts(&everything).await.unwrap();
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert!(facts[0].stale_refusals >= 1, "{facts:?}");
    assert_eq!(
        paddock::model::report::classify(&facts[0]),
        paddock::model::report::IncidentClass::Unknown(
            paddock::model::report::Resolution::Succeeded
        ),
        "{facts:?}"
    );
    ledger.stop().await;
}

db_test!(
    a_params_digest_conflict_under_one_key_is_rejected_ticketed_and_nothing_is_sent,
    workers = 4
);
async fn a_params_digest_conflict_under_one_key_is_rejected_ticketed_and_nothing_is_sent(db: Db) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["ledger"], 3, "10ms", true),
    )
    .await;
    let key = "order-7/charge/v1";
    host.trigger("pay", effect("ledger", "RES-7", "charge", key, 5))
        .await;
    let runner = host.runner("A", Duration::from_secs(30));
    runner.run_until_idle().await.unwrap();
    assert_eq!(ledger.stat("requests_received").await, 1);

    let t2 = host
        .trigger("pay", effect("ledger", "RES-7", "charge", key, 6))
        .await;
    runner.run_until_idle().await.unwrap();
    let t2 = host.store.trigger_get(t2.id).await.unwrap();
    // Failed, but its ticket holds it for a person's answer.
    assert_eq!(t2.state, "manual");
    assert_eq!(t2.error_class.as_deref(), Some("permanent"));
    assert!(
        t2.error_message
            .as_deref()
            .unwrap()
            .contains("key-conflict"),
        "{t2:?}"
    );
    assert_eq!(ledger.stat("requests_received").await, 1, "nothing sent");
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.state.as_str(), rec.sends), ("succeeded", 1));

    let tickets = host.store.exceptions_list(Some("open")).await.unwrap();
    assert_eq!(tickets.len(), 1);
    let ticket = &tickets[0];
    assert_eq!(ticket.kind, "key_conflict");
    assert_eq!(ticket.effect_key.as_deref(), Some(key));
    let evidence: Value = serde_json::from_str(&ticket.evidence).unwrap();
    assert_eq!(evidence["effect"]["state"], "succeeded");
    assert_eq!(evidence["trigger"]["id"], t2.id);
    assert!(evidence["detail"]["presented_digest"].is_string());
    // `paddock report incident`: the first trigger ran cleanly (not an
    // incident), the second is a params conflict sent to people.
    let everything = paddock::store::ReportQuery {
        since: 0,
        until: i64::MAX,
        tenant: None,
        group: None,
    };
    let facts = host.store.incident_facts(&everything).await.unwrap();
    let incident = paddock::model::report::Incident::of(&facts);
    assert_eq!(
        (
            incident.affected,
            incident.completed,
            incident.params_conflicts,
            incident.to_people
        ),
        (1, 0, 1, 1),
        "{facts:?}"
    );

    // Resolution needs an actor and a reason, writes new facts and an audit
    // entry, and happens once.
    assert!(
        host.store
            .exception_resolve(ticket.id, "dismiss", "alice", " ")
            .await
            .is_err()
    );
    assert!(
        host.store
            .exception_resolve(ticket.id, "mark_failed", "alice", "no")
            .await
            .is_err()
    );
    let audit_before = host.count("audit_log").await;
    let done = host
        .store
        .exception_resolve(
            ticket.id,
            "dismiss",
            "alice",
            "client bug: reused key for a new amount",
        )
        .await
        .unwrap();
    assert_eq!(done.state, "resolved");
    assert_eq!(done.resolved_by.as_deref(), Some("alice"));
    assert_eq!(
        done.before_digest, done.after_digest,
        "dismiss changes no effect"
    );
    assert_eq!(host.count("audit_log").await, audit_before + 1);
    assert_eq!(host.store.trigger_get(t2.id).await.unwrap().state, "failed");
    let last = host.store.audit_list().await.unwrap().pop().unwrap();
    assert_eq!(
        (last.actor.as_str(), last.action.as_str()),
        ("alice", "exception.resolve")
    );
    assert!(
        host.store
            .exception_resolve(ticket.id, "dismiss", "bob", "again")
            .await
            .is_err()
    );
    ledger.stop().await;
}

db_test!(a_job_may_only_call_connectors_it_is_granted, workers = 4);
async fn a_job_may_only_call_connectors_it_is_granted(db: Db) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["other"], 1, "10ms", true),
    )
    .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-1", "reserve", "k-1", 1))
        .await;
    host.runner("A", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "failed");
    assert!(t.error_message.unwrap().contains("not-granted"));
    assert_eq!(ledger.stat("requests_received").await, 0);
    ledger.stop().await;
}

db_test!(
    unknowns_at_drain_are_resolved_by_key_after_restart_without_duplicates,
    workers = 4
);
async fn unknowns_at_drain_are_resolved_by_key_after_restart_without_duplicates(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    // A lost answer is lost at once (the ledger resets the connection), so
    // these wait long; the held requests are given up after `held`'s
    // timeout, which only they pay.
    let long = Duration::from_secs(60);
    put(&host.store, connector("ledger", &ledger, long, true)).await;
    put(&host.store, connector("blind", &ledger, long, false)).await;
    put(
        &host.store,
        connector("held", &ledger, Duration::from_secs(2), true),
    )
    .await;
    host.job(
        "pay",
        "effector",
        &job_toml(&["ledger", "blind", "held"], 3, "10ms", true),
    )
    .await;
    let key = |i: usize| format!("drain-{i}/reserve/v1");
    for i in 0..10 {
        let conn = match i {
            // committed downstream, the answer lost
            0..=6 => "ledger",
            // never committed: held at the ledger until the host gives up
            // (the first attempt's token only; a resend goes through)
            7 | 8 => "held",
            // committed, the answer lost, and the connector cannot be asked
            _ => "blind",
        };
        if (7..=8).contains(&i) {
            ledger.hold(&key(i), 1).await;
        } else {
            ledger
                .fault(json!({"drop_response_after_commit": 1,
                              "scope": {"idempotency_key": crate::sent_key(&key(i))}}))
                .await;
        }
        host.trigger(
            "pay",
            effect(conn, &format!("RES-{i}"), "reserve", &key(i), 5),
        )
        .await;
    }
    // Ten effects in flight when the host stops waiting for them.
    let claims = host
        .store
        .trigger_claim_batch("A", 30_000, 10, None)
        .await
        .unwrap();
    assert_eq!(claims.len(), 10);
    let runner_a = host.runner("A", Duration::from_secs(30));
    let mut running = tokio::task::JoinSet::new();
    for c in claims {
        let r = runner_a.clone();
        running.spawn(async move { r.execute(c).await });
    }
    while let Some(s) = running.join_next().await {
        let s = s.unwrap();
        assert_eq!(s.error_class.as_deref(), Some("unknown"), "{s:?}");
    }
    assert_eq!(
        scalar(
            &host,
            "SELECT count(*) FROM effects WHERE state = 'unknown'"
        )
        .await,
        10
    );
    drop(runner_a);
    // Each committed one was committed before its answer was dropped; the
    // held ones cannot land while held.
    assert_eq!(ledger.stat("applied").await, 8);

    // Restart: a new gateway's recovery scan resolves by key, sends nothing.
    let gateway = EffectGateway::new(host.store.clone());
    let received = ledger.stat("requests_received").await;
    let report = gateway.recover(100).await.unwrap();
    assert_eq!(
        (
            report.succeeded,
            report.not_found,
            report.tickets,
            report.undecided
        ),
        (7, 2, 1, 0),
        "{report:?}"
    );
    assert_eq!(ledger.stat("requests_received").await, received);
    let now = host.store.now_ms().await.unwrap();
    let claims = host
        .store
        .trigger_claim_batch("B", 30_000, 10, Some(now + HOUR_MS))
        .await
        .unwrap();
    assert_eq!(claims.len(), 9, "the ticket holds its trigger");
    let runner_b = Runner::with_effects(
        host.store.clone(),
        host.sandbox.clone(),
        RunnerConfig {
            runner_id: "B".into(),
            ..RunnerConfig::default()
        },
        gateway,
    );
    let mut running = tokio::task::JoinSet::new();
    for c in claims {
        let r = runner_b.clone();
        running.spawn(async move { r.execute(c).await });
    }
    while running.join_next().await.is_some() {}

    let mut outcomes = std::collections::BTreeMap::<String, i32>::new();
    for t in host.store.triggers_list(100).await.unwrap() {
        let label = match t.state.as_str() {
            "succeeded" => result(&t)["outcome"].as_str().unwrap().to_string(),
            other => format!("{other}/{}", t.error_class.unwrap_or_default()),
        };
        *outcomes.entry(label).or_default() += 1;
    }
    let expected: std::collections::BTreeMap<String, i32> = [
        ("replayed".to_string(), 7),
        ("done".to_string(), 2),
        ("manual/unknown".to_string(), 1),
    ]
    .into();
    assert_eq!(outcomes, expected);
    for i in 0..7 {
        let rec = host
            .store
            .effect_get(crate::TENANT, &key(i))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((rec.state.as_str(), rec.sends), ("succeeded", 1), "{i}");
        assert_eq!(rec.resolved_by.as_deref(), Some("recovery"));
    }
    for i in 7..9 {
        let rec = host
            .store
            .effect_get(crate::TENANT, &key(i))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((rec.state.as_str(), rec.sends), ("succeeded", 2), "{i}");
    }
    let rec = host
        .store
        .effect_get(crate::TENANT, &key(9))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.state.as_str(), rec.sends), ("unknown", 1));
    let tickets = host.store.exceptions_list(Some("open")).await.unwrap();
    assert_eq!(tickets.len(), 1);
    assert_eq!(
        (tickets[0].kind.as_str(), tickets[0].effect_key.clone()),
        ("unknown_outcome", Some(key(9)))
    );
    // `paddock report incident` over this run: 10 affected, each an
    // unknown outcome — 9 resolved succeeded (7 found by the recovery
    // scanner, 2 found not committed and resent: `unknown_at` survives the
    // resend), 1 still unknown and sent to people.
    let everything = paddock::store::ReportQuery {
        since: 0,
        until: i64::MAX,
        tenant: None,
        group: None,
    };
    let facts = host.store.incident_facts(&everything).await.unwrap();
    let incident = paddock::model::report::Incident::of(&facts);
    assert_eq!(
        (
            incident.affected,
            incident.unknown.total,
            incident.to_people
        ),
        (10, 10, 1),
        "{facts:?}"
    );
    assert_eq!(
        (incident.unknown.succeeded, incident.unknown.still_unknown),
        (9, 1),
        "{facts:?}"
    );
    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 10, "{stats}");
    assert_eq!(stats["replayed"], 0, "no duplicate at the downstream");
    assert_eq!(
        stats["requests_received"], 12,
        "only the two uncommitted were resent"
    );
    for i in 0..10 {
        assert_eq!(ledger.resource(&format!("RES-{i}")).await["operations"], 1);
    }

    // A person decides the undecidable one: new facts plus an audit entry.
    // Marking an effect succeeded is high-risk, so it takes two people: one
    // proposes (nothing changes yet), the same person cannot approve it
    // (not even through a token), a second one does.
    let id = tickets[0].id;
    let proposed = host
        .store
        .exception_resolve(
            id,
            "mark_succeeded",
            "local:ops-alice",
            "ledger console shows RES-9 reserved",
        )
        .await
        .unwrap();
    assert_eq!(
        (proposed.state.as_str(), proposed.proposed_action.as_deref()),
        ("open", Some("mark_succeeded"))
    );
    let rec = host
        .store
        .effect_get(crate::TENANT, &key(9))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, "unknown", "a proposal changes no effect");
    let refused = host
        .store
        .exception_approve(id, "token:ops-alice", "looks right")
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("two-person rule"), "{refused}");
    let resolve_again = host
        .store
        .exception_resolve(id, "mark_failed", "local:ops-bob", "no")
        .await
        .unwrap_err()
        .to_string();
    assert!(resolve_again.contains("awaits approval"), "{resolve_again}");
    // Withdrawn, the ticket is open as before; proposed again, it waits again.
    let withdrawn = host
        .store
        .exception_reject(id, "local:ops-bob", "ask the ledger team first")
        .await
        .unwrap();
    assert_eq!(
        (
            withdrawn.state.as_str(),
            withdrawn.proposed_action.as_deref()
        ),
        ("open", None)
    );
    host.store
        .exception_resolve(
            id,
            "mark_succeeded",
            "local:ops-alice",
            "ledger team agrees",
        )
        .await
        .unwrap();
    // The second person approves with a token (the local command line
    // cannot: see tests/all/two_person.rs).
    let done = host
        .store
        .exception_approve(id, "token:ops-bob", "checked the console too")
        .await
        .unwrap();
    assert_eq!(
        (done.state.as_str(), done.resolved_by.as_deref()),
        ("resolved", Some("token:ops-bob"))
    );
    assert_ne!(done.before_digest, done.after_digest);
    let audit = host.store.audit_list().await.unwrap();
    let steps: Vec<_> = audit
        .iter()
        .filter(|e| e.subject == format!("exception:{id}"))
        .map(|e| (e.actor.as_str(), e.action.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("paddock", "exception.open"),
            ("local:ops-alice", "exception.propose"),
            ("local:ops-bob", "exception.reject"),
            ("local:ops-alice", "exception.propose"),
            ("token:ops-bob", "exception.approve")
        ]
    );
    let approval: Value = serde_json::from_str(&audit.last().unwrap().detail).unwrap();
    assert_eq!(approval["proposed_by"], "local:ops-alice", "{approval}");
    let rec = host
        .store
        .effect_get(crate::TENANT, &key(9))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, "succeeded");
    assert_eq!(rec.resolved_by, Some(format!("ticket:{}", tickets[0].id)));
    ledger.stop().await;
}

db_test!(
    a_compensation_is_a_new_effect_that_never_rewrites_the_original_and_cannot_recurse,
    workers = 4
);
async fn a_compensation_is_a_new_effect_that_never_rewrites_the_original_and_cannot_recurse(
    db: Db,
) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["ledger"], 3, "10ms", true),
    )
    .await;
    let runner = host.runner("A", Duration::from_secs(30));
    let original = "order-9/reserve/v1";
    host.trigger("pay", effect("ledger", "RES-C", "reserve", original, 30))
        .await;
    runner.run_until_idle().await.unwrap();
    assert_eq!(ledger.resource("RES-C").await["balance"], 70);
    let before = host
        .store
        .effect_get(crate::TENANT, original)
        .await
        .unwrap()
        .unwrap();

    // Nothing recorded under the key: nothing to compensate.
    let mut params = effect("ledger", "RES-C", "release", "order-0/undo", 30);
    params["compensates"] = json!("order-0/reserve/v1");
    let t0 = host.trigger("pay", params).await;
    // The compensation: its own key, referencing the original.
    let undo = "order-9/reserve/v1/undo";
    let mut params = effect("ledger", "RES-C", "release", undo, 30);
    params["compensates"] = json!(original);
    let t1 = host.trigger("pay", params).await;
    runner.run_until_idle().await.unwrap();
    let t0 = host.store.trigger_get(t0.id).await.unwrap();
    assert_eq!(t0.state, "failed");
    assert!(t0.error_message.unwrap().contains("nothing is recorded"));
    let t1 = host.store.trigger_get(t1.id).await.unwrap();
    assert_eq!(t1.state, "succeeded", "{t1:?}");
    assert_eq!(ledger.resource("RES-C").await["balance"], 100);
    let rec = host
        .store
        .effect_get(crate::TENANT, undo)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.compensates.as_deref(), Some(original));
    assert_eq!(rec.sends, 1, "its own budget");
    assert_eq!(
        host.store
            .effect_get(crate::TENANT, original)
            .await
            .unwrap()
            .unwrap(),
        before,
        "the original is never rewritten"
    );

    // A compensation cannot itself be compensated.
    let mut params = effect("ledger", "RES-C", "reserve", "order-9/undo/undo", 30);
    params["compensates"] = json!(undo);
    let t2 = host.trigger("pay", params).await;
    runner.run_until_idle().await.unwrap();
    let t2 = host.store.trigger_get(t2.id).await.unwrap();
    assert_eq!(t2.state, "failed");
    assert!(t2.error_message.unwrap().contains("cannot be compensated"));
    assert_eq!(ledger.stat("requests_received").await, 2);
    ledger.stop().await;
}

db_test!(
    a_downstream_record_for_another_operation_under_our_key_becomes_an_evidence_ticket,
    workers = 4
);
async fn a_downstream_record_for_another_operation_under_our_key_becomes_an_evidence_ticket(
    db: Db,
) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_millis(300), true),
    )
    .await;
    // A long backoff: the unknown attempt must not be retried (and resend
    // under our key) while the test sets up the foreign record.
    host.job("pay", "effector", &job_toml(&["ledger"], 3, "5m", true))
        .await;
    let key = "order-5/reserve/v1";
    // Our request is held until the host gives up on it, and stays held
    // (so it never lands) while another client uses the key.
    ledger.hold(key, 1).await;
    host.trigger("pay", effect("ledger", "RES-5", "reserve", key, 5))
        .await;
    let s = host
        .runner("A", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(s[0].error_class.as_deref(), Some("unknown"));
    // Another client uses the same key for another resource.
    assert_eq!(
        ledger
            .post_effect("RES-OTHER", "reserve", &crate::sent_key(key), 5)
            .await,
        200
    );

    let report = EffectGateway::new(host.store.clone())
        .recover(10)
        .await
        .unwrap();
    assert_eq!((report.tickets, report.succeeded), (1, 0), "{report:?}");
    let tickets = host.store.exceptions_list(Some("open")).await.unwrap();
    assert_eq!(tickets[0].kind, "evidence_conflict");
    let evidence: Value = serde_json::from_str(&tickets[0].evidence).unwrap();
    assert_eq!(
        evidence["detail"]["downstream_record"]["resource"],
        "RES-OTHER"
    );
    assert_eq!(evidence["effect"]["action"], "RES-5/reserve");
    let rec = host
        .store
        .effect_get(crate::TENANT, key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.state, "unknown",
        "not marked from someone else's record"
    );
    ledger.stop().await;
}

db_test!(
    the_background_recovery_scanner_settles_a_lost_answer_without_a_new_attempt,
    workers = 4
);
async fn the_background_recovery_scanner_settles_a_lost_answer_without_a_new_attempt(db: Db) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["ledger"], 3, "1m", false),
    )
    .await;
    let key = "order-3/reserve/v1";
    ledger
        .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(key)}}))
        .await;
    let t = host
        .trigger("pay", effect("ledger", "RES-3", "reserve", key, 5))
        .await;
    let ran = host
        .runner("A", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let recorded = host.store.effect_get(crate::TENANT, key).await.unwrap();
    assert_eq!(
        recorded.map(|r| r.state),
        Some(paddock::model::EffectState::Unknown),
        "the attempts: {ran:?}; their rows: {:?}",
        host.store.attempts_for(t.id).await
    );
    let guard =
        EffectGateway::new(host.store.clone()).spawn_recovery(Duration::from_millis(20), 100);
    crate::procs::eventually(Duration::from_secs(60), "the recovery scan", || async {
        let state = host
            .store
            .effect_get(crate::TENANT, key)
            .await
            .unwrap()
            .unwrap()
            .state;
        (state == "succeeded").then_some(())
    })
    .await;
    drop(guard);
    assert_eq!(ledger.stat("requests_received").await, 1, "nothing resent");
    ledger.stop().await;
}

db_test!(
    a_spent_budget_on_a_non_idempotent_connector_becomes_a_ticket_not_a_silent_failure,
    workers = 4
);
/// A downstream that does not honour idempotency keys may have half-applied
/// any "failed" send, so a spent send budget is a person's decision: an
/// exception ticket with the effect and the attempts. An idempotent
/// downstream's failure under the same load is just a failure.
async fn a_spent_budget_on_a_non_idempotent_connector_becomes_a_ticket_not_a_silent_failure(
    db: Db,
) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let mut blind = connector("blind", &ledger, Duration::from_secs(5), true);
    blind.idempotent = false;
    put(&host.store, blind).await;
    put(
        &host.store,
        connector("keyed", &ledger, Duration::from_secs(5), true),
    )
    .await;
    ledger
        .fault(json!({"error_rate": 1.0, "error_status": 503, "seed": 1}))
        .await;
    host.job(
        "pay",
        "effector",
        &job_toml(&["blind", "keyed"], 2, "10ms", false),
    )
    .await;
    let runner = host.runner("A", Duration::from_secs(30));

    let keyed = host
        .trigger("pay", effect("keyed", "RES-1", "charge", "k/keyed", 5))
        .await;
    runner.run_until_idle().await.unwrap();
    let keyed = host.store.trigger_get(keyed.id).await.unwrap();
    assert_eq!(keyed.state, "failed", "{:?}", keyed.error_message);
    assert!(host.store.exceptions_list(None).await.unwrap().is_empty());

    let blind = host
        .trigger("pay", effect("blind", "RES-2", "charge", "k/blind", 5))
        .await;
    runner.run_until_idle().await.unwrap();
    let blind = host.store.trigger_get(blind.id).await.unwrap();
    assert_eq!(blind.state, "manual", "held by its ticket");
    let message = blind.error_message.unwrap_or_default();
    assert!(
        message.contains("does not honour idempotency keys"),
        "{message}"
    );
    let tickets = host.store.exceptions_list(None).await.unwrap();
    assert_eq!(tickets.len(), 1, "{tickets:?}");
    let ticket = &tickets[0];
    assert_eq!(ticket.kind, "budget_exhausted");
    assert_eq!(ticket.effect_key.as_deref(), Some("k/blind"));
    let evidence: Value = serde_json::from_str(&ticket.evidence).unwrap();
    assert_eq!(evidence["effect"]["idempotency_key"], "k/blind");
    assert!(evidence["effect"]["sends"].as_i64().unwrap() >= 2);
    assert!(!evidence["attempts"].as_array().unwrap().is_empty());
    assert!(ticket.allowed_actions.contains("resend"));
    ledger.stop().await;
}

db_test!(
    an_operator_records_a_compensation_from_the_cli_and_a_runner_performs_it,
    workers = 4
);
/// `paddock effects compensate` through the real binary: an operator's
/// compensation is checked like a guest's, needs a reason, is
/// audited, and runs as an ordinary trigger with its own key and budget.
async fn an_operator_records_a_compensation_from_the_cli_and_a_runner_performs_it(db: Db) {
    let (host, ledger) = pay_setup(
        db,
        Duration::from_secs(5),
        &job_toml(&["ledger"], 3, "10ms", true),
    )
    .await;
    let runner = host.runner("A", Duration::from_secs(30));
    let original = "order-5/reserve/v1";
    host.trigger("pay", effect("ledger", "RES-OP", "reserve", original, 40))
        .await;
    runner.run_until_idle().await.unwrap();
    assert_eq!(ledger.resource("RES-OP").await["balance"], 60);
    let before = host
        .store
        .effect_get(crate::TENANT, original)
        .await
        .unwrap()
        .unwrap();

    let paddock = |actor: &str, original: &str, key: &str, reason: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
            .args(["--database-url", &host.url, "--actor", actor])
            .args(["effects", "compensate", original, "--job", "pay"])
            .args(["--key", key, "--action", "RES-OP/release"])
            .args(["--payload", &json!({"amount": 40}).to_string()])
            .args(["--reason", reason])
            .output()
            .unwrap()
    };
    let triggers_before = host.count("triggers").await;
    // Nothing recorded under that key: refused by name.
    let out = paddock("alice", "order-404/reserve", "order-404/undo", "refund");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing is recorded"));
    assert_eq!(host.count("triggers").await, triggers_before);

    let out = paddock("alice", original, "order-5/undo", "customer cancelled");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    runner.run_until_idle().await.unwrap();
    assert_eq!(ledger.resource("RES-OP").await["balance"], 100);
    let undo = host
        .store
        .effect_get(crate::TENANT, "order-5/undo")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (undo.state.as_str(), undo.compensates.as_deref()),
        ("succeeded", Some(original))
    );
    assert_eq!(
        host.store
            .effect_get(crate::TENANT, original)
            .await
            .unwrap()
            .unwrap(),
        before,
        "the original is never rewritten"
    );
    let audit = host.store.audit_list().await.unwrap();
    let entry = audit
        .iter()
        .find(|e| e.action == "effect.compensate")
        .expect("audited");
    assert_eq!(
        (entry.actor.as_str(), entry.subject.as_str()),
        (crate::two_person::os_actor().as_str(), original)
    );
    assert!(entry.detail.contains("customer cancelled"));
    assert!(
        entry.detail.contains("payload_digest") && !entry.detail.contains("amount"),
        "the payload is audited as a digest only: {}",
        entry.detail
    );

    // The compensation itself cannot be compensated.
    let out = paddock("alice", "order-5/undo", "order-5/undo/undo", "again");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be compensated"));
    ledger.stop().await;
}

db_test!(
    an_open_breaker_holds_the_groups_that_call_its_connector,
    workers = 4
);
/// A connector's breaker open in a process is a high-water mark for every
/// group whose work called it (their attempts would only be refused): the
/// governor holds their claims, names the connector, counts the hold once
/// however often it renews it, and a held group's trigger says why.
async fn an_open_breaker_holds_the_groups_that_call_its_connector(db: Db) {
    use paddock::lease::governor::{Gauges, govern_once};
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let mut c = connector("ledger", &ledger, Duration::from_secs(5), true);
    c.breaker_min_calls = 1;
    c.breaker_failure_rate = 0.5;
    c.breaker_open_ms = 600_000; // open for the whole test
    put(&host.store, c).await;
    host.job("pay", "effector", &job_toml(&["ledger"], 1, "10ms", false))
        .await;
    let runner = host.runner("A", Duration::from_secs(30));
    ledger
        .fault(json!({"error_rate": 1.0, "error_status": 503, "seed": 3}))
        .await;
    host.trigger("pay", effect("ledger", "RES-H1", "charge", "hold/1", 5))
        .await;
    runner.run_until_idle().await.unwrap();
    let gauges = Gauges {
        runner_id: "A".into(),
        effects: Some(runner.effects().clone()),
        hold_for: Duration::from_secs(60),
        ..Gauges::default()
    };
    let why = "breaker open on connector ledger";
    let round = govern_once(&host.store, &gauges).await.unwrap();
    assert_eq!(round.group_holds_moved, 1);
    assert_eq!(
        host.store.group_held("default").await.unwrap(),
        (Some(why.to_string()), 1)
    );
    // Held: the group's next trigger is not claimed, and says why.
    let next = host
        .trigger("pay", effect("ledger", "RES-H2", "charge", "hold/2", 5))
        .await;
    assert!(runner.run_until_idle().await.unwrap().is_empty());
    assert_eq!(
        host.store.wait_reason(&next).await.unwrap().unwrap(),
        format!("group default is held: {why}")
    );
    // Renewed by the next round, not counted again.
    let round = govern_once(&host.store, &gauges).await.unwrap();
    assert_eq!(round.group_holds_moved, 0);
    assert_eq!(host.store.group_held("default").await.unwrap().1, 1);
    ledger.stop().await;
}

db_test!(
    an_open_breaker_parks_the_trigger_until_it_half_opens_without_spending_an_attempt,
    workers = 4
);
/// While a connector's breaker is open, work that needs it is parked until
/// the breaker lets a probe through — it does not burn attempts. With a
/// budget of one attempt, a trigger refused by the open breaker would fail
/// at once if the refusal spent its attempt; parked, it waits and succeeds
/// once the downstream is back.
async fn an_open_breaker_parks_the_trigger_until_it_half_opens_without_spending_an_attempt(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let mut c = connector("ledger", &ledger, Duration::from_secs(5), true);
    c.breaker_min_calls = 1;
    c.breaker_failure_rate = 0.5;
    c.breaker_open_ms = 1_500;
    put(&host.store, c).await;
    host.job("pay", "effector", &job_toml(&["ledger"], 1, "10ms", false))
        .await;
    let runner = host.runner("A", Duration::from_secs(30));

    // The downstream fails: the first trigger's one send opens the breaker.
    ledger
        .fault(json!({"error_rate": 1.0, "error_status": 503, "seed": 3}))
        .await;
    let first = host
        .trigger("pay", effect("ledger", "RES-P1", "charge", "park/1", 5))
        .await;
    // The breaker opens after this moment, so it half-opens no earlier
    // than `before_open + open_ms`.
    let before_open = host.store.now_ms().await.unwrap();
    runner.run_until_idle().await.unwrap();
    assert_eq!(
        host.store.trigger_get(first.id).await.unwrap().state,
        "failed"
    );
    let sent_while_failing = ledger.stat("requests_received").await;

    // The second trigger meets the open breaker: parked, nothing sent.
    let parked = host
        .trigger("pay", effect("ledger", "RES-P2", "charge", "park/2", 5))
        .await;
    let summaries = runner.run_until_idle().await.unwrap();
    assert_eq!(summaries[0].outcome.to_string(), "parked", "{summaries:?}");
    let t = host.store.trigger_get(parked.id).await.unwrap();
    assert_eq!(t.state, "pending");
    // Whole milliseconds of two clocks: allow for their rounding only.
    assert!(
        t.next_run_at >= before_open + 1_500 - 5,
        "parked until the breaker half-opens, not retried at once \
         ({} < {before_open} + 1500)",
        t.next_run_at
    );
    assert_eq!(ledger.stat("requests_received").await, sent_while_failing);

    // The downstream recovers; after the open period the probe goes through.
    ledger.clear_faults().await;
    let done = crate::procs::eventually(Duration::from_secs(30), "the parked trigger", || async {
        runner.run_until_idle().await.unwrap();
        let t = host.store.trigger_get(parked.id).await.unwrap();
        matches!(t.state.as_str(), "succeeded" | "failed").then_some(t)
    })
    .await;
    assert_eq!(done.state, "succeeded", "{:?}", done.error_message);
    let attempts = host.store.attempts_for(parked.id).await.unwrap();
    let released = attempts
        .iter()
        .filter(|a| a.outcome.as_deref() == Some("released"))
        .count();
    assert!(released >= 1, "{attempts:?}");
    assert!(
        attempts
            .iter()
            .filter(|a| a.outcome.as_deref() == Some("released"))
            .all(|a| a.error_class.as_deref() == Some("circuit_open"))
    );
    assert_eq!(
        host.store
            .effect_get(crate::TENANT, "park/2")
            .await
            .unwrap()
            .unwrap()
            .sends,
        1,
        "one send: the probe"
    );
    ledger.stop().await;
}
