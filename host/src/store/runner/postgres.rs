//! PostgreSQL's hot path: a claim and a group commit, each **one
//! statement** — one commit whatever the batch (the claim's statement
//! follows the lock of the groups' rows in its transaction) — run on
//! the native driver's pool ([`Store::hot`]), written for PostgreSQL
//! (CTEs, `FOR UPDATE SKIP LOCKED`, arrays and `unnest`, `RETURNING`)
//! rather than in the SQLite spelling and rewritten. The contract is
//! [`RunnerStore::claim`] and [`RunnerStore::attempt_finish_batch`], the
//! same on both databases (the conformance suite runs on both).
//!
//! Why one statement: a statement is atomic on its own (an implicit
//! transaction), and every step of a claim or a commit is a function of the
//! step before it, which data-modifying CTEs express — so a `BEGIN`, the
//! steps and a `COMMIT` (4-6 round trips, each waiting on the network and
//! the server) become one. The plans: every walk is an ordered scan of a
//! partial index that stops after its batch, and every other access is by
//! primary or unique key from a handful of rows, so no statistic can make a
//! plan read the backlog (see `docs/architecture.md`, "PostgreSQL hot
//! path"); the hot pool's sessions forbid the scans and sorts a stale
//! statistic could choose, so the one generic plan each statement keeps
//! (see [`super::super::HOT_SESSION`]) is as good on a large table as on
//! the small one it was made on.

use super::super::fence::lease_fence;
use super::super::*;
use super::claim::{fresh_lane, recovery_lane, running_rows};
use super::commit::Moved;
use crate::model::{AttemptEnd, Claim, FencingToken, LeaseRef};
use crate::trigger_state;

