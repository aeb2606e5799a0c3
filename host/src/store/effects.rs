//! The side-effect plane's store ([`EffectStore`]): effect intents and
//! outcomes, the recovery scanner's reads and compare-and-set writes, and
//! exception tickets.
//!
//! Every effect write made by an attempt is fenced in the same statement by
//! the attempt's trigger lease ([`super::fence::lease_fence`]). Zero rows
//! with a stale token is [`StoreError::LeaseLost`], counted in
//! `stale_token_rejections` (and `stale_effect_writes`).

use super::columns::{effect_columns, exception_columns};
use super::dialect::now_ms;
use super::fence::{EffectRef, lease_fence};
use super::state_log::StateChange;
use super::*;
use crate::model::{LeaseRef, TriggerState, canonical_json};
use crate::{effect_state, effect_states, trigger_state};
use async_trait::async_trait;

#[async_trait]
impl EffectStore for Store {
    async fn connector_secret(
        &self,
        connector: &str,
    ) -> StoreResult<Option<crate::model::secret::ConnectorSecret>> {
        self.secret_get(connector).await
    }

    /// Write a new effect's intent, fenced by the lease in the same
    /// statement (`sends = 1`: the send follows). `Conflict` when the key
    /// was recorded meanwhile; `LeaseLost` when the token is stale.
    async fn effect_intent(&self, lease: &LeaseRef, new: &NewEffect) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "INSERT INTO effects (tenant, idempotency_key, downstream_key, trigger_id, attempt_id, \
             connector, action, params_digest, request_id, fencing_token, state, compensates, sends, \
             created_at, updated_at) \
             SELECT t.tenant, ?1, ?10, t.id, ?3, ?4, ?5, ?6, ?7, t.fencing_token, ",
            effect_state!(intent),
            ", ?8, 1, ",
            now_ms!(),
            ", ",
            now_ms!(),
            " FROM triggers t WHERE ",
            lease_fence!("t", id = "?2", token = "?9"),
            " AND t.tenant = ?11 ON CONFLICT (tenant, idempotency_key) DO NOTHING RETURNING ",
            effect_columns!()
        )))
        .bind(&new.idempotency_key)
        .bind(lease.trigger_id)
        .bind(lease.attempt_id)
        .bind(&new.connector)
        .bind(&new.action)
        .bind(&new.params_digest)
        .bind(&new.request_id)
        .bind(&new.compensates)
        .bind(lease.fencing_token.get())
        .bind(&new.downstream_key)
        .bind(&new.tenant)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => {
                let effect = EffectRef {
                    key: &new.idempotency_key,
                    request_id: Some(&new.request_id),
                    params_digest: Some(&new.params_digest),
                };
                Err(self.effect_miss(lease, "effect intent", &effect).await)
            }
        }
    }

    /// Re-write the intent of an unresolved effect (intent, unknown or
    /// retryable) before sending it again under this lease: the record takes
    /// the lease's token and `sends + 1`. Re-writing an `intent` means an
    /// attempt that is gone left it and a query by key found it not
    /// committed: its answer was lost, so `unknown_at` is set (as the
    /// recovery scanner sets it when it finds the same), and the incident
    /// report counts it an unknown outcome resolved by resending.
    async fn effect_reintent(
        &self,
        lease: &LeaseRef,
        key: &str,
        params_digest: &str,
        request_id: &str,
    ) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "UPDATE effects SET trigger_id = ?1, attempt_id = ?2, fencing_token = ?3, \
             request_id = ?4, state = ",
            effect_state!(intent),
            ", sends = sends + 1, updated_at = ",
            now_ms!(),
            ", unknown_at = CASE WHEN unknown_at IS NULL AND state = ",
            effect_state!(intent),
            " THEN ",
            now_ms!(),
            " ELSE unknown_at END \
             WHERE tenant = (SELECT tenant FROM triggers WHERE id = ?1) \
               AND idempotency_key = ?5 AND params_digest = ?6 AND state IN ",
            effect_states!(intent, unknown, retryable),
            " AND fencing_token <= ?3 \
               AND EXISTS (SELECT 1 FROM triggers t WHERE ",
            lease_fence!("t", id = "?1", token = "?3"),
            ") RETURNING ",
            effect_columns!()
        )))
        .bind(lease.trigger_id)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token.get())
        .bind(request_id)
        .bind(key)
        .bind(params_digest)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => {
                let effect = EffectRef {
                    key,
                    request_id: Some(request_id),
                    params_digest: Some(params_digest),
                };
                Err(self.effect_miss(lease, "effect intent", &effect).await)
            }
        }
    }

    /// Record what became of an unresolved effect, fenced by the lease:
    /// after a send (the record holds this token) or after a query by key
    /// (the record may hold an older token).
    async fn effect_settle(
        &self,
        lease: &LeaseRef,
        key: &str,
        outcome: &EffectOutcome,
    ) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "UPDATE effects SET state = ?1, response = ?2, error = ?3, last_status = ?4, \
             resolved_by = ?5, updated_at = ",
            now_ms!(),
            ", unknown_at = CASE WHEN unknown_at IS NULL AND (?1 = ",
            effect_state!(unknown),
            " OR ?5 = 'query') THEN ",
            now_ms!(),
            " ELSE unknown_at END \
             WHERE tenant = (SELECT tenant FROM triggers WHERE id = ?7) \
               AND idempotency_key = ?6 AND state IN ",
            effect_states!(intent, unknown, retryable),
            " AND fencing_token <= ?8 \
               AND EXISTS (SELECT 1 FROM triggers t WHERE ",
            lease_fence!("t", id = "?7", token = "?8"),
            ") RETURNING ",
            effect_columns!()
        )))
        .bind(outcome.state.as_str())
        .bind(&outcome.response)
        .bind(&outcome.error)
        .bind(outcome.last_status)
        .bind(outcome.resolved_by)
        .bind(key)
        .bind(lease.trigger_id)
        .bind(lease.fencing_token.get())
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => {
                let effect = EffectRef {
                    key,
                    request_id: None,
                    params_digest: None,
                };
                Err(self.effect_miss(lease, "effect outcome", &effect).await)
            }
        }
    }

    /// Effects left `intent` or `unknown` whose trigger holds no live lease:
    /// the recovery scanner's work list.
    async fn effects_unresolved(&self, limit: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects e WHERE e.state IN ",
            effect_states!(intent, unknown),
            " AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.id = e.trigger_id \
                   AND t.state = ",
            trigger_state!(running),
            " AND t.lease_until >= ",
            now_ms!(),
            ") ORDER BY e.id LIMIT CAST(? AS INTEGER)"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The recovery scanner's write: compare-and-set on the token the record
    /// holds, and only while no live lease could be writing it. Returns
    /// whether it applied.
    async fn effect_recover(
        &self,
        tenant: &str,
        key: &str,
        expected_token: i64,
        outcome: &EffectOutcome,
    ) -> StoreResult<bool> {
        Ok(sqlx::query(self.sql(concat!(
            "UPDATE effects SET state = ?1, response = ?2, error = ?3, last_status = ?4, \
             resolved_by = ?5, updated_at = ",
            now_ms!(),
            ", unknown_at = coalesce(unknown_at, ",
            now_ms!(),
            ") WHERE tenant = ?8 AND idempotency_key = ?6 AND fencing_token = ?7 \
               AND state IN ",
            effect_states!(intent, unknown),
            " AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.id = effects.trigger_id \
                   AND t.state = ",
            trigger_state!(running),
            " AND t.lease_until >= ",
            now_ms!(),
            ")"
        )))
        .bind(outcome.state.as_str())
        .bind(&outcome.response)
        .bind(&outcome.error)
        .bind(outcome.last_status)
        .bind(outcome.resolved_by)
        .bind(key)
        .bind(expected_token)
        .bind(tenant)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    /// Open a ticket, or return the open one with the same kind and subject
    /// (`false`). Opening is audited under the actor `paddock`.
    async fn exception_open(&self, new: &NewException) -> StoreResult<(ExceptionRecord, bool)> {
        let (mut tx, _turn) = self.begin_write().await?;
        let evidence = canonical_json(&new.evidence);
        let allowed = serde_json::to_string(&new.allowed_actions).unwrap_or_default();
        let inserted = sqlx::query(self.sql(concat!(
            "INSERT INTO exceptions (kind, tenant, subject, trigger_id, effect_key, evidence, \
             allowed_actions, state, created_at) \
             SELECT ?1, (SELECT tenant FROM triggers WHERE id = ?3), ?2, ?3, ?4, ?5, ?6, 'open', ",
            now_ms!(),
            " WHERE true ON CONFLICT DO NOTHING"
        )))
        .bind(new.kind)
        .bind(&new.subject)
        .bind(new.trigger_id)
        .bind(&new.effect_key)
        .bind(&evidence)
        .bind(&allowed)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let record: ExceptionRecord = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE kind = ?1 AND subject = ?2 AND state = 'open' \
               AND coalesce(tenant, '') = coalesce((SELECT tenant FROM triggers WHERE id = ?3), '')"
        )))
        .bind(new.kind)
        .bind(&new.subject)
        .bind(new.trigger_id)
        .fetch_one(&mut *tx)
        .await?;
        // A queued trigger waits for its new ticket's answer, not its retry
        // time; a running one is held by its attempt's end (`store/held.rs`).
        let held = match (inserted, new.trigger_id) {
            (true, Some(trigger_id)) => self.hold_queued(&mut tx, trigger_id).await?,
            _ => None,
        };
        if inserted {
            self.counter_add_in(&mut *tx, "exceptions_opened", 1)
                .await?;
            self.audit_append(
                &mut tx,
                "paddock",
                "exception.open",
                &format!("exception:{}", record.id),
                serde_json::json!({ "kind": new.kind, "subject": new.subject }),
            )
            .await?;
        }
        tx.commit().await?;
        if let (Some(plan_key), Some(trigger_id)) = (held, new.trigger_id) {
            let change = StateChange {
                cause: "ticket_hold",
                state: TriggerState::Manual.as_str(),
                actor: "paddock",
            };
            change.log(&[(trigger_id, plan_key)]);
        }
        Ok((record, inserted))
    }
}

impl Store {
    /// A zero-row fenced write: stale token (counted, `LeaseLost`) or a
    /// record that changed under us (`Conflict`).
    async fn effect_miss(
        &self,
        lease: &LeaseRef,
        what: &str,
        effect: &EffectRef<'_>,
    ) -> StoreError {
        let current: Option<(i64, String)> = match sqlx::query_as(
            self.sql("SELECT fencing_token, state FROM triggers WHERE id = ?"),
        )
        .bind(lease.trigger_id)
        .fetch_optional(&self.pool)
        .await
        {
            Ok(found) => found,
            Err(e) => return e.into(),
        };
        match current {
            Some((token, state))
                if token == lease.fencing_token.get()
                    && state == TriggerState::Running.as_str() =>
            {
                StoreError::Conflict(format!("{what}: the effect record changed concurrently"))
            }
            _ => {
                if let Err(e) = self
                    .counter_add_in(&self.pool, "stale_effect_writes", 1)
                    .await
                {
                    return e;
                }
                self.lease_lost_with(lease, what, Some(effect)).await
            }
        }
    }
}
