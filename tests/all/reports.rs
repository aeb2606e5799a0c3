//! `paddock report` (issue 19 item 4) and structured JSON logs (item 6).
//!
//! The incident and cost scenarios are driven through the store's own
//! fenced APIs — claims with an injected clock for the takeovers, the
//! attempt ends, checkpoint writes under the stale token (refused, and
//! recorded in `stale_writes` by `Store::lease_lost`), effect intents and
//! settles, the recovery scanner's compare-and-set, tickets opened as the
//! gateway opens them — not by SQL inserts, and not by running 86 guests:
//! each category is the store-level trace the real path leaves. Over real
//! runs the report is checked too: the JSON log test here (a real `paddock
//! serve`, real guests, a real takeover: completed + stale refused), and
//! the ends of `effects::unknowns_at_drain_…` (unknown outcomes resolved by
//! the recovery scanner and by resending, one still unknown) and
//! `effects::a_params_digest_conflict_…` (a params conflict), with the
//! reference ledger. The whole incident, 86 triggers with real guests and
//! runners, is `incident::eighty_six_real_triggers_…`.

use crate::procs::{Proc, eventually};
use crate::{Db, TestHost};
use paddock::model::report::{self, Incident};
use paddock::model::{AttemptEnd, AttemptOutcome, Claim, LeaseRef, TriggerState};
use paddock::store::prelude::*;
use paddock::store::{
    ClaimRequest, CostBy, EffectOutcome, NewEffect, NewException, NewTrigger, ReportQuery, Store,
    StoreError,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const LEASE: i64 = 60_000;

/// `n` manual triggers of job `j`, due a minute before `t0`, ids ascending.
async fn triggers(store: &Store, n: usize, t0: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let new = NewTrigger {
            scheduled_at: Some(t0 - 60_000),
            ..NewTrigger::manual("j", json!({ "n": i }), None)
        };
        ids.push(store.trigger_create(&new).await.unwrap().0.id);
    }
    ids
}

/// Claims as `owner` at `now`: the leases by trigger id.
async fn claim(store: &Store, owner: &str, now: i64, limit: i64) -> BTreeMap<i64, LeaseRef> {
    let claims: Vec<Claim> = store
        .claim(&ClaimRequest {
            owner,
            lease_ms: LEASE,
            limit,
            retry_slots: 0,
            now: Some(now),
        })
        .await
        .unwrap();
    claims
        .into_iter()
        .map(|c| (c.trigger_id, c.lease(owner)))
        .collect()
}

fn end(state: TriggerState, fuel: i64, wall_ms: i64) -> AttemptEnd {
    let succeeded = state == TriggerState::Succeeded;
    AttemptEnd {
        trigger_state: state,
        retry_after_ms: (state == TriggerState::RetryWait).then_some(60_000),
        result: succeeded.then(|| vec![b'r'; 1_000]),
        error_class: (!succeeded).then(|| "transient".to_string()),
        error_message: (!succeeded).then(|| "it failed".to_string()),
        attempt_outcome: if succeeded {
            AttemptOutcome::Succeeded
        } else {
            AttemptOutcome::Failed
        },
        fuel_used: fuel,
        peak_memory_bytes: 1_000_000_000,
        wall_ms,
        log: String::new(),
    }
}

fn effect(key: &str) -> NewEffect {
    NewEffect {
        tenant: crate::TENANT.into(),
        downstream_key: crate::sent_key(key),
        idempotency_key: key.into(),
        connector: "ledger".into(),
        action: "debit".into(),
        params_digest: format!("digest-{key}"),
        request_id: format!("request-{key}"),
        compensates: None,
    }
}

fn outcome(state: &'static str, resolved_by: &'static str) -> EffectOutcome {
    EffectOutcome {
        state: state.parse().unwrap(),
        response: None,
        error: (state != "succeeded").then(|| format!("{state} outcome")),
        last_status: None,
        resolved_by,
    }
}

