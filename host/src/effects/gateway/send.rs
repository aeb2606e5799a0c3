//! One send of a key: the breaker's admission, the rate limit and a permit,
//! the intent written under the lease, the call, and what its answer
//! becomes ([`protocol::on_answer`]).

use super::connectors::Live;
use super::{Caller, EffectGateway, SendError};
use crate::effects::breaker::Admit;
use crate::effects::classify::{self, Answer};
use crate::effects::protocol::{self, Answered, Connector, Refused, Reply, Resend, counter};
use crate::model::StopReason;
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::store::{NewEffect, StoreError};
use std::time::Duration;

/// How one send ended, when the request goes on.
pub(super) enum Sent {
    /// The guest has its answer.
    Answered(Outcome),
    /// The breaker held the call back for a moment; nothing was sent.
    Held,
    /// Nothing was committed downstream (send number `sends`); the backoff
    /// has been waited.
    Transient { sends: i64 },
}

fn new_request_id() -> String {
    format!("req-{:016x}", rand::random::<u64>())
}

impl EffectGateway {
    /// Send `request` once under the caller's lease: a new intent, or the
    /// recorded one rewritten (`rewrite_intent`). `parked` adds up the
    /// breaker waits of this request.
    pub(super) async fn send_once(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        request: &Request,
        digest: &str,
        rewrite_intent: bool,
        parked: &mut Duration,
    ) -> Result<Sent, SendError> {
        let connector = Connector::of(&live.record);
        // The breaker's lock is released here, before anything waits.
        let admit = live.breaker.lock().unwrap().admit(self.now_ms());
        let probe = match admit {
            Admit::Allowed => false,
            Admit::Probe => true,
            Admit::Rejected { retry_after_ms } => {
                match protocol::when_refused(
                    connector,
                    retry_after_ms,
                    *parked,
                    self.config.max_park,
                ) {
                    Refused::Wait(wait) => {
                        *parked += wait;
                        tokio::time::sleep(wait).await;
                        return Ok(Sent::Held);
                    }
                    Refused::Refuse(refusal) => {
                        self.count(counter::CIRCUIT_OPEN).await;
                        if let Some(park) = caller.park {
                            park.note(retry_after_ms);
                        }
                        return Err(refusal.into());
                    }
                }
            }
        };
        let (answer, sends) = self
            .call(caller, live, request, digest, rewrite_intent, probe)
            .await?;
        let verdict = classify::classify(&answer);
        live.breaker
            .lock()
            .unwrap()
            .record(self.now_ms(), probe, verdict.is_breaker_failure());
        let key = &request.idempotency_key;
        let answered = protocol::on_answer(key, &answer, verdict);
        self.record_answer(caller, connector, key, answered, sends)
            .await
    }

    /// Wait for the rate limit and a permit, write the intent under the
    /// lease, and call the downstream; the permit is held until the answer
    /// arrives. Returns the answer and the send's number.
    async fn call(
        &self,
        caller: &Caller<'_>,
        live: &Live,
        request: &Request,
        digest: &str,
        rewrite_intent: bool,
        probe: bool,
    ) -> Result<(Answer, i64), SendError> {
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
        let key = &request.idempotency_key;
        let request_id = new_request_id();
        let intent = if rewrite_intent {
            self.store
                .effect_reintent(caller.lease, key, digest, &request_id)
                .await
        } else {
            let new = NewEffect {
                tenant: caller.tenant.to_string(),
                downstream_key: classify::downstream_key(caller.tenant, key),
                idempotency_key: key.clone(),
                connector: request.connector.clone(),
                action: request.action.clone(),
                params_digest: digest.to_string(),
                request_id: request_id.clone(),
                compensates: request.compensates.clone(),
            };
            self.store.effect_intent(caller.lease, &new).await
        };
        let (sends, sent_key) = match intent {
            Ok(rec) => (rec.sends, rec.downstream_key),
            Err(e) => {
                // Nothing is sent, so the probe decides nothing.
                if probe {
                    live.breaker.lock().unwrap().abandon_probe();
                }
                return Err(match e {
                    StoreError::Conflict(_) => SendError::Raced,
                    other => self.store_error(caller, other).into(),
                });
            }
        };
        let answer = self
            .http
            .send(
                live.endpoint(caller.response_cap),
                &request.action,
                &sent_key,
                caller.lease.fencing_token.get(),
                &request_id,
                &request.payload,
            )
            .await;
        Ok((answer, sends))
    }

    /// Do what an answer became: record it under the lease, count, open a
    /// ticket or wait the backoff, and say how the request goes on.
    async fn record_answer(
        &self,
        caller: &Caller<'_>,
        connector: Connector<'_>,
        key: &str,
        answered: Answered,
        sends: i64,
    ) -> Result<Sent, SendError> {
        let budget = protocol::send_budget(caller.retry);
        match answered {
            Answered::Settled {
                outcome,
                counter,
                reply,
            } => {
                self.settle(caller, key, &outcome).await?;
                if let Some(name) = counter {
                    self.count(name).await;
                }
                Ok(Sent::Answered(reply?))
            }
            Answered::KeyConflict { outcome, reply } => {
                let settled = self.settle(caller, key, &outcome).await?;
                self.count(counter::KEY_CONFLICT).await;
                let answer = self.reply(caller, Reply::Ticketed(reply), Some(&settled));
                Ok(Sent::Answered(answer.await?))
            }
            Answered::Fenced { outcome, why } => {
                self.count(counter::STALE_TOKEN).await;
                if let Some(stop) = caller.stop {
                    stop.request(StopReason::LeaseLost);
                }
                tracing::warn!(trigger_id = caller.lease.trigger_id, token = %caller.lease.fencing_token, why = %crate::model::text::Esc(&why), "downstream refused the fencing token");
                // Under a stale token the store refuses this write too (and
                // counts it); the answer is lease-lost either way.
                let _ = self.store.effect_settle(caller.lease, key, &outcome).await;
                Err(EffectError::LeaseLost.into())
            }
            Answered::Transient { outcome, why } => {
                self.settle(caller, key, &outcome).await?;
                match protocol::after_transient(why, sends, budget) {
                    Resend::Exhausted(spent) => {
                        let answer = self.budget_exhausted(caller, connector, key, spent).await;
                        Ok(Sent::Answered(answer?))
                    }
                    Resend::AfterBackoff => {
                        let cap = self.config.max_inline_backoff;
                        let unit = rand::random::<f64>();
                        let wait = protocol::inline_backoff(caller.retry, sends, unit, cap);
                        tokio::time::sleep(wait).await;
                        Ok(Sent::Transient { sends })
                    }
                }
            }
            Answered::Unknown { outcome, why } => {
                let settled = self.settle(caller, key, &outcome).await?;
                self.count(counter::UNKNOWN).await;
                let reply = protocol::after_unknown(key, why, settled.sends, budget, connector);
                Ok(Sent::Answered(
                    self.reply(caller, reply, Some(&settled)).await?,
                ))
            }
        }
    }
}
