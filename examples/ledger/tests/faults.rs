//! Every injected fault is observable by a real HTTP client.

mod common;

use std::error::Error as _;
use std::time::{Duration, Instant};

use common::TestLedger;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_5xx_commits_nothing_and_the_retry_applies() {
    let l = TestLedger::start().await;
    l.add_fault(json!({"error_status": 503, "once": true, "scope": {"resource": "RES-900"}}))
        .await;

    // Out of scope: untouched.
    let other = l
        .effect_ok("RES-1", "charge", "k-other", None, json!({"amount": 1}))
        .await;
    assert_eq!(other.status, StatusCode::OK);

    let r = l
        .effect("RES-900", "reserve", "k-5xx", Some(1), json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["ledger-outcome"], "injected_error");
    assert!(r.headers().contains_key("retry-after"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "injected_fault");

    let (s, _) = l.get("/v1/operations/k-5xx").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing committed");

    let retry = l
        .effect_ok("RES-900", "reserve", "k-5xx", Some(1), json!({"amount": 5}))
        .await;
    assert_eq!(retry.status, StatusCode::OK);
    assert!(!retry.replayed, "the first attempt never applied");
    assert_eq!(l.stats().await["injected_faults"]["error"], 1);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_error_rate_fails_some_requests_and_only_the_others_are_recorded() {
    let l = TestLedger::start().await;
    l.set_balance("RES-R", 1000).await;
    l.add_fault(json!({"error_rate": 0.5, "error_status": 500, "seed": 7}))
        .await;
    let mut failed = 0;
    for i in 0..20 {
        let key = format!("rate-{i}");
        let o = l
            .effect_ok("RES-R", "reserve", &key, None, json!({"amount": 1}))
            .await;
        let (s, _) = l.get(&format!("/v1/operations/{key}")).await;
        match o.status {
            StatusCode::INTERNAL_SERVER_ERROR => {
                failed += 1;
                assert_eq!(s, StatusCode::NOT_FOUND);
            }
            StatusCode::OK => assert_eq!(s, StatusCode::OK),
            other => panic!("unexpected {other}"),
        }
    }
    assert!((1..20).contains(&failed), "{failed} of 20 failed");
    let (_, res) = l.get("/v1/resources/RES-R").await;
    assert_eq!(res["balance"], 1000 - (20 - failed));
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_latency_delays_the_request_before_it_is_handled() {
    let l = TestLedger::start().await;
    l.add_fault(json!({"latency_ms": 400, "once": true})).await;
    let t = Instant::now();
    let o = l
        .effect_ok("RES-L", "charge", "k-slow", None, json!({"amount": 1}))
        .await;
    assert_eq!(o.status, StatusCode::OK);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );

    let t = Instant::now();
    let o = l
        .effect_ok("RES-L", "charge", "k-fast", None, json!({"amount": 1}))
        .await;
    assert_eq!(o.status, StatusCode::OK);
    assert!(t.elapsed() < Duration::from_millis(400), "once means once");
    assert_eq!(l.stats().await["injected_faults"]["latency"], 1);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_then_drop_gives_the_client_a_connection_error_but_the_operation_is_recorded() {
    let l = TestLedger::start().await;
    l.add_fault(json!({"drop_response_after_commit": 1, "scope": {"resource": "RES-900"}}))
        .await;

    let t = Instant::now();
    let err = l
        .effect(
            "RES-900",
            "reserve",
            "k-drop",
            Some(3),
            json!({"amount": 5}),
        )
        .await
        .expect_err("the response must be dropped");
    // Not a timeout: the connection is reset right after the commit.
    assert!(!err.is_timeout(), "{err:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(err.is_request(), "{err:?}");
    // Not a connect error either: the request was sent, so its fate is unknown.
    assert!(!err.is_connect(), "{err:?}");
    let chain = error_chain(&err);
    eprintln!("commit-then-drop, client saw: {chain}");
    assert!(
        chain.contains("reset") || chain.contains("closed"),
        "unexpected error chain: {chain}"
    );

    // "What happened to key K?" — it was applied.
    let (s, op) = l.get("/v1/operations/k-drop").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(op["outcome"], "applied");
    assert_eq!(op["fencing_token"], 3);

    // A retry with the same key replays; the balance moved once.
    let retry = l
        .effect_ok(
            "RES-900",
            "reserve",
            "k-drop",
            Some(3),
            json!({"amount": 5}),
        )
        .await;
    assert_eq!(retry.status, StatusCode::OK);
    assert!(retry.replayed);
    assert_eq!(retry.body, op["response"]);
    let (_, res) = l.get("/v1/resources/RES-900").await;
    assert_eq!(res["balance"], 95);
    assert_eq!(l.stats().await["injected_faults"]["drop_response"], 1);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_response_times_the_client_out_after_the_commit() {
    let l = TestLedger::start().await;
    l.add_fault(json!({"delay_response_ms": 1500, "once": true}))
        .await;
    let impatient = common::client(Duration::from_millis(300));
    let err = common::effect_with(
        &impatient,
        &l.base,
        "RES-9",
        "refund",
        "k-delay",
        Some(1),
        json!({"amount": 4}),
    )
    .await
    .expect_err("client gives up first");
    assert!(err.is_timeout(), "{err:?}");

    // Unknown to the client, but the ledger committed before delaying.
    let (s, op) = l.get("/v1/operations/k-delay").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(op["outcome"], "applied");
    assert_eq!(l.stats().await["injected_faults"]["delay_response"], 1);

    // A patient client does get the (late) answer when the fault is active.
    l.add_fault(json!({"delay_response_ms": 300, "once": true}))
        .await;
    let t = Instant::now();
    let o = l
        .effect_ok("RES-9", "refund", "k-delay", Some(1), json!({"amount": 4}))
        .await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(o.replayed);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clearing_faults_removes_rules_and_releases_held_requests() {
    let l = TestLedger::start().await;
    l.add_fault(json!({"error_status": 503})).await;
    let (s, _) = l
        .admin(
            Method::POST,
            "/admin/hold",
            Some(json!({"hold_key": "k-held"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, listed) = l.get("/admin/faults").await;
    assert_eq!(listed["faults"].as_array().unwrap().len(), 1);
    assert_eq!(listed["holds"].as_array().unwrap().len(), 1);

    let (_, cleared) = l.admin(Method::DELETE, "/admin/faults", None).await;
    assert_eq!(cleared["cleared_faults"], 1);
    assert_eq!(cleared["released_holds"], 1);
    let o = l
        .effect_ok("RES-1", "charge", "k-held", None, json!({"amount": 1}))
        .await;
    assert_eq!(o.status, StatusCode::OK);

    let (s, body) = l
        .admin(
            Method::POST,
            "/admin/faults",
            Some(json!({"error_rate": 2.0})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_admin_request");
    let (s, _) = l
        .admin(Method::POST, "/admin/faults", Some(json!({"bogus": 1})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_held_requests_instead_of_hanging() {
    let l = TestLedger::start().await;
    l.admin(
        Method::POST,
        "/admin/hold",
        Some(json!({"hold_key": "k-park"})),
    )
    .await;
    let client = l.client.clone();
    let base = l.base.clone();
    let parked = tokio::spawn(async move {
        common::effect_with(
            &client,
            &base,
            "RES-1",
            "charge",
            "k-park",
            None,
            json!({"amount": 1}),
        )
        .await
    });
    for _ in 0..400 {
        let (_, h) = l.get("/admin/holds").await;
        if h["holds"][0]["waiting"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    l.stop().await;
    let r = parked.await.unwrap().expect("answered during drain");
    assert_eq!(r.status(), StatusCode::OK);
}

fn error_chain(e: &reqwest::Error) -> String {
    let mut s = format!("{e}");
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(" <- ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s.to_lowercase()
}
