//! What `paddock report` reads: an incident's affected triggers with their
//! facts, a window's usage per job / version / group / tenant, unit prices,
//! and the conservation checks. The definitions are in
//! [`crate::model::report`]; each report is one statement (read only),
//! its tenant and group filters in SQL.
//!
//! - incident: the affected triggers are the union of four small ranges —
//!   takeovers in the window (attempts ended `expired` by the claim that
//!   took their trigger over, by `ended_at`; no index: a scan of attempts,
//!   bounded by the history kept — a clean success is not an incident),
//!   `stale_writes_at`,
//!   effects whose life overlaps the window, and tickets opened in it —
//!   then each one's facts by correlated counts over its own rows
//!   (`stale_writes_trigger`, `effects_trigger`).
//! - cost: four `UNION ALL` branches (attempts started, effects created,
//!   triggers finished, tickets resolved in the window) summed per key.
//! - conservation: pairs of counts over whole tables, one row per check.

use super::dialect::now_ms;
use super::*;
use crate::model::report::{
    Books, Check, IDEMPOTENCY_HITS_COUNTER, PRICE_NAMES, Prices, TriggerFacts, Usage,
};
use crate::trigger_state;

/// A window and the filters of `report incident` and `report cost`.
#[derive(Debug, Clone, Default)]
pub struct ReportQuery {
    /// `[since, until)`, ms on the database clock.
    pub since: i64,
    pub until: i64,
    pub tenant: Option<String>,
    pub group: Option<String>,
}

/// What `report cost` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostBy {
    Job,
    Version,
    Group,
    Tenant,
}

impl std::str::FromStr for CostBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "job" => Ok(Self::Job),
            "version" => Ok(Self::Version),
            "group" => Ok(Self::Group),
            "tenant" => Ok(Self::Tenant),
            other => Err(format!(
                "--by must be job, version, group or tenant, not '{other}'"
            )),
        }
    }
}

/// An effect whose answer was lost: marked when it became unknown
/// (`unknown_at`, migration 0020: settled `unknown`, or by a query by key or
/// the recovery scanner — kept through a resend), still `unknown`, settled
/// by a ticket, or an `intent` whose attempt is gone; `resolved_by` also
/// catches rows settled before 0020.
macro_rules! unknown_effect {
    () => {
        concat!(
            "(e.unknown_at IS NOT NULL OR e.state = ",
            $crate::effect_state!(unknown),
            " OR e.resolved_by = 'query' OR e.resolved_by = 'recovery' \
             OR e.resolved_by LIKE 'ticket:%' OR (e.state = ",
            $crate::effect_state!(intent),
            " AND NOT EXISTS \
             (SELECT 1 FROM triggers r WHERE r.id = e.trigger_id AND r.state = ",
            trigger_state!(running),
            ")))"
        )
    };
}

/// An effect whose life overlaps the window.
macro_rules! effect_in_window {
    () => {
        "e.created_at < ?2 AND e.updated_at >= ?1"
    };
}

/// Counts of a trigger's unknown effects in the window in one state set.
macro_rules! unknowns {
    ($($state:ident),+) => {
        concat!(
            "(SELECT count(*) FROM effects e WHERE e.trigger_id = t.id AND ",
            effect_in_window!(),
            " AND ",
            unknown_effect!(),
            " AND e.state IN ",
            $crate::effect_states!($($state),+),
            ")"
        )
    };
}

const INCIDENT: &str = concat!(
    "WITH affected (trigger_id) AS (\
       SELECT trigger_id FROM attempts WHERE outcome = ",
    crate::attempt_outcome!(expired),
    " AND ended_at >= ?1 AND ended_at < ?2 \
       UNION SELECT trigger_id FROM stale_writes WHERE at >= ?1 AND at < ?2 \
       UNION SELECT e.trigger_id FROM effects e WHERE ",
    effect_in_window!(),
    " AND ",
    unknown_effect!(),
    " UNION SELECT trigger_id FROM exceptions WHERE trigger_id IS NOT NULL \
         AND created_at >= ?1 AND created_at < ?2) \
     SELECT t.id, t.state, \
       (SELECT count(*) FROM stale_writes s WHERE s.trigger_id = t.id AND s.at >= ?1 AND s.at < ?2), ",
    unknowns!(succeeded),
    ", ",
    unknowns!(failed, retryable),
    ", ",
    unknowns!(unknown, intent),
    ", (SELECT count(*) FROM exceptions x WHERE x.trigger_id = t.id AND x.kind = 'key_conflict' \
          AND x.created_at >= ?1 AND x.created_at < ?2), \
       (SELECT count(*) FROM exceptions x WHERE x.trigger_id = t.id \
          AND x.created_at >= ?1 AND x.created_at < ?2) \
     FROM affected a JOIN triggers t ON t.id = a.trigger_id \
     WHERE (?3 IS NULL OR t.tenant = ?3) AND (?4 IS NULL OR t.resource_group = ?4) ORDER BY t.id"
);

