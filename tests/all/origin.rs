//! Connectors stay at their origin: a redirect is never followed (nothing
//! reaches the other origin, and its answer is never recorded), a
//! downstream that echoes the request's credential leaves it in no stored
//! row and no API answer, and a base URL with user info is refused at
//! `connector set` (CLI and API) — a row stored with one before is shown
//! without it.

use crate::ledger::{effect, put};
use crate::secrets::paddock;
use crate::{Db, TestHost};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use paddock::api::{ApiServer, ApiState};
use paddock::effects::EffectGateway;
use paddock::model::identity::Role;
use paddock::model::secret::ConnectorSecret;
use paddock::store::prelude::*;
use paddock::store::{ConnectorRecord, NewToken};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const SECRET: &str = "k3y-0rigin-5ecret-91";

/// A downstream served on 127.0.0.1:0 that counts the requests it gets.
struct Downstream {
    url: String,
    hits: Arc<AtomicU64>,
    _task: tokio::task::JoinHandle<()>,
}

impl Downstream {
    async fn start(router: impl FnOnce(Arc<AtomicU64>) -> axum::Router) -> Self {
        let hits = Arc::new(AtomicU64::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = router(hits.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url,
            hits,
            _task: task,
        }
    }

    fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Every request's headers, as JSON.
fn echoed(headers: &HeaderMap) -> Value {
    let map: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into()),
            )
        })
        .collect();
    Value::Object(map)
}

/// A connector row at `base_url`: the reference ledger's settings, tokens
/// not compared (these downstreams know nothing of fencing).
fn hop(name: &str, base_url: String) -> ConnectorRecord {
    ConnectorRecord {
        name: name.into(),
        kind: "http".into(),
        base_url,
        timeout_ms: 5_000,
        permits: 16,
        rate_per_sec: 0.0,
        compares_tokens: false,
        queryable: true,
        idempotent: true,
        breaker_failure_rate: 0.5,
        breaker_min_calls: 1_000_000,
        breaker_window_ms: 10_000,
        breaker_open_ms: 1_000,
    }
}

async fn set_secret(host: &TestHost, connector: &str) {
    host.store
        .connector_secret_set(
            connector,
            Some(&ConnectorSecret::header("x-api-key", SECRET).unwrap()),
            "test",
        )
        .await
        .unwrap();
}

db_test!(a_downstream_redirecting_to_another_origin_gets_nothing_sent_there);
async fn a_downstream_redirecting_to_another_origin_gets_nothing_sent_there(db: Db) {
    let host = TestHost::new(db).await;
    let other = Downstream::start(|hits| {
        axum::Router::new()
            .fallback(|State(hits): State<Arc<AtomicU64>>| async move {
                hits.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({"receipt": "from-the-other-origin"}))
            })
            .with_state(hits)
    })
    .await;
    let target = other.url.clone();
    let redirector = Downstream::start(move |hits| {
        axum::Router::new()
            .route(
                "/{code}/{*rest}",
                axum::routing::any(
                    move |State(hits): State<Arc<AtomicU64>>,
                          Path((code, rest)): Path<(u16, String)>| {
                        let target = target.clone();
                        async move {
                            hits.fetch_add(1, Ordering::SeqCst);
                            Response::builder()
                                .status(StatusCode::from_u16(code).unwrap())
                                .header(header::LOCATION, format!("{target}/{rest}"))
                                .body(axum::body::Body::from("moved"))
                                .unwrap()
                        }
                    },
                ),
            )
            .with_state(hits)
    })
    .await;
    for code in [302, 307] {
        let name = format!("hop{code}");
        put(
            &host.store,
            hop(&name, format!("{}/{code}", redirector.url)),
        )
        .await;
        set_secret(&host, &name).await;
    }
    host.job("pay", "effector", "connectors = [\"hop302\", \"hop307\"]")
        .await;

    for code in [302, 307] {
        let key = format!("order-{code}/charge");
        let t = host
            .run_one(
                "pay",
                effect(&format!("hop{code}"), "RES-1", "charge", &key, 5),
            )
            .await;
        assert_eq!(t.state, "failed", "{code}: {:?}", t.error_message);
        let error = t.error_message.clone().unwrap_or_default();
        assert!(error.contains("do not follow redirects"), "{error}");
        assert!(!error.contains("from-the-other-origin"), "{error}");
        let effects = host.store.effects_list(100).await.unwrap();
        let e = effects
            .iter()
            .find(|e| e.idempotency_key == key)
            .expect("the effect is recorded");
        assert_eq!(e.state, "failed", "{e:?}");
        assert_eq!(e.last_status, Some(code as i64), "{e:?}");
        // What the connector's own origin said, never the other's.
        let response = String::from_utf8_lossy(e.response.as_deref().unwrap_or_default());
        assert_eq!(response, "moved", "{e:?}");
        assert!(
            e.error
                .as_deref()
                .unwrap_or_default()
                .contains("--base-url"),
            "{e:?}"
        );
    }
    assert_eq!(
        redirector.hits(),
        2,
        "one request per connector, never retried"
    );
    assert_eq!(other.hits(), 0, "nothing reaches the other origin");
}

