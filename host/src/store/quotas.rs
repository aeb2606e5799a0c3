//! The quotas applied outside the claim statement: a tenant's manual
//! triggers per minute (creation moves the due time), its fuel per hour
//! (serving processes report fuel per tenant per minute; the governor
//! holds a tenant over its quota, and claims skip a held tenant), the
//! high-water holds on groups, and the recovery ramp's position — each
//! the governor's to move (`lease/governor.rs`).

use super::dialect::now_ms;
use super::runner::{recovery_lane, running_rows};
use super::*;
use crate::model::ResourceGroup;
use crate::model::group::OBSERVATION_WINDOW_MS;
use crate::model::shares::RampInputs;
use crate::trigger_state;

/// The window of the per-minute quota, ms.
const MINUTE_MS: i64 = 60_000;

/// A tenant whose hold the governor moved: held now with this reason, or
/// released (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantHoldMove {
    pub tenant: String,
    pub held: Option<String>,
}

/// A group's recovery ramp as it stands, with what the governor needs to
/// move it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RampNow {
    pub pct: i64,
    pub inputs: RampInputs,
}

impl Store {
    /// Under the tenant's per-minute quota, when a manual trigger `tenant`
    /// asks to run at `wanted` may become due — also the time it counts in
    /// the quota's window (`quota_due_at`): `wanted`, or, when the tenant
    /// already has that many manual triggers counted within a minute
    /// before it or later, a minute after the quota-th latest of them, so
    /// no minute holds more than the quota. `None` when the tenant has no
    /// such quota (the trigger is due at `wanted` and counts nowhere). In
    /// the creating transaction; the tenant's row is locked on PostgreSQL.
    pub(super) async fn manual_due_at(
        &self,
        tx: &mut Tx,
        tenant: &str,
        wanted: i64,
    ) -> StoreResult<Option<i64>> {
        let quota: Option<Option<i64>> = sqlx::query_scalar(self.sql(match self.dialect {
            Dialect::Sqlite => "SELECT triggers_per_minute FROM tenants WHERE tenant = ?",
            Dialect::Postgres => {
                "SELECT triggers_per_minute FROM tenants WHERE tenant = ? FOR NO KEY UPDATE"
            }
        }))
        .bind(tenant)
        .fetch_optional(&mut **tx)
        .await?;
        let Some(Some(per_minute)) = quota else {
            return Ok(None);
        };
        // Only runs counted against a quota are in `triggers_manual`
        // (migration 0022), so a tenant without one pays no index entry.
        let latest: Option<i64> = sqlx::query_scalar(self.sql(
            "SELECT quota_due_at FROM triggers WHERE tenant = ? AND quota_due_at > ? \
             ORDER BY quota_due_at DESC LIMIT 1 OFFSET ?",
        ))
        .bind(tenant)
        .bind(wanted - MINUTE_MS)
        .bind(per_minute - 1)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(Some(latest.map_or(wanted, |at| wanted.max(at + MINUTE_MS))))
    }

