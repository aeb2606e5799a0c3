//! Backfills: a job run for the fire times of a past window, on request —
//! after an outage the misfire policy skipped, or for a job added late.
//! Each fire time becomes one trigger in the recovery lane (a share of its
//! group's capacity, ramped, so a large backfill cannot crowd out fresh
//! work or hit a recovering downstream at once), under the same plan key
//! the scanner would have given it: a time already triggered — by the
//! scanner or an earlier backfill — is left as it is, never doubled.

use super::dialect::{new_trigger_id, now_ms};
use super::state_log::Created;
use super::*;
use crate::model::{PlanSpec, plan_key_ms};
use crate::trigger_state;

/// What a backfill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Backfilled {
    pub created: i64,
    pub existing: i64,
}

impl Store {
    /// One recovery-lane trigger of `job` at plan `version` per time in
    /// `times` (ms), due at once; audited as `job.backfill`. Refused, with
    /// nothing stored, for more than
    /// [`crate::model::bounds::BACKFILL_PER_REQUEST`] times or when the
    /// tenant would have more than
    /// [`crate::model::bounds::BACKFILL_PENDING_PER_TENANT`] backfill
    /// triggers waiting to run.
    pub async fn triggers_backfill(
        &self,
        job: &JobRecord,
        version: i64,
        times: &[i64],
        actor: &str,
    ) -> StoreResult<Backfilled> {
        let job_id = job.job_id.as_str();
        let plan = self.plan_get(&job.tenant, job_id, version).await?;
        let spec: PlanSpec = serde_json::from_str(&plan.spec)
            .map_err(|e| StoreError::Conflict(format!("stored plan is unreadable: {e}")))?;
        crate::model::bounds::backfill_max(times.len().max(1)).map_err(StoreError::OutOfBounds)?;
        let (mut tx, _turn) = self.begin_write().await?;
        if self.dialect == Dialect::Postgres {
            // Two backfills of one tenant at once would each count the
            // other's triggers as not there yet: take turns per tenant.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext('backfill:' || $1))")
                .bind(&job.tenant)
                .execute(&mut *tx)
                .await?;
        }
        self.refuse_if_gated(&mut tx, job_id, version, &job.tenant, &plan.resource_group)
            .await?;
        let mut created = Vec::new();
        let first_id = self
            .reserve_trigger_ids(&mut tx, &[(&job.tenant, times.len())])
            .await?[0];
        for (k, at) in times.iter().enumerate() {
            let inserted: Option<(i64, String)> = sqlx::query_as(self.sql(concat!(
                "INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group, \
                 origin, scheduled_at, params, state, priority, next_run_at, recovery, created_at, \
                 updated_at) VALUES (",
                new_trigger_id!(),
                ", ?, ?, ?, ?, ?, ",
                crate::trigger_origin!(backfill),
                ", ?, '{}', ",
                trigger_state!(pending),
                ", ?, ?, 1, ",
                now_ms!(),
                ", ",
                now_ms!(),
                ") ON CONFLICT (tenant, plan_key) DO NOTHING RETURNING id, plan_key"
            )))
            .bind(first_id.map(|first| first + k as i64))
            .bind(plan_key_ms(job_id, *at, version as u32, None))
            .bind(job_id)
            .bind(version)
            .bind(&job.tenant)
            .bind(&plan.resource_group)
            .bind(*at)
            .bind(spec.priority as i64)
            .bind(*at)
            .fetch_optional(&mut *tx)
            .await?;
            created.extend(inserted);
        }
        self.refuse_over_waiting_limit(&mut tx, &job.tenant).await?;
        let done = Backfilled {
            created: created.len() as i64,
            existing: (times.len() - created.len()) as i64,
        };
        self.audit_append(
            &mut tx,
            actor,
            "job.backfill",
            &job.qualified(),
            serde_json::json!({
                "version": version,
                "from": times.first(),
                "to": times.last(),
                "created": done.created,
                "existing": done.existing,
            }),
        )
        .await?;
        if let (Some(first), true) = (times.iter().min(), !created.is_empty()) {
            self.announce_due(&mut *tx, *first).await?;
        }
        tx.commit().await?;
        for (trigger_id, plan_key) in &created {
            Created {
                trigger_id: *trigger_id,
                plan_key,
                job_id,
                origin: crate::model::TriggerOrigin::Backfill,
                state: TriggerState::Pending.as_str(),
                params: "{}",
                actor,
            }
            .log();
        }
        Ok(done)
    }

    /// Refuse when `tenant` has more backfill triggers waiting to run
    /// than [`crate::model::bounds::BACKFILL_PENDING_PER_TENANT`]. Counted
    /// after the inserts, in the same transaction: times already triggered
    /// add nothing, and a refusal rolls back every row.
    async fn refuse_over_waiting_limit(&self, tx: &mut Tx, tenant: &str) -> StoreResult<()> {
        let waiting: i64 = sqlx::query_scalar(self.sql(concat!(
            "SELECT count(*) FROM triggers WHERE tenant = ? AND origin = ",
            crate::trigger_origin!(backfill),
            " AND state IN (",
            trigger_state!(pending),
            ", ",
            trigger_state!(retry_wait),
            ")"
        )))
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
        crate::model::bounds::backfill_pending(tenant, waiting).map_err(StoreError::OutOfBounds)
    }
}