/// The database clock on PostgreSQL (see [`super::super::dialect::POSTGRES_NOW`]).
macro_rules! pg_now {
    () => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// Each group as a claim sees it: its room — its effective concurrency
/// less its running triggers (`triggers_running`; lapsed leases still
/// count — their holder may only be paused), none while a high-water mark
/// holds it — and what its shares need (its running count, minimum
/// share, recovery share and ramp, and its recovery lane's running count,
/// from the group's range of `triggers_running`). Read after [`LOCK_GROUPS`], so every claim
/// committed before this one is counted.
macro_rules! claim_room {
    () => {
        concat!(
            "SELECT g.name, g.aging_ms, g.effective_concurrency AS eff, g.min_share, \
         g.recovery_share_pct, g.recovery_ramp_pct, r.running, \
         CASE WHEN g.held IS NULL THEN g.effective_concurrency - r.running ELSE 0 END AS room, \
         (SELECT count(*) FROM triggers v WHERE ",
            running_rows!("v."),
            " AND v.recovery = 1 AND v.resource_group = g.name) AS recovering \
     FROM resource_groups g CROSS JOIN LATERAL (SELECT count(*) AS running FROM triggers t \
         WHERE ",
            running_rows!("t."),
            " AND t.resource_group = g.name) AS r"
        )
    };
}

/// The tenants with work of a lane (`$lane`, its predicate — see
/// [`super::claim::recovery_lane`]) in each group with room: a loose walk
/// of that lane's claim index (`(resource_group, tenant, …)`), one probe
/// per tenant whatever its backlog. `$cte` names the recursive CTE.
macro_rules! tenants_walk {
    ($cte:literal, $($lane:tt)+) => {
        concat!(
            $cte,
            " (grp, tenant) AS (SELECT room.name, (SELECT t.tenant FROM triggers t WHERE ",
            $($lane)+,
            " AND t.resource_group = room.name ORDER BY t.tenant LIMIT 1) FROM room \
         WHERE room.room > 0 \
         UNION ALL SELECT w.grp, (SELECT t.tenant FROM triggers t WHERE ",
            $($lane)+,
            " AND t.resource_group = w.grp AND t.tenant > w.tenant ORDER BY t.tenant LIMIT 1) \
         FROM ",
            $cte,
            " w WHERE w.tenant IS NOT NULL)"
        )
    };
}

/// One queue of a claim lane: per (group, tenant) with due work of the
/// lane (`$lane`, its predicate), at most the group's room (and `$4`)
/// rows in (priority, next_run_at, id) order, locked — an ordered probe of
/// that lane's claim index — each scored by [`super::claim::fair_score`]:
/// (running + k) / weight less an aging bonus of at most 1 as the tenant's
/// oldest candidate waits.
macro_rules! claim_queue {
    ($($lane:tt)+) => {
        concat!(
            "SELECT q.id, q.resource_group, q.priority, q.next_run_at, false AS takeover, \
         s.tenant, s.t_room, \
         (s.running + row_number() OVER (PARTITION BY s.grp, s.tenant \
             ORDER BY q.priority, q.next_run_at, q.id))::FLOAT8 / s.weight \
         - least(greatest((SELECT now FROM clock) - min(q.next_run_at) OVER \
             (PARTITION BY s.grp, s.tenant), 0)::FLOAT8 / s.aging_ms, 1.0) AS score \
     FROM tenancy s CROSS JOIN LATERAL (SELECT id, resource_group, priority, next_run_at \
         FROM triggers WHERE ",
            $($lane)+,
            " AND resource_group = s.grp AND tenant = s.tenant \
         AND next_run_at <= (SELECT now FROM clock) \
         ORDER BY priority, next_run_at, id LIMIT greatest(least($4, s.room, s.t_room), 0) \
         FOR UPDATE SKIP LOCKED) AS q"
        )
    };
}

/// Lane 1, recovery: due retries ([`crate::model::Transition::Claim`]
/// from `retry_wait`) and due pending catch-up fires and backfills —
/// every (group, tenant) queue of them ([`claim_queue`]).
macro_rules! claim_retries {
    () => {
        claim_queue!(recovery_lane!(""))
    };
}
#[cfg(test)]
pub(in crate::store) const CLAIM_RETRIES: &str = claim_retries!();

/// Lane 2, fresh work: due `pending` triggers not in the recovery lane,
/// queued as the recovery lane's are,
/// and `running` ones whose lease lapsed (`triggers_running`, longest lapsed
/// first, whatever their group's room: a takeover adds nothing to the
/// running count; first in the lane, since their attempt is stuck) —
/// [`crate::model::Transition::Claim`] from `pending`,
/// [`crate::model::Transition::TakeOver`] from `running`.
macro_rules! claim_fresh {
    () => {
        concat!(
            claim_queue!(fresh_lane!("")),
            " UNION ALL \
     SELECT id, resource_group, priority, next_run_at, true, NULL, NULL, -1e9::FLOAT8 \
     FROM (SELECT id, \
         resource_group, priority, next_run_at FROM triggers WHERE state = ",
            trigger_state!(running),
            " AND lease_until < (SELECT now FROM clock) \
         ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED) AS lapsed"
        )
    };
}
#[cfg(test)]
pub(in crate::store) const CLAIM_FRESH: &str = claim_fresh!();

/// The claim of the chosen rows: token + 1, lease on the database clock.
/// Its guard is the lanes': the rows were selected by state and are
/// locked by this statement until it ends, so their state cannot change
/// in between. Rows are found by `id = ANY(array)` — key lookups from the
/// batch, never a join whose order statistics could turn round (a plan
/// that walks `triggers` and probes the batch reads the whole table).
macro_rules! claim_update {
    () => {
        concat!(
            "UPDATE triggers SET state = ",
            trigger_state!(running),
            ", lease_owner = $2, lease_until = (SELECT now FROM clock) + $3, \
         fencing_token = triggers.fencing_token + 1, attempts = triggers.attempts + 1, \
         updated_at = (SELECT now FROM clock), recovery = CASE WHEN triggers.state = ",
            trigger_state!(retry_wait),
            " THEN 1 ELSE triggers.recovery END \
     WHERE triggers.id = ANY(ARRAY(SELECT id FROM chosen)) \
     RETURNING triggers.id, triggers.fencing_token, triggers.attempts, triggers.lease_until, \
         triggers.updated_at, triggers.job_id, triggers.tenant, triggers.plan_version, \
         triggers.plan_key, triggers.scheduled_at, triggers.params, triggers.resource_group, \
         triggers.origin"
        )
    };
}
#[cfg(test)]
pub(in crate::store) const CLAIM_UPDATE: &str = claim_update!();

/// A lane's candidates in claim order (`n`): takeovers first, then each
/// group's first candidates — as many as it runs short of its minimum
/// share — then the rest, each part by fair-share score, then (priority,
/// next_run_at, id): [`super::claim::guaranteed_first`]'s order.
macro_rules! lane_order {
    ($($lane:tt)+) => {
        concat!(
            "SELECT id, resource_group, takeover, tenant, t_room, row_number() OVER (ORDER BY \
             CASE WHEN takeover THEN 0 WHEN gk <= min_share - running THEN 1 ELSE 2 END, \
             score, priority, next_run_at, id) AS n \
         FROM (SELECT lane.*, room.min_share, room.running, row_number() OVER \
             (PARTITION BY lane.resource_group, lane.takeover \
              ORDER BY lane.score, lane.priority, lane.next_run_at, lane.id) AS gk \
             FROM (",
            $($lane)+,
            ") AS lane LEFT JOIN room ON room.name = lane.resource_group) AS ranked"
        )
    };
}

/// Claims serialize on the groups' rows, taken in name order before the
/// claim statement reads its snapshot: the room a claim counts then
/// includes every claim committed before it, in any process, so no group
/// runs more than its effective concurrency. (Inside one statement the
/// lock would come too late: its snapshot predates the wait.) Ends do not
/// take it — they only make room, and a claim that misses one claims less.
const LOCK_GROUPS: &str = "SELECT name FROM resource_groups ORDER BY name FOR NO KEY UPDATE";

/// The whole claim: `$1` an injected now (tests) or NULL, `$2` owner, `$3`
/// lease ms, `$4` limit, `$5` the retry lane's share. The shares are
/// [`super::claim::choose_batch`]'s: up to `$5` retries, fresh work for
/// the rest, then more retries if fresh work left room and the share was
/// filled; then [`super::claim::within_room`]'s cut: in that order (`ord`),
/// each group's recovery lane up to its recovery room (its ceiling —
/// the ramp's step, and the share while fresh work waits — less its
/// running recovery), then each group's new claims up to its room and
/// each tenant's up to its room under its max in flight (none if held).
/// A trigger claimed again gets any attempt a previous holder left open
/// closed as `expired`, and its first start is read for the total-time
/// budget; every claimed trigger gets its new attempt row.
const CLAIM: &str = concat!(
    "WITH RECURSIVE clock (now) AS MATERIALIZED (SELECT coalesce($1::BIGINT, ",
    pg_now!(),
    ")), \
     room AS MATERIALIZED (",
    claim_room!(),
    "), ",
    tenants_walk!("pending_tenants", fresh_lane!("t.")),
    ", ",
    tenants_walk!("retry_tenants", recovery_lane!("t.")),
    ", \
     tenancy AS MATERIALIZED (SELECT q.grp, q.tenant, room.room, room.aging_ms, \
         coalesce(w.weight, 1) AS weight, \
         CASE WHEN w.held IS NOT NULL THEN 0 WHEN w.max_in_flight IS NULL THEN $4 \
             ELSE w.max_in_flight - (SELECT count(*) FROM triggers r WHERE ",
    running_rows!("r."),
    " AND r.tenant = q.tenant) END AS t_room, \
         (SELECT count(*) FROM triggers r WHERE ",
    running_rows!("r."),
    " AND r.resource_group = q.grp AND r.tenant = q.tenant) AS running \
         FROM (SELECT grp, tenant FROM pending_tenants WHERE tenant IS NOT NULL \
             UNION SELECT grp, tenant FROM retry_tenants WHERE tenant IS NOT NULL) AS q \
         JOIN room ON room.name = q.grp LEFT JOIN tenants w ON w.tenant = q.tenant), \
     retry AS MATERIALIZED (",
    lane_order!(claim_retries!()),
    "), \
     fresh AS MATERIALIZED (",
    lane_order!(claim_fresh!()),
    "), \
     counts AS (SELECT least($5, (SELECT count(*) FROM retry)) AS r_first, \
         (SELECT count(*) FROM retry) AS r_all, (SELECT count(*) FROM fresh) AS f_all), \
     shares AS (SELECT r_first, r_first + CASE WHEN r_first = $5 \
             THEN least($4 - r_first - least($4 - r_first, f_all), r_all - r_first) ELSE 0 END \
             AS r_take, \
         least($4 - r_first, f_all) AS f_take FROM counts), \
     picked AS (SELECT id, resource_group, takeover, tenant, t_room, true AS recovery, \
             CASE WHEN n <= r_first THEN n ELSE $4 + n END AS ord \
         FROM retry, shares WHERE n <= r_take \
         UNION ALL SELECT id, resource_group, takeover, tenant, t_room, false, r_first + n \
         FROM fresh, shares WHERE n <= f_take), \
     recovery_room AS (SELECT room.name, greatest(1, (room.eff * CASE WHEN EXISTS \
             (SELECT 1 FROM fresh f WHERE f.resource_group = room.name AND NOT f.takeover) \
         THEN least(room.recovery_share_pct, room.recovery_ramp_pct) \
         ELSE room.recovery_ramp_pct END + 99) / 100) - room.recovering AS r_room FROM room), \
     admitted AS (SELECT p.*, row_number() OVER (PARTITION BY p.resource_group, p.takeover, \
             p.recovery ORDER BY p.ord) AS kr FROM picked p), \
     chosen AS (SELECT id FROM (SELECT a.id, a.takeover, room.room, a.t_room, \
             row_number() OVER (PARTITION BY a.resource_group, a.takeover ORDER BY a.ord) AS k, \
             row_number() OVER (PARTITION BY a.tenant, a.takeover ORDER BY a.ord) AS kt \
         FROM admitted a LEFT JOIN room ON room.name = a.resource_group \
         LEFT JOIN recovery_room rr ON rr.name = a.resource_group \
         WHERE a.takeover OR NOT a.recovery OR a.kr <= rr.r_room) AS cut \
         WHERE takeover OR (k <= room AND kt <= t_room)), \
     claimed AS (",
    claim_update!(),
    "), \
     again AS (SELECT id FROM claimed WHERE attempts > 1), \
     expired AS (UPDATE attempts SET outcome = 'expired', ended_at = (SELECT now FROM clock), \
         error_class = 'lease_expired', error_message = 'lease expired; trigger taken over' \
         WHERE ended_at IS NULL AND trigger_id = ANY(ARRAY(SELECT id FROM again))), \
     firsts AS (SELECT trigger_id, min(started_at) AS first_started_at FROM attempts \
         WHERE trigger_id = ANY(ARRAY(SELECT id FROM again)) GROUP BY trigger_id), \
     opened AS (INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, \
             started_at, lease_until) \
         SELECT id, attempts, $2, fencing_token, updated_at, lease_until FROM claimed \
         RETURNING trigger_id, id) \
     SELECT c.id, o.id AS attempt_id, c.fencing_token, c.attempts, c.lease_until, c.updated_at, \
         coalesce(f.first_started_at, c.updated_at) AS first_started_at, c.job_id, c.tenant, \
         c.plan_version, c.plan_key, c.scheduled_at, c.params, c.resource_group, c.origin \
     FROM claimed c JOIN opened o ON o.trigger_id = c.id \
     LEFT JOIN firsts f ON f.trigger_id = c.id"
);

/// A claimed trigger as [`CLAIM`] returns it.
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: i64,
    attempt_id: i64,
    fencing_token: i64,
    attempts: i64,
    lease_until: i64,
    /// The claim's clock (the attempt's start).
    updated_at: i64,
    first_started_at: i64,
    job_id: String,
    tenant: String,
    plan_version: i64,
    plan_key: String,
    scheduled_at: i64,
    params: String,
    resource_group: String,
    origin: String,
}

