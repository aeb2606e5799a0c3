//! The host services of one attempt ([`AttemptServices`]): checkpoints
//! and effects backed by writes fenced by the attempt's token, and the
//! control answer at every safe point.

use crate::effects::{Caller, EffectGateway, ParkSlot};
use crate::model::{LeaseRef, RetryPolicy, StopReason};
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::sandbox::wit::types::Control;
use crate::sandbox::{AttemptServices, HostFuture, StopSignal};
use crate::store::{RunnerStore, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The host services of one attempt, backed by fenced store writes.
pub(super) struct RunnerServices {
    /// Set by the effect gateway when an open breaker refused a call.
    pub(super) park: Arc<ParkSlot>,
    pub(super) store: Arc<dyn RunnerStore>,
    pub(super) lease: LeaseRef,
    /// The trigger's tenant: the namespace of every effect key it names.
    pub(super) tenant: String,
    pub(super) stop: Arc<StopSignal>,
    pub(super) progress: Arc<AtomicI64>,
    pub(super) connectors: Vec<String>,
    pub(super) effects: Arc<EffectGateway>,
    pub(super) retry: RetryPolicy,
    /// The group's `effect_response` cap.
    pub(super) response_cap: usize,
}

impl RunnerServices {
    fn caller(&self) -> Caller<'_> {
        Caller {
            lease: &self.lease,
            tenant: &self.tenant,
            granted: &self.connectors,
            retry: &self.retry,
            stop: Some(&self.stop),
            park: Some(&self.park),
            response_cap: self.response_cap,
        }
    }
}

impl AttemptServices for RunnerServices {
    fn control(&self) -> Control {
        self.stop.control()
    }

    fn load_checkpoint(&self) -> HostFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move {
            match self.store.checkpoint_load(self.lease.trigger_id).await {
                Ok(found) => found.map(|(_, data)| data),
                Err(e) => {
                    tracing::warn!(trigger_id = self.lease.trigger_id, error = %crate::model::text::Esc(&e), "checkpoint load failed");
                    None
                }
            }
        })
    }

    fn save_checkpoint(&self, state: Vec<u8>) -> HostFuture<'_, Control> {
        Box::pin(async move {
            // A draining guest may still save the safe point it reached.
            if self.stop.gate_closed() {
                return Control::LeaseLost;
            }
            match self.store.checkpoint_save(&self.lease, &state).await {
                Ok(seq) => {
                    self.progress.store(seq, Ordering::Relaxed);
                    self.stop.control()
                }
                Err(StoreError::LeaseLost { .. }) => {
                    self.stop.request(StopReason::LeaseLost);
                    Control::LeaseLost
                }
                Err(e) => {
                    // Not knowing whether the write counted, the guest must
                    // not rely on it; stopping is the safe answer.
                    tracing::warn!(trigger_id = self.lease.trigger_id, error = %crate::model::text::Esc(&e), "checkpoint save failed");
                    self.stop.request(StopReason::LeaseLost);
                    Control::LeaseLost
                }
            }
        })
    }

    fn invoke_effect(&self, request: Request) -> HostFuture<'_, Result<Outcome, EffectError>> {
        Box::pin(async move {
            match self.stop.reason() {
                Some(StopReason::LeaseLost) => return Err(EffectError::LeaseLost),
                // Draining: no new effect starts (one already sent settles,
                // or stays `intent`/`unknown` for the next attempt to query).
                Some(StopReason::Pause | StopReason::Shutdown) => {
                    return Err(EffectError::CircuitOpen(format!(
                        "not sent: the host is draining or a gate paused the trigger; '{}' can be retried after the trigger resumes",
                        request.idempotency_key
                    )));
                }
                _ => {}
            }
            // A downstream 409 or a stale intent/outcome write closes the
            // gate (the gateway calls `stop.request(LeaseLost)`) and is
            // counted.
            self.effects.invoke(&self.caller(), request).await
        })
    }

    fn query_effect<'a>(
        &'a self,
        connector: &'a str,
        key: &'a str,
    ) -> HostFuture<'a, Result<Option<Outcome>, EffectError>> {
        Box::pin(async move {
            if self.stop.interrupting().is_some() {
                return Err(EffectError::LeaseLost);
            }
            self.effects.query(&self.caller(), connector, key).await
        })
    }
}
