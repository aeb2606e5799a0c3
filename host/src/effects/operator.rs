//! What a person does to effects by hand — `paddock effects
//! recover|compensate` and `POST /v1/effects/recover`, `POST
//! /v1/effects/{key}/compensate` — the same code from the command line and
//! the API, audited with the caller (`local:NAME` or `token:NAME`).

use super::EffectGateway;
use super::gateway::RecoveryReport;
use crate::model::plan::sha256_hex;
use crate::model::text::Esc;
use crate::store::{ControlStore, NewTrigger, Store, StoreError};

/// An operator's compensation of a succeeded effect: a new trigger of
/// `job` performs it through the original's connector, with its own key.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Compensation {
    /// The idempotency key of the effect to compensate.
    pub original: String,
    /// The job whose component performs it.
    pub job: String,
    /// The compensation's own idempotency key.
    pub key: String,
    /// The downstream action, e.g. `RES-1/refund`.
    pub action: String,
    /// The request body (text).
    pub payload: String,
    pub reason: String,
}

/// The trigger that performs a compensation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Compensated {
    pub trigger: i64,
    /// False: the same compensation was asked before.
    pub created: bool,
}

/// Why a compensation was refused.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The request cannot be done as asked (no reason, the original not
    /// succeeded or itself a compensation, the key its own original).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Check `c` like a guest's compensation, record its trigger, audit it as
/// `effect.compensate` (the payload as a digest: it may carry what no
/// audit entry may print).
pub async fn compensate(
    store: &Store,
    actor: &str,
    c: &Compensation,
) -> Result<Compensated, OperatorError> {
    if c.reason.trim().is_empty() {
        return Err(OperatorError::Invalid(
            "an operator's compensation needs a reason".into(),
        ));
    }
    // Both keys are names in the compensating job's tenant: another
    // tenant's effect is not found there, so it is never compensated.
    let job = match store
        .job_get_for(&crate::model::identity::TenantScope::Every, &c.job)
        .await
    {
        Ok(job) => job,
        Err(StoreError::NotFound(_)) => {
            return Err(OperatorError::Invalid(format!("no job '{}'", Esc(&c.job))));
        }
        Err(StoreError::Conflict(why) | StoreError::OutOfBounds(why)) => {
            return Err(OperatorError::Invalid(why));
        }
        Err(e) => return Err(e.into()),
    };
    let tenant = job.tenant.clone();
    let original = EffectGateway::new(store.clone())
        .check_compensation(&tenant, &c.key, &c.original)
        .await
        .map_err(|e| OperatorError::Invalid(format!("cannot compensate '{}': {e}", c.original)))?;
    let params = serde_json::json!({
        "connector": original.connector,
        "action": c.action,
        "key": c.key,
        "payload": c.payload,
        "compensates": c.original,
    });
    let (trigger, created) = store
        .trigger_create(&NewTrigger::manual(&job.qualified(), params, None).by(actor))
        .await?;
    store
        .audit_record(
            actor,
            "effect.compensate",
            &c.original,
            serde_json::json!({
                "reason": c.reason, "job": c.job, "trigger_id": trigger.id,
                "new_trigger": created, "connector": original.connector,
                "action": c.action, "key": c.key,
                "payload_digest": sha256_hex(c.payload.as_bytes()),
            }),
        )
        .await?;
    Ok(Compensated {
        trigger: trigger.id,
        created,
    })
}

/// One recovery scan of at most `limit` unresolved effects, run by a
/// person, so audited as `effects.recover` with what it settled.
pub async fn recover(store: &Store, actor: &str, limit: i64) -> Result<RecoveryReport, StoreError> {
    let report = EffectGateway::new(store.clone()).recover(limit).await?;
    store
        .audit_record(
            actor,
            "effects.recover",
            "effects",
            serde_json::json!({
                "limit": limit, "scanned": report.scanned,
                "succeeded": report.succeeded, "failed": report.failed,
                "not_found": report.not_found, "tickets": report.tickets,
                "undecided": report.undecided,
            }),
        )
        .await?;
    Ok(report)
}