db_test!(a_downstream_echoing_the_credential_leaves_it_in_no_row_and_no_answer);
async fn a_downstream_echoing_the_credential_leaves_it_in_no_row_and_no_answer(db: Db) {
    let host = TestHost::new(db).await;
    // Every answer echoes the request's headers: a success, a refusal
    // (its body becomes the error text), a 303 (unknown: settled by a
    // query, whose record becomes a ticket's evidence).
    let echo = Downstream::start(|hits| {
        axum::Router::new()
            .route(
                "/v1/operations/{key}",
                axum::routing::get(
                    |State(hits): State<Arc<AtomicU64>>, headers: HeaderMap| async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        // A record naming another operation: never taken
                        // as ours, it becomes a ticket's evidence.
                        axum::Json(json!({
                            "status": 200,
                            "resource": "OTHER",
                            "action": "refund",
                            "response": {"seen": echoed(&headers)},
                        }))
                    },
                ),
            )
            .fallback(
                |State(hits): State<Arc<AtomicU64>>, headers: HeaderMap| async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    // The key as the guest named it, without its tenant.
                    let key = key
                        .split_once('/')
                        .map_or(key.clone(), |(_, k)| k.to_string());
                    let body = axum::Json(json!({"error": "echo", "headers": echoed(&headers)}));
                    let status = if key.starts_with("refuse") {
                        StatusCode::UNPROCESSABLE_ENTITY
                    } else if key.starts_with("unknown") {
                        StatusCode::SEE_OTHER
                    } else {
                        StatusCode::OK
                    };
                    (status, body).into_response()
                },
            )
            .with_state(hits)
    })
    .await;
    put(&host.store, hop("echo", format!("{}/v1", echo.url))).await;
    set_secret(&host, "echo").await;
    host.job("pay", "effector", "connectors = [\"echo\"]").await;

    let ok = host
        .run_one("pay", effect("echo", "RES-1", "charge", "ok-1", 5))
        .await;
    assert_eq!(ok.state, "succeeded", "{:?}", ok.error_message);
    let result = String::from_utf8_lossy(ok.result.as_deref().unwrap_or_default()).into_owned();
    assert!(
        result.contains("[redacted]"),
        "the echo arrived, redacted: {result}"
    );
    let refused = host
        .run_one("pay", effect("echo", "RES-1", "charge", "refuse-1", 5))
        .await;
    assert_eq!(refused.state, "failed");
    host.trigger("pay", effect("echo", "RES-1", "charge", "unknown-1", 5))
        .await;
    host.runner("r", std::time::Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
    // The unknown one is settled by the recovery scanner's query.
    let report = EffectGateway::new(host.store.clone())
        .recover(100)
        .await
        .unwrap();
    assert_eq!(report.scanned, 1, "{report:?}");
    assert_eq!(echo.hits(), 4, "every call reached the downstream");
    let tickets = host.store.exceptions_list(None).await.unwrap();
    assert_eq!(tickets.len(), 1, "the query's record opened a ticket");
    assert!(
        tickets[0].evidence.contains("[redacted]"),
        "{:?}",
        tickets[0]
    );

    // Every stored row...
    let mut stored = String::new();
    for t in host.store.triggers_list(100).await.unwrap() {
        stored.push_str(&format!("{t:?}"));
        stored.push_str(&String::from_utf8_lossy(
            t.result.as_deref().unwrap_or_default(),
        ));
        for a in host.store.attempts_for(t.id).await.unwrap() {
            stored.push_str(&format!("{a:?}"));
        }
    }
    for e in host.store.effects_list(100).await.unwrap() {
        stored.push_str(&format!("{e:?}"));
        stored.push_str(&String::from_utf8_lossy(
            e.response.as_deref().unwrap_or_default(),
        ));
    }
    for x in &tickets {
        stored.push_str(&format!("{x:?}"));
    }
    stored.push_str(&serde_json::to_string(&host.store.audit_list().await.unwrap()).unwrap());
    assert!(stored.contains("[redacted]"));
    assert!(
        !stored.contains(SECRET),
        "a stored row holds the credential"
    );

    // ...and every API answer that shows them.
    let token = host
        .store
        .token_create(
            &NewToken {
                name: "admin".into(),
                role: Role::Admin,
                tenant: None,
                valid_for_ms: 3_600_000,
            },
            "local:test",
        )
        .await
        .unwrap()
        .text;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = ApiServer::start(
        listener,
        ApiState {
            store: host.store.clone(),
            registry: host.registry.clone(),
        },
    )
    .unwrap();
    let http = reqwest::Client::new();
    let mut paths = vec![
        "/v1/triggers".to_string(),
        "/v1/effects".into(),
        "/v1/tickets".into(),
        "/v1/audit".into(),
        "/v1/connectors".into(),
    ];
    for t in host.store.triggers_list(100).await.unwrap() {
        paths.push(format!("/v1/triggers/{}", t.id));
        paths.push(format!("/v1/triggers/{}/effects", t.id));
    }
    for x in &tickets {
        paths.push(format!("/v1/tickets/{}", x.id));
    }
    for path in paths {
        let answer = http
            .get(format!("http://{}{path}", server.addr()))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        let text = answer.text().await.unwrap();
        assert!(
            !text.contains(SECRET),
            "{path} shows the credential: {text}"
        );
    }
}