/// The window's usage per `$key` (an expression over `triggers t`).
macro_rules! cost_sql {
    ($key:literal) => {
        concat!(
            "SELECT k, CAST(sum(n) AS BIGINT), CAST(sum(fuel) AS BIGINT), CAST(sum(wall) AS BIGINT), \
               CAST(sum(mem) AS DOUBLE PRECISION), CAST(sum(bytes) AS BIGINT), \
               CAST(sum(calls) AS BIGINT), CAST(sum(retries) AS BIGINT), CAST(sum(comps) AS BIGINT), \
               CAST(sum(touches) AS BIGINT), CAST(sum(correct) AS BIGINT) FROM (\
             SELECT ", $key, " AS k, 1 AS n, coalesce(a.fuel_used, 0) AS fuel, \
               coalesce(a.wall_ms, 0) AS wall, \
               CAST(coalesce(a.peak_memory_bytes, 0) AS DOUBLE PRECISION) * coalesce(a.wall_ms, 0) AS mem, \
               coalesce(length(a.log), 0) AS bytes, 0 AS calls, \
               CASE WHEN a.attempt_no > 1 THEN 1 ELSE 0 END AS retries, 0 AS comps, 0 AS touches, \
               0 AS correct \
             FROM attempts a JOIN triggers t ON t.id = a.trigger_id \
             WHERE a.started_at >= ?1 AND a.started_at < ?2 \
               AND (?3 IS NULL OR t.tenant = ?3) AND (?4 IS NULL OR t.resource_group = ?4) \
             UNION ALL SELECT ", $key, ", 0, 0, 0, 0, coalesce(length(e.response), 0), e.sends, 0, \
               CASE WHEN e.compensates IS NULL THEN 0 ELSE 1 END, 0, 0 \
             FROM effects e JOIN triggers t ON t.id = e.trigger_id \
             WHERE e.created_at >= ?1 AND e.created_at < ?2 \
               AND (?3 IS NULL OR t.tenant = ?3) AND (?4 IS NULL OR t.resource_group = ?4) \
             UNION ALL SELECT ", $key, ", 0, 0, 0, 0, coalesce(length(t.result), 0), 0, 0, 0, 0, \
               CASE WHEN t.state = ", trigger_state!(succeeded), " AND NOT EXISTS (\
                 SELECT 1 FROM effects o JOIN effects c \
                   ON c.tenant = o.tenant AND c.compensates = o.idempotency_key \
                 WHERE o.trigger_id = t.id) THEN 1 ELSE 0 END \
             FROM triggers t WHERE t.finished_at >= ?1 AND t.finished_at < ?2 \
               AND (?3 IS NULL OR t.tenant = ?3) AND (?4 IS NULL OR t.resource_group = ?4) \
             UNION ALL SELECT ", $key, ", 0, 0, 0, 0, 0, 0, 0, 0, 1, 0 \
             FROM exceptions x JOIN triggers t ON t.id = x.trigger_id \
             WHERE x.state = 'resolved' AND x.resolved_at >= ?1 AND x.resolved_at < ?2 \
               AND (?3 IS NULL OR t.tenant = ?3) AND (?4 IS NULL OR t.resource_group = ?4) \
             ) u GROUP BY k ORDER BY k"
        )
    };
}

// A job is keyed by its qualified name, `tenant/job`: two tenants' jobs of
// the same id are two jobs, never one row.
const COST_BY_JOB: &str = cost_sql!("t.tenant || '/' || t.job_id");
const COST_BY_VERSION: &str =
    cost_sql!("t.tenant || '/' || t.job_id || '@v' || CAST(t.plan_version AS TEXT)");
const COST_BY_GROUP: &str = cost_sql!("t.resource_group");
const COST_BY_TENANT: &str = cost_sql!("t.tenant");