/// The fenced transitions of a group commit ([`crate::model::Transition::Finish`]):
/// each end moves its trigger only if the trigger is still `running` at
/// the end's token.
macro_rules! finish_move {
    () => {
        concat!(
            "UPDATE triggers SET state = CASE WHEN ends.state = ",
            trigger_state!(retry_wait),
            " AND triggers.pause_requested = 1 THEN ",
            trigger_state!(paused),
            " ELSE ends.state END, pause_requested = 0, result = ends.result, \
         error_class = ends.error_class, error_message = ends.error_message, \
         next_run_at = CASE WHEN ends.retry_after_ms IS NULL THEN triggers.next_run_at \
             ELSE (SELECT now FROM clock) + ends.retry_after_ms END, \
         lease_owner = NULL, lease_until = NULL, \
         finished_at = CASE WHEN ends.terminal THEN (SELECT now FROM clock) END, \
         updated_at = (SELECT now FROM clock) \
     FROM ends WHERE triggers.id = ANY($1) AND ",
            lease_fence!("triggers", id = "ends.trigger_id", token = "ends.token"),
            " RETURNING triggers.id, triggers.fencing_token"
        )
    };
}
#[cfg(test)]
pub(in crate::store) const FINISH_MOVE: &str = finish_move!();

/// The whole group commit, the batch as one array per column: the fenced
/// transitions, then the attempts of the ends that moved (each fenced by
/// its own token too). Returns the (trigger, token) pairs that moved.
///
/// Every row is reachable only by a key lookup, whatever the planner
/// believes: triggers by `id = ANY($1)` (the `triggers_running` index's
/// predicate is not implied by the fence, see migrations 0008 and 0013), attempts by
/// their id or by the whole unique key (trigger, token) — a token alone
/// would be a walk of that index's every entry.
const FINISH: &str = concat!(
    "WITH clock (now) AS MATERIALIZED (SELECT ",
    pg_now!(),
    "), \
     ends AS MATERIALIZED (SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], \
         $4::BYTEA[], $5::TEXT[], $6::TEXT[], $7::BIGINT[], $8::BOOLEAN[], $9::BIGINT[], \
         $10::TEXT[], $11::BIGINT[], $12::BIGINT[], $13::BIGINT[], $14::TEXT[]) \
         AS e (trigger_id, token, state, result, error_class, error_message, retry_after_ms, \
             terminal, attempt_id, outcome, fuel_used, peak_memory_bytes, wall_ms, log)), \
     moved AS (",
    finish_move!(),
    "), \
     closed AS (UPDATE attempts SET outcome = ends.outcome, ended_at = (SELECT now FROM clock), \
         error_class = ends.error_class, error_message = ends.error_message, \
         fuel_used = ends.fuel_used, peak_memory_bytes = ends.peak_memory_bytes, \
         wall_ms = ends.wall_ms, log = ends.log \
         FROM ends JOIN moved ON moved.id = ends.trigger_id AND moved.fencing_token = ends.token \
         WHERE attempts.id = ANY($9) AND attempts.id = ends.attempt_id \
             AND attempts.trigger_id = ends.trigger_id AND attempts.fencing_token = ends.token) \
     SELECT id, fencing_token FROM moved"
);

