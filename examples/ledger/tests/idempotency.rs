//! Idempotency keys, key conflicts, business failures and the query by key.

mod common;

use common::TestLedger;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_request_is_replayed_with_the_original_response_and_applied_once() {
    let l = TestLedger::start().await;
    let first = l
        .effect_ok("RES-900", "reserve", "k-1", Some(1), json!({"amount": 5}))
        .await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.outcome, "applied");
    assert!(!first.replayed);
    assert_eq!(first.body["balance_after"], 95);

    // Same key, same body (different key order and whitespace): replay.
    let r = l
        .client
        .post(l.url("/v1/RES-900/reserve"))
        .header("Idempotency-Key", "k-1")
        .header("Fencing-Token", "1")
        .header("Content-Type", "application/json")
        .body(r#"{ "amount" : 5 }"#)
        .send()
        .await
        .unwrap();
    let again = common::Outcome::read(r).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.replayed, "Idempotent-Replayed: true expected");
    assert_eq!(again.outcome, "replayed");
    assert_eq!(again.body, first.body, "the recorded body, verbatim");

    let (_, res) = l.get("/v1/resources/RES-900").await;
    assert_eq!(res["balance"], 95, "applied exactly once");
    let stats = l.stats().await;
    assert_eq!(stats["applied"], 1);
    assert_eq!(stats["replayed"], 1);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_different_params_is_a_key_conflict_and_changes_nothing() {
    let l = TestLedger::start().await;
    let first = l
        .effect_ok("RES-1", "charge", "k-2", None, json!({"amount": 10}))
        .await;
    assert_eq!(first.status, StatusCode::OK);

    for (resource, action, body) in [
        ("RES-1", "charge", json!({"amount": 11})),
        ("RES-1", "refund", json!({"amount": 10})),
        ("RES-2", "charge", json!({"amount": 10})),
    ] {
        let c = l.effect_ok(resource, action, "k-2", None, body).await;
        assert_eq!(c.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(c.body["error"], "key_conflict");
        assert_eq!(c.outcome, "key_conflict");
        assert!(!c.replayed);
        assert_ne!(c.body["recorded_digest"], c.body["presented_digest"]);
    }

    let (_, res) = l.get("/v1/resources/RES-1").await;
    assert_eq!(res["balance"], 90);
    let (s, _) = l.get("/v1/resources/RES-2").await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "a conflicting request creates nothing"
    );
    assert_eq!(l.stats().await["key_conflicts"], 3);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_beyond_zero_is_a_recorded_permanent_failure_that_replays_as_such() {
    let l = TestLedger::start().await;
    l.set_balance("RES-7", 3).await;
    let r = l
        .effect_ok("RES-7", "reserve", "k-3", Some(4), json!({"amount": 5}))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["error"], "insufficient_balance");
    assert_eq!(r.outcome, "rejected");

    // Even after the balance would allow it, the key's outcome is settled.
    l.set_balance("RES-7", 50).await;
    let again = l
        .effect_ok("RES-7", "reserve", "k-3", Some(4), json!({"amount": 5}))
        .await;
    assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(again.replayed);
    assert_eq!(again.body, r.body);

    let (s, op) = l.get("/v1/operations/k-3").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(op["outcome"], "rejected");
    assert_eq!(op["status"], 422);
    let (_, res) = l.get("/v1/resources/RES-7").await;
    assert_eq!(res["balance"], 50);
    assert_eq!(res["highest_fencing_token"], 4);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_key_can_be_queried_and_an_unknown_key_is_not_found() {
    let l = TestLedger::start().await;
    let r = l
        .client
        .post(l.url("/v1/RES-900/release"))
        .header("Idempotency-Key", "effect-42")
        .header("Fencing-Token", "9")
        .header("X-Request-Id", "req-abc")
        .json(&json!({"amount": 7, "memo": "return stock"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let applied: serde_json::Value = r.json().await.unwrap();

    let (s, op) = l.get("/v1/operations/effect-42").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(op["idempotency_key"], "effect-42");
    assert_eq!(op["resource"], "RES-900");
    assert_eq!(op["action"], "release");
    assert_eq!(op["outcome"], "applied");
    assert_eq!(op["status"], 200);
    assert_eq!(op["fencing_token"], 9);
    assert_eq!(op["request_id"], "req-abc");
    assert_eq!(op["response"], applied);
    assert_eq!(op["params_digest"].as_str().unwrap().len(), 64);

    let (s, body) = l.get("/v1/operations/never-sent").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_refused_and_never_recorded() {
    let l = TestLedger::start().await;
    let no_key = l
        .client
        .post(l.url("/v1/RES-1/reserve"))
        .json(&json!({"amount": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = no_key.json().await.unwrap();
    assert_eq!(body["error"], "missing_idempotency_key");

    let bad_token = l
        .client
        .post(l.url("/v1/RES-1/reserve"))
        .header("Idempotency-Key", "k")
        .header("Fencing-Token", "seventy-seven")
        .json(&json!({"amount": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_token.status(), StatusCode::BAD_REQUEST);

    let bad_body = l
        .effect_ok("RES-1", "reserve", "k", None, json!({"amount": -3}))
        .await;
    assert_eq!(bad_body.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_body.body["error"], "invalid_body");

    let bad_action = l
        .effect_ok("RES-1", "steal", "k", None, json!({"amount": 1}))
        .await;
    assert_eq!(bad_action.status, StatusCode::NOT_FOUND);
    assert_eq!(bad_action.body["error"], "unknown_action");

    let (s, _) = l.get("/v1/operations/k").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(l.stats().await["invalid_requests"], 4);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_operations_survive_a_restart_on_the_same_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");
    let l = TestLedger::start_at(&db).await;
    let first = l
        .effect_ok(
            "RES-5",
            "charge",
            "k-restart",
            Some(3),
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK);
    l.stop().await;

    let l = TestLedger::start_at(&db).await;
    let again = l
        .effect_ok(
            "RES-5",
            "charge",
            "k-restart",
            Some(3),
            json!({"amount": 1}),
        )
        .await;
    assert!(again.replayed);
    assert_eq!(again.body, first.body);
    let stale = l
        .effect_ok("RES-5", "charge", "k-other", Some(2), json!({"amount": 1}))
        .await;
    assert_eq!(
        stale.status,
        StatusCode::CONFLICT,
        "the highest token is durable too"
    );
    l.stop().await;
}