fn ticket(kind: &'static str, key: &str, trigger_id: i64) -> NewException {
    NewException {
        kind,
        subject: key.into(),
        trigger_id: Some(trigger_id),
        effect_key: Some(key.into()),
        evidence: json!({ "key": key }),
        allowed_actions: vec!["mark-failed"],
    }
}

/// `paddock --database-url URL ARGS`: (exit code, stdout, stderr).
pub fn paddock(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(url)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run paddock");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn rfc3339(ms: i64) -> String {
    paddock::model::time::rfc3339(paddock::model::time::from_millis(ms))
}

db_test!(the_incident_report_splits_86_affected_triggers_and_closes_91_86_percent);
/// Issue 19's incident: 86 triggers held by runner A are taken over by B
/// (token 2) after A's leases lapsed, and then: 50 complete under B; 18
/// complete under B after A, still running on the old token, tried to save
/// a checkpoint and was refused; 12 had an effect whose answer was lost
/// (8 resolved succeeded and 3 failed by the recovery scanner — those
/// triggers retry — and 1 still unknown with a ticket); 6 hit a params
/// conflict under their effect's key (ticket). Report: 86 affected = 50 +
/// 18 + 12 (8 / 3 / 1) + 6; 7 to people; auto-closure 79 / 86 = 91.86%.
async fn the_incident_report_splits_86_affected_triggers_and_closes_91_86_percent(db: Db) {
    let h = TestHost::new(db).await;
    h.job("j", "noop", "").await;
    let store = &h.store;
    let t0 = store.now_ms().await.unwrap();
    let ids = triggers(store, 86, t0).await;
    let a = claim(store, "A", t0, 100).await;
    assert_eq!(a.len(), 86);
    let b = claim(store, "B", t0 + 2 * LEASE, 100).await;
    assert_eq!(b.len(), 86, "B takes every lapsed lease over");

    for id in &ids[0..50] {
        let ok = end(TriggerState::Succeeded, 1, 1);
        store.attempt_finish(&b[id], &ok).await.unwrap();
    }
    for (i, id) in ids[50..68].iter().enumerate() {
        // Half of the old writers save a checkpoint, half start an effect.
        let refused = if i < 9 {
            store.checkpoint_save(&a[id], b"old").await.map(|_| ())
        } else {
            let key = format!("stale-{id}");
            store.effect_intent(&a[id], &effect(&key)).await.map(|_| ())
        };
        assert!(
            matches!(refused, Err(StoreError::LeaseLost { .. })),
            "{refused:?}"
        );
        let ok = end(TriggerState::Succeeded, 1, 1);
        store.attempt_finish(&b[id], &ok).await.unwrap();
    }
    for (i, id) in ids[68..80].iter().enumerate() {
        let key = format!("unknown-{id}");
        store.effect_intent(&b[id], &effect(&key)).await.unwrap();
        let lost = outcome("unknown", "gateway");
        store.effect_settle(&b[id], &key, &lost).await.unwrap();
        let retry = end(TriggerState::RetryWait, 1, 1);
        store.attempt_finish(&b[id], &retry).await.unwrap();
        let found = match i {
            0..8 => Some("succeeded"),
            8..11 => Some("failed"),
            _ => None,
        };
        match found {
            Some(state) => assert!(
                store
                    .effect_recover(crate::TENANT, &key, 2, &outcome(state, "recovery"))
                    .await
                    .unwrap()
            ),
            None => {
                store
                    .exception_open(&ticket("unknown_outcome", &key, *id))
                    .await
                    .unwrap();
            }
        }
    }
    for id in &ids[80..86] {
        let key = format!("conflict-{id}");
        store.effect_intent(&b[id], &effect(&key)).await.unwrap();
        let sent = outcome("succeeded", "gateway");
        store.effect_settle(&b[id], &key, &sent).await.unwrap();
        store
            .exception_open(&ticket("key_conflict", &key, *id))
            .await
            .unwrap();
        let failed = end(TriggerState::Failed, 1, 1);
        store.attempt_finish(&b[id], &failed).await.unwrap();
    }

    let stale: Vec<(String, i64)> = sqlx::query_as(store.sql(
        "SELECT kind, count(*) FROM stale_writes WHERE fencing_token = 1 AND found_token = 2 \
         AND (kind = 'checkpoint' OR idempotency_key LIKE 'stale-%') GROUP BY kind ORDER BY kind",
    ))
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        stale,
        [
            ("checkpoint".to_string(), 9),
            ("effect_intent".to_string(), 9)
        ],
        "each refusal is recorded with both tokens, an effect's with its key"
    );

    let (since, until) = (t0 - 1_000, t0 + 3 * LEASE);
    let q = ReportQuery {
        since,
        until,
        tenant: None,
        group: None,
    };
    let incident = Incident::of(&store.incident_facts(&q).await.unwrap());
    assert_eq!(incident.affected, 86);
    assert_eq!(incident.completed, 50);
    assert_eq!(incident.stale_refused, 18);
    assert_eq!(
        incident.unknown,
        report::UnknownSplit {
            total: 12,
            succeeded: 8,
            failed: 3,
            still_unknown: 1
        }
    );
    assert_eq!(incident.params_conflicts, 6);
    assert_eq!(incident.to_people, 7);
    assert_eq!(incident.auto_closed(), 79);

    // The same through the command line, as text and JSON, and filtered.
    let (since, until) = (rfc3339(since), rfc3339(until));
    let window = ["--since", since.as_str(), "--until", until.as_str()];
    let mut args = vec!["report", "incident"];
    args.extend(window);
    let (code, text, err) = paddock(&h.url, &args);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("91.86%"), "{text}");
    assert!(
        text.contains("(8 succeeded, 3 failed -> retried, 1 still unknown)"),
        "{text}"
    );
    args.extend(["--tenant", "t1", "--format", "json"]);
    let (code, json, err) = paddock(&h.url, &args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["affected"], 86);
    assert_eq!(v["to_people"], 7);
    assert_eq!(v["auto_closure_pct"], 91.86);
    // A window before anything happened affects nothing.
    let before = rfc3339(t0 - 10_000);
    let early = rfc3339(t0 - 5_000);
    let empty = ["report", "incident", "--since", &before, "--until", &early];
    let (code, text, err) = paddock(&h.url, &empty);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("nothing affected"), "{text}");
    let other = ["report", "incident", "--since", "1h", "--tenant", "nobody"];
    let (code, _, err) = paddock(&h.url, &other);
    assert_ne!(code, 0);
    assert!(err.contains("no job belongs to tenant 'nobody'"), "{err}");
}