const CONSERVATION: &str = concat!(
    "SELECT 'trigger_states', (SELECT count(*) FROM triggers), \
       (SELECT count(*) FROM triggers WHERE state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(running),
    ", ",
    trigger_state!(retry_wait),
    ", ",
    trigger_state!(succeeded),
    ", ",
    trigger_state!(failed),
    ", ",
    trigger_state!(cancelled),
    ", ",
    trigger_state!(skipped),
    ", ",
    trigger_state!(manual),
    ", ",
    trigger_state!(paused),
    ")) \
     UNION ALL SELECT 'running_triggers_have_a_lease', \
       (SELECT count(*) FROM triggers WHERE state = ",
    trigger_state!(running),
    "), (SELECT count(*) FROM triggers WHERE state = ",
    trigger_state!(running),
    " AND lease_owner IS NOT NULL AND lease_until IS NOT NULL) \
     UNION ALL SELECT 'attempts_vs_triggers', \
       (SELECT CAST(coalesce(sum(attempts), 0) AS BIGINT) FROM triggers), \
       (SELECT count(*) FROM attempts) \
     UNION ALL SELECT 'started_triggers_have_attempts', \
       (SELECT count(*) FROM triggers WHERE attempts > 0), \
       (SELECT count(DISTINCT trigger_id) FROM attempts) \
     UNION ALL SELECT 'effects_vs_idempotency_records', (SELECT count(*) FROM effects), \
       (SELECT count(DISTINCT tenant || '/' || idempotency_key) FROM effects WHERE state IN ",
    crate::effect_states!(intent, succeeded, failed, unknown, retryable),
    ") \
     UNION ALL SELECT 'open_leases_vs_running_attempts', \
       (SELECT count(*) FROM triggers WHERE state = ",
    trigger_state!(running),
    "), (SELECT count(*) FROM triggers t WHERE t.state = ",
    trigger_state!(running),
    " AND EXISTS (SELECT 1 FROM attempts a WHERE a.trigger_id = t.id \
          AND a.fencing_token = t.fencing_token)) \
     UNION ALL SELECT 'running_attempts_vs_open_leases', \
       (SELECT count(*) FROM attempts WHERE ended_at IS NULL), \
       (SELECT count(*) FROM attempts a JOIN triggers t ON t.id = a.trigger_id \
          WHERE a.ended_at IS NULL AND t.state = ",
    trigger_state!(running),
    " AND t.fencing_token = a.fencing_token) \
     UNION ALL SELECT 'open_tickets_hold_their_waiting_triggers', \
       (SELECT count(*) FROM triggers t WHERE t.state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(retry_wait),
    ", ",
    trigger_state!(manual),
    ") AND EXISTS (SELECT 1 FROM exceptions e WHERE e.trigger_id = t.id AND e.state = 'open')), \
       (SELECT count(*) FROM triggers t WHERE t.state = ",
    trigger_state!(manual),
    " AND EXISTS (SELECT 1 FROM exceptions e WHERE e.trigger_id = t.id AND e.state = 'open'))"
);

/// What each conservation check's two counts count, by name.
const CHECK_TERMS: [(&str, &str, &str); 8] = [
    (
        "trigger_states",
        "triggers",
        "triggers in exactly one known state",
    ),
    (
        "running_triggers_have_a_lease",
        "running triggers",
        "running triggers with a lease owner and expiry",
    ),
    (
        "attempts_vs_triggers",
        "attempts the triggers count",
        "attempt rows",
    ),
    (
        "started_triggers_have_attempts",
        "triggers that count an attempt",
        "triggers with attempt rows",
    ),
    (
        "effects_vs_idempotency_records",
        "effect rows",
        "distinct idempotency keys in a known state",
    ),
    (
        "open_leases_vs_running_attempts",
        "running triggers (open leases)",
        "of them with an attempt at their token",
    ),
    (
        "running_attempts_vs_open_leases",
        "attempts not ended",
        "of them under their trigger's running lease",
    ),
    (
        "open_tickets_hold_their_waiting_triggers",
        "waiting triggers an open ticket owns",
        "of them held in manual",
    ),
];

type IncidentRow = (i64, String, i64, i64, i64, i64, i64, i64);
type CostRow = (String, i64, i64, i64, f64, i64, i64, i64, i64, i64, i64);

