//! The store side of the side-effect plane: connectors, effect intents and
//! outcomes, the recovery scanner's reads and compare-and-set writes, and
//! exception tickets.
//!
//! Every effect write made by an attempt is fenced in the same statement by
//! the attempt's trigger: `EXISTS (SELECT 1 FROM triggers WHERE id = ? AND
//! fencing_token = ? AND state = 'running')`. Zero rows with a stale token is
//! [`StoreError::LeaseLost`], counted in `stale_token_rejections`.

use super::dialect::now_ms;
use super::*;
use crate::registry::manifest;
use sha2::{Digest, Sha256};

macro_rules! effect_columns {
    () => {
        "id, idempotency_key, trigger_id, attempt_id, connector, action, params_digest, \
         request_id, fencing_token, state, response, error, compensates, sends, last_status, \
         resolved_by, created_at, updated_at"
    };
}

macro_rules! connector_columns {
    () => {
        "name, kind, base_url, timeout_ms, permits, rate_per_sec, compares_tokens, queryable, \
         idempotent, breaker_failure_rate, breaker_min_calls, breaker_window_ms, breaker_open_ms"
    };
}

macro_rules! exception_columns {
    () => {
        "id, kind, subject, trigger_id, effect_key, evidence, allowed_actions, state, resolution, \
         resolved_by, reason, before_digest, after_digest, created_at, resolved_at"
    };
}

fn row_digest(effect: &Option<EffectRecord>) -> String {
    let value = serde_json::to_value(effect).unwrap_or_default();
    hex::encode(Sha256::digest(manifest::canonical_json(&value).as_bytes()))
}

impl Store {
    /// Add one to a named counter.
    pub async fn counter_incr(&self, name: &str) -> StoreResult<()> {
        self.counter_add(&self.pool, name, 1).await
    }

    // ---- connectors ------------------------------------------------------