db_test!(the_cost_report_is_0_050_per_correct_result_with_8_duplicates_absorbed);
/// Issue 19's cost: 100 triggers each make one downstream call; 8 of
/// their first attempts lose their lease after the call, and the next
/// attempt finds the effect recorded and replays it (no second call). 100
/// correct results, 108 attempts, 100 calls. Usage and prices:
/// - CPU: 100 × 1.5e9 + 8 × 3.75e9 fuel = 180 CPU s (1e9 fuel a second) at
///   0.01 → 1.8, 0.018 per correct result;
/// - memory: 1 GB peak × (100 × 5 s + 8 × 12.5 s) = 600 GB-s at 0.001 →
///   0.6, 0.006;
/// - calls: 100 at 0.02 → 2.0, 0.020;
/// - retries: 8 at 0.05 → 0.4, 0.004;
/// - storage: 100 results of 1,000 bytes = 1e-4 GB at 2,000 → 0.2, 0.002;
///
/// 0.018 + 0.006 + 0.020 + 0.004 + 0.002 = 0.050 per correct result.
async fn the_cost_report_is_0_050_per_correct_result_with_8_duplicates_absorbed(db: Db) {
    let h = TestHost::new(db).await;
    h.job("j", "noop", "").await;
    let store = &h.store;
    let t0 = store.now_ms().await.unwrap();
    let ids = triggers(store, 100, t0).await;
    let a = claim(store, "A", t0, 100).await;
    assert_eq!(a.len(), 100);
    for (i, id) in ids.iter().enumerate() {
        let key = format!("pay-{id}");
        store.effect_intent(&a[id], &effect(&key)).await.unwrap();
        let sent = outcome("succeeded", "gateway");
        store.effect_settle(&a[id], &key, &sent).await.unwrap();
        if i < 8 {
            let lost = end(TriggerState::Succeeded, 3_750_000_000, 12_500);
            assert!(
                store
                    .attempt_abandon(&a[id], &lost, "lease lost")
                    .await
                    .unwrap()
            );
        } else {
            let ok = end(TriggerState::Succeeded, 1_500_000_000, 5_000);
            store.attempt_finish(&a[id], &ok).await.unwrap();
        }
    }
    let b = claim(store, "B", t0 + 2 * LEASE, 100).await;
    assert_eq!(b.len(), 8, "the 8 lost attempts are taken over");
    for (id, lease) in &b {
        let recorded = store
            .effect_get(crate::TENANT, &format!("pay-{id}"))
            .await
            .unwrap();
        assert_eq!(recorded.unwrap().state, "succeeded", "replayed, not resent");
        let ok = end(TriggerState::Succeeded, 1_500_000_000, 5_000);
        store.attempt_finish(lease, &ok).await.unwrap();
    }

    let prices = [
        ("cpu_second", 0.01),
        ("gb_second", 0.001),
        ("downstream_call", 0.02),
        ("retry", 0.05),
        ("storage_gb", 2_000.0),
    ];
    let changes: Vec<(String, f64)> = prices.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    store.price_set(&changes, "local:admin").await.unwrap();
    let audit = store.audit_list().await.unwrap();
    let entry = audit.last().unwrap();
    assert_eq!(
        (entry.action.as_str(), entry.actor.as_str()),
        ("price.set", "local:admin")
    );
    let refused = store
        .price_set(&[("retry".into(), 1.0), ("cpu_second".into(), -1.0)], "x")
        .await;
    assert!(refused.unwrap_err().to_string().contains("--cpu-second"));
    assert_eq!(store.prices().await.unwrap().retry, 0.05, "nothing set");

    // The command line: an admin's price, audited as local:USER (the
    // account it runs as; --actor a note beside it); a bad value named and
    // nothing set.
    let set = ["--actor", "alice", "price", "set", "--manual-touch", "5"];
    let (code, text, err) = paddock(&h.url, &set);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("manual-touch") && text.contains('5'),
        "{text}"
    );
    let entry = store.audit_list().await.unwrap().pop().unwrap();
    assert_eq!(
        (entry.action.as_str(), entry.actor.as_str()),
        ("price.set", crate::two_person::os_actor().as_str())
    );
    assert!(
        entry.detail.contains(r#""actor_note":"alice""#),
        "{entry:?}"
    );
    let bad = ["price", "set", "--manual-touch", "1", "--retry=-1"];
    let (code, _, err) = paddock(&h.url, &bad);
    assert_ne!(code, 0);
    assert!(err.contains("--retry: -1 is not a price"), "{err}");
    assert_eq!(store.prices().await.unwrap().manual_touch, 5.0);

    let q = ReportQuery {
        since: t0 - 1_000,
        until: t0 + 3 * LEASE,
        tenant: None,
        group: None,
    };
    let usage = store.cost_usage(&q, CostBy::Job).await.unwrap();
    assert_eq!(usage.len(), 1, "{usage:?}");
    let u = &usage[0];
    assert_eq!(
        u.key,
        format!("{}/j", crate::TENANT),
        "a job is keyed with its tenant"
    );
    assert_eq!(
        (u.attempts, u.retries, u.downstream_calls, u.correct),
        (108, 8, 100, 100)
    );
    assert_eq!(
        (u.fuel, u.wall_ms, u.storage_bytes),
        (180_000_000_000, 600_000, 100_000)
    );
    let cost = report::cost(u, &store.prices().await.unwrap());
    let per = cost.per_correct.unwrap();
    assert!((per - 0.050).abs() < 1e-9, "{cost:?}");

    let (since, until) = (rfc3339(q.since), rfc3339(q.until));
    let args = [
        "report", "cost", "--since", &since, "--until", &until, "--by", "version", "--format",
        "json",
    ];
    let (code, json, err) = paddock(&h.url, &args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["lines"][0]["usage"]["key"], "t1/j@v1");
    let per = v["lines"][0]["per_correct"].as_f64().unwrap();
    assert!((per - 0.050).abs() < 1e-9, "{json}");
    let (code, text, err) = paddock(
        &h.url,
        &["report", "cost", "--last", "1h", "--by", "tenant"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("t1"), "{text}");
    let (code, _, err) = paddock(
        &h.url,
        &["report", "cost", "--last", "1h", "--by", "colour"],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("--by must be job, version, group or tenant"),
        "{err}"
    );

    // The books balance after it all; a trigger counting an attempt that
    // has no row is listed, and the command exits nonzero.
    let checks = store.conservation().await.unwrap();
    assert!(report::differences(&checks).is_empty(), "{checks:?}");
    assert_eq!(checks.len(), 8);
    let (code, text, err) = paddock(&h.url, &["report", "conservation"]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(text.contains("every check balances"), "{text}");
    sqlx::query(store.sql("UPDATE triggers SET attempts = attempts + 1 WHERE id = ?"))
        .bind(ids[0])
        .execute(store.pool())
        .await
        .unwrap();
    let checks = store.conservation().await.unwrap();
    let differ = report::differences(&checks);
    assert_eq!(differ.len(), 1, "{checks:?}");
    assert_eq!(
        (
            differ[0].name.as_str(),
            differ[0].left_count,
            differ[0].right_count
        ),
        ("attempts_vs_triggers", 109, 108)
    );
    let (code, json, _) = paddock(&h.url, &["report", "conservation", "--format", "json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["differences"][0]["name"], "attempts_vs_triggers");
    assert_eq!(v["differences"][0]["difference"], 1);
}

db_test!(json_logs_carry_the_trigger_the_token_and_a_params_digest_never_the_params);
/// `paddock serve --log-format json`: a trigger that succeeds logs its
/// claim and its end; a trigger whose lease is taken over (the test claims
/// it with a later clock while its guest burns CPU) logs the refused
/// heartbeat of the old token. Every log line is one JSON object with the
/// fields at the top level; the params appear only as a digest.
async fn json_logs_carry_the_trigger_the_token_and_a_params_digest_never_the_params(db: Db) {
    let h = TestHost::new(db).await;
    h.job("j", "noop", "").await;
    h.job("burn", "gated", "[params]\nburn = true").await;
    let store = &h.store;
    let secret = "p4rams-in-clear-7731";
    let ok = store
        .trigger_create(&NewTrigger::manual("j", json!({ "card": secret }), None))
        .await
        .unwrap()
        .0;
    let serve = Proc::spawn(
        "json",
        &h.url,
        h.dir.path(),
        &[
            "--log-format",
            "json",
            "serve",
            "--runner-id",
            "json",
            "--lease",
            "2s",
            "--heartbeat",
            "200ms",
            "--poll",
            "50ms",
        ],
    );
    eventually(
        Duration::from_secs(60),
        "the first trigger succeeds",
        || async {
            (store.trigger_get(ok.id).await.unwrap().state == TriggerState::Succeeded).then_some(())
        },
    )
    .await;
    let burn = store
        .trigger_create(&NewTrigger::manual("burn", json!({ "card": secret }), None))
        .await
        .unwrap()
        .0;
    let running = eventually(Duration::from_secs(60), "the burner runs", || async {
        let t = store.trigger_get(burn.id).await.unwrap();
        (t.state == TriggerState::Running).then_some(t)
    })
    .await;
    // The thief claims with a clock an hour ahead, so the lease has
    // lapsed; on PostgreSQL a claim skips a row the runner has locked at
    // that moment (a heartbeat), so it asks again until it takes it.
    let now = store.now_ms().await.unwrap();
    eventually(
        Duration::from_secs(60),
        "the thief takes the burner",
        || async {
            let thief = claim(store, "thief", now + 3_600_000, 10).await;
            let t = store.trigger_get(burn.id).await.unwrap();
            assert_eq!(t.state, TriggerState::Running, "{t:?}\n{}", serve.stderr());
            thief.contains_key(&burn.id).then_some(())
        },
    )
    .await;
    let lines = eventually(
        Duration::from_secs(60),
        "the old token is refused",
        || async {
            let err = serve.stderr();
            err.contains("fenced_write_refused").then_some(err)
        },
    )
    .await;

    assert!(!lines.contains(secret), "params in clear:\n{lines}");
    let events: Vec<serde_json::Value> = lines
        .lines()
        // `paddock serve: ...` status lines are the command's own output
        // (tests and benches read their fixed text), not log lines.
        .filter(|l| !l.trim().is_empty() && !l.starts_with("paddock serve:"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let find = |event: &str, trigger: i64| {
        events
            .iter()
            .find(|e| e["event"] == event && e["trigger_id"] == trigger)
            .unwrap_or_else(|| panic!("no {event} line for {trigger}:\n{lines}"))
            .clone()
    };
    let digest = paddock::model::plan::sha256_hex(ok.params.as_bytes());
    for line in [find("trigger_claimed", ok.id), find("trigger_state", ok.id)] {
        assert_eq!(line["plan_key"], ok.plan_key.as_str(), "{line}");
        assert_eq!(line["fencing_token"], 1, "{line}");
        assert!(line["attempt"].as_i64().unwrap() > 0, "{line}");
        assert_eq!(line["params_digest"], digest.as_str(), "{line}");
    }
    assert_eq!(find("trigger_state", ok.id)["state"], "succeeded");
    let refused = find("fenced_write_refused", burn.id);
    assert_eq!(refused["plan_key"], running.plan_key.as_str(), "{refused}");
    assert_eq!(refused["fencing_token"], running.fencing_token, "{refused}");
    assert_eq!(
        refused["found_token"],
        running.fencing_token + 1,
        "{refused}"
    );
    assert!(refused["attempt"].as_i64().unwrap() > 0, "{refused}");
    let recorded: i64 = sqlx::query_scalar(
        store.sql("SELECT count(*) FROM stale_writes WHERE trigger_id = ? AND fencing_token = ?"),
    )
    .bind(burn.id)
    .bind(running.fencing_token)
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(
        recorded >= 1,
        "the refusal is recorded for the incident report"
    );

    // The incident report sees the real refusal — the taken-over trigger's
    // old token was refused — and not the clean success.
    let args = ["report", "incident", "--since", "1h", "--format", "json"];
    let (code, json, err) = paddock(&h.url, &args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (v["affected"].as_i64(), v["completed"].as_i64()),
        (Some(1), Some(0)),
        "{json}"
    );
    assert_eq!(v["stale_refused"], 1, "{json}");
}

/// `paddock --log-format json ARGS` with info lines on: (exit code, the
/// JSON log lines on stderr).
fn paddock_logged(url: &str, args: &[&str]) -> (i32, Vec<serde_json::Value>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(url)
        .arg("--log-format")
        .arg("json")
        .args(args)
        .env("PADDOCK_LOG", "paddock=info")
        .output()
        .expect("run paddock");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out.status.code().unwrap_or(-1), lines, err)
}

db_test!(a_persons_state_changes_are_one_json_line_each_with_the_actor_and_no_params);
/// Issue 19 item 6 for the changes people make: a manual run, a pause
/// and resume of its job, an approval and a cancel each log one
/// `trigger_created` / `trigger_state` line per trigger, carrying the
/// trigger id, plan key, new state, cause and actor — and the params only
/// as a digest.
async fn a_persons_state_changes_are_one_json_line_each_with_the_actor_and_no_params(db: Db) {
    let h = TestHost::new(db).await;
    h.job("j", "noop", "").await;
    let url = h.url.as_str();
    let secret = "4111-1111-1111-1111";
    let card = format!("card=\"{secret}\"");
    let (code, lines, err) = paddock_logged(url, &["trigger", "run", "j", "--param", &card]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(secret), "params in clear:\n{err}");
    let created: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "trigger_created")
        .collect();
    assert_eq!(created.len(), 1, "{err}");
    let id = created[0]["trigger_id"].as_i64().unwrap();
    let t = h.store.trigger_get(id).await.unwrap();
    assert_eq!(created[0]["plan_key"], t.plan_key.as_str());
    assert_eq!(created[0]["state"], "pending");
    assert_eq!(created[0]["origin"], "manual");
    assert_eq!(
        created[0]["params_digest"],
        paddock::model::plan::sha256_hex(t.params.as_bytes()).as_str()
    );

    let change = |lines: &[serde_json::Value], cause: &str| -> serde_json::Value {
        let found: Vec<_> = lines
            .iter()
            .filter(|l| l["event"] == "trigger_state" && l["cause"] == cause)
            .cloned()
            .collect();
        assert_eq!(found.len(), 1, "one {cause} line: {lines:?}");
        assert_eq!(found[0]["trigger_id"], id);
        assert_eq!(found[0]["plan_key"], t.plan_key.as_str());
        found[0].clone()
    };
    let (code, lines, err) = paddock_logged(url, &["pause", "--job", "j", "--reason", "r"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(change(&lines, "pause")["state"], "paused");
    assert_eq!(
        change(&lines, "pause")["actor"],
        crate::two_person::os_actor().as_str()
    );
    let (code, lines, err) = paddock_logged(url, &["resume", "--job", "j", "--reason", "r"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(change(&lines, "resume")["state"], "pending");

    sqlx::query(
        h.store
            .sql("UPDATE triggers SET state = 'manual' WHERE id = ?"),
    )
    .bind(id)
    .execute(h.store.pool())
    .await
    .unwrap();
    let ids = id.to_string();
    let approve = ["trigger", "approve", &ids, "--reason", "ok"];
    let (code, lines, err) = paddock_logged(url, &approve);
    assert_eq!(code, 0, "{err}");
    assert_eq!(change(&lines, "approve")["state"], "pending");
    let cancel = ["trigger", "cancel", &ids, "--reason", "not needed"];
    let (code, lines, err) = paddock_logged(url, &cancel);
    assert_eq!(code, 0, "{err}");
    assert_eq!(change(&lines, "cancel")["state"], "cancelled");
    // A cancel that finds the trigger final changes nothing and logs
    // nothing.
    let (_, lines, _) = paddock_logged(url, &cancel);
    assert!(
        !lines.iter().any(|l| l["event"] == "trigger_state"),
        "{lines:?}"
    );

    // A backfill logs each trigger it creates (and none it finds).
    h.job(
        "hourly",
        "noop",
        "[schedule]\nkind = \"cron\"\ncron = \"0 0 * * * *\"\ntimezone = \"UTC\"",
    )
    .await;
    let window = [
        "schedule",
        "backfill",
        "hourly",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T03:00:00Z",
    ];
    let (code, lines, err) = paddock_logged(url, &window);
    assert_eq!(code, 0, "{err}");
    let backfilled: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "trigger_created" && l["origin"] == "backfill")
        .collect();
    assert_eq!(backfilled.len(), 3, "{err}");
    assert!(
        backfilled
            .iter()
            .all(|l| l["plan_key"].as_str().unwrap().starts_with("hourly@")),
        "{backfilled:?}"
    );
    let (code, lines, err) = paddock_logged(url, &window);
    assert_eq!(code, 0, "{err}");
    assert!(
        !lines.iter().any(|l| l["event"] == "trigger_created"),
        "{lines:?}"
    );
}
