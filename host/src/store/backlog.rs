//! What `paddock status` reads: per resource group, its running triggers
//! against its limit, its backlog and oldest due age, the triggers that
//! arrived and succeeded in a window, and its open exception tickets —
//! the counts [`crate::model::backlog::Flow`] turns into rates and a drain
//! ETA (the terms are defined there).
//!
//! Read only, and bounded by what is counted, not by the history:
//!
//! - running: `triggers_running` (one entry per running trigger);
//! - backlog and oldest due age: the claim lanes' partial indexes,
//!   `triggers_pending` and `triggers_recovery` (their predicates spelled
//!   as the indexes are, [`fresh_lane`] / [`recovery_lane`]): entries of
//!   waiting work only, never a finished trigger;
//! - successes: `success_counts`, one row per (group, tenant) per group
//!   commit that ended triggers of theirs as succeeded, at its clock (the
//!   triggers' `finished_at`; migration 0024), one range of
//!   `success_counts_at (resource_group, at, tenant)` per group;
//! - arrivals, in two disjoint parts: triggers whose plan time falls in
//!   the window, through `triggers_job (tenant, job_id, scheduled_at)`, one range
//!   per job; and triggers created in the window for a plan time already
//!   past (catch-up fires, backfills), through the newest ids of the
//!   primary key (ids follow creation, give or take
//!   [`super::trigger_ids::REACH`] on SQLite, where each tenant takes ids
//!   from a block of its own: the walk starts that many ids before the last
//!   trigger created [`ID_ORDER_SLACK_MS`] before the window);
//! - tickets: the open ones (`exceptions_open_subject`, partial on
//!   `state = 'open'`), joined to their trigger by key.
//!
//! Every count but the group's limit is scoped to one tenant when asked
//! (`StatusQuery::tenant`): that tenant's triggers, and tickets about them.
//! All statements run in one read-only snapshot (SQLite: one read
//! transaction; PostgreSQL: `REPEATABLE READ`), at one `now`, so a trigger
//! moving between backlog and running while the report is read is counted
//! once.

use super::runner::{fresh_lane, recovery_lane, running_rows};
use super::*;
use crate::trigger_state;
use serde::Serialize;
use std::collections::BTreeMap;

/// How far before the window the walk of the newest triggers starts: ids
/// are handed out in creation order, give or take the triggers one
/// statement inserts at once, so a minute is ample.
pub const ID_ORDER_SLACK_MS: i64 = 60_000;

/// What to report on.
#[derive(Debug, Clone, Default)]
pub struct StatusQuery {
    /// The window's length, ms (checked by the caller,
    /// [`crate::model::backlog::check_window`]).
    pub window_ms: i64,
    /// The window's end and the instant backlog is judged at (`None`: the
    /// database clock; tests inject it).
    pub now: Option<i64>,
    /// Only this tenant's triggers and tickets.
    pub tenant: Option<String>,
    /// Only this group.
    pub group: Option<String>,
}

/// One resource group's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GroupStatus {
    pub group: String,
    /// Its triggers running now.
    pub running: i64,
    /// Its effective concurrency: what claims let run at once.
    pub limit: i64,
    /// The input of the effective concurrency that binds.
    pub limit_bound_by: String,
    /// Due triggers waiting for a claim (both lanes).
    pub backlog: i64,
    /// Of which in the recovery lane (retries, catch-up fires, backfills).
    pub backlog_recovery: i64,
    /// How long the longest-waiting due trigger has been due, ms.
    pub oldest_due_ms: Option<i64>,
    /// Triggers that became due in the window.
    pub arrivals: i64,
    /// Triggers that succeeded in the window.
    pub successes: i64,
    /// Open exception tickets about its triggers.
    pub open_tickets: i64,
    /// Its triggers held by a closed gate (`paused`, migration 0018): not
    /// backlog — no claim may take them until the gate reopens.
    pub paused: i64,
    /// Its triggers waiting for a person (`manual`: an approval of a
    /// parked fire, or the answer to an open ticket that holds it): not
    /// backlog either — no claim takes them and no retry time wakes them.
    #[serde(default)]
    pub manual: i64,
    /// Its triggers taken over in the window, and how long each stood
    /// still first ([`crate::model::takeover`]).
    #[serde(default)]
    pub takeovers: crate::model::takeover::Takeovers,
}

impl GroupStatus {
    /// The counts the drain ETA is computed from.
    pub fn flow(&self, window_ms: i64) -> crate::model::backlog::Flow {
        crate::model::backlog::Flow {
            backlog: self.backlog,
            arrivals: self.arrivals,
            successes: self.successes,
            window_ms,
        }
    }
}