    /// Create or replace a connector, audited.
    pub async fn connector_put(&self, c: &ConnectorRecord, actor: &str) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO connectors (",
            connector_columns!(),
            ", created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, base_url = excluded.base_url, \
             timeout_ms = excluded.timeout_ms, permits = excluded.permits, \
             rate_per_sec = excluded.rate_per_sec, compares_tokens = excluded.compares_tokens, \
             queryable = excluded.queryable, idempotent = excluded.idempotent, \
             breaker_failure_rate = excluded.breaker_failure_rate, \
             breaker_min_calls = excluded.breaker_min_calls, \
             breaker_window_ms = excluded.breaker_window_ms, \
             breaker_open_ms = excluded.breaker_open_ms, updated_at = excluded.updated_at"
        )))
        .bind(&c.name)
        .bind(&c.kind)
        .bind(&c.base_url)
        .bind(c.timeout_ms)
        .bind(c.permits)
        .bind(c.rate_per_sec)
        .bind(c.compares_tokens as i64)
        .bind(c.queryable as i64)
        .bind(c.idempotent as i64)
        .bind(c.breaker_failure_rate)
        .bind(c.breaker_min_calls)
        .bind(c.breaker_window_ms)
        .bind(c.breaker_open_ms)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "connector.put",
            &c.name,
            serde_json::to_value(c).unwrap_or_default(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn connector_get(&self, name: &str) -> StoreResult<Option<ConnectorRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            connector_columns!(),
            " FROM connectors WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn connectors_list(&self) -> StoreResult<Vec<ConnectorRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            connector_columns!(),
            " FROM connectors ORDER BY name"
        )))
        .fetch_all(&self.pool)
        .await?)
    }

    // ---- effects ---------------------------------------------------------

    pub async fn effect_get(&self, key: &str) -> StoreResult<Option<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE idempotency_key = ?"
        )))
        .bind(key)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn effects_for_trigger(&self, trigger_id: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE trigger_id = ? ORDER BY id"
        )))
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn effects_list(&self, limit: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects ORDER BY id DESC LIMIT CAST(? AS INTEGER)"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A zero-row fenced write: stale token (counted, `LeaseLost`) or a
    /// record that changed under us (`Conflict`).
    async fn effect_miss(&self, lease: &LeaseRef, what: &str) -> StoreError {
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
            Some((token, state)) if token == lease.fencing_token && state == "running" => {
                StoreError::Conflict(format!("{what}: the effect record changed concurrently"))
            }
            _ => {
                if let Err(e) = self.counter_add(&self.pool, "stale_effect_writes", 1).await {
                    return e;
                }
                self.lease_lost(lease, what).await
            }
        }
    }

    /// Write a new effect's intent, fenced by the lease in the same
    /// statement (`sends = 1`: the send follows). `Conflict` when the key
    /// was recorded meanwhile; `LeaseLost` when the token is stale.
    pub async fn effect_intent(
        &self,
        lease: &LeaseRef,
        new: &NewEffect,
    ) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "INSERT INTO effects (idempotency_key, trigger_id, attempt_id, connector, action, \
             params_digest, request_id, fencing_token, state, compensates, sends, created_at, updated_at) \
             SELECT ?1, t.id, ?3, ?4, ?5, ?6, ?7, t.fencing_token, 'intent', ?8, 1, ",
            now_ms!(),
            ", ",
            now_ms!(),
            " FROM triggers t WHERE t.id = ?2 AND t.fencing_token = ?9 AND t.state = 'running' \
             ON CONFLICT (idempotency_key) DO NOTHING RETURNING ",
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
        .bind(lease.fencing_token)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => Err(self.effect_miss(lease, "effect intent").await),
        }
    }

    /// Re-write the intent of an unresolved effect (intent, unknown or
    /// retryable) before sending it again under this lease: the record takes
    /// the lease's token and `sends + 1`.
    pub async fn effect_reintent(
        &self,
        lease: &LeaseRef,
        key: &str,
        params_digest: &str,
        request_id: &str,
    ) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "UPDATE effects SET trigger_id = ?1, attempt_id = ?2, fencing_token = ?3, \
             request_id = ?4, state = 'intent', sends = sends + 1, updated_at = ",
            now_ms!(),
            " WHERE idempotency_key = ?5 AND params_digest = ?6 \
               AND state IN ('intent', 'unknown', 'retryable') AND fencing_token <= ?3 \
               AND EXISTS (SELECT 1 FROM triggers t WHERE t.id = ?1 AND t.fencing_token = ?3 \
                           AND t.state = 'running') \
             RETURNING ",
            effect_columns!()
        )))
        .bind(lease.trigger_id)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token)
        .bind(request_id)
        .bind(key)
        .bind(params_digest)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => Err(self.effect_miss(lease, "effect intent").await),
        }
    }

    /// Record what became of an unresolved effect, fenced by the lease:
    /// after a send (the record holds this token) or after a query by key
    /// (the record may hold an older token).
    pub async fn effect_settle(
        &self,
        lease: &LeaseRef,
        key: &str,
        outcome: &EffectOutcome,
    ) -> StoreResult<EffectRecord> {
        let row: Option<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "UPDATE effects SET state = ?1, response = ?2, error = ?3, last_status = ?4, \
             resolved_by = ?5, updated_at = ",
            now_ms!(),
            " WHERE idempotency_key = ?6 AND state IN ('intent', 'unknown', 'retryable') \
               AND fencing_token <= ?8 \
               AND EXISTS (SELECT 1 FROM triggers t WHERE t.id = ?7 AND t.fencing_token = ?8 \
                           AND t.state = 'running') \
             RETURNING ",
            effect_columns!()
        )))
        .bind(outcome.state)
        .bind(&outcome.response)
        .bind(&outcome.error)
        .bind(outcome.last_status)
        .bind(outcome.resolved_by)
        .bind(key)
        .bind(lease.trigger_id)
        .bind(lease.fencing_token)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => Err(self.effect_miss(lease, "effect outcome").await),
        }
    }

    /// Effects left `intent` or `unknown` whose trigger holds no live lease:
    /// the recovery scanner's work list.
    pub async fn effects_unresolved(&self, limit: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects e WHERE e.state IN ('intent', 'unknown') \
               AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.id = e.trigger_id \
                   AND t.state = 'running' AND t.lease_until >= ",
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
    pub async fn effect_recover(
        &self,
        key: &str,
        expected_token: i64,
        outcome: &EffectOutcome,
    ) -> StoreResult<bool> {
        Ok(sqlx::query(self.sql(concat!(
            "UPDATE effects SET state = ?1, response = ?2, error = ?3, last_status = ?4, \
             resolved_by = ?5, updated_at = ",
            now_ms!(),
            " WHERE idempotency_key = ?6 AND fencing_token = ?7 AND state IN ('intent', 'unknown') \
               AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.id = effects.trigger_id \
                   AND t.state = 'running' AND t.lease_until >= ",
            now_ms!(),
            ")"
        )))
        .bind(outcome.state)
        .bind(&outcome.response)
        .bind(&outcome.error)
        .bind(outcome.last_status)
        .bind(outcome.resolved_by)
        .bind(key)
        .bind(expected_token)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    // ---- exception tickets -------------------------------------------------

    /// Open a ticket, or return the open one with the same kind and subject
    /// (`false`). Opening is audited under the actor `paddock`.
    pub async fn exception_open(&self, new: &NewException) -> StoreResult<(ExceptionRecord, bool)> {
        let (mut tx, _turn) = self.begin_write().await?;
        let evidence = manifest::canonical_json(&new.evidence);
        let allowed = serde_json::to_string(&new.allowed_actions).unwrap_or_default();
        let inserted = sqlx::query(self.sql(concat!(
            "INSERT INTO exceptions (kind, subject, trigger_id, effect_key, evidence, \
             allowed_actions, state, created_at) VALUES (?, ?, ?, ?, ?, ?, 'open', ",
            now_ms!(),
            ") ON CONFLICT DO NOTHING"
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
            " FROM exceptions WHERE kind = ? AND subject = ? AND state = 'open'"
        )))
        .bind(new.kind)
        .bind(&new.subject)
        .fetch_one(&mut *tx)
        .await?;
        if inserted {
            self.counter_add(&mut *tx, "exceptions_opened", 1).await?;
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
        Ok((record, inserted))
    }

    pub async fn exception_get(&self, id: i64) -> StoreResult<ExceptionRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("exception {id}")))
    }

    /// Tickets, newest first; `state` filters (`open` / `resolved`).
    pub async fn exceptions_list(&self, state: Option<&str>) -> StoreResult<Vec<ExceptionRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE ?1 IS NULL OR state = ?1 ORDER BY id DESC"
        )))
        .bind(state)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Resolve an open ticket with one of its allowed actions. Writes the
    /// new facts on the effect (never deleting the record), the ticket's
    /// before/after digests, and an audit entry — in one transaction.
    pub async fn exception_resolve(
        &self,
        id: i64,
        action: &str,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord> {
        if actor.trim().is_empty() || reason.trim().is_empty() {
            return Err(StoreError::Conflict(
                "resolving an exception needs an actor and a reason".into(),
            ));
        }
        let (mut tx, _turn) = self.begin_write().await?;
        let ticket: ExceptionRecord = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&mut *tx)
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
        if !ticket.allowed().iter().any(|a| a == action) {
            return Err(StoreError::Conflict(format!(
                "action '{action}' is not allowed for exception {id}; allowed: {}",
                ticket.allowed().join(", ")
            )));
        }
        let before = self
            .effect_in(&mut tx, ticket.effect_key.as_deref())
            .await?;
        let by = format!("ticket:{id}");
        if let Some(key) = &ticket.effect_key {
            let sql = match action {
                "mark_succeeded" => Some(concat!(
                    "UPDATE effects SET state = 'succeeded', resolved_by = ?, updated_at = ",
                    now_ms!(),
                    " WHERE idempotency_key = ?"
                )),
                "mark_failed" => Some(concat!(
                    "UPDATE effects SET state = 'failed', resolved_by = ?, updated_at = ",
                    now_ms!(),
                    " WHERE idempotency_key = ?"
                )),
                // A fresh send budget; the same key keeps the downstream idempotent.
                "resend" => Some(concat!(
                    "UPDATE effects SET state = 'retryable', sends = 0, resolved_by = ?, updated_at = ",
                    now_ms!(),
                    " WHERE idempotency_key = ?"
                )),
                _ => None,
            };
            if let Some(sql) = sql {
                sqlx::query(self.sql(sql))
                    .bind(&by)
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let after = self
            .effect_in(&mut tx, ticket.effect_key.as_deref())
            .await?;
        let (before_digest, after_digest) = (row_digest(&before), row_digest(&after));
        sqlx::query(self.sql(concat!(
            "UPDATE exceptions SET state = 'resolved', resolution = ?, resolved_by = ?, reason = ?, \
             before_digest = ?, after_digest = ?, resolved_at = ",
            now_ms!(),
            " WHERE id = ? AND state = 'open'"
        )))
        .bind(action)
        .bind(actor)
        .bind(reason)
        .bind(&before_digest)
        .bind(&after_digest)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "exception.resolve",
            &format!("exception:{id}"),
            serde_json::json!({
                "kind": ticket.kind, "subject": ticket.subject, "action": action,
                "reason": reason, "effect_key": ticket.effect_key,
                "before_digest": before_digest, "after_digest": after_digest,
            }),
        )
        .await?;
        tx.commit().await?;
        self.exception_get(id).await
    }

    async fn effect_in(&self, tx: &mut Tx, key: Option<&str>) -> StoreResult<Option<EffectRecord>> {
        let Some(key) = key else { return Ok(None) };
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE idempotency_key = ?"
        )))
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?)
    }
}
