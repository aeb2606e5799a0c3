//! Resolving exception tickets, under the two-person rule
//! ([`crate::model::tickets`]): a low-risk action (`mark_failed`,
//! `dismiss`) resolves the ticket at once; a high-risk one (`resend`,
//! `mark_succeeded`) is proposed, and runs only when a different person
//! approves it (`exception_approve`: a token of another person; the local
//! command line only where an install allows it) — or is withdrawn
//! (`exception_reject`).
//! Every step is one transaction with its audit entry: `exception.resolve`,
//! `exception.propose`, `exception.approve` (proposer, approver, both
//! reasons, the effect's digests before and after), `exception.reject`.

use super::columns::{effect_columns, exception_columns};
use super::dialect::now_ms;
use super::*;
use crate::effect_state;
use crate::model::canonical_json;
use crate::model::tickets::{LocalApprovals, high_risk, second_person};
use sha2::{Digest, Sha256};

/// Who decided a resolution, for its audit entry: one person, or a
/// proposer and the approver (and, when the approver was the local command
/// line allowed to approve, why that stands).
struct Decided<'a> {
    actor: &'a str,
    reason: &'a str,
    proposal: Option<(&'a str, &'a str)>,
    local_approval: Option<String>,
}

impl Store {
    /// `exception_resolve`: resolve an open ticket with one of its allowed
    /// actions, or propose it when it is high-risk.
    pub(super) async fn ticket_resolve(
        &self,
        id: i64,
        action: &str,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord> {
        need_person("resolving", actor, reason)?;
        let (mut tx, _turn) = self.begin_write().await?;
        let ticket = self.open_ticket(&mut tx, id).await?;
        if let Some(proposed) = &ticket.proposed_action {
            return Err(StoreError::Conflict(format!(
                "exception {id} awaits approval of '{proposed}' proposed by {}; \
                 approve it (`paddock exceptions approve {id}`) or reject it first",
                ticket.proposed_by.as_deref().unwrap_or("?")
            )));
        }
        if !ticket.allowed().iter().any(|a| a == action) {
            return Err(StoreError::Conflict(format!(
                "action '{action}' is not allowed for exception {id}; allowed: {}",
                ticket.allowed().join(", ")
            )));
        }
        if high_risk(action) {
            sqlx::query(self.sql(concat!(
                "UPDATE exceptions SET proposed_action = ?, proposed_by = ?, proposed_reason = ?, \
                 proposed_at = ",
                now_ms!(),
                " WHERE id = ? AND state = 'open' AND proposed_action IS NULL"
            )))
            .bind(action)
            .bind(actor)
            .bind(reason)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            self.audit_append(
                &mut tx,
                actor,
                "exception.propose",
                &format!("exception:{id}"),
                serde_json::json!({
                    "kind": ticket.kind, "subject": ticket.subject, "action": action,
                    "reason": reason, "effect_key": ticket.effect_key,
                }),
            )
            .await?;
        } else {
            let decided = Decided {
                actor,
                reason,
                proposal: None,
                local_approval: None,
            };
            self.execute_resolution(&mut tx, &ticket, action, decided)
                .await?;
        }
        tx.commit().await?;
        self.exception_get(id).await
    }

    /// Approve the high-risk action proposed on ticket `id`: refused when
    /// `actor` is the proposer's person (two tokens of one person, or the
    /// CLI and a token of one name, count once) and when it is the local
    /// command line; otherwise the action runs and the ticket is resolved.
    pub async fn exception_approve(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord> {
        self.exception_approve_with(id, actor, reason, LocalApprovals::Refuse)
            .await
    }

    /// [`Store::exception_approve`], the local command line's approvals
    /// as `local` says ([`LocalApprovals`]).
    pub async fn exception_approve_with(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
        local: LocalApprovals,
    ) -> StoreResult<ExceptionRecord> {
        need_person("approving", actor, reason)?;
        let (mut tx, _turn) = self.begin_write().await?;
        let ticket = self.open_ticket(&mut tx, id).await?;
        let (Some(action), Some(proposer)) = (&ticket.proposed_action, &ticket.proposed_by) else {
            return Err(StoreError::Conflict(format!(
                "exception {id} has no proposed action to approve"
            )));
        };
        let route =
            format!("paddock --server URL --token T exceptions approve {id} --reason \"...\"");
        let local_approval = second_person(proposer, actor, local, &route)
            .map_err(|why| StoreError::Conflict(format!("exception {id}: {why}")))?;
        let proposed_reason = ticket.proposed_reason.clone().unwrap_or_default();
        let decided = Decided {
            actor,
            reason,
            proposal: Some((proposer, &proposed_reason)),
            local_approval,
        };
        self.execute_resolution(&mut tx, &ticket, action, decided)
            .await?;
        tx.commit().await?;
        self.exception_get(id).await
    }

    /// Withdraw the action proposed on ticket `id` (by anyone, the
    /// proposer included): the ticket stays open, as it was.
    pub async fn exception_reject(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord> {
        need_person("rejecting a proposal on", actor, reason)?;
        let (mut tx, _turn) = self.begin_write().await?;
        let ticket = self.open_ticket(&mut tx, id).await?;
        let Some(action) = &ticket.proposed_action else {
            return Err(StoreError::Conflict(format!(
                "exception {id} has no proposed action to reject"
            )));
        };
        sqlx::query(self.sql(
            "UPDATE exceptions SET proposed_action = NULL, proposed_by = NULL, \
             proposed_reason = NULL, proposed_at = NULL WHERE id = ? AND state = 'open'",
        ))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "exception.reject",
            &format!("exception:{id}"),
            serde_json::json!({
                "action": action, "proposed_by": ticket.proposed_by, "reason": reason,
            }),
        )
        .await?;
        tx.commit().await?;
        self.exception_get(id).await
    }

    /// Ticket `id`, which must still be open.
    async fn open_ticket(&self, tx: &mut Tx, id: i64) -> StoreResult<ExceptionRecord> {
        let ticket: ExceptionRecord = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("exception {id}")))?;
        if ticket.state != "open" {
            return Err(StoreError::Conflict(format!(
                "exception {id} is already {} ({} by {})",
                ticket.state,
                ticket.resolution.as_deref().unwrap_or("?"),
                ticket.resolved_by.as_deref().unwrap_or("?")
            )));
        }
        Ok(ticket)
    }

