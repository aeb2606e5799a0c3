//! The effect protocol's I/O: store lookups and fenced writes, connector
//! permits, breaker and rate limit, the HTTP call, and the recovery scanner.

use super::breaker::{Admit, Breaker, BreakerConfig, BreakerState, RateLimit};
use super::classify::{self, Answer, Found, Verdict};
use super::http::HttpConnector;
use crate::model::retry::{RetryPolicy, backoff_ms};
use crate::model::{LeaseRef, StopReason};
use crate::sandbox::StopSignal;
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::store::{
    ConnectorRecord, EffectOutcome, EffectRecord, EffectStore, NewEffect, NewException, Store,
    StoreError,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Gateway settings. Defaults: connector rows cached 1 s; a backoff inside
/// one `invoke` is capped at 5 s (longer waits belong to `retry_wait`);
/// `max_park` (default 0: off) lets a call wait, sending nothing, for an
/// open breaker before answering `circuit-open`. It holds a runner slot
/// while it waits (which cut throughput in the retry-storm test), so the
/// default is to answer at once: the refusal is noted in the attempt's
/// [`ParkSlot`] and the runner parks the trigger in the schedule
/// (`next_run_at`) without spending an attempt.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub connector_ttl: Duration,
    pub max_inline_backoff: Duration,
    pub max_park: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            connector_ttl: Duration::from_secs(1),
            max_inline_backoff: Duration::from_secs(5),
            max_park: Duration::ZERO,
        }
    }
}

/// Who is asking: the attempt's lease, its grants and retry policy, and its
/// stop signal (closed on a fenced answer).
pub struct Caller<'a> {
    pub lease: &'a LeaseRef,
    pub granted: &'a [String],
    pub retry: &'a RetryPolicy,
    pub stop: Option<&'a StopSignal>,
    /// Where the gateway notes that a connector's breaker refused a call,
    /// so the runner can park the trigger until the breaker half-opens
    /// instead of spending an attempt (see [`ParkSlot`]).
    pub park: Option<&'a ParkSlot>,
}

/// An attempt's note that an open circuit breaker refused one of its
/// effects: the longest wait any refusal asked for, in ms. The runner reads
/// it when the attempt ends; a transient failure with a note parks the
/// trigger until then and gives the attempt back to the budget.
#[derive(Debug, Default)]
pub struct ParkSlot(std::sync::atomic::AtomicU64);

impl ParkSlot {
    pub fn note(&self, retry_after_ms: u64) {
        self.0
            .fetch_max(retry_after_ms.max(1), std::sync::atomic::Ordering::SeqCst);
    }

    /// ms until the refusing breaker lets a probe through, if any refused.
    pub fn parked_for(&self) -> Option<u64> {
        match self.0.load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            ms => Some(ms),
        }
    }
}

/// In-memory state of one connector in this process.
struct Live {
    record: ConnectorRecord,
    loaded: Instant,
    permits: Arc<Semaphore>,
    breaker: Mutex<Breaker>,
    rate: Mutex<RateLimit>,
}

impl Live {
    fn new(record: ConnectorRecord) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(record.permits.max(1) as usize)),
            breaker: Mutex::new(Breaker::new(BreakerConfig {
                failure_rate: record.breaker_failure_rate,
                min_calls: record.breaker_min_calls.max(1) as u32,
                window_ms: record.breaker_window_ms.max(1) as u64,
                open_ms: record.breaker_open_ms.max(1) as u64,
            })),
            rate: Mutex::new(RateLimit::new(record.rate_per_sec)),
            loaded: Instant::now(),
            record,
        }
    }
}

/// What one recovery scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub scanned: usize,
    /// Found applied at the downstream: marked succeeded, nothing resent.
    pub succeeded: usize,
    /// Found refused at the downstream: marked failed.
    pub failed: usize,
    /// Not found at the downstream: marked retryable (safe to resend).
    pub not_found: usize,
    /// Could not be decided: an exception ticket each.
    pub tickets: usize,
    /// Query failed; left for the next scan.
    pub undecided: usize,
}

