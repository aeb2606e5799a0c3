//! The effect protocol's I/O: it gathers what [`super::protocol`] decides
//! on (the record under a key, the connector, the attempt's stop state, the
//! downstream's answers) and does what it says: fenced writes, counters,
//! exception tickets, waits. One send is in [`send`], the connector cache
//! in [`connectors`], tickets in [`tickets`], the recovery scanner in
//! [`recovery`].

mod connectors;
mod recovery;
mod send;
mod tickets;

pub use recovery::{RecoveryGuard, RecoveryReport};

use super::breaker::{BreakerPhase, BreakerState};
use super::classify;
use super::http::HttpConnector;
use super::protocol::{
    self, Connector, KeyRecord, Lookup, Queried, QueryStep, Reply, Step, counter,
};
use crate::model::retry::RetryPolicy;
use crate::model::{LeaseRef, StopReason};
use crate::sandbox::StopSignal;
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::store::{EffectOutcome, EffectRecord, EffectStore, Store, StoreError};
use connectors::{Connectors, Live};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// The tenant of the lease's trigger: every key the caller names
    /// (its own, a compensation's target, a query's) is looked up in this
    /// tenant's namespace only.
    pub tenant: &'a str,
    pub granted: &'a [String],
    pub retry: &'a RetryPolicy,
    pub stop: Option<&'a StopSignal>,
    /// Where the gateway notes that a connector's breaker refused a call,
    /// so the runner can park the trigger until the breaker half-opens
    /// instead of spending an attempt (see [`ParkSlot`]).
    pub park: Option<&'a ParkSlot>,
    /// The most of a downstream's answer read for this caller (its group's
    /// `effect_response` cap): over it, the outcome is unknown and nothing
    /// of the body is stored.
    pub response_cap: usize,
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

/// The side-effect gateway. One per process; cheap to share.
pub struct EffectGateway {
    store: Arc<dyn EffectStore>,
    http: HttpConnector,
    config: GatewayConfig,
    connectors: Connectors,
    epoch: Instant,
}

