//! The reference downstream (`paddock-ledger`) served in-process on
//! 127.0.0.1:0, with helpers for its admin and query endpoints, and the
//! connector rows that point at it.

use paddock::Store;
use paddock::store::ConnectorRecord;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub struct Ledger {
    pub url: String,
    client: reqwest::Client,
    /// The gates named by [`Ledger::held_trigger`], by trigger id, with
    /// the key each is sent under (its tenant's).
    gate_names: Mutex<HashMap<i64, (String, String)>>,
    next_gate: AtomicU64,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Ledger {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let db = dir.path().join("ledger.db");
        let task = tokio::spawn(async move {
            paddock_ledger::serve(listener, db, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        let ledger = Self {
            url: format!("http://{addr}"),
            client: reqwest::Client::new(),
            gate_names: Mutex::new(HashMap::new()),
            next_gate: AtomicU64::new(1),
            stop: Some(tx),
            task: Some(task),
            _dir: dir,
        };
        for _ in 0..100 {
            if ledger
                .client
                .get(format!("{}/healthz", ledger.url))
                .send()
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ledger
    }

    pub async fn stop(mut self) {
        // A request still parked at a hold would keep the graceful shutdown
        // waiting: let every one go first.
        self.clear_faults().await;
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap_or(Value::Null)
    }

    /// An effect request sent straight to the ledger (another client).
    pub async fn post_effect(&self, resource: &str, action: &str, key: &str, amount: i64) -> u16 {
        self.client
            .post(format!("{}/v1/{resource}/{action}", self.url))
            .header("idempotency-key", key)
            .json(&json!({"amount": amount}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    pub async fn stats(&self) -> Value {
        self.get("/v1/stats").await.1
    }

    pub async fn stat(&self, name: &str) -> u64 {
        self.stats().await[name].as_u64().unwrap()
    }

    pub async fn resource(&self, name: &str) -> Value {
        self.get(&format!("/v1/resources/{name}")).await.1
    }

    /// Require `header: value` on every `/v1` request (401 otherwise).
    pub async fn require(&self, header: &str, value: &str) {
        let status = self
            .client
            .put(format!("{}/admin/auth", self.url))
            .json(&json!({ "header": header, "value": value }))
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "{status}");
    }

    pub async fn fault(&self, rule: Value) {
        self.post("/admin/faults", rule).await;
    }

    pub async fn clear_faults(&self) {
        self.client
            .delete(format!("{}/admin/faults", self.url))
            .send()
            .await
            .unwrap();
    }

    // The holds below take an effect's key as a `TestHost::job`'s guest
    // names it; the ledger sees the key qualified by the tenant
    // (`crate::sent_key`).

    pub async fn hold(&self, key: &str, token: i64) {
        self.post(
            "/admin/hold",
            json!({"hold_key": crate::sent_key(key), "fencing_token": token}),
        )
        .await;
    }

    /// Hold requests under `sent`, the key as the downstream sees it.
    pub async fn hold_sent(&self, sent: &str) {
        self.post("/admin/hold", json!({ "hold_key": sent })).await;
    }

    pub async fn release(&self, key: &str) {
        self.release_sent(&crate::sent_key(key)).await;
    }

    /// Release the hold on a key as the ledger sees it.
    pub async fn release_sent(&self, sent: &str) {
        self.post("/admin/release", json!({"hold_key": sent})).await;
    }

    /// Requests parked at the hold for `key` right now.
    pub async fn waiting(&self, key: &str) -> u64 {
        self.waiting_sent(&crate::sent_key(key)).await
    }

    /// Requests parked at the hold for a key as the ledger sees it.
    pub async fn waiting_sent(&self, key: &str) -> u64 {
        let (_, holds) = self.get("/admin/holds").await;
        holds["holds"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|h| h["hold_key"] == key)
            .and_then(|h| h["waiting"].as_u64())
            .unwrap_or(0)
    }

    /// Wait until `n` requests are parked on the hold for `key`.
    pub async fn wait_held(&self, key: &str, n: u64) {
        crate::procs::eventually(
            Duration::from_secs(60),
            &format!("{n} request(s) parked at the hold for {key}"),
            || async { (self.waiting(key).await >= n).then_some(()) },
        )
        .await;
    }

    /// Hold the gate of attempt `attempt` of trigger `trigger` (see the
    /// `gated` guest): that attempt stays in its gate effect until
    /// [`Ledger::open_gate`]. Only for a trigger no runner can have
    /// claimed yet: with runners serving, use [`Ledger::held_trigger`].
    pub async fn hold_gate(&self, trigger: i64, attempt: u32) {
        self.post(
            "/admin/hold",
            json!({"hold_key": self.gate_key(trigger, attempt)}),
        )
        .await;
    }

    /// A trigger of `job` whose first attempt waits at its gate until
    /// [`Ledger::open_gate`]. Its gate is named (param `gate_name`) and held
    /// before the trigger exists: a runner already serving may claim it as
    /// soon as it is created, and would pass a gate held only after.
    pub async fn held_trigger(&self, host: &crate::TestHost, job: &str, mut params: Value) -> i64 {
        let name = format!("held-{}", self.next_gate.fetch_add(1, Ordering::Relaxed));
        let tenant = host
            .store
            .job_get_for(&paddock::model::identity::TenantScope::Every, job)
            .await
            .unwrap()
            .tenant;
        let gate = paddock::effects::classify::downstream_key(&tenant, &format!("gate/{name}/1"));
        self.post("/admin/hold", json!({"hold_key": gate})).await;
        params["gate_name"] = json!(name);
        let id = host.trigger(job, params).await.id;
        self.gate_names.lock().unwrap().insert(id, (name, tenant));
        id
    }

    /// Let the attempt held by [`Ledger::hold_gate`] go on.
    pub async fn open_gate(&self, trigger: i64, attempt: u32) {
        self.release_sent(&self.gate_key(trigger, attempt)).await;
    }

    /// Wait until that attempt is waiting at its gate.
    pub async fn at_gate(&self, trigger: i64, attempt: u32) {
        let key = self.gate_key(trigger, attempt);
        crate::procs::eventually(
            Duration::from_secs(60),
            &format!("a request parked at the hold for {key}"),
            || async { (self.waiting_sent(&key).await >= 1).then_some(()) },
        )
        .await;
    }

    /// The key the ledger sees for the `gated` guest's gate of one attempt:
    /// named by its trigger's id (a job of [`crate::TENANT`]), or by
    /// [`Ledger::held_trigger`] (of the job's tenant).
    pub fn gate_key(&self, trigger: i64, attempt: u32) -> String {
        match self.gate_names.lock().unwrap().get(&trigger) {
            Some((name, tenant)) => paddock::effects::classify::downstream_key(
                tenant,
                &format!("gate/{name}/{attempt}"),
            ),
            None => crate::sent_key(&format!("gate/{trigger}/{attempt}")),
        }
    }
}

/// Connector `gate` for the `gated` guest: the ledger, with a timeout far
/// beyond any test, so a held gate is left only when the test opens it.
pub async fn put_gate(store: &Store, ledger: &Ledger) {
    put(
        store,
        connector("gate", ledger, Duration::from_secs(600), true),
    )
    .await;
}

/// A connector row for the ledger: `{url}/v1`, tokens compared (per
/// resource: use one trigger per resource), queryable unless `blind`.
pub fn connector(
    name: &str,
    ledger: &Ledger,
    timeout: Duration,
    queryable: bool,
) -> ConnectorRecord {
    ConnectorRecord {
        name: name.into(),
        kind: "http".into(),
        base_url: format!("{}/v1", ledger.url),
        timeout_ms: timeout.as_millis() as i64,
        permits: 16,
        rate_per_sec: 0.0,
        compares_tokens: true,
        queryable,
        idempotent: true,
        breaker_failure_rate: 0.5,
        breaker_min_calls: 1_000_000, // off unless a test turns it on
        breaker_window_ms: 10_000,
        breaker_open_ms: 1_000,
    }
}

pub async fn put(store: &Store, c: ConnectorRecord) {
    store.connector_put(&c, "test").await.unwrap();
}

/// A test host with the reference ledger as connector `ledger` (queryable,
/// tokens compared, calls time out after `timeout`).
pub async fn host_with_ledger(db: crate::Db, timeout: Duration) -> (crate::TestHost, Ledger) {
    let host = crate::TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(&host.store, connector("ledger", &ledger, timeout, true)).await;
    (host, ledger)
}

/// Effector params for one ledger effect.
pub fn effect(connector: &str, resource: &str, action: &str, key: &str, amount: i64) -> Value {
    json!({
        "connector": connector,
        "action": format!("{resource}/{action}"),
        "key": key,
        "payload": json!({"amount": amount}).to_string(),
    })
}
