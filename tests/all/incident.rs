//! Issue 19's incident, end to end: 86 triggers of the `effector` guest,
//! run by real runners against the reference ledger, with the faults the
//! scenario names injected on purpose, and then `paddock report incident`
//! over the window. The unit-level check of the same numbers, built from
//! store calls, is `reports::the_incident_report_splits_86_…`.
//!
//! Runners: `A1` and `A2` are `paddock serve` processes (lease 8 s) whose
//! first attempts save a checkpoint and then stay busy before their effect
//! (`busy_attempts = 1`: CPU in bursts, the checkpoint saved again between
//! them); once every one is past its checkpoint, both processes are
//! SIGSTOPped — the partition — and their leases lapse. `B` is an
//! in-process `paddock::lease::Runner` that takes the lapsed triggers over
//! with token 2 and runs everything after. The recovery scanner is run
//! once, by the test, between the unknowns' first attempt and their retry
//! (their backoff is an hour, so the retry is claimed with the store's
//! clock two hours ahead).
//!
//! Each bucket is built, not hoped for. The report puts a trigger in the
//! first class that applies — params conflict, unknown outcome (still
//! unknown, then failed, then succeeded), stale writes refused, completed —
//! so each row says why its triggers stop where they do:
//!
//! | triggers | what happens | ends as | class |
//! |---:|---|---|---|
//! | 50 | A1 checkpoints step 1 and is busy, nothing in flight; A1 is stopped, B takes over (token 2) from the checkpoint, sends the effect once, succeeds; A1 is killed while stopped | succeeded by token 2; no write of token 1 after the stop, no effect of token 1 | completed |
//! | 18 | as above with A2; then A2 is continued: its first writes — a checkpoint save of the busy guest or the runner's heartbeat, whichever the machine runs first — are under token 1 and refused by the host (`stale_writes`); the closed gate stops the rest | succeeded by token 2, ≥ 1 refused write of token 1, no effect of token 1 | stale writes refused |
//! | 8 | B reserves 5; the ledger commits and resets the connection (`drop_response_after_commit`) → `unknown`; the recovery scanner finds it applied → `succeeded`; the retry replays it | succeeded | unknown → succeeded |
//! | 3 | B reserves 1000 of 100; the ledger commits a rejection (422) and resets the connection → `unknown`; the scanner finds the rejection → `failed`; the retry replays the failure | failed | unknown → failed (retried) |
//! | 1 | as the 8, through connector `blind`, which cannot be queried by key: `unknown` and a ticket at once, which holds the trigger; the scanner cannot ask either (same ticket); no retry runs | manual, ticket open | still unknown, to people |
//! | 6 | B runs an effect under the key of one of the 50 with another amount: the host finds the key recorded with another params digest, sends nothing, opens a `key_conflict` ticket, which holds the trigger | manual, ticket open | params conflict, to people |
//!
//! Why the old attempts are busy rather than parked in an effect: a
//! takeover of an attempt with an effect in flight is an unknown outcome
//! (the intent of a gone attempt, found not committed by the new token's
//! query and re-sent — `docs/architecture.md`, "Reports"), so the 50 and
//! the 18 would all be unknowns. A stale writer refused downstream is
//! counted that way, with its refusals in its facts
//! (`effects::a_stale_writer_is_refused_…`); here nothing old is in
//! flight, and the ledger sees no stale token.
//!
//! 86 affected = 50 + 18 + 12 (8 / 3 / 1) + 6; 7 to people (6 + 1);
//! auto-closed 50 + 18 + 8 + 3 = 79 of 86 = 91.86%.
//!
//! Barriers are all events: checkpoints in the database, lines in a
//! process's log; the processes are stopped only at a moment they hold no
//! lock on their triggers (as `faults.rs` does).

use crate::ledger::{Ledger, connector, effect, put};
use crate::procs::{Proc, eventually_or};
use crate::reports::{paddock, rfc3339};
use crate::{Db, TestHost};
use paddock::effects::EffectGateway;
use paddock::model::report::{self, Incident, UnknownSplit};
use paddock::store::ReportQuery;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const COMPLETED: usize = 50;
const STALE: usize = 18;
const HOUR_MS: i64 = 3_600_000;
/// A bound on each wait, not a guess at how long it takes: every wait is
/// for an event. Generous because a cold start compiles the guest in each
/// process, on a shared two-core machine (180 s was once too little there).
const WAIT: Duration = Duration::from_secs(600);

