//! The two-person rule on resuming the global pause
//! ([`crate::model::tickets`]): the first resume of the closed global gate
//! is a proposal kept on its row (migration 0033) and audited
//! (`gate.resume.propose`); the gate reopens only when a different
//! authenticated person resumes it too, and that resume's audit entry names
//! the proposer and both reasons. The proposer's own second resume, and by
//! default any second resume from the local command line, is refused.

use super::super::dialect::now_ms;
use super::super::*;
use crate::model::gates::{GateScope, ResumeReport};
use crate::model::tickets::{LocalApprovals, second_person};

/// How a resume that takes two people stands.
pub(in crate::store) enum Second {
    /// Recorded as the proposal; nothing reopened.
    Proposed(ResumeReport),
    /// A second person resumes: the proposal, for the resume's audit entry.
    Approved(serde_json::Value),
}

/// The command that resumes the global gate through a token.
const TOKEN_ROUTE: &str = "paddock --server URL --token T resume --global --reason \"...\"";

impl Store {
    /// Inside the resume's transaction: record `actor`'s resume of
    /// `scope` as the proposal, or check that `actor` is a second person
    /// (`local`: whether the local command line may be one).
    pub(in crate::store) async fn resume_second_person(
        &self,
        tx: &mut Tx,
        scope: &GateScope,
        actor: &str,
        reason: &str,
        local: LocalApprovals,
    ) -> StoreResult<Second> {
        let open: Option<(i64, Option<String>, Option<String>)> = sqlx::query_as(self.sql(
            "SELECT id, resume_proposed_by, resume_proposed_reason FROM gates \
             WHERE kind = ? AND value = ? AND reopened_at IS NULL",
        ))
        .bind(scope.kind())
        .bind(scope.value())
        .fetch_optional(&mut **tx)
        .await?;
        let Some((id, proposer, proposed_reason)) = open else {
            return Err(StoreError::Conflict(format!(
                "{scope} is not paused; nothing changed (see `paddock gates`)"
            )));
        };
        let Some(proposer) = proposer else {
            sqlx::query(self.sql(concat!(
                "UPDATE gates SET resume_proposed_by = ?, resume_proposed_reason = ?, \
                 resume_proposed_at = ",
                now_ms!(),
                " WHERE id = ? AND reopened_at IS NULL AND resume_proposed_by IS NULL"
            )))
            .bind(actor)
            .bind(reason)
            .bind(id)
            .execute(&mut **tx)
            .await?;
            self.audit_append(
                tx,
                actor,
                "gate.resume.propose",
                &scope.subject(),
                serde_json::json!({ "reason": reason }),
            )
            .await?;
            return Ok(Second::Proposed(ResumeReport {
                proposed_by: Some(actor.to_string()),
                ..ResumeReport::default()
            }));
        };
        let local_approval = second_person(&proposer, actor, local, TOKEN_ROUTE)
            .map_err(|why| StoreError::Conflict(format!("resuming {scope}: {why}")))?;
        let mut detail = serde_json::json!({
            "proposed_by": proposer, "proposed_reason": proposed_reason,
        });
        if let Some(why) = local_approval {
            detail["local_approval"] = why.into();
        }
        Ok(Second::Approved(detail))
    }
}