/// Every group's line, read at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StatusReport {
    /// The window's end (database clock unless injected), ms.
    pub now: i64,
    pub window_ms: i64,
    pub tenant: Option<String>,
    pub groups: Vec<GroupStatus>,
    /// Open tickets tied to no trigger (none when a tenant is asked for).
    pub unattributed_tickets: i64,
}

/// Counts per group from one statement.
type PerGroup = BTreeMap<String, i64>;

const GROUPS: &str = "SELECT name, effective_concurrency, effective_binding \
     FROM resource_groups WHERE ?1 IS NULL OR name = ?1 ORDER BY name";

const RUNNING: &str = concat!(
    "SELECT resource_group, count(*) FROM triggers WHERE ",
    running_rows!(""),
    " AND (?1 IS NULL OR tenant = ?1) GROUP BY resource_group"
);

/// Paused triggers per group (`triggers_paused`, migration 0018).
const PAUSED: &str = concat!(
    "SELECT resource_group, count(*) FROM triggers WHERE state = ",
    trigger_state!(paused),
    " AND (?1 IS NULL OR tenant = ?1) GROUP BY resource_group"
);

/// Triggers waiting for a person per group (`triggers_parked`, migration
/// 0017).
const MANUAL: &str = concat!(
    "SELECT resource_group, count(*) FROM triggers WHERE state = ",
    trigger_state!(manual),
    " AND (?1 IS NULL OR tenant = ?1) GROUP BY resource_group"
);

/// Each lane's due work per group: how many, and the earliest due time.
const BACKLOG: &str = concat!(
    "SELECT resource_group, CAST(0 AS BIGINT), count(*), min(next_run_at) FROM triggers WHERE ",
    fresh_lane!(""),
    " AND next_run_at <= ?1 AND (?2 IS NULL OR tenant = ?2) GROUP BY resource_group \
     UNION ALL \
     SELECT resource_group, CAST(1 AS BIGINT), count(*), min(next_run_at) FROM triggers WHERE ",
    recovery_lane!(""),
    " AND next_run_at <= ?1 AND (?2 IS NULL OR tenant = ?2) GROUP BY resource_group"
);

/// Succeeded in `(?2, ?1]`, per group: one range of `success_counts_at`
/// each (a correlated sum, so no plan can scan other groups' history).
const SUCCESSES: &str = "SELECT g.name, (SELECT CAST(coalesce(sum(s.n), 0) AS BIGINT) \
     FROM success_counts s WHERE s.resource_group = g.name AND s.at > ?2 AND s.at <= ?1 \
     AND (?3 IS NULL OR s.tenant = ?3)) FROM resource_groups g";

/// A `manual` trigger an open ticket holds (`?` its id column): it had
/// arrived before the ticket held it, unlike a fire parked for approval,
/// which arrives when approved. (The test is read for `manual` rows only.)
macro_rules! held_arrived {
    ($id:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM exceptions e WHERE e.trigger_id = ",
            $id,
            " AND e.state = 'open')"
        )
    };
}

/// Arrivals, part one: plan time in `(?2, ?1]`, created by `?1`, one
/// range of `triggers_job` per job (of the tenant, when asked). Written
/// natively: SQLite keeps the loop's order as written with `CROSS JOIN`;
/// PostgreSQL needs `LATERAL`, or it walks the whole `triggers_job` index
/// for the time range (measured at 1.24M triggers, 60,000 in the window:
/// a lateral walk per job 112 ms, a scan of the index 144 ms and growing
/// with the history, a sequential scan 218 ms).
const ARRIVED_ON_TIME: &str = concat!(
    "SELECT t.resource_group, count(*) FROM jobs j CROSS JOIN triggers t \
     WHERE t.tenant = j.tenant AND t.job_id = j.job_id AND t.scheduled_at > ?2 AND t.scheduled_at <= ?1 \
     AND t.created_at <= ?1 AND (t.state <> ",
    trigger_state!(manual),
    " OR ",
    held_arrived!("t.id"),
    ") AND (?3 IS NULL OR j.tenant = ?3) AND (?3 IS NULL OR t.tenant = ?3) \
     GROUP BY t.resource_group"
);
const ARRIVED_ON_TIME_POSTGRES: &str = concat!(
    "SELECT x.resource_group, CAST(sum(x.n) AS BIGINT) FROM jobs j CROSS JOIN LATERAL \
     (SELECT t.resource_group, count(*) AS n FROM triggers t \
      WHERE t.tenant = j.tenant AND t.job_id = j.job_id AND t.scheduled_at > ?2 AND t.scheduled_at <= ?1 \
      AND t.created_at <= ?1 AND (t.state <> ",
    trigger_state!(manual),
    " OR ",
    held_arrived!("t.id"),
    ") AND (?3 IS NULL OR t.tenant = ?3) GROUP BY t.resource_group) x \
     WHERE (?3 IS NULL OR j.tenant = ?3) GROUP BY x.resource_group"
);

