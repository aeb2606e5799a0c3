//! A person's retry-now. A failed trigger is final — the
//! state machine never rewrites one (`completed_triggers_are_never_rewritten`)
//! — so retrying it is a new fact: a new manual trigger of the same plan
//! version with the same params, whose request key (`retry-of-ID`) makes
//! asking twice one run. A trigger waiting to retry is only brought
//! forward: due now instead of at the end of its backoff. Both audited as
//! `trigger.retry` with the actor and the reason.

use super::dialect::now_ms;
use super::state_log::StateChange;
use super::*;
use crate::trigger_state;

/// What a retry-now did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "retry", rename_all = "snake_case")]
pub enum Retried {
    /// A failed trigger: `trigger` is the new run (`created` false: an
    /// earlier retry of the same trigger, returned again).
    NewRun { trigger: i64, created: bool },
    /// A trigger waiting to retry is due now.
    DueNow,
}

/// A waiting retry brought forward; nothing else about the trigger moves.
const DUE_NOW: &str = concat!(
    "UPDATE triggers SET next_run_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state = ",
    trigger_state!(retry_wait)
);

impl Store {
    /// Retry trigger `id` now: a new run of a failed one, or a waiting
    /// retry made due. Refused for any other state, naming it; a new run
    /// in a paused scope is refused like any manual run.
    pub async fn trigger_retry(&self, id: i64, actor: &str, reason: &str) -> StoreResult<Retried> {
        if reason.trim().is_empty() {
            return Err(StoreError::Conflict(
                "a retry needs a reason (--reason \"...\")".into(),
            ));
        }
        let t = self.trigger_get(id).await?;
        match t.state {
            TriggerState::Failed => {
                let params: serde_json::Value = serde_json::from_str(&t.params)
                    .map_err(|e| StoreError::Conflict(format!("stored params unreadable: {e}")))?;
                let new = NewTrigger {
                    plan_version: Some(t.plan_version as u32),
                    ..NewTrigger::manual(
                        &crate::model::plan::JobName::qualified(&t.tenant, &t.job_id),
                        params,
                        Some(&format!("retry-of-{id}")),
                    )
                }
                .by(actor);
                let (run, created) = self.trigger_create(&new).await?;
                if created {
                    self.audit_record(
                        actor,
                        "trigger.retry",
                        &id.to_string(),
                        serde_json::json!({ "reason": reason, "new_trigger": run.id }),
                    )
                    .await?;
                }
                Ok(Retried::NewRun {
                    trigger: run.id,
                    created,
                })
            }
            TriggerState::RetryWait => {
                let (mut tx, _turn) = self.begin_write().await?;
                let moved = sqlx::query(self.sql(DUE_NOW))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if moved == 0 {
                    return Err(StoreError::Conflict(format!(
                        "trigger {id} is no longer waiting to retry"
                    )));
                }
                self.audit_append(
                    &mut tx,
                    actor,
                    "trigger.retry",
                    &id.to_string(),
                    serde_json::json!({ "reason": reason, "due": "now" }),
                )
                .await?;
                tx.commit().await?;
                let due = StateChange {
                    cause: "retry",
                    state: TriggerState::RetryWait.as_str(),
                    actor,
                };
                due.log(&[(id, t.plan_key.clone())]);
                Ok(Retried::DueNow)
            }
            other => Err(StoreError::Conflict(format!(
                "trigger {id} is {other}: only a failed trigger (a new run) or one waiting to \
                 retry (due now) can be retried"
            ))),
        }
    }
}