impl Store {
    /// [`RunnerStore::claim`] on PostgreSQL: [`LOCK_GROUPS`], then [`CLAIM`],
    /// in one transaction.
    pub(in crate::store) async fn claim_postgres(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        share: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<Claim>> {
        let mut tx = self.hot().begin().await?;
        sqlx::query(LOCK_GROUPS).execute(&mut *tx).await?;
        let rows: Vec<ClaimedRow> = sqlx::query_as(CLAIM)
            .bind(now)
            .bind(owner)
            .bind(lease_ms)
            .bind(limit)
            .bind(share)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(rows
            .into_iter()
            .map(|c| Claim {
                trigger_id: c.id,
                attempt_id: c.attempt_id,
                attempt_no: c.attempts,
                fencing_token: FencingToken::new(c.fencing_token),
                lease_until: c.lease_until,
                job_id: c.job_id,
                tenant: c.tenant,
                plan_version: c.plan_version,
                plan_key: c.plan_key,
                scheduled_at: c.scheduled_at,
                params: c.params,
                resource_group: c.resource_group,
                origin: c.origin,
                started_at: c.updated_at,
                first_started_at: c.first_started_at,
            })
            .collect())
    }

    /// [`RunnerStore::attempt_finish_batch`]'s writes on PostgreSQL:
    /// [`FINISH`], one round trip; the (trigger, token) pairs that moved.
    pub(in crate::store) async fn finish_postgres(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Moved> {
        let column =
            |f: &dyn Fn(&(LeaseRef, AttemptEnd)) -> i64| ends.iter().map(f).collect::<Vec<i64>>();
        let text = |f: &dyn Fn(&(LeaseRef, AttemptEnd)) -> Option<String>| {
            ends.iter().map(f).collect::<Vec<Option<String>>>()
        };
        let moved: Vec<(i64, i64)> = sqlx::query_as(FINISH)
            .bind(column(&|(lease, _)| lease.trigger_id))
            .bind(column(&|(lease, _)| lease.fencing_token.get()))
            .bind(text(&|(_, end)| {
                Some(end.trigger_state.as_str().to_string())
            }))
            .bind(
                ends.iter()
                    .map(|(_, end)| end.result.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(text(&|(_, end)| end.error_class.clone()))
            .bind(text(&|(_, end)| end.error_message.clone()))
            .bind(
                ends.iter()
                    .map(|(_, end)| end.retry_after_ms)
                    .collect::<Vec<_>>(),
            )
            .bind(
                ends.iter()
                    .map(|(_, end)| end.trigger_state.is_terminal())
                    .collect::<Vec<_>>(),
            )
            .bind(column(&|(lease, _)| lease.attempt_id))
            .bind(text(&|(_, end)| {
                Some(end.attempt_outcome.as_str().to_string())
            }))
            .bind(column(&|(_, end)| end.fuel_used))
            .bind(column(&|(_, end)| end.peak_memory_bytes))
            .bind(column(&|(_, end)| end.wall_ms))
            .bind(text(&|(_, end)| Some(end.log.clone())))
            .fetch_all(self.hot())
            .await?;
        Ok(moved.into_iter().collect())
    }
}

/// The hot statements' texts, for `benches/claim_plans.rs` (which shows
/// their plans with `EXPLAIN` at several backlog sizes): the claim (`$1`
/// now or NULL, `$2` owner, `$3` lease ms, `$4` limit, `$5` retry share)
/// and the group commit (`$1`..`$14`, one array per column, see
/// [`Store::finish_postgres`]).
pub fn hot_statements() -> [(&'static str, &'static str); 2] {
    [("claim", CLAIM), ("group commit", FINISH)]
}