/// PostgreSQL: the status transaction's settings. Each statement above is
/// written for an index; without these the planner may take a sequential
/// scan of `triggers` for a large backlog whose pages are not all-visible
/// (measured, 240,000 due of 1.24M: the fresh lane's count 293 ms by a
/// parallel sequential scan, 128 ms through `triggers_pending`). The
/// hot path's sessions forbid them the same way (`HOT_SESSION`).
const POSTGRES_SETTINGS: &str = "SELECT set_config('enable_seqscan', 'off', true), \
     set_config('jit', 'off', true)";

/// Where the walk of the newest triggers starts: the last trigger created
/// at or before `?1` (a backward walk of the primary key that stops there).
const NEWEST_BEFORE: &str =
    "SELECT id FROM triggers WHERE created_at <= ?1 ORDER BY id DESC LIMIT 1";

/// Arrivals, part two: created in `(?2, ?1]` for a plan time at or before
/// the window's start (`?2`), among the triggers after id `?3`.
const ARRIVED_LATE: &str = concat!(
    "SELECT resource_group, count(*) FROM triggers WHERE id > ?3 \
     AND created_at > ?2 AND created_at <= ?1 AND scheduled_at <= ?2 AND (state <> ",
    trigger_state!(manual),
    " OR ",
    held_arrived!("triggers.id"),
    ") AND (?4 IS NULL OR tenant = ?4) GROUP BY resource_group"
);

/// Takeovers in `(?2, ?1]` (the expired attempt's end) per group, each
/// with its latency: the successor's start less the expired lease's end
/// (`attempts_expired`, migration 0037).
const TAKEOVERS: &str = concat!(
    "SELECT t.resource_group, n.started_at - e.lease_until FROM attempts e \
     JOIN attempts n ON n.trigger_id = e.trigger_id AND n.attempt_no = e.attempt_no + 1 \
     JOIN triggers t ON t.id = e.trigger_id \
     WHERE e.outcome = ",
    crate::attempt_outcome!(expired),
    " AND e.ended_at > ?2 AND e.ended_at <= ?1 \
       AND (?3 IS NULL OR t.tenant = ?3)"
);

/// Open tickets per group of their trigger (NULL: tied to none).
const TICKETS: &str = "SELECT t.resource_group, count(*) FROM exceptions e \
     LEFT JOIN triggers t ON t.id = e.trigger_id \
     WHERE e.state = 'open' AND (?1 IS NULL OR t.tenant = ?1) GROUP BY t.resource_group";