    /// Run `action` on the ticket's effect (new facts, never a delete),
    /// resolve the ticket with the effect's digests before and after, move
    /// on the trigger it held (`store/held.rs`), and audit who decided.
    async fn execute_resolution(
        &self,
        tx: &mut Tx,
        ticket: &ExceptionRecord,
        action: &str,
        decided: Decided<'_>,
    ) -> StoreResult<()> {
        let id = ticket.id;
        let before = self.effect_in(tx, ticket).await?;
        if let Some(key) = &ticket.effect_key {
            self.apply_ticket_action(tx, id, key, action).await?;
        }
        let after = self.effect_in(tx, ticket).await?;
        let (before_digest, after_digest) = (row_digest(&before), row_digest(&after));
        sqlx::query(self.sql(concat!(
            "UPDATE exceptions SET state = 'resolved', resolution = ?, resolved_by = ?, reason = ?, \
             before_digest = ?, after_digest = ?, resolved_at = ",
            now_ms!(),
            " WHERE id = ? AND state = 'open'"
        )))
        .bind(action)
        .bind(decided.actor)
        .bind(decided.reason)
        .bind(&before_digest)
        .bind(&after_digest)
        .bind(id)
        .execute(&mut **tx)
        .await?;
        let mut detail = serde_json::json!({
            "kind": ticket.kind, "subject": ticket.subject, "action": action,
            "reason": decided.reason, "effect_key": ticket.effect_key,
            "before_digest": before_digest, "after_digest": after_digest,
        });
        // The trigger this ticket held moves on in the same transaction.
        if let Some(trigger_id) = ticket.trigger_id
            && let Some((to, _)) = self.resolve_held(tx, trigger_id, action).await?
        {
            detail["trigger"] = serde_json::json!({
                "id": trigger_id, "from": TriggerState::Manual, "to": to,
            });
        }
        let what = match decided.proposal {
            Some((proposer, proposed_reason)) => {
                detail["proposed_by"] = proposer.into();
                detail["proposed_reason"] = proposed_reason.into();
                if let Some(why) = decided.local_approval {
                    detail["local_approval"] = why.into();
                }
                "exception.approve"
            }
            None => "exception.resolve",
        };
        self.audit_append(tx, decided.actor, what, &format!("exception:{id}"), detail)
            .await
    }

    /// The new fact a ticket's action writes on its effect (never a
    /// delete): marked succeeded or failed by a person, or a fresh send
    /// budget under the same key.
    async fn apply_ticket_action(
        &self,
        tx: &mut Tx,
        id: i64,
        key: &str,
        action: &str,
    ) -> StoreResult<()> {
        let by = format!("ticket:{id}");
        let sql = match action {
            "mark_succeeded" => Some(concat!(
                "UPDATE effects SET state = ",
                effect_state!(succeeded),
                ", resolved_by = ?1, updated_at = ",
                now_ms!(),
                " WHERE idempotency_key = ?2 AND tenant = (SELECT tenant FROM exceptions WHERE id = ?3)"
            )),
            "mark_failed" => Some(concat!(
                "UPDATE effects SET state = ",
                effect_state!(failed),
                ", resolved_by = ?1, updated_at = ",
                now_ms!(),
                " WHERE idempotency_key = ?2 AND tenant = (SELECT tenant FROM exceptions WHERE id = ?3)"
            )),
            // A fresh send budget; the same key keeps the downstream idempotent.
            "resend" => Some(concat!(
                "UPDATE effects SET state = ",
                effect_state!(retryable),
                ", sends = 0, resolved_by = ?1, updated_at = ",
                now_ms!(),
                " WHERE idempotency_key = ?2 AND tenant = (SELECT tenant FROM exceptions WHERE id = ?3)"
            )),
            _ => None,
        };
        if let Some(sql) = sql {
            sqlx::query(self.sql(sql))
                .bind(&by)
                .bind(key)
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// The ticket's effect: its key in the ticket's tenant.
    async fn effect_in(
        &self,
        tx: &mut Tx,
        ticket: &ExceptionRecord,
    ) -> StoreResult<Option<EffectRecord>> {
        let (Some(key), Some(tenant)) = (&ticket.effect_key, &ticket.tenant) else {
            return Ok(None);
        };
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE tenant = ? AND idempotency_key = ?"
        )))
        .bind(tenant)
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?)
    }
}

/// A resolution step needs an actor and a reason.
fn need_person(what: &str, actor: &str, reason: &str) -> StoreResult<()> {
    if actor.trim().is_empty() || reason.trim().is_empty() {
        return Err(StoreError::Conflict(format!(
            "{what} an exception needs an actor and a reason"
        )));
    }
    Ok(())
}

/// The effect row's digest, before and after a resolution.
fn row_digest(effect: &Option<EffectRecord>) -> String {
    let value = serde_json::to_value(effect).unwrap_or_default();
    hex::encode(Sha256::digest(canonical_json(&value).as_bytes()))
}