db_test!(a_base_url_with_user_info_is_refused_at_set_and_an_old_one_is_shown_hidden);
async fn a_base_url_with_user_info_is_refused_at_set_and_an_old_one_is_shown_hidden(db: Db) {
    let host = TestHost::new(db).await;
    let (ok, out) = paddock(
        &host,
        &[
            "connector",
            "set",
            "bank",
            "--base-url",
            "https://svc:hunter2-pw@bank.example/v1",
        ],
        &[],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("paddock connector secret set"), "{out}");
    assert!(!out.contains("hunter2-pw"), "{out}");

    let token = host
        .store
        .token_create(
            &NewToken {
                name: "admin".into(),
                role: Role::Admin,
                tenant: None,
                valid_for_ms: 3_600_000,
            },
            "local:test",
        )
        .await
        .unwrap()
        .text;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = ApiServer::start(
        listener,
        ApiState {
            store: host.store.clone(),
            registry: host.registry.clone(),
        },
    )
    .unwrap();
    let base = format!("http://{}", server.addr());
    let http = reqwest::Client::new();
    let mut body =
        serde_json::to_value(hop("bank", "https://svc:hunter2-pw@bank.example/v1".into())).unwrap();
    let answer = http
        .put(format!("{base}/v1/connectors/bank"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let text = answer.text().await.unwrap();
    assert!(text.contains("paddock connector secret set"), "{text}");
    assert!(!text.contains("hunter2-pw"), "{text}");
    assert!(
        host.store.connectors_list().await.unwrap().is_empty(),
        "nothing stored"
    );
    body["base_url"] = json!("https://bank.example/v1");
    let answer = http
        .put(format!("{base}/v1/connectors/bank"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());

    // A row stored with user info before the rule: shown without it by
    // every list, to every role.
    put(
        &host.store,
        hop("old", "https://svc:hunter2-pw@old.example/v1".into()),
    )
    .await;
    let (ok, out) = paddock(&host, &["connector", "list"], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("https://***@old.example/v1"), "{out}");
    assert!(!out.contains("hunter2-pw"), "{out}");
    for (name, role, tenant) in [
        ("operator", Role::Operator, None),
        ("reviewer", Role::Reviewer, None),
        ("team", Role::Team, Some("t1".to_string())),
    ] {
        let token = host
            .store
            .token_create(
                &NewToken {
                    name: name.into(),
                    role,
                    tenant,
                    valid_for_ms: 3_600_000,
                },
                "local:test",
            )
            .await
            .unwrap()
            .text;
        let answer = http
            .get(format!("{base}/v1/connectors"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let text = answer.text().await.unwrap();
        assert!(!text.contains("hunter2-pw"), "{name}: {text}");
    }
}