impl Store {
    /// A read-only transaction every count of one status is read in: on
    /// PostgreSQL one snapshot (repeatable read) with the status plans'
    /// settings.
    async fn status_snapshot(&self) -> StoreResult<Tx> {
        let mut tx = self.pool.begin().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
            sqlx::query(POSTGRES_SETTINGS).execute(&mut *tx).await?;
        }
        Ok(tx)
    }

    /// The takeovers of `(since, now]` per group, and their latency.
    async fn takeovers(
        &self,
        tx: &mut Tx,
        now: i64,
        since: i64,
        tenant: Option<&str>,
    ) -> StoreResult<BTreeMap<String, crate::model::takeover::Takeovers>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(self.sql(TAKEOVERS))
            .bind(now)
            .bind(since)
            .bind(tenant)
            .fetch_all(&mut **tx)
            .await?;
        let mut by_group: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for (group, ms) in rows {
            by_group.entry(group).or_default().push(ms);
        }
        Ok(by_group
            .into_iter()
            .map(|(group, ms)| (group, crate::model::takeover::Takeovers::of(&ms)))
            .collect())
    }

    /// Every group's (or one group's) status over `query.window_ms` up to
    /// `query.now`; see the module doc for what each count reads.
    pub async fn status_report(&self, query: &StatusQuery) -> StoreResult<StatusReport> {
        let now = match query.now {
            Some(now) => now,
            None => self.now_ms().await?,
        };
        let since = now - query.window_ms;
        let tenant = query.tenant.as_deref();
        let mut tx = self.status_snapshot().await?;
        let groups: Vec<(String, i64, String)> = sqlx::query_as(self.sql(GROUPS))
            .bind(query.group.as_deref())
            .fetch_all(&mut *tx)
            .await?;
        let running = per_group(
            sqlx::query_as(self.sql(RUNNING))
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?,
        );
        let paused = per_group(
            sqlx::query_as(self.sql(PAUSED))
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?,
        );
        let manual = per_group(
            sqlx::query_as(self.sql(MANUAL))
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?,
        );
        let lanes: Vec<(String, i64, i64, Option<i64>)> = sqlx::query_as(self.sql(BACKLOG))
            .bind(now)
            .bind(tenant)
            .fetch_all(&mut *tx)
            .await?;
        let successes = per_group(
            sqlx::query_as(self.sql(SUCCESSES))
                .bind(now)
                .bind(since)
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?,
        );
        let arrivals = self.arrivals(&mut tx, now, since, tenant).await?;
        let tickets: Vec<(Option<String>, i64)> = sqlx::query_as(self.sql(TICKETS))
            .bind(tenant)
            .fetch_all(&mut *tx)
            .await?;
        let mut takeovers = self.takeovers(&mut tx, now, since, tenant).await?;
        tx.commit().await?;

        let count = |map: &PerGroup, group: &str| map.get(group).copied().unwrap_or(0);
        let groups = groups
            .into_iter()
            .map(|(group, limit, limit_bound_by)| {
                let lane = |recovery: i64| {
                    lanes
                        .iter()
                        .find(|(g, l, _, _)| *g == group && *l == recovery)
                        .map_or((0, None), |(_, _, n, oldest)| (*n, *oldest))
                };
                let ((fresh, fresh_oldest), (recovery, recovery_oldest)) = (lane(0), lane(1));
                let oldest = [fresh_oldest, recovery_oldest].into_iter().flatten().min();
                GroupStatus {
                    running: count(&running, &group),
                    limit,
                    limit_bound_by,
                    backlog: fresh + recovery,
                    backlog_recovery: recovery,
                    oldest_due_ms: oldest.map(|due| (now - due).max(0)),
                    arrivals: count(&arrivals, &group),
                    successes: count(&successes, &group),
                    open_tickets: tickets
                        .iter()
                        .find(|(g, _)| g.as_deref() == Some(group.as_str()))
                        .map_or(0, |(_, n)| *n),
                    paused: count(&paused, &group),
                    manual: count(&manual, &group),
                    takeovers: takeovers.remove(&group).unwrap_or_default(),
                    group,
                }
            })
            .collect();
        let unattributed_tickets = tickets
            .iter()
            .find(|(g, _)| g.is_none())
            .map_or(0, |(_, n)| *n);
        Ok(StatusReport {
            now,
            window_ms: query.window_ms,
            tenant: query.tenant.clone(),
            groups,
            unattributed_tickets,
        })
    }

    /// Triggers that became due in `(since, now]` per group: those whose
    /// plan time falls in the window, and those created in it for a plan
    /// time already past.
    async fn arrivals(
        &self,
        tx: &mut Tx,
        now: i64,
        since: i64,
        tenant: Option<&str>,
    ) -> StoreResult<PerGroup> {
        let mut arrivals = per_group(
            sqlx::query_as(self.sql(arrived_on_time(self.dialect)))
                .bind(now)
                .bind(since)
                .bind(tenant)
                .fetch_all(&mut **tx)
                .await?,
        );
        let start: Option<i64> = sqlx::query_scalar(self.sql(NEWEST_BEFORE))
            .bind(since - ID_ORDER_SLACK_MS)
            .fetch_optional(&mut **tx)
            .await?;
        let late: Vec<(String, i64)> = sqlx::query_as(self.sql(ARRIVED_LATE))
            .bind(now)
            .bind(since)
            .bind(start.unwrap_or(0) - super::trigger_ids::REACH)
            .bind(tenant)
            .fetch_all(&mut **tx)
            .await?;
        for (group, n) in late {
            *arrivals.entry(group).or_default() += n;
        }
        Ok(arrivals)
    }
}

/// [`ARRIVED_ON_TIME`] as `dialect` runs it.
fn arrived_on_time(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => ARRIVED_ON_TIME,
        Dialect::Postgres => ARRIVED_ON_TIME_POSTGRES,
    }
}

fn per_group(rows: Vec<(String, i64)>) -> PerGroup {
    rows.into_iter().collect()
}

/// The statements [`Store::status_report`] runs on `dialect`, with
/// SQLite's placeholders (translate with [`Store::sql`]) — after
/// [`POSTGRES_SETTINGS`] on PostgreSQL: name, text, and each placeholder's
/// kind in order (`i` an integer, `t` a text that may be NULL) — for the
/// test that reads their plans (`tests/all/status.rs`).
#[doc(hidden)]
pub fn status_statements(dialect: Dialect) -> [(&'static str, &'static str, &'static str); 8] {
    [
        ("groups", GROUPS, "t"),
        ("running", RUNNING, "t"),
        ("backlog", BACKLOG, "it"),
        ("successes", SUCCESSES, "iit"),
        ("arrived_on_time", arrived_on_time(dialect), "iit"),
        ("newest_before", NEWEST_BEFORE, "i"),
        ("arrived_late", ARRIVED_LATE, "iiit"),
        ("tickets", TICKETS, "t"),
    ]
}

/// PostgreSQL's settings for the statements of [`status_statements`].
#[doc(hidden)]
pub fn status_settings() -> &'static str {
    POSTGRES_SETTINGS
}