    /// Add what a serving process's guests burnt, per tenant, to this
    /// minute's count.
    pub async fn tenant_fuel_add(&self, used: &[(String, i64)]) -> StoreResult<()> {
        if used.is_empty() {
            return Ok(());
        }
        let (mut tx, _turn) = self.begin_write().await?;
        for (tenant, fuel) in used {
            sqlx::query(self.sql(concat!(
                "INSERT INTO tenant_fuel (tenant, minute, fuel) VALUES (?, (",
                now_ms!(),
                ") / 60000 * 60000, ?) ON CONFLICT (tenant, minute) \
                 DO UPDATE SET fuel = tenant_fuel.fuel + excluded.fuel"
            )))
            .bind(tenant)
            .bind(fuel)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Fuel each tenant burnt in the last hour, as reported.
    pub async fn tenant_fuel_used(&self, tenant: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(self.sql(concat!(
            "SELECT CAST(coalesce(sum(fuel), 0) AS BIGINT) FROM tenant_fuel \
             WHERE tenant = ? AND minute > ",
            now_ms!(),
            " - 3600000"
        )))
        .bind(tenant)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Hold each tenant at or over its fuel per hour, release each back
    /// under it (or whose quota was removed), and forget minutes older
    /// than two hours. Returns the holds that moved.
    pub async fn tenant_holds_refresh(&self) -> StoreResult<Vec<TenantHoldMove>> {
        type Row = (String, Option<i64>, Option<String>, i64);
        let rows: Vec<Row> = sqlx::query_as(self.sql(concat!(
            "SELECT w.tenant, w.fuel_per_hour, w.held, CAST(coalesce((SELECT sum(f.fuel) \
             FROM tenant_fuel f WHERE f.tenant = w.tenant AND f.minute > ",
            now_ms!(),
            " - 3600000), 0) AS BIGINT) FROM tenants w \
             WHERE w.fuel_per_hour IS NOT NULL OR w.held IS NOT NULL"
        )))
        .fetch_all(&self.pool)
        .await?;
        let mut moves = Vec::new();
        let (mut tx, _turn) = self.begin_write().await?;
        for (tenant, quota, held, used) in rows {
            let over = quota.is_some_and(|q| used >= q);
            if over == held.is_some() {
                continue;
            }
            let reason = quota.filter(|_| over).map(|q| {
                format!("over its fuel quota: {used} of {q} fuel per hour used in the last hour")
            });
            sqlx::query(self.sql("UPDATE tenants SET held = ? WHERE tenant = ?"))
                .bind(&reason)
                .bind(&tenant)
                .execute(&mut *tx)
                .await?;
            moves.push(TenantHoldMove {
                tenant,
                held: reason,
            });
        }
        sqlx::query(self.sql(concat!(
            "DELETE FROM tenant_fuel WHERE minute < ",
            now_ms!(),
            " - 7200000"
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(moves)
    }

    /// Hold a group's claims for `reason` (a high-water mark) on behalf of
    /// serving process `by`, until `until_ms` (database clock) unless
    /// renewed by the same call. Returns whether it is a new hold (then
    /// counted in `holds`); a group held by another process stays theirs.
    pub async fn group_hold(
        &self,
        group: &str,
        reason: &str,
        by: &str,
        until_ms: i64,
    ) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let held = sqlx::query(self.sql(
            "UPDATE resource_groups SET held = ?, held_by = ?, held_until = ?, holds = holds + 1 \
             WHERE name = ? AND held IS NULL",
        ))
        .bind(reason)
        .bind(by)
        .bind(until_ms)
        .bind(group)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !held {
            sqlx::query(self.sql(
                "UPDATE resource_groups SET held = ?, held_until = ? WHERE name = ? AND held_by = ?",
            ))
            .bind(reason)
            .bind(until_ms)
            .bind(group)
            .bind(by)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(held)
    }

    /// Release a group's hold if `by` holds it or its hold lapsed (its
    /// holder stopped renewing it). Returns whether it was released.
    pub async fn group_release(&self, group: &str, by: &str) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let released = sqlx::query(self.sql(concat!(
            "UPDATE resource_groups SET held = NULL, held_by = NULL, held_until = NULL \
             WHERE name = ? AND held IS NOT NULL AND (held_by = ? OR held_until < ",
            now_ms!(),
            ")"
        )))
        .bind(group)
        .bind(by)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(released)
    }

    /// The groups whose recent effects (the newest [`super::WINDOW_ATTEMPTS`])
    /// went to `connector`.
    pub async fn groups_calling(&self, connector: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(self.sql(
            "SELECT DISTINCT t.resource_group FROM effects e JOIN triggers t ON t.id = e.trigger_id \
             WHERE e.id > (SELECT coalesce(max(id), 0) FROM effects) - ? AND e.connector = ?",
        ))
        .bind(super::WINDOW_ATTEMPTS)
        .bind(connector)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A group's hold and how many times it was held.
    pub async fn group_held(&self, group: &str) -> StoreResult<(Option<String>, i64)> {
        Ok(
            sqlx::query_as(self.sql("SELECT held, holds FROM resource_groups WHERE name = ?"))
                .bind(group)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or((None, 0)),
        )
    }

    /// A group's recovery ramp and what moves it: whether recovery work
    /// waits or runs, and its attempts in the observation window (what
    /// [`ReadStore::group_observed`] reads), with how many failed.
    pub async fn group_ramp(&self, group: &ResourceGroup) -> StoreResult<RampNow> {
        let (pct, at, now, recovery_work): (i64, i64, i64, i64) =
            sqlx::query_as(self.sql(concat!(
                "SELECT recovery_ramp_pct, recovery_ramp_at, ",
                now_ms!(),
                ", CASE WHEN EXISTS (SELECT 1 FROM triggers t WHERE ",
                recovery_lane!("t."),
                " AND t.resource_group = g.name) \
             OR EXISTS (SELECT 1 FROM triggers v WHERE ",
                running_rows!("v."),
                " AND v.recovery = 1 AND v.resource_group = g.name) THEN 1 ELSE 0 END \
             FROM resource_groups g WHERE g.name = ?"
            )))
            .bind(&group.name)
            .fetch_one(&self.pool)
            .await?;
        let observed = self
            .observed_of_group(&group.name, OBSERVATION_WINDOW_MS)
            .await?;
        Ok(RampNow {
            pct,
            inputs: RampInputs {
                recovery_work: recovery_work == 1,
                samples: observed.samples,
                failures: observed.failures,
                service_time_ms: observed.service_time_ms,
                baseline_ms: group.capacity.service_time_ms,
                since_moved_ms: now - at,
            },
        })
    }

    /// Move a group's ramp from `from_pct` to `to_pct` (only if no other
    /// process moved it first). Returns whether it moved.
    pub async fn group_ramp_set(
        &self,
        group: &str,
        from_pct: i64,
        to_pct: i64,
    ) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let moved = sqlx::query(self.sql(concat!(
            "UPDATE resource_groups SET recovery_ramp_pct = ?, recovery_ramp_at = ",
            now_ms!(),
            " WHERE name = ? AND recovery_ramp_pct = ?"
        )))
        .bind(to_pct)
        .bind(group)
        .bind(from_pct)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(moved)
    }
}