/// `paddock serve` flags for an old runner holding `n` triggers: exactly
/// `n` slots, so it cannot take anything else (or its own lapsed triggers)
/// while it runs. Its lease is 16 heartbeats long: its busy guests keep a
/// core busy, and a lease lapsing before the test stops the process would
/// let the other old runner take it.
fn old_runner(n: &str) -> [&str; 10] {
    [
        "--lease",
        "8s",
        "--heartbeat",
        "500ms",
        "--poll",
        "100ms",
        "--concurrency",
        n,
        "--claim-batch",
        n,
    ]
}

/// The effect key and ledger resource of takeover trigger number `n`.
fn key(n: usize) -> String {
    format!("incident-{n}/reserve/v1")
}
fn resource(n: usize) -> String {
    format!("INC-{n}")
}

fn logs(procs: &[&Proc]) -> String {
    procs
        .iter()
        .map(|p| format!("--- {} stderr ---\n{}", p.name, p.stderr()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

/// How many of `ids` hold a checkpoint saved under token 1.
async fn checkpointed(host: &TestHost, ids: &[i64]) -> usize {
    let mut n = 0;
    for id in ids {
        let token: Option<i64> = sqlx::query_scalar(
            host.store
                .sql("SELECT fencing_token FROM checkpoints WHERE trigger_id = ?"),
        )
        .bind(id)
        .fetch_optional(host.store.pool())
        .await
        .unwrap();
        n += usize::from(token == Some(1));
    }
    n
}

/// Start `paddock serve` as `name` with one slot per trigger of `held` and
/// wait until every one of them is busy under its lease: past its step's
/// checkpoint (token 1), burning CPU before its effect, nothing in flight.
async fn busy(host: &TestHost, name: &str, held: &[(i64, usize)]) -> Proc {
    let n = held.len();
    let ids: Vec<i64> = held.iter().map(|(id, _)| *id).collect();
    let slots = n.to_string();
    let p = Proc::serve(name, &host.url, host.dir.path(), &old_runner(&slots));
    eventually_or(
        WAIT,
        &format!("{name}'s {n} attempts busy past their checkpoint"),
        || logs(&[&p]),
        || async { (checkpointed(host, &ids).await == n).then_some(()) },
    )
    .await;
    for (id, k) in held {
        let t = host.store.trigger_get(*id).await.unwrap();
        assert_eq!(
            (t.state.as_str(), t.lease_owner.as_deref(), t.fencing_token),
            ("running", Some(name), 1),
            "{t:?}"
        );
        assert_eq!(
            host.store
                .effect_get(crate::TENANT, &key(*k))
                .await
                .unwrap(),
            None
        );
    }
    p
}

/// The refused writes of token 1 recorded against `id`, by kind.
async fn stale_kinds(host: &TestHost, id: i64) -> Vec<String> {
    sqlx::query_scalar(host.store.sql(
        "SELECT kind FROM stale_writes WHERE trigger_id = ? AND fencing_token = 1 \
         AND found_token = 2 ORDER BY id",
    ))
    .bind(id)
    .fetch_all(host.store.pool())
    .await
    .unwrap()
}

/// A host with the ledger as `ledger` (queryable) and `blind` (not), the
/// group `incident` (room for every trigger at once, and no fuel or wall
/// limit that a busy attempt could reach while the test holds it) and job
/// `pay`, the `effector` guest whose retries wait an hour.
async fn setup(db: Db) -> (TestHost, Ledger) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    // A lost answer is lost at once (the ledger resets the connection).
    for (name, queryable) in [("ledger", true), ("blind", false)] {
        let c = connector(name, &ledger, Duration::from_secs(60), queryable);
        put(&host.store, c).await;
    }
    host.group_sized(
        "incident",
        i64::MAX,
        64 << 20,
        Duration::from_secs(600),
        128,
    )
    .await;
    host.job(
        "pay",
        "effector",
        "resource_group = \"incident\"\nconnectors = [\"ledger\", \"blind\"]\n\
         [retry]\nmax_attempts = 3\nbackoff = \"1h\"\nbackoff_max = \"1h\"\njitter = false",
    )
    .await;
    (host, ledger)
}

/// Triggers of `pay` numbered `numbers`, each saving one checkpoint and
/// then reserving 5 under its own key and resource ([`key`],
/// [`resource`]); the first attempt stays busy between the two
/// (`busy_attempts`). `(trigger id, number)`.
async fn takeover_triggers(host: &TestHost, numbers: std::ops::Range<usize>) -> Vec<(i64, usize)> {
    let mut made = Vec::with_capacity(numbers.len());
    for n in numbers {
        let mut params = effect("ledger", &resource(n), "reserve", &key(n), 5);
        params["steps"] = json!(1);
        params["busy_attempts"] = json!(1);
        made.push((host.trigger("pay", params).await.id, n));
    }
    made
}

db_test!(
    eighty_six_real_triggers_split_50_18_12_6_and_the_incident_report_closes_91_86_percent,
    workers = 4
);
async fn eighty_six_real_triggers_split_50_18_12_6_and_the_incident_report_closes_91_86_percent(
    db: Db,
) {
    let started = Instant::now();
    let (host, ledger) = setup(db).await;
    let store = &host.store;
    let since = store.now_ms().await.unwrap();

    // --- The partition: A1 and A2 keep every trigger busy, then stop. --
    let completed_held = takeover_triggers(&host, 0..COMPLETED).await;
    let mut a1 = busy(&host, "A1", &completed_held).await;
    let stale_held = takeover_triggers(&host, COMPLETED..COMPLETED + STALE).await;
    let mut a2 = busy(&host, "A2", &stale_held).await;
    let completed: Vec<i64> = completed_held.iter().map(|(id, _)| *id).collect();
    let stale: Vec<i64> = stale_held.iter().map(|(id, _)| *id).collect();
    a1.stop_outside_a_transaction(&host.store, &completed).await;
    a2.stop_outside_a_transaction(&host.store, &stale).await;
    println!("incident: A1 and A2 stopped after {:?}", started.elapsed());

    // --- B takes every lapsed lease over with token 2. ------------------
    let b = host.runner("B", Duration::from_secs(30));
    let taken: Vec<(i64, usize)> = completed_held.iter().chain(&stale_held).copied().collect();
    eventually_or(
        WAIT,
        "B completes the 68 taken-over triggers",
        || logs(&[&a1, &a2]),
        || async {
            b.run_until_idle().await.unwrap();
            let mut done = 0;
            for (id, _) in &taken {
                done += usize::from(store.trigger_get(*id).await.unwrap().state == "succeeded");
            }
            (done == taken.len()).then_some(())
        },
    )
    .await;
    println!("incident: B took 68 over after {:?}", started.elapsed());
    for (id, n) in &taken {
        let t = store.trigger_get(*id).await.unwrap();
        assert_eq!(t.fencing_token, 2);
        let attempts: Vec<_> = store
            .attempts_for(*id)
            .await
            .unwrap()
            .into_iter()
            .map(|a| (a.fencing_token, a.runner_id, a.outcome))
            .collect();
        let old = if *n < COMPLETED { "A1" } else { "A2" };
        assert_eq!(
            attempts,
            [
                (1, old.to_string(), Some("expired".to_string())),
                (2, "B".to_string(), Some("succeeded".to_string()))
            ]
        );
        let out = result(&t);
        let got = (
            out["outcome"].as_str(),
            out["attempt"].as_i64(),
            out["resumed_from"].as_i64(),
        );
        assert_eq!(
            got,
            (Some("done"), Some(2), Some(1)),
            "B resumed from A's checkpoint: {out}"
        );
        let rec = store
            .effect_get(crate::TENANT, &key(*n))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                rec.state.as_str(),
                rec.fencing_token,
                rec.sends,
                rec.resolved_by.as_deref()
            ),
            ("succeeded", 2, 1, Some("gateway")),
            "one send, by token 2"
        );
    }
    assert_eq!(ledger.stat("applied").await, 68);
    // A1 never comes back: nothing it held is written under token 1.
    a1.kill();

    // --- A2 comes back: its first writes are under token 1, refused. ---
    a2.signal("CONT");
    eventually_or(
        WAIT,
        "A2 gives up its 18 attempts",
        || logs(&[&a2]),
        || async {
            let gave_up = a2
                .stderr()
                .matches("commit gate closed; result discarded")
                .count();
            (gave_up == STALE).then_some(())
        },
    )
    .await;
    a2.kill();
    // Which write of a woken attempt comes first — its checkpoint or the
    // runner's heartbeat — is the machine's to decide; either is refused
    // and recorded, and then the closed gate stops the rest in the process.
    let mut kinds = BTreeMap::<String, usize>::new();
    for id in &stale {
        let refused = stale_kinds(&host, *id).await;
        assert!(!refused.is_empty(), "{id}: nothing refused");
        for k in refused {
            assert!(
                ["checkpoint", "heartbeat", "release", "result_commit"].contains(&k.as_str()),
                "{id}: {k}"
            );
            *kinds.entry(k).or_default() += 1;
        }
    }
    println!("incident: A2's refused writes by kind {kinds:?}");
    for id in &completed {
        assert_eq!(stale_kinds(&host, *id).await, Vec::<String>::new(), "{id}");
    }
    for (id, _) in &taken {
        let cp = sqlx::query_as::<_, (i64, i64)>(
            store.sql("SELECT seq, fencing_token FROM checkpoints WHERE trigger_id = ?"),
        )
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(cp.1, 2, "the checkpoint is B's: nothing of token 1 landed");
    }
    let stats = ledger.stats().await;
    let got = (
        stats["applied"].as_u64(),
        stats["stale_token_rejections"].as_u64(),
    );
    assert_eq!(
        got,
        (Some(68), Some(0)),
        "nothing old was in flight: {stats}"
    );

    // --- Lost answers and params conflicts, run by B. -------------------
    let mut lost = Vec::new();
    for i in 0..12 {
        let key = format!("lost-{i}/reserve/v1");
        let (via, amount) = match i {
            0..8 => ("ledger", 5),
            8..11 => ("ledger", 1_000),
            _ => ("blind", 5),
        };
        ledger
            .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(&key)}}))
            .await;
        let t = host
            .trigger(
                "pay",
                effect(via, &format!("LOST-{i}"), "reserve", &key, amount),
            )
            .await;
        lost.push((t.id, key));
    }
    let mut conflicts = Vec::new();
    for (_, n) in &completed_held[..6] {
        let n = *n;
        let t = host
            .trigger("pay", effect("ledger", &resource(n), "reserve", &key(n), 6))
            .await;
        conflicts.push(t.id);
    }
    b.run_until_idle().await.unwrap();
    for (id, key) in &lost {
        let t = store.trigger_get(*id).await.unwrap();
        // The blind one's ticket holds it for a person.
        let waits = if key.starts_with("lost-11/") {
            "manual"
        } else {
            "retry_wait"
        };
        assert_eq!(
            (t.state.as_str(), t.error_class.as_deref()),
            (waits, Some("unknown"))
        );
        let rec = store.effect_get(crate::TENANT, key).await.unwrap().unwrap();
        assert_eq!((rec.state.as_str(), rec.sends), ("unknown", 1), "{key}");
    }
    for id in &conflicts {
        let t = store.trigger_get(*id).await.unwrap();
        assert_eq!(t.state, "manual", "held by its ticket");
        assert!(t.error_message.unwrap_or_default().contains("key-conflict"));
    }

    // The recovery scanner asks the ledger by key; nothing is resent.
    let received = ledger.stat("requests_received").await;
    let recovery = EffectGateway::new(store.clone())
        .recover(100)
        .await
        .unwrap();
    assert_eq!(
        (
            recovery.scanned,
            recovery.succeeded,
            recovery.failed,
            recovery.tickets
        ),
        (12, 8, 3, 1),
        "{recovery:?}"
    );
    assert_eq!(
        (recovery.not_found, recovery.undecided),
        (0, 0),
        "{recovery:?}"
    );
    assert_eq!(ledger.stat("requests_received").await, received);

    // The retries, an hour of backoff later on the store's clock.
    let now = store.now_ms().await.unwrap();
    let retries = store
        .trigger_claim_batch("B", 30_000, 100, Some(now + 2 * HOUR_MS))
        .await
        .unwrap();
    assert_eq!(retries.len(), 11, "the held one is not claimed");
    for claim in retries {
        b.execute(claim).await;
    }
    let mut ends = BTreeMap::<String, usize>::new();
    for (id, key) in &lost {
        let t = store.trigger_get(*id).await.unwrap();
        let rec = store.effect_get(crate::TENANT, key).await.unwrap().unwrap();
        let label = format!(
            "{} / effect {} by {}",
            t.state,
            rec.state,
            rec.resolved_by.unwrap_or_default()
        );
        *ends.entry(label).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = [
        ("succeeded / effect succeeded by recovery".to_string(), 8),
        ("failed / effect failed by recovery".to_string(), 3),
        ("manual / effect unknown by recovery".to_string(), 1),
    ]
    .into();
    assert_eq!(ends, expected);
    let tickets = store.exceptions_list(Some("open")).await.unwrap();
    let mut by_kind = BTreeMap::<String, usize>::new();
    for t in &tickets {
        *by_kind.entry(t.kind.clone()).or_default() += 1;
    }
    assert_eq!(
        by_kind,
        BTreeMap::from([
            ("key_conflict".to_string(), 6),
            ("unknown_outcome".to_string(), 1)
        ])
    );
    let stats = ledger.stats().await;
    assert_eq!(
        (
            stats["applied"].as_u64(),
            stats["business_rejections"].as_u64(),
            stats["replayed"].as_u64()
        ),
        (Some(68 + 8 + 1), Some(3), Some(0)),
        "one operation per key, nothing applied twice: {stats}"
    );

    // --- The report. ----------------------------------------------------
    let until = store.now_ms().await.unwrap() + 3 * HOUR_MS;
    let q = ReportQuery {
        since,
        until,
        tenant: None,
        group: None,
    };
    let facts = store.incident_facts(&q).await.unwrap();
    let incident = Incident::of(&facts);
    assert_eq!(
        incident,
        Incident {
            affected: 86,
            completed: 50,
            stale_refused: 18,
            unknown: UnknownSplit {
                total: 12,
                succeeded: 8,
                failed: 3,
                still_unknown: 1
            },
            params_conflicts: 6,
            failed: 0,
            in_flight: 0,
            to_people: 7,
        },
        "{facts:#?}"
    );
    assert_eq!(incident.auto_closed(), 79);
    let classes: BTreeMap<i64, report::IncidentClass> = facts
        .iter()
        .map(|f| (f.trigger_id, report::classify(f)))
        .collect();
    for id in &completed {
        assert_eq!(classes[id], report::IncidentClass::Completed, "{id}");
    }
    for id in &stale {
        assert_eq!(classes[id], report::IncidentClass::StaleRefused, "{id}");
    }
    for id in &conflicts {
        assert_eq!(classes[id], report::IncidentClass::ParamsConflict, "{id}");
    }

    let (since, until) = (rfc3339(since), rfc3339(until));
    let args = [
        "report", "incident", "--since", &since, "--until", &until, "--format", "json",
    ];
    let (code, json, err) = paddock(&host.url, &args);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let got = (
        v["affected"].as_i64(),
        v["completed"].as_i64(),
        v["stale_refused"].as_i64(),
        v["params_conflicts"].as_i64(),
        v["to_people"].as_i64(),
        v["auto_closed"].as_i64(),
    );
    assert_eq!(
        got,
        (Some(86), Some(50), Some(18), Some(6), Some(7), Some(79)),
        "{json}"
    );
    assert_eq!(
        v["unknown"],
        json!({"total": 12, "succeeded": 8, "failed": 3, "still_unknown": 1}),
        "{json}"
    );
    assert_eq!(v["auto_closure_pct"], 91.86, "{json}");
    let (code, text, err) = paddock(&host.url, &args[..6]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("91.86%"), "{text}");
    assert!(
        text.contains("(8 succeeded, 3 failed -> retried, 1 still unknown)"),
        "{text}"
    );

    // The books balance after all of it.
    let checks = store.conservation().await.unwrap();
    assert!(report::differences(&checks).is_empty(), "{checks:?}");
    println!("incident: done after {:?}", started.elapsed());
    drop((a1, a2));
    ledger.stop().await;
}
