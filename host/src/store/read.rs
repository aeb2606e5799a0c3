//! The read models every role shares ([`ReadStore`]) and the bookkeeping
//! counters ([`Counters`]). Nothing here writes but the counters.

use super::columns::{
    attempt_columns, connector_columns, effect_columns, exception_columns, trigger_columns,
};
use super::dialect::now_ms;
use super::*;
use crate::model::ResourceGroup;
use crate::model::audit::AuditEntry;
use crate::model::group::CapacityInputs;
use async_trait::async_trait;

/// A `resource_groups` row.
#[derive(sqlx::FromRow)]
pub(super) struct GroupRow {
    name: String,
    fuel_per_attempt: i64,
    memory_bytes: i64,
    deadline_ms: i64,
    max_concurrency: i64,
    grants: String,
    connector_rate_per_s: Option<f64>,
    service_time_ms: Option<i64>,
    db_connections: Option<i64>,
    memory_budget_bytes: Option<i64>,
    working_set_bytes: Option<i64>,
    aging_ms: i64,
    min_share: i64,
    recovery_share_pct: i64,
    ramp_every_ms: i64,
    output_caps: String,
}

/// The columns of a [`GroupRow`].
macro_rules! group_columns {
    () => {
        "name, fuel_per_attempt, memory_bytes, deadline_ms, max_concurrency, grants, \
         connector_rate_per_s, service_time_ms, db_connections, memory_budget_bytes, \
         working_set_bytes, aging_ms, min_share, recovery_share_pct, ramp_every_ms, output_caps"
    };
}

impl From<GroupRow> for ResourceGroup {
    fn from(row: GroupRow) -> Self {
        Self {
            name: row.name,
            fuel_per_attempt: row.fuel_per_attempt,
            memory_bytes: row.memory_bytes,
            deadline_ms: row.deadline_ms,
            max_concurrency: row.max_concurrency,
            grants: row.grants,
            // A stored value that no longer reads takes the defaults.
            caps: serde_json::from_str(&row.output_caps).unwrap_or_default(),
            capacity: CapacityInputs {
                connector_rate_per_s: row.connector_rate_per_s,
                service_time_ms: row.service_time_ms,
                db_connections: row.db_connections,
                memory_budget_bytes: row.memory_budget_bytes,
                working_set_bytes: row.working_set_bytes,
            },
            aging_ms: row.aging_ms,
            shares: crate::model::shares::GroupShares {
                min_share: row.min_share,
                recovery_share_pct: row.recovery_share_pct,
                ramp_every_ms: row.ramp_every_ms,
            },
        }
    }
}