impl Store {
    /// The affected triggers of an incident window, with their facts.
    pub async fn incident_facts(&self, q: &ReportQuery) -> StoreResult<Vec<TriggerFacts>> {
        let rows: Vec<IncidentRow> = sqlx::query_as(self.sql(INCIDENT))
            .bind(q.since)
            .bind(q.until)
            .bind(q.tenant.as_deref())
            .bind(q.group.as_deref())
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(TriggerFacts {
                    trigger_id: r.0,
                    state: r
                        .1
                        .parse()
                        .map_err(|e| StoreError::Conflict(format!("trigger {}: {e}", r.0)))?,
                    stale_refusals: r.2,
                    unknown_succeeded: r.3,
                    unknown_failed: r.4,
                    unknown_open: r.5,
                    params_conflicts: r.6,
                    tickets: r.7,
                })
            })
            .collect()
    }

    /// The window's usage per key.
    pub async fn cost_usage(&self, q: &ReportQuery, by: CostBy) -> StoreResult<Vec<Usage>> {
        let sql = match by {
            CostBy::Job => COST_BY_JOB,
            CostBy::Version => COST_BY_VERSION,
            CostBy::Group => COST_BY_GROUP,
            CostBy::Tenant => COST_BY_TENANT,
        };
        let rows: Vec<CostRow> = sqlx::query_as(self.sql(sql))
            .bind(q.since)
            .bind(q.until)
            .bind(q.tenant.as_deref())
            .bind(q.group.as_deref())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Usage {
                key: r.0,
                attempts: r.1,
                fuel: r.2,
                wall_ms: r.3,
                memory_byte_ms: r.4,
                storage_bytes: r.5,
                downstream_calls: r.6,
                retries: r.7,
                compensations: r.8,
                manual_touches: r.9,
                correct: r.10,
            })
            .collect())
    }

    /// The unit prices set (a unit not set costs 0).
    pub async fn prices(&self) -> StoreResult<Prices> {
        let rows: Vec<(String, f64)> =
            sqlx::query_as(self.sql("SELECT name, value FROM unit_prices ORDER BY name"))
                .fetch_all(&self.pool)
                .await?;
        let mut prices = Prices::default();
        for (name, value) in rows {
            prices.set(&name, value).map_err(StoreError::Conflict)?;
        }
        Ok(prices)
    }

    /// Set unit prices (each checked first: one bad value sets none), with
    /// an audit entry `price.set` naming every value set, in one
    /// transaction. The prices after.
    pub async fn price_set(&self, changes: &[(String, f64)], actor: &str) -> StoreResult<Prices> {
        let mut after = self.prices().await?;
        for (name, value) in changes {
            after.set(name, *value).map_err(StoreError::OutOfBounds)?;
        }
        if changes.is_empty() {
            return Err(StoreError::Conflict(format!(
                "no price given (flags: {})",
                PRICE_NAMES
                    .map(|n| format!("--{}", n.replace('_', "-")))
                    .join(" ")
            )));
        }
        let (mut tx, _turn) = self.begin_write().await?;
        for (name, value) in changes {
            sqlx::query(self.sql(concat!(
                "INSERT INTO unit_prices (name, value, set_by, set_at) VALUES (?1, ?2, ?3, ",
                now_ms!(),
                ") ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
                 set_by = excluded.set_by, set_at = excluded.set_at"
            )))
            .bind(name)
            .bind(*value)
            .bind(actor)
            .execute(&mut *tx)
            .await?;
        }
        let detail: serde_json::Map<String, serde_json::Value> = changes
            .iter()
            .map(|(name, value)| (name.clone(), serde_json::json!(value)))
            .collect();
        self.audit_append(&mut tx, actor, "price.set", "prices", detail.into())
            .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// The totals a conservation report shows beside its checks: triggers
    /// by state, attempt rows and idempotency hits (cluster-wide counter).
    pub async fn books(&self) -> StoreResult<Books> {
        let counts = self.trigger_counts().await?;
        let attempts: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM attempts"))
            .fetch_one(&self.pool)
            .await?;
        Ok(Books {
            triggers: counts.total,
            by_state: counts.by_state,
            attempts,
            idempotency_hits: self.counter(IDEMPOTENCY_HITS_COUNTER).await?,
        })
    }

    /// Every conservation check with its two counts.
    pub async fn conservation(&self) -> StoreResult<Vec<Check>> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(self.sql(CONSERVATION))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(name, left_count, right_count)| {
                let (_, left, right) = CHECK_TERMS
                    .iter()
                    .find(|(n, _, _)| *n == name)
                    .copied()
                    .unwrap_or(("", "left", "right"));
                Check {
                    name,
                    left: left.into(),
                    right: right.into(),
                    left_count,
                    right_count,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerState;

    #[test]
    fn the_state_check_counts_every_state_of_the_state_machine() {
        let states = CONSERVATION
            .split("UNION ALL")
            .next()
            .expect("the first check");
        for state in TriggerState::ALL {
            let quoted = format!("'{}'", state.as_str());
            assert!(states.contains(&quoted), "{quoted} is not counted");
        }
    }

    #[test]
    fn every_check_has_its_terms() {
        let named = CONSERVATION.matches("SELECT '").count();
        assert_eq!(named, CHECK_TERMS.len());
        for (name, _, _) in CHECK_TERMS {
            assert!(CONSERVATION.contains(&format!("SELECT '{name}'")), "{name}");
        }
    }
}
