//! The external side of fencing: lower tokens are refused, atomically.

mod common;

use std::time::Duration;

use common::{Outcome, TestLedger};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_fencing_token_is_refused_counted_and_changes_nothing() {
    let l = TestLedger::start().await;
    let ok = l
        .effect_ok(
            "RES-900",
            "reserve",
            "k-78",
            Some(78),
            json!({"amount": 10}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);

    let stale = l
        .effect_ok(
            "RES-900",
            "reserve",
            "k-77",
            Some(77),
            json!({"amount": 10}),
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(stale.outcome, "stale_fencing_token");
    assert_eq!(
        stale.body,
        json!({"error": "stale_fencing_token", "resource": "RES-900", "presented": 77, "current": 78})
    );

    let (s, _) = l.get("/v1/operations/k-77").await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "nothing recorded for the stale request"
    );
    let (_, res) = l.get("/v1/resources/RES-900").await;
    assert_eq!(res["balance"], 90);
    assert_eq!(res["highest_fencing_token"], 78);
    assert_eq!(l.stats().await["stale_token_rejections"], 1);

    // An equal token and a request without a token both pass.
    let equal = l
        .effect_ok(
            "RES-900",
            "reserve",
            "k-78b",
            Some(78),
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(equal.status, StatusCode::OK);
    let untokened = l
        .effect_ok("RES-900", "reserve", "k-none", None, json!({"amount": 1}))
        .await;
    assert_eq!(untokened.status, StatusCode::OK);
    // Tokens are per resource.
    let other = l
        .effect_ok(
            "RES-901",
            "reserve",
            "k-other",
            Some(1),
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(other.status, StatusCode::OK);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_writer_is_refused_even_when_it_replays_an_already_recorded_key() {
    let l = TestLedger::start().await;
    let a = l
        .effect_ok("RES-1", "charge", "k-shared", Some(5), json!({"amount": 1}))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    // A newer holder replays the same effect and so raises the token.
    let b = l
        .effect_ok("RES-1", "charge", "k-shared", Some(6), json!({"amount": 1}))
        .await;
    assert!(b.replayed);
    let c = l
        .effect_ok("RES-1", "charge", "k-shared", Some(5), json!({"amount": 1}))
        .await;
    assert_eq!(c.status, StatusCode::CONFLICT);
    assert_eq!(c.body["error"], "stale_fencing_token");
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_writers_with_different_tokens_get_only_consistent_outcomes() {
    let l = TestLedger::start().await;
    l.set_balance("RES-C", 1000).await;
    let mut tasks = Vec::new();
    for token in 1..=20u64 {
        let client = l.client.clone();
        let base = l.base.clone();
        tasks.push(tokio::spawn(async move {
            let r = common::effect_with(
                &client,
                &base,
                "RES-C",
                "reserve",
                &format!("conc-{token}"),
                Some(token),
                json!({"amount": 1}),
            )
            .await
            .expect("request");
            (token, Outcome::read(r).await)
        }));
    }
    let mut applied = Vec::new();
    let mut stale = 0;
    for t in tasks {
        let (token, o) = t.await.unwrap();
        match o.status {
            StatusCode::OK => applied.push(token),
            StatusCode::CONFLICT => {
                stale += 1;
                let current = o.body["current"].as_u64().unwrap();
                assert!(current > token, "refused {token} against {current}");
                let (s, _) = l.get(&format!("/v1/operations/conc-{token}")).await;
                assert_eq!(s, StatusCode::NOT_FOUND);
            }
            other => panic!("unexpected {other} for token {token}: {}", o.body),
        }
    }
    eprintln!("applied {applied:?}, stale {stale}");
    assert!(
        applied.contains(&20),
        "the highest token can never be stale"
    );
    assert_eq!(applied.len() + stale, 20);

    // In commit order, applied tokens strictly increase.
    let mut seq = Vec::new();
    for token in &applied {
        let (s, op) = l.get(&format!("/v1/operations/conc-{token}")).await;
        assert_eq!(s, StatusCode::OK);
        seq.push((op["sequence"].as_i64().unwrap(), *token));
    }
    seq.sort();
    assert!(
        seq.windows(2).all(|w| w[0].1 < w[1].1),
        "tokens out of order in commit order: {seq:?}"
    );

    let (_, res) = l.get("/v1/resources/RES-C").await;
    assert_eq!(res["balance"], 1000 - applied.len() as i64);
    assert_eq!(res["highest_fencing_token"], 20);
    assert_eq!(res["operations"], applied.len() as i64);
    let stats = l.stats().await;
    assert_eq!(stats["stale_token_rejections"], stale);
    assert_eq!(stats["applied"], applied.len() as u64);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_copies_of_one_request_apply_once_and_replay_nineteen_times() {
    let l = TestLedger::start().await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let client = l.client.clone();
        let base = l.base.clone();
        tasks.push(tokio::spawn(async move {
            let r = common::effect_with(
                &client,
                &base,
                "RES-D",
                "charge",
                "same-key",
                Some(3),
                json!({"amount": 2}),
            )
            .await
            .expect("request");
            Outcome::read(r).await
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert!(outcomes.iter().all(|o| o.status == StatusCode::OK));
    assert_eq!(outcomes.iter().filter(|o| !o.replayed).count(), 1);
    assert!(outcomes.windows(2).all(|w| w[0].body == w[1].body));
    let (_, res) = l.get("/v1/resources/RES-D").await;
    assert_eq!(res["balance"], 98);
    l.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_from_token_77_is_refused_after_token_78_went_through() {
    let l = TestLedger::start().await;
    l.set_balance("RES-900", 100).await;
    let (s, _) = l
        .admin(
            Method::POST,
            "/admin/hold",
            Some(json!({"hold_key": "effect-release-1", "fencing_token": 77})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);

    // Attempt 77 sends; the ledger parks it before applying.
    let client = l.client.clone();
    let base = l.base.clone();
    let late = tokio::spawn(async move {
        let r = common::effect_with(
            &client,
            &base,
            "RES-900",
            "release",
            "effect-release-1",
            Some(77),
            json!({"amount": 10}),
        )
        .await
        .expect("held request");
        Outcome::read(r).await
    });
    wait_until_held(&l, 1).await;

    // Attempt 78 (the lease was taken over) sends the same effect: applied.
    let newer = l
        .effect_ok(
            "RES-900",
            "release",
            "effect-release-1",
            Some(78),
            json!({"amount": 10}),
        )
        .await;
    assert_eq!(newer.status, StatusCode::OK);
    assert_eq!(newer.outcome, "applied");

    let (_, rel) = l
        .admin(
            Method::POST,
            "/admin/release",
            Some(json!({"hold_key": "effect-release-1"})),
        )
        .await;
    assert_eq!(rel["released_requests"], 1);
    let late = tokio::time::timeout(Duration::from_secs(10), late)
        .await
        .expect("released request answers")
        .unwrap();
    assert_eq!(late.status, StatusCode::CONFLICT);
    assert_eq!(late.body["error"], "stale_fencing_token");
    assert_eq!(late.body["presented"], 77);
    assert_eq!(late.body["current"], 78);

    let (_, res) = l.get("/v1/resources/RES-900").await;
    assert_eq!(res["balance"], 110, "released exactly once");
    let (_, op) = l.get("/v1/operations/effect-release-1").await;
    assert_eq!(op["fencing_token"], 78);
    let stats = l.stats().await;
    assert_eq!(stats["stale_token_rejections"], 1);
    assert_eq!(stats["injected_faults"]["hold"], 1);
    l.stop().await;
}

pub async fn wait_until_held(l: &TestLedger, n: u64) {
    for _ in 0..400 {
        let (_, h) = l.get("/admin/holds").await;
        let waiting: u64 = h["holds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["waiting"].as_u64().unwrap())
            .sum();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("request was never held");
}
