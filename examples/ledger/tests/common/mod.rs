//! Shared test harness: a ledger served in-process on 127.0.0.1:0.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Client, Method, Response, StatusCode};
use serde_json::Value;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestLedger {
    pub base: String,
    pub client: Client,
    pub db_path: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _dir: Option<TempDir>,
}

impl TestLedger {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("ledger.db");
        let mut l = Self::start_at(&db).await;
        l._dir = Some(dir);
        l
    }

    /// Serves a ledger on an existing database path (the caller owns the dir).
    pub async fn start_at(db: &Path) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let db_path = db.to_path_buf();
        let serve_db = db_path.clone();
        let task = tokio::spawn(async move {
            paddock_ledger::serve(listener, serve_db, async {
                let _ = rx.await;
            })
            .await
            .expect("ledger serve");
        });
        let l = Self {
            base: format!("http://{addr}"),
            client: client(Duration::from_secs(30)),
            db_path,
            shutdown: Some(tx),
            task: Some(task),
            _dir: None,
        };
        // The database is opened inside `serve`; wait until it answers.
        for _ in 0..200 {
            if let Ok(r) = l.client.get(l.url("/healthz")).send().await
                && r.status().is_success()
            {
                return l;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("ledger did not come up");
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `POST /v1/{resource}/{action}` with the given key, token and body.
    pub async fn effect(
        &self,
        resource: &str,
        action: &str,
        key: &str,
        token: Option<u64>,
        body: Value,
    ) -> reqwest::Result<Response> {
        effect_with(&self.client, &self.base, resource, action, key, token, body).await
    }

    /// Like [`effect`] but returns `(status, headers' outcome, replayed, json)`.
    pub async fn effect_ok(
        &self,
        resource: &str,
        action: &str,
        key: &str,
        token: Option<u64>,
        body: Value,
    ) -> Outcome {
        let r = self
            .effect(resource, action, key, token, body)
            .await
            .expect("effect request");
        Outcome::read(r).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self.client.get(self.url(path)).send().await.expect("get");
        let s = r.status();
        (s, r.json().await.expect("json"))
    }

    pub async fn admin(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.client.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("admin request");
        let s = r.status();
        (s, r.json().await.expect("admin json"))
    }

    pub async fn stats(&self) -> Value {
        self.get("/v1/stats").await.1
    }

    pub async fn set_balance(&self, resource: &str, balance: u64) {
        let (s, _) = self
            .admin(
                Method::PUT,
                &format!("/admin/resources/{resource}"),
                Some(serde_json::json!({ "balance": balance })),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
    }

    pub async fn add_fault(&self, spec: Value) {
        let (s, body) = self.admin(Method::POST, "/admin/faults", Some(spec)).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(15), t)
                .await
                .expect("ledger stops within 15s")
                .expect("ledger task");
        }
    }
}

impl Drop for TestLedger {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

pub fn client(timeout: Duration) -> Client {
    Client::builder()
        .timeout(timeout)
        .build()
        .expect("reqwest client")
}

pub async fn effect_with(
    client: &Client,
    base: &str,
    resource: &str,
    action: &str,
    key: &str,
    token: Option<u64>,
    body: Value,
) -> reqwest::Result<Response> {
    let mut req = client
        .post(format!("{base}/v1/{resource}/{action}"))
        .header("Idempotency-Key", key)
        .json(&body);
    if let Some(t) = token {
        req = req.header("Fencing-Token", t.to_string());
    }
    req.send().await
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: StatusCode,
    /// `Ledger-Outcome` header.
    pub outcome: String,
    /// `Idempotent-Replayed: true` present.
    pub replayed: bool,
    pub body: Value,
}

impl Outcome {
    pub async fn read(r: Response) -> Self {
        let status = r.status();
        let outcome = r
            .headers()
            .get("ledger-outcome")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let replayed = r
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let body = r.json().await.expect("effect json");
        Self {
            status,
            outcome,
            replayed,
            body,
        }
    }
}