/// The side-effect gateway. One per process; cheap to share.
pub struct EffectGateway {
    store: Arc<dyn EffectStore>,
    http: HttpConnector,
    config: GatewayConfig,
    live: Mutex<HashMap<String, Arc<Live>>>,
    epoch: Instant,
}

fn new_request_id() -> String {
    format!("req-{:016x}", rand::random::<u64>())
}

fn body_text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

impl EffectGateway {
    pub fn new(store: Store) -> Arc<Self> {
        Self::with_config(store, GatewayConfig::default())
    }

    pub fn with_config(store: Store, config: GatewayConfig) -> Arc<Self> {
        Self::with_store(Arc::new(store), config)
    }

    /// A gateway over any [`EffectStore`] (tests wrap one to inject faults).
    pub fn with_store(store: Arc<dyn EffectStore>, config: GatewayConfig) -> Arc<Self> {
        Arc::new(Self {
            store,
            http: HttpConnector::new(),
            config,
            live: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
        })
    }

    /// Monotonic ms for the breaker and rate limit.
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The connector's live state, reloading its row at most every TTL
    /// (breaker state survives a reload if the row did not change).
    async fn connector(&self, name: &str) -> Result<Option<Arc<Live>>, StoreError> {
        if let Some(live) = self.live.lock().unwrap().get(name)
            && live.loaded.elapsed() < self.config.connector_ttl
        {
            return Ok(Some(live.clone()));
        }
        let Some(record) = self.store.connector_get(name).await? else {
            self.live.lock().unwrap().remove(name);
            return Ok(None);
        };
        let mut map = self.live.lock().unwrap();
        let live = match map.get(name) {
            Some(old) if old.record == record => Arc::new(Live {
                record,
                loaded: Instant::now(),
                permits: old.permits.clone(),
                breaker: Mutex::new(old.breaker.lock().unwrap().clone()),
                rate: Mutex::new(old.rate.lock().unwrap().clone()),
            }),
            _ => Arc::new(Live::new(record)),
        };
        map.insert(name.to_string(), live.clone());
        Ok(Some(live))
    }

    async fn granted_connector(
        &self,
        granted: &[String],
        name: &str,
    ) -> Result<Arc<Live>, EffectError> {
        if !granted.iter().any(|c| c == name) {
            return Err(EffectError::NotGranted(format!(
                "connector '{name}' is not granted to this job (add it to the manifest's `connectors`)"
            )));
        }
        match self.connector(name).await {
            Ok(Some(live)) => Ok(live),
            Ok(None) => Err(EffectError::NotGranted(format!(
                "connector '{name}' is not configured on this host (`paddock connector set {name} ...`)"
            ))),
            Err(e) => Err(EffectError::Invalid(format!(
                "connector '{name}' could not be read: {e}"
            ))),
        }
    }

    /// A store error seen by an attempt: a stale token closes the gate.
    fn store_error(&self, caller: &Caller<'_>, e: StoreError) -> EffectError {
        match e {
            StoreError::LeaseLost { .. } => {
                if let Some(stop) = caller.stop {
                    stop.request(StopReason::LeaseLost);
                }
                EffectError::LeaseLost
            }
            other => {
                tracing::warn!(trigger_id = caller.lease.trigger_id, error = %other, "effect bookkeeping failed");
                // Not knowing what was written, the attempt must not go on.
                if let Some(stop) = caller.stop {
                    stop.request(StopReason::LeaseLost);
                }
                EffectError::LeaseLost
            }
        }
    }

    async fn count(&self, name: &str) {
        if let Err(e) = self.store.counter_add(name, 1).await {
            tracing::warn!(counter = name, error = %e, "counter not written");
        }
    }