/// Why one pass at a request ended without an answer.
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
            connectors: Connectors::new(store.clone(), config.connector_ttl),
            store,
            http: HttpConnector::new(),
            config,
            epoch: Instant::now(),
        })
    }

    /// Perform (or replay) one effect for an attempt. See the module docs
    /// of [`super::protocol`] for the order of decisions.
    pub async fn invoke(
        &self,
        caller: &Caller<'_>,
        request: Request,
    ) -> Result<Outcome, EffectError> {
        protocol::check_request(&request)?;
        let live = self
            .connectors
            .granted(caller.granted, &request.connector)
            .await?;
        let key = &request.idempotency_key;
        let digest = classify::params_digest(
            &request.connector,
            &request.action,
            request.compensates.as_deref(),
            &request.payload,
        );
        if let Some(original) = &request.compensates {
            self.check_compensation(caller.tenant, key, original)
                .await?;
        }
        let mut lookup = Lookup::start(live.breaker_state() == BreakerState::Closed);
        loop {
            let existing = if lookup.reads() {
                self.store
                    .effect_get(caller.tenant, key)
                    .await
                    .map_err(|e| self.store_error(caller, e))?
            } else {
                None
            };
            match self
                .perform(caller, &live, &request, &digest, existing.as_ref())
                .await
            {
                Err(SendError::Raced) => lookup = lookup.after_race(key)?,
                Err(SendError::Effect(e)) => return Err(e),
                Ok(outcome) => return Ok(outcome),
            }
        }
    }

    /// Carry one request from what is recorded under its key to an answer:
    /// each round asks [`protocol::next_step`] and does that step.
    async fn perform(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        request: &Request,
        digest: &str,
        existing: Option<&EffectRecord>,
    ) -> Result<Outcome, SendError> {
        let connector = Connector::of(&live.record);
        let budget = protocol::send_budget(caller.retry);
        let mut record = KeyRecord::of(existing, digest);
        let mut parked = Duration::ZERO;
        loop {
            let interrupted = caller.stop.and_then(StopSignal::interrupting);
            record = match protocol::next_step(record, connector, budget, interrupted) {
                Step::Replay(outcome) => {
                    self.count(counter::IDEMPOTENCY_HIT).await;
                    return Ok(outcome);
                }
                Step::KeyConflict(rec) => {
                    self.count(counter::KEY_CONFLICT).await;
                    let reply = protocol::key_conflict(rec, digest, caller.lease);
                    let answer = self.reply(caller, Reply::Ticketed(reply), Some(rec)).await;
                    return answer.map_err(SendError::from);
                }
                Step::QueryFirst(rec) => match self.query_first(caller, live, rec).await? {
                    Some(outcome) => return Ok(outcome),
                    None => KeyRecord::Resendable { sends: rec.sends },
                },
                Step::UnknownUnqueryable(rec) => {
                    let answer = self.unqueryable(caller, connector, rec).await;
                    return answer.map_err(SendError::from);
                }
                Step::Refuse => return Err(EffectError::LeaseLost.into()),
                Step::BudgetExhausted(spent) => {
                    let key = &request.idempotency_key;
                    let answer = self.budget_exhausted(caller, connector, key, spent).await;
                    return answer.map_err(SendError::from);
                }
                Step::Send { rewrite_intent } => {
                    let sent = self
                        .send_once(caller, live, request, digest, rewrite_intent, &mut parked)
                        .await?;
                    match sent {
                        send::Sent::Answered(outcome) => return Ok(outcome),
                        send::Sent::Held => record,
                        send::Sent::Transient { sends } => KeyRecord::Resendable { sends },
                    }
                }
            };
        }
    }

    /// Whether `key` may compensate `original` (see
    /// [`protocol::compensation_target`]), both names in `tenant`'s
    /// namespace: another tenant's effect is not found, so it can never be
    /// compensated from here. Returns the original. Used by `invoke` and by
    /// an operator's `paddock effects compensate`.
    pub async fn check_compensation(
        &self,
        tenant: &str,
        key: &str,
        original: &str,
    ) -> Result<EffectRecord, EffectError> {
        protocol::compensates_itself(key, original)?;
        protocol::compensation_target(original, self.store.effect_get(tenant, original).await)
    }

    /// Ask the downstream by key about an unresolved record before anything
    /// is sent again. `None`: it never happened there; safe to send.
    async fn query_first(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        rec: &EffectRecord,
    ) -> Result<Option<Outcome>, EffectError> {
        let found = self
            .http
            .query(live.endpoint(caller.response_cap), &rec.downstream_key)
            .await;
        match protocol::after_query(rec, found, protocol::send_budget(caller.retry)) {
            Queried::Recorded(outcome) => {
                let settled = self.settle(caller, &rec.idempotency_key, &outcome).await?;
                self.count(counter::IDEMPOTENCY_HIT).await;
                Ok(Some(protocol::replay(&settled)))
            }
            Queried::NotFound => Ok(None),
            Queried::EvidenceConflict(reply) => self
                .reply(caller, Reply::Ticketed(reply), Some(rec))
                .await
                .map(Some),
            Queried::Undecided(reply) => {
                self.count(counter::UNKNOWN).await;
                self.reply(caller, reply, Some(rec)).await.map(Some)
            }
        }
    }

    /// An unresolved record on a connector that cannot be asked: `unknown`,
    /// with a ticket.
    async fn unqueryable(
        &self,
        caller: &Caller<'_>,
        connector: Connector<'_>,
        rec: &EffectRecord,
    ) -> Result<Outcome, EffectError> {
        self.count(counter::UNKNOWN).await;
        let reply = protocol::unqueryable(rec, connector);
        self.reply(caller, Reply::Ticketed(reply), Some(rec)).await
    }

    /// A spent send budget (always an error for the guest); a ticket's
    /// evidence is the effect as it stands now.
    async fn budget_exhausted(
        &self,
        caller: &Caller<'_>,
        connector: Connector<'_>,
        key: &str,
        spent: protocol::Spent,
    ) -> Result<Outcome, EffectError> {
        self.count(counter::BUDGET_EXHAUSTED).await;
        let reply = protocol::budget_exhausted(key, spent, connector);
        let evidence = match &reply {
            Reply::Ticketed(_) => self
                .store
                .effect_get(caller.tenant, key)
                .await
                .ok()
                .flatten(),
            Reply::Now(_) => None,
        };
        self.reply(caller, reply, evidence.as_ref()).await
    }

    /// `effects.query`: what became of an effect, by key, without sending.
    pub async fn query(
        &self,
        caller: &Caller<'_>,
        connector: &str,
        key: &str,
    ) -> Result<Option<Outcome>, EffectError> {
        classify::check_key(key).map_err(EffectError::Invalid)?;
        let live = self.connectors.granted(caller.granted, connector).await?;
        let rec = self
            .store
            .effect_get(caller.tenant, key)
            .await
            .map_err(|e| self.store_error(caller, e))?;
        let connector = Connector::of(&live.record);
        match protocol::query_step(key, connector, rec.as_ref()) {
            QueryStep::Answer(answer) => answer,
            QueryStep::Unqueryable(rec) => self.unqueryable(caller, connector, rec).await.map(Some),
            QueryStep::QueryFirst(rec) => match self.query_first(caller, &live, rec).await? {
                Some(outcome) => Ok(Some(outcome)),
                None => {
                    self.settle(caller, key, &protocol::not_found_by_query())
                        .await?;
                    Ok(None)
                }
            },
            QueryStep::AskDownstream => Ok(protocol::found_unrecorded(
                self.http
                    .query(live.endpoint(caller.response_cap), key)
                    .await,
            )),
        }
    }

    /// The connectors whose breaker is open in this process and not yet
    /// letting a probe through.
    pub fn open_breakers(&self) -> Vec<String> {
        self.connectors.open(self.now_ms())
    }

    /// The breaker state of a connector in this process, if loaded.
    pub fn breaker_state(&self, connector: &str) -> Option<BreakerState> {
        self.connectors.breaker_state(connector)
    }

    /// Each connector loaded in this process with its breaker's state:
    /// closed, open (refusing calls) or half-open (an open breaker whose
    /// wait is over lets one probe through), for `/metrics`.
    pub fn breaker_states(&self) -> Vec<(String, BreakerPhase)> {
        let now = self.now_ms();
        let mut states: Vec<_> = self
            .connectors
            .breaker_states()
            .into_iter()
            .map(|(name, state)| (name, BreakerPhase::of(state, now)))
            .collect();
        states.sort();
        states
    }

    /// Tell the guest, opening the exception ticket first when the reply
    /// names one (with `effect` as its evidence).
    async fn reply(
        &self,
        caller: &Caller<'_>,
        reply: Reply,
        effect: Option<&EffectRecord>,
    ) -> Result<Outcome, EffectError> {
        match reply {
            Reply::Now(answer) => answer,
            Reply::Ticketed(ticketed) => {
                let ticket = tickets::open(
                    &*self.store,
                    &ticketed.ticket,
                    caller.lease.trigger_id,
                    effect,
                )
                .await;
                ticketed.reply(ticket)
            }
        }
    }

    /// Record what became of `key` under the caller's lease.
    async fn settle(
        &self,
        caller: &Caller<'_>,
        key: &str,
        outcome: &EffectOutcome,
    ) -> Result<EffectRecord, EffectError> {
        self.store
            .effect_settle(caller.lease, key, outcome)
            .await
            .map_err(|e| self.store_error(caller, e))
    }

    /// A store error seen by an attempt closes its gate: a stale token means
    /// another holder, and after any other failure the attempt does not know
    /// what was written, so it must not go on either.
    fn store_error(&self, caller: &Caller<'_>, e: StoreError) -> EffectError {
        if !matches!(e, StoreError::LeaseLost { .. }) {
            tracing::warn!(trigger_id = caller.lease.trigger_id, error = %crate::model::text::Esc(&e), "effect bookkeeping failed");
        }
        if let Some(stop) = caller.stop {
            stop.request(StopReason::LeaseLost);
        }
        EffectError::LeaseLost
    }

    async fn count(&self, name: &str) {
        if let Err(e) = self.store.counter_add(name, 1).await {
            tracing::warn!(counter = name, error = %crate::model::text::Esc(&e), "counter not written");
        }
    }

    /// Monotonic ms for the breaker and rate limit.
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}