#[async_trait]
impl ReadStore for Store {
    /// The database's clock, in ms.
    async fn now_ms(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
            .fetch_one(&self.pool)
            .await?)
    }

    async fn trigger_get(&self, id: i64) -> StoreResult<TriggerRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger {id}")))
    }

    async fn trigger_by_key(&self, tenant: &str, plan_key: &str) -> StoreResult<TriggerRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE tenant = ? AND plan_key = ?"
        )))
        .bind(tenant)
        .bind(plan_key)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger '{plan_key}'")))
    }

    /// The newest triggers first.
    async fn triggers_list(&self, limit: i64) -> StoreResult<Vec<TriggerRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers ORDER BY id DESC LIMIT CAST(? AS INTEGER)"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn attempts_for(&self, trigger_id: i64) -> StoreResult<Vec<AttemptRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            attempt_columns!(),
            " FROM attempts WHERE trigger_id = ? ORDER BY id"
        )))
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Triggers by state; the states sum to the total.
    async fn trigger_counts(&self) -> StoreResult<TriggerCounts> {
        let by_state: Vec<(String, i64)> = sqlx::query_as(
            self.sql("SELECT state, count(*) FROM triggers GROUP BY state ORDER BY state"),
        )
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM triggers"))
            .fetch_one(&self.pool)
            .await?;
        Ok(TriggerCounts { total, by_state })
    }

    /// The last checkpoint saved for a trigger, by any attempt.
    async fn checkpoint_load(&self, trigger_id: i64) -> StoreResult<Option<(i64, Vec<u8>)>> {
        Ok(
            sqlx::query_as(self.sql("SELECT seq, data FROM checkpoints WHERE trigger_id = ?"))
                .bind(trigger_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn counter(&self, name: &str) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar(self.sql("SELECT value FROM counters WHERE name = ?"))
                .bind(name)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or(0),
        )
    }

    async fn counters(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(
            sqlx::query_as(self.sql("SELECT name, value FROM counters ORDER BY name"))
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn component_get(&self, digest: &str) -> StoreResult<Option<ComponentRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT digest, size_bytes, manifest, pushed_by, pushed_at FROM components WHERE digest = ?",
        ))
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn component_bytes(&self, digest: &str) -> StoreResult<Vec<u8>> {
        sqlx::query_scalar(self.sql("SELECT bytes FROM components WHERE digest = ?"))
            .bind(digest)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("component sha256:{digest}")))
    }

    async fn components_list(&self) -> StoreResult<Vec<ComponentRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT digest, size_bytes, manifest, pushed_by, pushed_at FROM components \
             ORDER BY pushed_at, digest",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn job_get(&self, tenant: &str, job_id: &str) -> StoreResult<Option<JobRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, tenant, latest_version, created_at FROM jobs \
             WHERE tenant = ? AND job_id = ?",
        ))
        .bind(tenant)
        .bind(job_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn jobs_named(&self, job_id: &str) -> StoreResult<Vec<JobRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, tenant, latest_version, created_at FROM jobs \
             WHERE job_id = ? ORDER BY tenant",
        ))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn jobs_list(&self) -> StoreResult<Vec<JobRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, tenant, latest_version, created_at FROM jobs ORDER BY job_id, tenant",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn plan_get(
        &self,
        tenant: &str,
        job_id: &str,
        version: i64,
    ) -> StoreResult<PlanVersionRecord> {
        sqlx::query_as(self.sql(
            "SELECT job_id, version, digest, spec, component_digest, resource_group, created_by, created_at \
             FROM plan_versions WHERE tenant = ? AND job_id = ? AND version = ?",
        ))
        .bind(tenant)
        .bind(job_id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("job '{job_id}' version {version}")))
    }

    async fn plan_versions(
        &self,
        tenant: &str,
        job_id: &str,
    ) -> StoreResult<Vec<PlanVersionRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, version, digest, spec, component_digest, resource_group, created_by, created_at \
             FROM plan_versions WHERE tenant = ? AND job_id = ? ORDER BY version",
        ))
        .bind(tenant)
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn connector_get(&self, name: &str) -> StoreResult<Option<ConnectorRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            connector_columns!(),
            " FROM connectors WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The list people see (API, CLI, reports): a base URL stored with user
    /// info before `connector set` refused it is shown with it hidden; the
    /// gateway reads its row whole through `connector_get`.
    async fn connectors_list(&self) -> StoreResult<Vec<ConnectorRecord>> {
        let mut rows: Vec<ConnectorRecord> = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            connector_columns!(),
            " FROM connectors ORDER BY name"
        )))
        .fetch_all(&self.pool)
        .await?;
        for row in &mut rows {
            row.base_url = crate::model::origin::shown_base_url(&row.base_url).into_owned();
        }
        Ok(rows)
    }

    async fn effect_get(&self, tenant: &str, key: &str) -> StoreResult<Option<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE tenant = ? AND idempotency_key = ?"
        )))
        .bind(tenant)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn effects_for_trigger(&self, trigger_id: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE trigger_id = ? ORDER BY id"
        )))
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn effects_list(&self, limit: i64) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects ORDER BY id DESC LIMIT CAST(? AS INTEGER)"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn exception_get(&self, id: i64) -> StoreResult<ExceptionRecord> {
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
    async fn exceptions_list(&self, state: Option<&str>) -> StoreResult<Vec<ExceptionRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE ?1 IS NULL OR state = ?1 ORDER BY id DESC"
        )))
        .bind(state)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn shard_count(&self) -> StoreResult<u32> {
        let n: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM schedule_shards"))
            .fetch_one(&self.pool)
            .await?;
        Ok(n as u32)
    }

    async fn shards_list(&self) -> StoreResult<Vec<ShardRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT shard, owner, generation, lease_until, watermark, last_scan_at, \
             triggers_created, triggers_existing FROM schedule_shards ORDER BY shard",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Skipped fire times, newest first, optionally of one job.
    async fn skipped_list(
        &self,
        job: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SkippedFire>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT tenant, job_id, plan_version, scheduled_at, reason FROM skipped_fires \
             WHERE ?1 IS NULL OR (tenant = ?1 AND job_id = ?2) \
             ORDER BY scheduled_at DESC LIMIT CAST(?3 AS INTEGER)",
        ))
        .bind(job.map(|(tenant, _)| tenant))
        .bind(job.map(|(_, id)| id))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Skipped fire times by reason.
    async fn skipped_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            self.sql("SELECT reason, count(*) FROM skipped_fires GROUP BY reason ORDER BY reason"),
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn audit_list(&self) -> StoreResult<Vec<AuditEntry>> {
        self.audit_from_seq(0).await
    }

    async fn group_get(&self, name: &str) -> StoreResult<Option<ResourceGroup>> {
        let row: Option<GroupRow> = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            group_columns!(),
            " FROM resource_groups WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn group_load(&self, name: &str) -> StoreResult<Option<super::GroupLoad>> {
        self.load_of_group(name).await
    }

    async fn group_observed(
        &self,
        name: &str,
        window_ms: i64,
    ) -> StoreResult<crate::model::group::Observed> {
        self.observed_of_group(name, window_ms).await
    }

    async fn group_tenants(&self, group: &str) -> StoreResult<Vec<String>> {
        self.tenants_of_group(group).await
    }

    async fn groups_list(&self) -> StoreResult<Vec<ResourceGroup>> {
        let rows: Vec<GroupRow> = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            group_columns!(),
            " FROM resource_groups ORDER BY name"
        )))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }
}

#[async_trait]
impl Counters for Store {
    async fn counter_add(&self, name: &str, by: i64) -> StoreResult<()> {
        self.counter_add_in(&self.pool, name, by).await
    }
}

impl Store {
    /// Add `by` to a counter through `executor` (inside a transaction when
    /// it is one).
    pub(crate) async fn counter_add_in<'e, E>(
        &self,
        executor: E,
        name: &str,
        by: i64,
    ) -> StoreResult<()>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        sqlx::query(self.sql(
            "INSERT INTO counters (name, value) VALUES (?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
        ))
        .bind(name)
        .bind(by)
        .execute(executor)
        .await?;
        Ok(())
    }
}
