//! Trigger creation while a gate is closed: a manual run in a closed scope
//! is refused, naming the gate; a scheduled fire is created and held
//! `paused` in the scan's transaction (at resume it fires, or its job's
//! misfire policy judges it if it is late by then).

use super::super::dialect::now_ms;
use super::super::state_log::Moved;
use super::super::*;
use super::{COVERED, GATE_LOCK, GateRecord};
use crate::model::plan::JobName;
use crate::trigger_state;

/// The closed gate covering a new trigger of `?1` job (its qualified name,
/// `tenant/job`), `?2` plan version, `?3` tenant, `?4` group, `?5` job id —
/// the widest first.
const COVERING: &str = "SELECT id, kind, value, reason, closed_by, closed_at, reopened_by, \
     reopened_at, reopen_reason FROM gates WHERE reopened_at IS NULL \
     AND (kind = 'global' OR (kind = 'job' AND value = ?1) OR (kind = 'tenant' AND value = ?3) \
     OR (kind = 'group' AND value = ?4) OR (kind = 'type' AND value = (SELECT p.job_type \
         FROM plan_versions p WHERE p.tenant = ?3 AND p.job_id = ?5 AND p.version = ?2))) \
     ORDER BY CASE kind WHEN 'global' THEN 0 WHEN 'group' THEN 1 WHEN 'tenant' THEN 2 \
         WHEN 'type' THEN 3 ELSE 4 END LIMIT 1";

/// [`crate::model::Transition::Pause`] of a scan's new fires that a closed
/// gate covers (`?1` shard, `?2` the scan's first fire time).
pub(in crate::store) const HOLD_FIRES: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(paused),
    ", updated_at = ",
    now_ms!(),
    " WHERE state = ",
    trigger_state!(pending),
    " AND origin = ",
    crate::trigger_origin!(schedule),
    " AND scheduled_at >= ?2 \
     AND EXISTS (SELECT 1 FROM job_schedules s WHERE s.shard = ?1 \
         AND s.tenant = triggers.tenant AND s.job_id = triggers.job_id) AND "
);

impl Store {
    /// PostgreSQL: wait out a pause or resume in progress, and keep the
    /// next one from committing until this transaction ends.
    async fn share_gate_lock(&self, tx: &mut Tx) -> StoreResult<()> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock_shared($1)")
                .bind(GATE_LOCK)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Refuse a manual run of `job_id` (plan `version`, `tenant`, `group`)
    /// while a closed gate covers it. Call first in the creating
    /// transaction.
    pub(in crate::store) async fn refuse_if_gated(
        &self,
        tx: &mut Tx,
        job_id: &str,
        version: i64,
        tenant: &str,
        group: &str,
    ) -> StoreResult<()> {
        self.share_gate_lock(tx).await?;
        let gate: Option<GateRecord> = sqlx::query_as(self.sql(COVERING))
            .bind(JobName::qualified(tenant, job_id))
            .bind(version)
            .bind(tenant)
            .bind(group)
            .bind(job_id)
            .fetch_optional(&mut **tx)
            .await?;
        match gate {
            None => Ok(()),
            Some(g) => Err(StoreError::Conflict(format!(
                "job '{job_id}' is paused: {} was paused by {} ({}); trigger creation is closed \
                 until `paddock resume` reopens it",
                g.scope(),
                g.closed_by,
                g.reason
            ))),
        }
    }

    /// Refuse to approve parked trigger `id` while a closed gate covers
    /// it: approved, it would be claimable inside a paused scope.
    pub(in crate::store) async fn refuse_approval_if_gated(
        &self,
        tx: &mut Tx,
        id: i64,
    ) -> StoreResult<()> {
        let row: Option<(String, i64, String, String)> =
            sqlx::query_as(self.sql(
                "SELECT job_id, plan_version, tenant, resource_group FROM triggers WHERE id = ?",
            ))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        match row {
            Some((job, version, tenant, group)) => {
                self.refuse_if_gated(tx, &job, version, &tenant, &group)
                    .await
            }
            None => Ok(()),
        }
    }

    /// Hold the fires a scan just created in `shard` (from `first_at` on)
    /// that a closed gate covers: `paused`, in the scan's transaction.
    /// Costs one read of the open gates when none is closed.
    pub(in crate::store) async fn hold_gated_fires(
        &self,
        tx: &mut Tx,
        shard: i64,
        first_at: i64,
    ) -> StoreResult<Vec<Moved>> {
        self.share_gate_lock(tx).await?;
        let open: i64 =
            sqlx::query_scalar(self.sql("SELECT count(*) FROM gates WHERE reopened_at IS NULL"))
                .fetch_one(&mut **tx)
                .await?;
        if open == 0 {
            return Ok(Vec::new());
        }
        let sql = self
            .dialect
            .sql_owned(format!("{HOLD_FIRES}{COVERED} RETURNING id, plan_key"));
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(shard)
            .bind(first_at)
            .fetch_all(&mut **tx)
            .await?)
    }
}
