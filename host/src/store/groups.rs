//! A resource group's load: what claims enforce (its effective
//! concurrency and the input that binds), how many of its triggers run,
//! and what its recent attempts measured — the observations
//! [`crate::model::group::effective_concurrency`] is recomputed from.

use super::dialect::now_ms;
use super::runner::running_rows;
use super::*;
use crate::model::ResourceGroup;
use crate::model::group::{
    Capacity, OBSERVATION_WINDOW_MS, Observed, TenantQuota, effective_concurrency,
};

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
/// A tenant's quota row as [`Store::wait_reason`] reads it: max in flight,
/// manual triggers per minute, why it is held, its running count.
type Quota = (Option<i64>, Option<i64>, Option<String>, i64);

/// What one [`Store::wait_reasons`] call read once: the clock, each
/// tenant's quota, each group's hold and load.
#[derive(Default)]
struct WaitMemo {
    now: Option<i64>,
    tenants: std::collections::HashMap<String, Option<Quota>>,
    groups: std::collections::HashMap<String, (Option<String>, Option<GroupLoad>)>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize, serde::Deserialize)]
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
             WHERE ",
            running_rows!("t."),
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
        let (samples, mean, peak, failures): (i64, Option<f64>, Option<i64>, i64) =
            sqlx::query_as(self.sql(concat!(
                "SELECT count(*), CAST(avg(a.wall_ms) AS DOUBLE PRECISION), max(a.peak_memory_bytes), \
                 CAST(coalesce(sum(CASE WHEN a.outcome = ",
                crate::attempt_outcome!(succeeded),
                " THEN 0 ELSE 1 END), 0) AS BIGINT) \
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
            failures,
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
        type Row = (String, i64, Option<i64>, Option<i64>, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(self.sql(
            "SELECT tenant, weight, max_in_flight, triggers_per_minute, fuel_per_hour \
             FROM tenants ORDER BY tenant",
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(tenant, weight, max_in_flight, triggers_per_minute, fuel_per_hour)| TenantQuota {
                    tenant,
                    weight,
                    max_in_flight,
                    triggers_per_minute,
                    fuel_per_hour,
                },
            )
            .collect())
    }

    /// Why a trigger that could run is still waiting, for people
    /// (`trigger show`, `trigger list`): deferred by its tenant's
    /// per-minute quota, not due yet, its group held or full, its recovery
    /// lane full, its tenant held over a quota or at its max in flight, or
    /// waiting its turn. `None` once it runs or ended.
    pub async fn wait_reason(&self, t: &TriggerRecord) -> StoreResult<Option<String>> {
        self.wait_reason_in(t, &mut WaitMemo::default()).await
    }

    /// [`Store::wait_reason`] of several triggers (a page of a list), each
    /// tenant's quota and each group's state read once for all of them.
    pub async fn wait_reasons(
        &self,
        triggers: &[TriggerRecord],
    ) -> StoreResult<Vec<Option<String>>> {
        let mut memo = WaitMemo::default();
        let mut reasons = Vec::with_capacity(triggers.len());
        for t in triggers {
            reasons.push(self.wait_reason_in(t, &mut memo).await?);
        }
        Ok(reasons)
    }

    async fn wait_reason_in(
        &self,
        t: &TriggerRecord,
        memo: &mut WaitMemo,
    ) -> StoreResult<Option<String>> {
        use crate::model::TriggerState::{Manual, Pending, RetryWait};
        if t.state == Manual {
            return self.manual_reason(t).await.map(Some);
        }
        if !matches!(t.state, Pending | RetryWait) {
            return Ok(None);
        }
        let now = match memo.now {
            Some(now) => now,
            None => *memo.now.insert(self.now_ms().await?),
        };
        let quota = match memo.tenants.get(&t.tenant) {
            Some(quota) => quota.clone(),
            None => {
                let quota: Option<Quota> = sqlx::query_as(self.sql(concat!(
                    "SELECT max_in_flight, triggers_per_minute, held, (SELECT count(*) FROM \
                     triggers r WHERE ",
                    running_rows!("r."),
                    " AND r.tenant = w.tenant) FROM tenants w WHERE w.tenant = ?"
                )))
                .bind(&t.tenant)
                .fetch_optional(&self.pool)
                .await?;
                memo.tenants.insert(t.tenant.clone(), quota.clone());
                quota
            }
        };
        let (max_in_flight, per_minute, tenant_held, tenant_running) =
            quota.unwrap_or((None, None, None, 0));
        if t.next_run_at > now {
            let at = crate::model::time::rfc3339(crate::model::time::from_millis(t.next_run_at));
            if let Some(per_minute) = per_minute
                && t.origin == crate::model::TriggerOrigin::Manual
                && t.next_run_at > t.scheduled_at
            {
                return Ok(Some(format!(
                    "waits for tenant {}'s quota of {per_minute} manual triggers per minute: \
                     due at {at}",
                    t.tenant
                )));
            }
            return Ok(Some(format!("not due until {at}")));
        }
        let (held, load) = match memo.groups.get(&t.resource_group) {
            Some(group) => group.clone(),
            None => {
                let (held, _) = self.group_held(&t.resource_group).await?;
                let load = self.load_of_group(&t.resource_group).await?;
                memo.groups
                    .insert(t.resource_group.clone(), (held.clone(), load.clone()));
                (held, load)
            }
        };
        if let Some(why) = held {
            return Ok(Some(format!("group {} is held: {why}", t.resource_group)));
        }
        if let Some(load) = load
            && load.running >= load.effective_concurrency
        {
            return Ok(Some(format!(
                "group {} is full: {} of {} running (bound by {})",
                t.resource_group, load.running, load.effective_concurrency, load.effective_binding
            )));
        }
        if let Some(why) = self.recovery_lane_full(t).await? {
            return Ok(Some(why));
        }
        if let Some(why) = tenant_held {
            return Ok(Some(format!("tenant {} is held: {why}", t.tenant)));
        }
        if let Some(max) = max_in_flight
            && tenant_running >= max
        {
            return Ok(Some(format!(
                "tenant {} is at its max in flight: {tenant_running} of {max} running",
                t.tenant
            )));
        }
        Ok(Some(format!(
            "due: waiting for a claim (group {} shares its room between tenants by weight)",
            t.resource_group
        )))
    }

    /// Why a trigger of the recovery lane waits on the lane's ceiling, if
    /// it does: the lane's running count at its cap as the claim would see
    /// it with fresh work waiting (the lower of the two caps).
    async fn recovery_lane_full(&self, t: &TriggerRecord) -> StoreResult<Option<String>> {
        type Lane = (i64, i64, i64, i64, i64);
        let (recovery, effective, share, ramp, recovering): Lane =
            sqlx::query_as(self.sql(concat!(
                "SELECT CAST(t.recovery AS BIGINT), g.effective_concurrency, g.recovery_share_pct, \
                 g.recovery_ramp_pct, (SELECT count(*) FROM triggers v WHERE ",
                running_rows!("v."),
                " AND v.recovery = 1 AND v.resource_group = g.name) \
             FROM triggers t JOIN resource_groups g ON g.name = t.resource_group WHERE t.id = ?"
            )))
            .bind(t.id)
            .fetch_one(&self.pool)
            .await?;
        let in_lane = recovery == 1 || t.state == crate::model::TriggerState::RetryWait;
        let cap = crate::model::shares::recovery_cap(effective, share, ramp, true);
        if !in_lane || recovering < cap {
            return Ok(None);
        }
        Ok(Some(format!(
            "group {}'s recovery lane is full: {recovering} running, its share {share}% \
             (ramp at {ramp}%) of {effective} slots while fresh work waits",
            t.resource_group
        )))
    }
}