    /// Evidence for a ticket: the trigger, its attempts and tokens, the
    /// effect record and what the downstream answered.
    async fn evidence(
        &self,
        trigger_id: i64,
        effect: Option<&EffectRecord>,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let trigger = self.store.trigger_get(trigger_id).await.ok().map(|t| {
            serde_json::json!({
                "id": t.id, "plan_key": t.plan_key, "state": t.state,
                "fencing_token": t.fencing_token, "attempts": t.attempts,
            })
        });
        let attempts: Vec<_> = self
            .store
            .attempts_for(trigger_id)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                serde_json::json!({
                    "id": a.id, "attempt_no": a.attempt_no, "runner_id": a.runner_id,
                    "fencing_token": a.fencing_token, "outcome": a.outcome,
                    "error_class": a.error_class,
                })
            })
            .collect();
        let effect = effect.map(|e| {
            serde_json::json!({
                "idempotency_key": e.idempotency_key, "connector": e.connector,
                "action": e.action, "params_digest": e.params_digest, "request_id": e.request_id,
                "fencing_token": e.fencing_token, "state": e.state, "sends": e.sends,
                "last_status": e.last_status, "error": e.error, "compensates": e.compensates,
                "response": e.response.as_deref().map(body_text),
            })
        });
        serde_json::json!({
            "trigger": trigger, "attempts": attempts, "effect": effect, "detail": extra,
        })
    }

    async fn ticket(
        &self,
        kind: &'static str,
        subject: String,
        trigger_id: i64,
        effect: Option<&EffectRecord>,
        extra: serde_json::Value,
    ) -> Option<i64> {
        let allowed = match kind {
            "unknown_outcome" | "evidence_conflict" => {
                vec!["mark_succeeded", "mark_failed", "resend"]
            }
            "budget_exhausted" => vec!["resend", "mark_failed"],
            _ => vec!["dismiss"],
        };
        let new = NewException {
            kind,
            subject,
            trigger_id: Some(trigger_id),
            effect_key: effect.map(|e| e.idempotency_key.clone()),
            evidence: self.evidence(trigger_id, effect, extra).await,
            allowed_actions: allowed,
        };
        match self.store.exception_open(&new).await {
            Ok((t, _)) => Some(t.id),
            Err(e) => {
                tracing::error!(error = %e, kind, "exception ticket not written");
                None
            }
        }
    }

    /// The effect's send budget is spent. For an idempotent downstream the
    /// downstream's "nothing was committed" can be trusted and the failure
    /// is the job's to handle. A downstream that does not honour idempotency
    /// keys may have half-applied any of those sends, so a person decides:
    /// an exception ticket carries the effect and every attempt.
    async fn budget_exhausted(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        key: &str,
        why: String,
    ) -> EffectError {
        self.count("effect_budget_exhausted").await;
        if live.record.idempotent {
            return EffectError::BudgetExhausted(why);
        }
        let record = self.store.effect_get(key).await.ok().flatten();
        let ticket = self
            .ticket(
                "budget_exhausted",
                key.to_string(),
                caller.lease.trigger_id,
                record.as_ref(),
                serde_json::json!({
                    "why": why,
                    "connector": live.record.name,
                    "idempotent": false,
                }),
            )
            .await;
        EffectError::BudgetExhausted(format!(
            "{why}; connector '{}' does not honour idempotency keys, so a person decides: \
             exception ticket {}",
            live.record.name,
            ticket.map_or("not written".into(), |t| t.to_string())
        ))
    }

    /// The recorded outcome of a settled effect, as the guest sees it again.
    fn replay(record: &EffectRecord) -> Outcome {
        match record.state.as_str() {
            "succeeded" => Outcome::Replayed(record.response.clone().unwrap_or_default()),
            _ => Outcome::Failed(record.error.clone().unwrap_or_else(|| "failed".into())),
        }
    }

    /// Perform (or replay) one effect for an attempt. See the module docs
    /// for the order of checks.
    pub async fn invoke(
        &self,
        caller: &Caller<'_>,
        request: Request,
    ) -> Result<Outcome, EffectError> {
        classify::check_key(&request.idempotency_key).map_err(EffectError::Invalid)?;
        classify::check_action(&request.action).map_err(EffectError::Invalid)?;
        let live = self
            .granted_connector(caller.granted, &request.connector)
            .await?;
        let key = request.idempotency_key.clone();
        let digest = classify::params_digest(
            &request.connector,
            &request.action,
            request.compensates.as_deref(),
            &request.payload,
        );
        if let Some(original) = &request.compensates {
            self.check_compensation(&key, original).await?;
        }
        // First sends are the common case: while the breaker is closed,
        // skip the lookup and let the fenced intent insert find out (its
        // `ON CONFLICT DO NOTHING` answers "already recorded" as a race,
        // and the loop then looks the key up as usual). One round trip
        // fewer on every new effect. With the breaker not closed the key is
        // read first, so a recorded outcome is replayed even while the
        // downstream is refused.
        let mut optimistic = live.breaker.lock().unwrap().state() == BreakerState::Closed;
        let mut raced = false;
        loop {
            let existing = if optimistic {
                None
            } else {
                self.store
                    .effect_get(&key)
                    .await
                    .map_err(|e| self.store_error(caller, e))?
            };
            if let Some(rec) = &existing {
                if rec.params_digest != digest {
                    self.count("effect_key_conflicts").await;
                    let ticket = self
                        .ticket(
                            "key_conflict",
                            format!("{key}#{digest}"),
                            caller.lease.trigger_id,
                            Some(rec),
                            serde_json::json!({
                                "presented_digest": digest, "presented_by_attempt": caller.lease.attempt_id,
                                "presented_token": caller.lease.fencing_token,
                            }),
                        )
                        .await;
                    return Err(EffectError::KeyConflict(format!(
                        "key '{key}' was recorded with other params (digest {}, presented {digest}); \
                         nothing was sent; exception ticket {}",
                        rec.params_digest,
                        ticket.map_or("not written".into(), |t| t.to_string())
                    )));
                }
                match rec.state.as_str() {
                    "succeeded" | "failed" => {
                        self.count("effect_idempotency_hits").await;
                        return Ok(Self::replay(rec));
                    }
                    "intent" | "unknown" => {
                        // Query first: never resend what may have happened.
                        if let Some(done) = self.resolve_in_attempt(caller, &live, rec).await? {
                            return Ok(done);
                        }
                    }
                    _ => {} // retryable: nothing committed, resend
                }
            }
            match self
                .send(caller, &live, &request, &digest, existing.as_ref())
                .await
            {
                Err(SendError::Raced) if optimistic => optimistic = false,
                Err(SendError::Raced) if !raced => raced = true,
                Err(SendError::Raced) => {
                    return Err(EffectError::Invalid(format!(
                        "key '{key}' is being written concurrently by another attempt"
                    )));
                }
                Err(SendError::Effect(e)) => return Err(e),
                Ok(outcome) => return Ok(outcome),
            }
        }
    }

    /// Whether `key` may compensate `original`: the original exists, has
    /// succeeded, is not itself a compensation (no unbounded chains), and is
    /// not `key`. Returns the original. Used by `invoke` and by an
    /// operator's `paddock effects compensate`.
    pub async fn check_compensation(
        &self,
        key: &str,
        original: &str,
    ) -> Result<EffectRecord, EffectError> {
        if original == key {
            return Err(EffectError::Invalid(
                "an effect cannot compensate itself".into(),
            ));
        }
        let rec = self
            .store
            .effect_get(original)
            .await
            .map_err(|e| EffectError::Invalid(format!("original effect unreadable: {e}")))?
            .ok_or_else(|| {
                EffectError::Invalid(format!(
                    "nothing is recorded under key '{original}' to compensate"
                ))
            })?;
        if rec.compensates.is_some() {
            return Err(EffectError::Invalid(format!(
                "'{original}' is itself a compensation; compensations cannot be compensated"
            )));
        }
        if rec.state != "succeeded" {
            return Err(EffectError::Invalid(format!(
                "'{original}' is {}, not succeeded: nothing to compensate yet",
                rec.state
            )));
        }
        Ok(rec)
    }

    /// An unresolved record found by a new request: query by key. Returns
    /// the outcome if decided, `None` if it is safe to send.
    async fn resolve_in_attempt(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        rec: &EffectRecord,
    ) -> Result<Option<Outcome>, EffectError> {
        let key = &rec.idempotency_key;
        if !live.record.queryable {
            let ticket = self
                .ticket(
                    "unknown_outcome",
                    key.clone(),
                    caller.lease.trigger_id,
                    Some(rec),
                    serde_json::json!({"why": "connector cannot be queried by key"}),
                )
                .await;
            self.count("effect_unknown").await;
            return Ok(Some(Outcome::Unknown(format!(
                "'{key}' may have happened and connector '{}' cannot be queried; exception ticket {}",
                live.record.name,
                ticket.map_or("not written".into(), |t| t.to_string())
            ))));
        }
        match self.http.query(&live.record, key).await {
            Found::Recorded { record, .. } if !classify::evidence_matches(&rec.action, &record) => {
                let ticket = self
                    .ticket(
                        "evidence_conflict",
                        key.clone(),
                        caller.lease.trigger_id,
                        Some(rec),
                        serde_json::json!({"downstream_record": record}),
                    )
                    .await;
                Ok(Some(Outcome::Unknown(format!(
                    "the downstream's record for '{key}' is for another operation; exception ticket {}",
                    ticket.map_or("not written".into(), |t| t.to_string())
                ))))
            }
            Found::Recorded { status, body, .. } => {
                let (state, error) = if (200..300).contains(&status) {
                    ("succeeded", None)
                } else {
                    ("failed", Some(format!("{status}: {}", body_text(&body))))
                };
                let settled = self
                    .store
                    .effect_settle(
                        caller.lease,
                        key,
                        &EffectOutcome {
                            state,
                            response: Some(body),
                            error,
                            last_status: Some(status as i64),
                            resolved_by: "query",
                        },
                    )
                    .await
                    .map_err(|e| self.store_error(caller, e))?;
                self.count("effect_idempotency_hits").await;
                Ok(Some(Self::replay(&settled)))
            }
            Found::NotFound => Ok(None),
            Found::Undecided(why) => {
                self.count("effect_unknown").await;
                if rec.sends >= caller.retry.max_attempts as i64 {
                    let ticket = self
                        .ticket(
                            "unknown_outcome",
                            key.clone(),
                            caller.lease.trigger_id,
                            Some(rec),
                            serde_json::json!({"query": why}),
                        )
                        .await;
                    return Ok(Some(Outcome::Unknown(format!(
                        "'{key}' is still unknown after {} sends ({why}); exception ticket {}",
                        rec.sends,
                        ticket.map_or("not written".into(), |t| t.to_string())
                    ))));
                }
                Ok(Some(Outcome::Unknown(format!(
                    "'{key}' is unknown and the query failed: {why}"
                ))))
            }
        }
    }

    /// Send (and resend within the budget) under the lease.
    async fn send(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        request: &Request,
        digest: &str,
        existing: Option<&EffectRecord>,
    ) -> Result<Outcome, SendError> {
        let key = &request.idempotency_key;
        let budget = caller.retry.max_attempts.max(1) as i64;
        let mut sends = existing.map_or(0, |r| r.sends);
        let mut recorded = existing.is_some();
        let mut parked = Duration::ZERO;
        loop {
            if caller.stop.is_some_and(|s| s.interrupting().is_some()) {
                return Err(EffectError::LeaseLost.into());
            }
            if sends >= budget {
                let why = format!(
                    "'{key}' was sent {sends} times (budget {budget}); nothing was committed"
                );
                return Err(self.budget_exhausted(caller, live, key, why).await.into());
            }
            let admit = live.breaker.lock().unwrap().admit(self.now_ms());
            let probe = match admit {
                Admit::Allowed => false,
                Admit::Probe => true,
                Admit::Rejected { retry_after_ms } => {
                    // Park instead of burning an attempt, while the wait is short.
                    let wait = Duration::from_millis(retry_after_ms.clamp(5, 100));
                    if parked + wait <= self.config.max_park {
                        parked += wait;
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    self.count("circuit_open_rejections").await;
                    if let Some(park) = caller.park {
                        park.note(retry_after_ms);
                    }
                    return Err(EffectError::CircuitOpen(format!(
                        "connector '{}' is open; retry after {retry_after_ms} ms",
                        live.record.name
                    ))
                    .into());
                }
            };
            let answer = {
                loop {
                    let wait = live.rate.lock().unwrap().take(self.now_ms());
                    if wait == 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                let _permit = live
                    .permits
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("connector semaphore never closes");
                let request_id = new_request_id();
                let intent = if recorded {
                    self.store
                        .effect_reintent(caller.lease, key, digest, &request_id)
                        .await
                } else {
                    self.store
                        .effect_intent(
                            caller.lease,
                            &NewEffect {
                                idempotency_key: key.clone(),
                                connector: request.connector.clone(),
                                action: request.action.clone(),
                                params_digest: digest.to_string(),
                                request_id: request_id.clone(),
                                compensates: request.compensates.clone(),
                            },
                        )
                        .await
                };
                match intent {
                    Ok(rec) => sends = rec.sends,
                    Err(StoreError::Conflict(_)) => {
                        if probe {
                            live.breaker.lock().unwrap().abandon_probe();
                        }
                        return Err(SendError::Raced);
                    }
                    Err(e) => {
                        if probe {
                            live.breaker.lock().unwrap().abandon_probe();
                        }
                        return Err(self.store_error(caller, e).into());
                    }
                }
                recorded = true;
                self.http
                    .send(
                        &live.record,
                        &request.action,
                        key,
                        caller.lease.fencing_token.get(),
                        &request_id,
                        &request.payload,
                    )
                    .await
            };
            let verdict = classify::classify(&answer);
            live.breaker
                .lock()
                .unwrap()
                .record(self.now_ms(), probe, verdict.is_breaker_failure());
            let (status, body) = match &answer {
                Answer::Status { status, body, .. } => (Some(*status as i64), Some(body.clone())),
                _ => (None, None),
            };
            let settle = |state: &'static str, error: Option<String>| EffectOutcome {
                state,
                response: body.clone(),
                error,
                last_status: status,
                resolved_by: "gateway",
            };
            match verdict {
                Verdict::Succeeded { replayed } => {
                    self.store
                        .effect_settle(caller.lease, key, &settle("succeeded", None))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    let body = body.unwrap_or_default();
                    return Ok(if replayed {
                        self.count("effect_idempotency_hits").await;
                        Outcome::Replayed(body)
                    } else {
                        Outcome::Done(body)
                    });
                }
                Verdict::Failed(why) => {
                    self.store
                        .effect_settle(caller.lease, key, &settle("failed", Some(why.clone())))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    return Ok(Outcome::Failed(why));
                }
                Verdict::Invalid(why) => {
                    self.store
                        .effect_settle(caller.lease, key, &settle("failed", Some(why.clone())))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    return Err(EffectError::Invalid(why).into());
                }
                Verdict::KeyConflict(why) => {
                    let rec = self
                        .store
                        .effect_settle(caller.lease, key, &settle("failed", Some(why.clone())))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    self.count("effect_key_conflicts").await;
                    let ticket = self
                        .ticket(
                            "key_conflict",
                            format!("{key}#downstream"),
                            caller.lease.trigger_id,
                            Some(&rec),
                            serde_json::json!({"downstream": why}),
                        )
                        .await;
                    return Err(EffectError::KeyConflict(format!(
                        "the downstream holds '{key}' with other params: {why}; exception ticket {}",
                        ticket.map_or("not written".into(), |t| t.to_string())
                    ))
                    .into());
                }
                Verdict::Fenced(why) => {
                    // The downstream refused our token: this attempt is stale.
                    self.count("downstream_stale_token_rejections").await;
                    if let Some(stop) = caller.stop {
                        stop.request(StopReason::LeaseLost);
                    }
                    tracing::warn!(trigger_id = caller.lease.trigger_id, token = %caller.lease.fencing_token, %why, "downstream refused the fencing token");
                    // Record the refusal; under a stale token this write is
                    // itself refused (and counted) by the store.
                    let _ = self
                        .store
                        .effect_settle(caller.lease, key, &settle("retryable", Some(why)))
                        .await;
                    return Err(EffectError::LeaseLost.into());
                }
                Verdict::Transient(why) => {
                    self.store
                        .effect_settle(caller.lease, key, &settle("retryable", Some(why.clone())))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    if sends >= budget {
                        let why = format!(
                            "'{key}' failed {sends} times (budget {budget}), last: {why}; \
                             nothing was committed"
                        );
                        return Err(self.budget_exhausted(caller, live, key, why).await.into());
                    }
                    let wait = backoff_ms(caller.retry, sends as u32, rand::random::<f64>())
                        .min(self.config.max_inline_backoff.as_millis() as u64);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                Verdict::Unknown(why) => {
                    let rec = self
                        .store
                        .effect_settle(caller.lease, key, &settle("unknown", Some(why.clone())))
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    self.count("effect_unknown").await;
                    if !live.record.queryable || rec.sends >= budget {
                        let ticket = self
                            .ticket(
                                "unknown_outcome",
                                key.clone(),
                                caller.lease.trigger_id,
                                Some(&rec),
                                serde_json::json!({"answer": why}),
                            )
                            .await;
                        return Ok(Outcome::Unknown(format!(
                            "{why}; exception ticket {}",
                            ticket.map_or("not written".into(), |t| t.to_string())
                        )));
                    }
                    return Ok(Outcome::Unknown(format!(
                        "{why}; the next attempt queries '{key}' before resending"
                    )));
                }
            }
        }
    }

    /// `effects.query`: what became of an effect, by key, without sending.
    pub async fn query(
        &self,
        caller: &Caller<'_>,
        connector: &str,
        key: &str,
    ) -> Result<Option<Outcome>, EffectError> {
        classify::check_key(key).map_err(EffectError::Invalid)?;
        let live = self.granted_connector(caller.granted, connector).await?;
        let rec = self
            .store
            .effect_get(key)
            .await
            .map_err(|e| self.store_error(caller, e))?;
        match rec {
            Some(rec) if rec.connector != connector => Err(EffectError::Invalid(format!(
                "'{key}' was recorded for connector '{}'",
                rec.connector
            ))),
            Some(rec) if rec.state == "succeeded" || rec.state == "failed" => {
                Ok(Some(Self::replay(&rec)))
            }
            Some(rec) if rec.state == "retryable" => Ok(None),
            Some(rec) => match self.resolve_in_attempt(caller, &live, &rec).await? {
                Some(outcome) => Ok(Some(outcome)),
                None => {
                    self.store
                        .effect_settle(
                            caller.lease,
                            key,
                            &EffectOutcome {
                                state: "retryable",
                                response: None,
                                error: Some("not found at the downstream".into()),
                                last_status: Some(404),
                                resolved_by: "query",
                            },
                        )
                        .await
                        .map_err(|e| self.store_error(caller, e))?;
                    Ok(None)
                }
            },
            None if live.record.queryable => match self.http.query(&live.record, key).await {
                Found::Recorded { status, body, .. } if (200..300).contains(&status) => {
                    Ok(Some(Outcome::Replayed(body)))
                }
                Found::Recorded { status, body, .. } => Ok(Some(Outcome::Failed(format!(
                    "{status}: {}",
                    body_text(&body)
                )))),
                Found::NotFound => Ok(None),
                Found::Undecided(why) => Ok(Some(Outcome::Unknown(why))),
            },
            None => Ok(None),
        }
    }

    /// The recovery scanner: resolve effects left `intent` or `unknown` by
    /// attempts that no longer hold a lease (crash, drain, expiry), by
    /// querying the downstream by key. Nothing is ever resent here.
    pub async fn recover(&self, limit: i64) -> Result<RecoveryReport, StoreError> {
        let mut report = RecoveryReport::default();
        for rec in self.store.effects_unresolved(limit).await? {
            report.scanned += 1;
            let live = self.connector(&rec.connector).await?;
            let queryable = live.as_ref().is_some_and(|l| l.record.queryable);
            let Some(live) = live.filter(|_| queryable) else {
                self.ticket(
                    "unknown_outcome",
                    rec.idempotency_key.clone(),
                    rec.trigger_id,
                    Some(&rec),
                    serde_json::json!({"why": "found unresolved by recovery; connector cannot be queried by key"}),
                )
                .await;
                self.store
                    .effect_recover(
                        &rec.idempotency_key,
                        rec.fencing_token,
                        &EffectOutcome {
                            state: "unknown",
                            response: rec.response.clone(),
                            error: rec.error.clone(),
                            last_status: rec.last_status,
                            resolved_by: "recovery",
                        },
                    )
                    .await?;
                report.tickets += 1;
                continue;
            };
            let outcome = match self.http.query(&live.record, &rec.idempotency_key).await {
                Found::Recorded { record, .. }
                    if !classify::evidence_matches(&rec.action, &record) =>
                {
                    self.ticket(
                        "evidence_conflict",
                        rec.idempotency_key.clone(),
                        rec.trigger_id,
                        Some(&rec),
                        serde_json::json!({"downstream_record": record}),
                    )
                    .await;
                    report.tickets += 1;
                    continue;
                }
                Found::Recorded { status, body, .. } => {
                    let ok = (200..300).contains(&status);
                    if ok {
                        report.succeeded += 1;
                    } else {
                        report.failed += 1;
                    }
                    EffectOutcome {
                        state: if ok { "succeeded" } else { "failed" },
                        error: (!ok).then(|| format!("{status}: {}", body_text(&body))),
                        response: Some(body),
                        last_status: Some(status as i64),
                        resolved_by: "recovery",
                    }
                }
                Found::NotFound => {
                    report.not_found += 1;
                    EffectOutcome {
                        state: "retryable",
                        response: None,
                        error: Some("not found at the downstream by recovery".into()),
                        last_status: Some(404),
                        resolved_by: "recovery",
                    }
                }
                Found::Undecided(why) => {
                    tracing::warn!(key = %rec.idempotency_key, %why, "recovery could not decide");
                    report.undecided += 1;
                    continue;
                }
            };
            self.store
                .effect_recover(&rec.idempotency_key, rec.fencing_token, &outcome)
                .await?;
        }
        Ok(report)
    }

    /// Run [`EffectGateway::recover`] every `every` until the returned guard
    /// is dropped (a `serve` process keeps one).
    pub fn spawn_recovery(self: &Arc<Self>, every: Duration, limit: i64) -> RecoveryGuard {
        let gateway = self.clone();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                match gateway.recover(limit).await {
                    Ok(r) if r.scanned > 0 => tracing::info!(?r, "effect recovery scan"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "effect recovery scan failed"),
                }
            }
        });
        RecoveryGuard(task)
    }

    /// The breaker state of a connector in this process, if loaded.
    pub fn breaker_state(&self, connector: &str) -> Option<super::BreakerState> {
        self.live
            .lock()
            .unwrap()
            .get(connector)
            .map(|l| l.breaker.lock().unwrap().state())
    }
}

/// Owns the background recovery scanner; stops it on drop.
pub struct RecoveryGuard(tokio::task::JoinHandle<()>);

impl Drop for RecoveryGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum SendError {
    /// The key was recorded by someone else between lookup and intent.
    Raced,
    Effect(EffectError),
}

impl From<EffectError> for SendError {
    fn from(e: EffectError) -> Self {
        SendError::Effect(e)
    }
}
