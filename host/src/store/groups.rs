//! A resource group's load: what claims enforce (its effective
//! concurrency and the input that binds), how many of its triggers run,
//! and what its recent attempts measured — the observations
//! [`crate::model::group::effective_concurrency`] is recomputed from.

use super::dialect::now_ms;
use super::*;
use crate::model::ResourceGroup;
use crate::model::group::{
    Capacity, OBSERVATION_WINDOW_MS, Observed, TenantQuota, effective_concurrency,
};
use crate::trigger_state;

/// Attempts the moving window looks back over at most: the newest this
/// many (by id, a primary-key range), of which those of the group that
/// ended within the window count. The cost is bounded whatever the
/// history; a group too quiet to have [`crate::model::group::MIN_SAMPLES`]
/// among them keeps its configured values.
pub const WINDOW_ATTEMPTS: i64 = 2_000;

/// A group's capacity as it stands: what its attempts in the last
/// [`OBSERVATION_WINDOW_MS`] measured, and the effective concurrency those
/// observations and its configured inputs give — without the instance
/// pool, which is each serving process's own. What `group set` / `group
/// apply` store and the governor recomputes.
pub async fn capacity_now(
    store: &(impl ReadStore + ?Sized),
    group: &ResourceGroup,
) -> StoreResult<(Observed, Capacity)> {
    let observed = store
        .group_observed(&group.name, OBSERVATION_WINDOW_MS)
        .await?;
    let capacity = effective_concurrency(group, &observed, None);
    Ok((observed, capacity))
}

/// What claims enforce for a group now, and how many of its triggers run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupLoad {
    pub effective_concurrency: i64,
    pub effective_binding: String,
    pub running: i64,
}

impl Store {
    /// [`ReadStore::group_load`].
    pub(super) async fn load_of_group(&self, name: &str) -> StoreResult<Option<GroupLoad>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT effective_concurrency, effective_binding, (SELECT count(*) FROM triggers t \
             WHERE t.state = ",
            trigger_state!(running),
            " AND t.resource_group = g.name) AS running FROM resource_groups g WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// [`ReadStore::group_observed`].
    pub(super) async fn observed_of_group(
        &self,
        name: &str,
        window_ms: i64,
    ) -> StoreResult<Observed> {
        let (samples, mean, peak): (i64, Option<f64>, Option<i64>) =
            sqlx::query_as(self.sql(concat!(
                "SELECT count(*), CAST(avg(a.wall_ms) AS DOUBLE PRECISION), max(a.peak_memory_bytes) \
                 FROM attempts a JOIN triggers t ON t.id = a.trigger_id \
                 WHERE a.id > (SELECT coalesce(max(id), 0) FROM attempts) - ? \
                 AND a.ended_at >= ",
                now_ms!(),
                " - ? AND a.wall_ms IS NOT NULL AND t.resource_group = ?"
            )))
            .bind(WINDOW_ATTEMPTS)
            .bind(window_ms)
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(Observed {
            samples,
            service_time_ms: mean,
            peak_memory_bytes: peak,
        })
    }

    /// Store a recomputed effective concurrency. Returns whether it moved
    /// (the caller logs it).
    pub async fn group_effective_set(&self, name: &str, capacity: &Capacity) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let moved = sqlx::query(self.sql(
            "UPDATE resource_groups SET effective_concurrency = ?, effective_binding = ? \
             WHERE name = ? AND (effective_concurrency <> ? OR effective_binding <> ?)",
        ))
        .bind(capacity.effective)
        .bind(capacity.binding)
        .bind(name)
        .bind(capacity.effective)
        .bind(capacity.binding)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(moved)
    }

    /// Every tenant with a weight set (`paddock tenant list`); a tenant
    /// without a row weighs 1.
    pub async fn tenants_list(&self) -> StoreResult<Vec<TenantQuota>> {
        let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(
            self.sql("SELECT tenant, weight, max_in_flight FROM tenants ORDER BY tenant"),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(tenant, weight, max_in_flight)| TenantQuota {
                tenant,
                weight,
                max_in_flight,
            })
            .collect())
    }

    /// Why a trigger that could run is still waiting, for people
    /// (`trigger show`, `trigger list`): not due yet, its group full, its
    /// tenant at its max in flight, or waiting its turn. `None` once it
    /// runs or ended.
    pub async fn wait_reason(&self, t: &TriggerRecord) -> StoreResult<Option<String>> {
        use crate::model::TriggerState::{Pending, RetryWait};
        if !matches!(t.state, Pending | RetryWait) {
            return Ok(None);
        }
        let now = self.now_ms().await?;
        if t.next_run_at > now {
            let at = crate::model::time::rfc3339(crate::model::time::from_millis(t.next_run_at));
            return Ok(Some(format!("not due until {at}")));
        }
        if let Some(load) = self.load_of_group(&t.resource_group).await?
            && load.running >= load.effective_concurrency
        {
            return Ok(Some(format!(
                "group {} is full: {} of {} running (bound by {})",
                t.resource_group, load.running, load.effective_concurrency, load.effective_binding
            )));
        }
        let quota: Option<(Option<i64>, i64)> = sqlx::query_as(self.sql(concat!(
            "SELECT max_in_flight, (SELECT count(*) FROM triggers r WHERE r.state = ",
            trigger_state!(running),
            " AND r.tenant = w.tenant) FROM tenants w WHERE w.tenant = ?"
        )))
        .bind(&t.tenant)
        .fetch_optional(&self.pool)
        .await?;
        if let Some((Some(max), running)) = quota
            && running >= max
        {
            return Ok(Some(format!(
                "tenant {} is at its max in flight: {running} of {max} running",
                t.tenant
            )));
        }
        Ok(Some(format!(
            "due: waiting for a claim (group {} shares its room between tenants by weight)",
            t.resource_group
        )))
    }
}
