//! Exception tickets: the questions the protocol hands to a person
//! ([`TicketRequest`]), opened with the evidence to answer them.

use crate::effects::protocol::{TicketRequest, body_text};
use crate::store::{EffectRecord, EffectStore, NewException};

/// Open a ticket (or find the open one with the same kind and subject) for
/// `trigger_id`'s effect. `None` when it could not be written: the caller
/// says so to the guest rather than failing the call.
pub(super) async fn open(
    store: &dyn EffectStore,
    request: &TicketRequest,
    trigger_id: i64,
    effect: Option<&EffectRecord>,
) -> Option<i64> {
    let kind = request.kind.as_str();
    let new = NewException {
        kind,
        subject: request.subject.clone(),
        trigger_id: Some(trigger_id),
        effect_key: effect.map(|e| e.idempotency_key.clone()),
        evidence: evidence(store, trigger_id, effect, request.detail.clone()).await,
        allowed_actions: request.kind.allowed_actions(),
    };
    match store.exception_open(&new).await {
        Ok((ticket, _)) => Some(ticket.id),
        Err(e) => {
            tracing::error!(error = %crate::model::text::Esc(&e), kind, "exception ticket not written");
            None
        }
    }
}

/// Evidence for a ticket: the trigger, its attempts and tokens, the effect
/// record and what the protocol saw (`detail`). Parts that cannot be read
/// are left out rather than holding the ticket back.
async fn evidence(
    store: &dyn EffectStore,
    trigger_id: i64,
    effect: Option<&EffectRecord>,
    detail: serde_json::Value,
) -> serde_json::Value {
    let trigger = store.trigger_get(trigger_id).await.ok().map(|t| {
        serde_json::json!({
            "id": t.id, "plan_key": t.plan_key, "state": t.state,
            "fencing_token": t.fencing_token, "attempts": t.attempts,
        })
    });
    let attempts: Vec<_> = store
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
        "trigger": trigger, "attempts": attempts, "effect": effect, "detail": detail,
    })
}
