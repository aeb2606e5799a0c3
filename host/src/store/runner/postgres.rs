//! PostgreSQL's hot path: a claim and a group commit — one commit each
//! whatever the batch — run on the native driver's pool ([`Store::hot`]),
//! written for PostgreSQL (CTEs, `FOR UPDATE SKIP LOCKED`, arrays and
//! `unnest`, `RETURNING`) rather than in the SQLite spelling and
//! rewritten. The contract is [`RunnerStore::claim`] and
//! [`RunnerStore::attempt_finish_batch`], the same on both databases (the
//! conformance suite runs on both).
//!
//! The group commit is **one statement**: a statement is atomic on its own
//! (an implicit transaction), and every step of a commit is a function of
//! the step before it, which data-modifying CTEs express — so a `BEGIN`,
//! the steps and a `COMMIT` (4-6 round trips, each waiting on the network
//! and the server) become one. The claim is one transaction of two round
//! trips ([`claim_on`]), each a simple query of statements the session
//! prepared when it opened ([`prepare_claim`]): `BEGIN` and the candidates
//! ([`CANDIDATES`]: every lane's queues, locked, with what the choice
//! needs); then the claim of the batch the client chose ([`CLAIM`]) with
//! the same code as SQLite ([`super::claim::choose`]), the groups' lock, a
//! check of the limits and the `COMMIT` ([`check_and_commit`]) — or, after
//! a refused check, the lock first ([`BEGIN_AND_LOCK_GROUPS`]). The choice is the
//! client's because the fair-share ranking — windows, each a sort — cost
//! the server more than the round trip it saves, and the server is what
//! every process shares. The plans: every walk is an
//! ordered scan of a partial index that stops after its batch, and every
//! other access is by primary or unique key from a handful of rows, so no
//! statistic can make a plan read the backlog (see
//! `docs/architecture.md`, "PostgreSQL hot path"); the hot pool's sessions
//! forbid the scans and sorts a stale statistic could choose, so the one
//! generic plan each statement keeps (see [`super::super::HOT_SESSION`])
//! is as good on a large table as on the small one it was made on.

use super::super::fence::lease_fence;
use super::super::held::ticket_holds;
use super::super::*;
use super::claim::{
    Ask, Candidate, Room, TAKEOVER_SCORE, choose, fresh_lane, lock_groups, recovery_lane,
    running_rows, score_queue,
};
use super::commit::Moved;
use crate::model::{AttemptEnd, Claim, FencingToken, LeaseRef};
use crate::trigger_state;
use sqlx::{Executor, FromRow};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

mod check;
mod literal;
use check::{PREPARE_CLAIM_CHECK, REFUSED, check_and_commit};

/// The database clock on PostgreSQL (see [`super::super::dialect::POSTGRES_NOW`]).
macro_rules! pg_now {
    () => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// The running triggers per (group, tenant) — lapsed leases still count:
/// their holder may only be paused — and how many of them are in the
/// recovery lane: one walk of `triggers_running`, whose order is that
/// grouping, from which every count of the claim is summed (the groups'
/// rooms and recovery lanes, the tenants' scores and max in flight), so
/// no running entry is read twice. Bounded by what runs, which the
/// groups' limits bound.
macro_rules! running_counts {
    () => {
        concat!(
            "SELECT resource_group AS grp, tenant, count(*) AS n, \
         count(*) FILTER (WHERE recovery = 1) AS recovering FROM triggers WHERE ",
            running_rows!(""),
            " GROUP BY resource_group, tenant"
        )
    };
}

/// Each group as a claim sees it: its room — its effective concurrency
/// less its running triggers ([`running_counts`]), none while a
/// high-water mark holds it — and what its shares need (its running
/// count, minimum share, recovery share and ramp, and its recovery lane's
/// running count). Under the claims' lock ([`claim_locked`]) every claim
/// committed before this one is counted; without it ([`claim_unlocked`])
/// claims committing meanwhile are not, and [`check_and_commit`] counts
/// again under the lock before the batch commits.
macro_rules! claim_room {
    () => {
        "SELECT g.name, g.aging_ms, g.effective_concurrency AS eff, g.min_share, \
     g.recovery_share_pct, g.recovery_ramp_pct, coalesce(r.n, 0) AS running, \
     CASE WHEN g.held IS NULL THEN g.effective_concurrency - coalesce(r.n, 0) ELSE 0 END AS room, \
     coalesce(r.recovering, 0) AS recovering \
     FROM resource_groups g LEFT JOIN (SELECT grp, sum(n)::BIGINT AS n, \
         sum(recovering)::BIGINT AS recovering FROM running_counts GROUP BY grp) AS r ON r.grp = g.name"
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
/// lane (`$lane`, its predicate; `$no` its number, see
/// [`super::claim::Candidate::lane`]), at most the group's room, the
/// tenant's and the claim's limit (`$2`) rows in (priority, next_run_at,
/// id) order, locked — an ordered probe of that lane's claim index — with
/// what the tenant's fair-share score needs (its running count in the
/// group and its weight) and its room.
macro_rules! claim_queue {
    ($no:literal, $($lane:tt)+) => {
        concat!(
            "SELECT q.id, ",
            $no,
            "::BIGINT AS lane, q.priority, q.next_run_at, s.grp AS resource_group, s.tenant, \
         s.running AS t_running, s.weight, s.t_room, s.limited \
     FROM tenancy s CROSS JOIN LATERAL (SELECT id, priority, next_run_at FROM triggers WHERE ",
            $($lane)+,
            " AND resource_group = s.grp AND tenant = s.tenant \
         AND next_run_at <= (SELECT now FROM clock) \
         ORDER BY priority, next_run_at, id LIMIT greatest(least($2, s.room, s.t_room), 0) \
         FOR UPDATE SKIP LOCKED) AS q"
        )
    };
}

/// Lane 0, recovery: due retries ([`crate::model::Transition::Claim`]
/// from `retry_wait`) and due pending catch-up fires and backfills —
/// every (group, tenant) queue of them ([`claim_queue`]).
macro_rules! claim_retries {
    () => {
        claim_queue!("0", recovery_lane!(""))
    };
}
#[cfg(test)]
pub(in crate::store) const CLAIM_RETRIES: &str = claim_retries!();

/// Lanes 1 and 2, fresh work: due `pending` triggers not in the recovery
/// lane, queued as the recovery lane's are, and `running` ones whose
/// lease lapsed (`triggers_running`, longest lapsed first, whatever their
/// group's room: a takeover adds nothing to the running count) —
/// [`crate::model::Transition::Claim`] from `pending`,
/// [`crate::model::Transition::TakeOver`] from `running`.
macro_rules! claim_fresh {
    () => {
        concat!(
            claim_queue!("1", fresh_lane!("")),
            " UNION ALL \
     SELECT id, 2, priority, next_run_at, resource_group, tenant, 0, 1, 0, false \
     FROM (SELECT id, resource_group, tenant, priority, next_run_at FROM triggers WHERE state = ",
            trigger_state!(running),
            " AND lease_until < (SELECT now FROM clock) \
         ORDER BY lease_until LIMIT $2 FOR UPDATE SKIP LOCKED) AS lapsed"
        )
    };
}
#[cfg(test)]
pub(in crate::store) const CLAIM_FRESH: &str = claim_fresh!();

/// The claim of the chosen rows: token + 1, lease on the database clock.
/// Its guard is the lanes': the rows were selected by state and are
/// locked by this transaction since [`CANDIDATES`], so their state cannot
/// change in between. Rows are found by `id = ANY(array)` — key lookups
/// from the batch, never a join whose order statistics could turn round (a
/// plan that walks `triggers` and probes the batch reads the whole table).
macro_rules! claim_update {
    () => {
        concat!(
            "UPDATE triggers SET state = ",
            trigger_state!(running),
            ", lease_owner = $2, lease_until = (SELECT now FROM clock) + $3, \
         fencing_token = triggers.fencing_token + 1, attempts = triggers.attempts + 1, \
         updated_at = (SELECT now FROM clock), recovery = CASE WHEN triggers.state = ",
            trigger_state!(retry_wait),
            " THEN 1 ELSE triggers.recovery END, overlap_token = CASE WHEN triggers.state = ",
            trigger_state!(running),
            " THEN triggers.overlap_token END \
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

/// Claims serialize on the groups' rows, taken in name order before a
/// claim counts: the room it counts then includes every claim committed
/// before it, in any process, so no group runs more than its effective
/// concurrency. (Inside the counting statement the lock would come too
/// late: its snapshot predates the wait.) Ends do not take it — they only
/// make room, and a claim that misses one claims less.
///
/// [`claim_locked`] takes it before it reads, sent with the `BEGIN` as one
/// simple query: one round trip where two were (each ~70 µs on a loaded
/// 2-core machine, measured with pgbench). [`claim_unlocked`] takes it
/// only for its last round trip ([`check_and_commit`]).
const BEGIN_AND_LOCK_GROUPS: &str = concat!("BEGIN; ", lock_groups!());

/// After a refusal, how many claims of the store take the claims' lock
/// before they read ([`claim_locked`]): a refusal means other processes'
/// claims are taking the same groups' last slots, where a claim that reads
/// first would likely be refused again, its writes wasted.
const LOCKED_AFTER_REFUSAL: u32 = 8;

/// A claim's candidates, locked (`FOR UPDATE SKIP LOCKED`): `$1` an
/// injected now (tests) or NULL, `$2` the claim's limit. Every lane's
/// queue per (group with room, tenant with due work) and the lapsed
/// leases, one row per lane and (group, tenant) ([`QueueRow`]): its
/// candidates' ids, priorities and due times as arrays, with its tenant's
/// score inputs and room and its group's room and shares once — a row
/// per candidate repeated those 16 columns, and decoding them cost the
/// client ~2 µs a job. The choice is made by the client, with the same
/// code as SQLite's ([`super::claim::choose`]): the database does what
/// only it can (lock, count, walk its indexes) and no sort or window of
/// the ranking runs on the server every process shares.
const CANDIDATES: &str = concat!(
    "WITH RECURSIVE clock (now) AS MATERIALIZED (SELECT coalesce($1::BIGINT, ",
    pg_now!(),
    ")), \
     running_counts AS MATERIALIZED (",
    running_counts!(),
    "), \
     room AS MATERIALIZED (",
    claim_room!(),
    "), ",
    tenants_walk!("pending_tenants", fresh_lane!("t.")),
    ", ",
    tenants_walk!("retry_tenants", recovery_lane!("t.")),
    ", \
     tenancy AS MATERIALIZED (SELECT q.grp, q.tenant, room.room, coalesce(w.weight, 1) AS weight, \
         (w.held IS NOT NULL OR w.max_in_flight IS NOT NULL) AS limited, \
         CASE WHEN w.held IS NOT NULL THEN 0 WHEN w.max_in_flight IS NULL THEN $2 \
             ELSE w.max_in_flight - coalesce((SELECT sum(r.n)::BIGINT FROM running_counts r \
                 WHERE r.tenant = q.tenant), 0) END AS t_room, \
         coalesce((SELECT r.n FROM running_counts r WHERE r.grp = q.grp AND r.tenant = q.tenant), 0) \
             AS running \
         FROM (SELECT grp, tenant FROM pending_tenants WHERE tenant IS NOT NULL \
             UNION SELECT grp, tenant FROM retry_tenants WHERE tenant IS NOT NULL) AS q \
         JOIN room ON room.name = q.grp LEFT JOIN tenants w ON w.tenant = q.tenant) \
     SELECT c.lane, c.resource_group, c.tenant, \
         c.t_running::BIGINT AS t_running, c.weight::BIGINT AS weight, \
         c.t_room::BIGINT AS t_room, c.limited, (SELECT now FROM clock) AS now, \
         g.aging_ms, g.eff::BIGINT AS eff, g.running::BIGINT AS g_running, g.min_share, \
         g.recovery_share_pct, g.recovery_ramp_pct, g.recovering::BIGINT AS recovering, \
         g.room::BIGINT AS room, array_agg(c.id) AS ids, array_agg(c.priority) AS priorities, \
         array_agg(c.next_run_at) AS next_runs \
     FROM (",
    claim_retries!(),
    " UNION ALL ",
    claim_fresh!(),
    ") AS c LEFT JOIN room g ON g.name = c.resource_group \
     GROUP BY c.lane, c.resource_group, c.tenant, c.t_running, c.weight, c.t_room, c.limited, \
         g.aging_ms, g.eff, g.running, g.min_share, g.recovery_share_pct, g.recovery_ramp_pct, \
         g.recovering, g.room"
);

/// The claim of the chosen batch: `$1` the candidates' now, `$2` owner,
/// `$3` lease ms, `$4` the chosen triggers' ids. A trigger claimed again
/// gets any attempt a previous holder left open closed as `expired`, and
/// its first start is read for the total-time budget; every claimed
/// trigger gets its new attempt row. The last `SELECT`'s columns are read
/// by position ([`claim_of`]).
const CLAIM: &str = concat!(
    "WITH clock (now) AS MATERIALIZED (SELECT $1::BIGINT), \
     chosen AS (SELECT unnest($4::BIGINT[]) AS id), \
     claimed AS (",
    claim_update!(),
    "), \
     again AS (SELECT id FROM claimed WHERE attempts > 1), \
     expired AS (UPDATE attempts SET outcome = ",
    crate::attempt_outcome!(expired),
    ", ended_at = (SELECT now FROM clock), \
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

/// A queue of candidates as [`CANDIDATES`] returns it: one lane's rows
/// of one (group, tenant), their ids, priorities and due times as arrays
/// (in no order: [`score_queue`] sorts them), with what the queue's
/// tenant and group bring to the choice once.
#[derive(sqlx::FromRow)]
struct QueueRow {
    lane: i64,
    resource_group: String,
    tenant: String,
    t_running: i64,
    weight: i64,
    t_room: i64,
    limited: bool,
    now: i64,
    aging_ms: Option<i64>,
    eff: Option<i64>,
    g_running: Option<i64>,
    min_share: Option<i64>,
    recovery_share_pct: Option<i64>,
    recovery_ramp_pct: Option<i64>,
    recovering: Option<i64>,
    room: Option<i64>,
    ids: Vec<i64>,
    priorities: Vec<i64>,
    next_runs: Vec<i64>,
}

impl QueueRow {
    /// Its group as [`super::claim::choose`] sees it (a group gone since
    /// the trigger was made has no room).
    fn room(&self) -> Room {
        Room {
            room: self.room.unwrap_or(0),
            aging_ms: self.aging_ms.unwrap_or(1),
            effective: self.eff.unwrap_or(0),
            running: self.g_running.unwrap_or(0),
            min_share: self.min_share.unwrap_or(0),
            recovery_share_pct: self.recovery_share_pct.unwrap_or(0),
            recovery_ramp_pct: self.recovery_ramp_pct.unwrap_or(0),
            recovering: self.recovering.unwrap_or(0),
        }
    }

    /// Its candidates, unscored.
    fn candidates(&self) -> impl Iterator<Item = Candidate> + '_ {
        (self.ids.iter().zip(&self.priorities).zip(&self.next_runs)).map(
            |((&id, &priority), &next_run_at)| Candidate {
                id,
                lane: self.lane,
                priority,
                next_run_at,
                tenant: self.tenant.clone(),
                resource_group: self.resource_group.clone(),
                score: TAKEOVER_SCORE,
            },
        )
    }
}

/// A claim's candidates as [`super::claim::choose`] takes them.
struct Scored {
    /// By id, each lane's queues scored ([`score_queue`]).
    candidates: HashMap<i64, Candidate>,
    /// Each candidate's group.
    rooms: HashMap<String, Room>,
    /// Each tenant with a max in flight or held, its room.
    tenant_rooms: HashMap<String, i64>,
    /// The claim's clock (the candidates' statement's).
    now: i64,
}

/// [`CANDIDATES`]' queues, scored and gathered for the choice.
fn scored(rows: Vec<QueueRow>) -> Scored {
    let now = rows.first().map_or(0, |r| r.now);
    let mut rooms = HashMap::new();
    let mut tenant_rooms = HashMap::new();
    let mut queues: HashMap<(String, String), (i64, i64, Vec<Candidate>)> = HashMap::new();
    let mut candidates = HashMap::with_capacity(rows.iter().map(|r| r.ids.len()).sum());
    for row in &rows {
        rooms
            .entry(row.resource_group.clone())
            .or_insert_with(|| row.room());
        if row.lane == 2 {
            candidates.extend(row.candidates().map(|c| (c.id, c)));
            continue;
        }
        if row.limited {
            tenant_rooms.insert(row.tenant.clone(), row.t_room);
        }
        queues
            .entry((row.resource_group.clone(), row.tenant.clone()))
            .or_insert_with(|| (row.t_running, row.weight, Vec::new()))
            .2
            .extend(row.candidates());
    }
    for ((group, _), (running, weight, mut queue)) in queues {
        score_queue(&mut queue, running, weight, now, rooms[&group].aging_ms);
        candidates.extend(queue.into_iter().map(|c| (c.id, c)));
    }
    Scored {
        candidates,
        rooms,
        tenant_rooms,
        now,
    }
}

/// A claimed trigger as [`CLAIM`] returns it, its columns read by
/// position (in the order of its last `SELECT`): a claim decodes one row
/// per job, and a column found by name costs a hash of the name.
fn claim_of(row: &sqlx::postgres::PgRow) -> Result<Claim, sqlx::Error> {
    use sqlx::Row;
    Ok(Claim {
        trigger_id: row.try_get(0)?,
        attempt_id: row.try_get(1)?,
        fencing_token: FencingToken::new(row.try_get(2)?),
        attempt_no: row.try_get(3)?,
        lease_until: row.try_get(4)?,
        // The claim's clock.
        started_at: row.try_get(5)?,
        first_started_at: row.try_get(6)?,
        job_id: row.try_get(7)?,
        tenant: row.try_get(8)?,
        plan_version: row.try_get(9)?,
        plan_key: row.try_get(10)?,
        scheduled_at: row.try_get(11)?,
        params: row.try_get(12)?,
        resource_group: row.try_get(13)?,
        origin: row
            .try_get::<String, _>(14)?
            .parse()
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
    })
}

/// The fenced transitions of a group commit ([`crate::model::Transition::Finish`]):
/// each end moves its trigger only if the trigger is still `running` at
/// the end's token; a retry or failure of a trigger an open ticket owns
/// waits `manual` instead (`store/held.rs`).
macro_rules! finish_move {
    () => {
        concat!(
            "UPDATE triggers SET state = CASE WHEN ends.state IN (",
            trigger_state!(retry_wait),
            ", ",
            trigger_state!(failed),
            ") AND ",
            ticket_holds!(),
            " THEN ",
            trigger_state!(manual),
            " WHEN ends.state = ",
            trigger_state!(retry_wait),
            " AND triggers.pause_requested = 1 THEN ",
            trigger_state!(paused),
            " ELSE ends.state END, pause_requested = 0, result = ends.result, \
         error_class = ends.error_class, error_message = ends.error_message, \
         next_run_at = CASE WHEN ends.retry_after_ms IS NULL THEN triggers.next_run_at \
             ELSE (SELECT now FROM clock) + ends.retry_after_ms END, \
         lease_owner = NULL, lease_until = NULL, \
         finished_at = CASE WHEN NOT ends.terminal THEN NULL WHEN ends.state = ",
            trigger_state!(failed),
            " AND ",
            ticket_holds!(),
            " THEN NULL ELSE (SELECT now FROM clock) END, \
         updated_at = (SELECT now FROM clock) \
     FROM ends WHERE triggers.id = ANY($1) AND ",
            lease_fence!("triggers", id = "ends.trigger_id", token = "ends.token"),
            " RETURNING triggers.id, triggers.fencing_token, triggers.state, \
         triggers.resource_group, triggers.tenant"
        )
    };
}
#[cfg(test)]
pub(in crate::store) const FINISH_MOVE: &str = finish_move!();

/// The whole group commit, the batch as one array per column: the fenced
/// transitions, then the attempts of the ends that moved (each fenced by
/// its own token too), and the successes counted, one row per (group,
/// tenant) in `success_counts` (migration 0024, read by `paddock status`).
/// Returns the (trigger, token) pairs that moved, with the state each wrote.
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
             AND attempts.trigger_id = ends.trigger_id AND attempts.fencing_token = ends.token), \
     counted AS (INSERT INTO success_counts (resource_group, tenant, at, n) \
         SELECT resource_group, tenant, (SELECT now FROM clock), count(*) FROM moved \
         WHERE state = ",
    trigger_state!(succeeded),
    " GROUP BY resource_group, tenant) \
     SELECT id, fencing_token, state FROM moved"
);

impl Store {
    /// Claims of this store whose batch, chosen without the claims' lock,
    /// its check refused — each claimed again under the lock ([`claim_on`]).
    /// Always 0 on SQLite, whose claims hold the write lock throughout.
    pub fn claims_refused(&self) -> u64 {
        self.claim_path.refused()
    }

    /// [`RunnerStore::claim`] on PostgreSQL ([`claim_on`]) on a
    /// connection of the hot pool. A claim that fails or is dropped may
    /// leave its session inside a transaction that no guard rolls back (a
    /// `BEGIN` that took before its lock failed, see
    /// [`BEGIN_AND_LOCK_GROUPS`]; the `BEGIN` of [`claim_unlocked`]), so
    /// its connection is closed rather than given back ([`Unclean`]).
    pub(super) async fn claim_postgres(&self, ask: Ask<'_>) -> StoreResult<Vec<Claim>> {
        let mut held = Unclean(Some(self.hot().acquire().await?));
        let conn = held.0.as_mut().expect("just acquired");
        let claimed = claim_on(conn, ask, &self.claim_path).await;
        if claimed.is_ok() {
            // Clean: back to the pool.
            held.0.take();
        }
        claimed
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
        let moved: Vec<(i64, i64, String)> = sqlx::query_as(FINISH)
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
        moved
            .into_iter()
            .map(|(id, token, state)| {
                let state = state
                    .parse()
                    .map_err(|e| StoreError::Conflict(format!("finish wrote {e}")))?;
                Ok(((id, token), state))
            })
            .collect()
    }
}

/// How this store's PostgreSQL claims have fared: how many of the next
/// ones take the claims' lock before they read ([`claim_on`]), and how many
/// checks refused a batch chosen without it (`/metrics`:
/// `paddock_claims_refused_total`).
#[derive(Debug, Default)]
pub(in crate::store) struct ClaimPath {
    locked_next: AtomicU32,
    refused: AtomicU64,
}

impl ClaimPath {
    pub(in crate::store) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// A hot connection closed when dropped, unless taken back out first.
struct Unclean(Option<sqlx::pool::PoolConnection<sqlx::Postgres>>);

impl Drop for Unclean {
    fn drop(&mut self) {
        if let Some(conn) = self.0.as_mut() {
            conn.close_on_drop();
        }
    }
}

/// The claim. Claims serialize on the claims' lock (see
/// [`BEGIN_AND_LOCK_GROUPS`]) so that none passes a group's or a tenant's
/// limit; what differs is how long each holds it.
///
/// - [`claim_unlocked`], first: the candidates are read and the batch
///   claimed without the lock, which is then taken only to check the
///   limits and commit ([`check_and_commit`]) — so claims of several
///   processes write side by side and queue only for that last round trip.
/// - [`claim_locked`], when that check refuses the batch, and for the next
///   [`LOCKED_AFTER_REFUSAL`] claims of the store ([`ClaimPath`]): the
///   lock from the first read, so the batch fits the rooms it read.
///
/// Both choose with the same code ([`choose`]); with one claimer they
/// choose the same batch.
async fn claim_on(
    conn: &mut sqlx::PgConnection,
    ask: Ask<'_>,
    path: &ClaimPath,
) -> StoreResult<Vec<Claim>> {
    let locked = path
        .locked_next
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok();
    if !locked {
        match claim_unlocked(conn, ask).await? {
            Some(claims) => return Ok(claims),
            None => {
                path.refused.fetch_add(1, Ordering::Relaxed);
                path.locked_next
                    .store(LOCKED_AFTER_REFUSAL, Ordering::Relaxed);
            }
        }
    }
    claim_locked(conn, ask).await
}

/// The claim under the claims' lock, in one transaction of two round
/// trips: [`BEGIN_AND_LOCK_GROUPS`] and the [`CANDIDATES`] (locked), the
/// choice ([`choose`]), then [`CLAIM`] of the chosen batch and `COMMIT`.
async fn claim_locked(conn: &mut sqlx::PgConnection, ask: Ask<'_>) -> StoreResult<Vec<Claim>> {
    let (chosen, scored) = candidates_and_choice(conn, BEGIN_AND_LOCK_GROUPS, ask).await?;
    let rows = claim_chosen(conn, &chosen, scored.now, ask, "COMMIT").await?;
    claims_of(&rows, &chosen)
}

/// The claim without the claims' lock until its last statements, in one
/// transaction of two round trips: `BEGIN` and the [`CANDIDATES`]
/// (locked, so no other claim takes them), the choice ([`choose`]), then
/// [`CLAIM`] of the chosen batch and [`check_and_commit`]. `None` if the
/// check refused the batch (rolled back). The transaction is `BEGIN` and
/// `COMMIT` sent by hand, so a claim that fails or is dropped leaves it
/// open: [`Store::claim_postgres`] closes the connection.
async fn claim_unlocked(
    conn: &mut sqlx::PgConnection,
    ask: Ask<'_>,
) -> StoreResult<Option<Vec<Claim>>> {
    let (chosen, scored) = candidates_and_choice(conn, "BEGIN", ask).await?;
    let check = check_and_commit(&chosen, &scored);
    match claim_chosen(conn, &chosen, scored.now, ask, &check).await {
        Ok(rows) => Ok(Some(claims_of(&rows, &chosen)?)),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(REFUSED) => {
            conn.execute("ROLLBACK").await?;
            tracing::debug!(
                why = e.message(),
                "claim refused; claiming again under the lock"
            );
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The claim's first round trip — `begin` (`BEGIN`, with or without the
/// claims' lock) and [`CANDIDATES`] — scored, and the batch [`choose`]
/// picks from them.
async fn candidates_and_choice(
    conn: &mut sqlx::PgConnection,
    begin: &str,
    ask: Ask<'_>,
) -> StoreResult<(Vec<i64>, Scored)> {
    let text = format!(
        "{begin}; EXECUTE paddock_candidates({}, {})",
        literal::maybe_int(ask.now),
        ask.limit
    );
    let rows = literal::rows(conn, text)
        .await?
        .iter()
        .map(QueueRow::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let mut scored = scored(rows);
    let tenant_rooms = std::mem::take(&mut scored.tenant_rooms);
    let chosen = choose(
        &scored.candidates,
        &scored.rooms,
        tenant_rooms,
        ask.limit,
        ask.share,
    );
    Ok((chosen, scored))
}

/// The claim's last round trip: [`CLAIM`] of the chosen batch at the
/// candidates' `now` (nothing if none was chosen), then `then` (`COMMIT`,
/// or the check and `COMMIT`) — one simple query. The claimed rows.
async fn claim_chosen(
    conn: &mut sqlx::PgConnection,
    chosen: &[i64],
    now: i64,
    ask: Ask<'_>,
    then: &str,
) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
    let mut text = String::new();
    if !chosen.is_empty() {
        text.push_str("EXECUTE paddock_claim(");
        text.push_str(&now.to_string());
        text.push_str(", ");
        literal::text(&mut text, ask.owner);
        text.push_str(", ");
        text.push_str(&ask.lease_ms.to_string());
        text.push_str(", ");
        literal::int_array(&mut text, chosen.iter().copied());
        text.push_str("); ");
    }
    text.push_str(then);
    literal::rows(conn, text).await
}

/// The claims of the chosen batch, one per row [`CLAIM`] returned. A row
/// short would mean a chosen trigger not claimed, which its lock since
/// [`CANDIDATES`] rules out; the claim then fails, and whatever it
/// committed lapses and is taken over.
fn claims_of(rows: &[sqlx::postgres::PgRow], chosen: &[i64]) -> StoreResult<Vec<Claim>> {
    if rows.len() != chosen.len() {
        return Err(StoreError::Conflict(format!(
            "claim of {} triggers claimed {}",
            chosen.len(),
            rows.len()
        )));
    }
    Ok(rows.iter().map(claim_of).collect::<Result<Vec<_>, _>>()?)
}

/// The claim's statements, prepared by every hot session when it opens
/// (see `open_hot_pool`), one simple query: [`CANDIDATES`] as
/// `paddock_candidates`, [`CLAIM`] as `paddock_claim` and the check
/// ([`PREPARE_CLAIM_CHECK`]). Prepared by name, a claim can send `BEGIN`
/// with its candidates, and its claim with the check and `COMMIT`, each
/// pair as one simple query: two round trips where there were four, each
/// a wait for a core on a busy machine (~0.9 ms apiece measured inside
/// the throughput bench, where `BEGIN` alone took as long).
pub(in crate::store) fn prepare_claim() -> String {
    format!(
        "PREPARE paddock_candidates (BIGINT, BIGINT) AS {CANDIDATES}; \
         PREPARE paddock_claim (BIGINT, TEXT, BIGINT, BIGINT[]) AS {CLAIM}; \
         {PREPARE_CLAIM_CHECK}"
    )
}

/// The hot statements' texts, for `benches/claim_plans.rs` (which shows
/// their plans with `EXPLAIN` at several backlog sizes): the claim's
/// candidates (`$1` now or NULL, `$2` limit), the claim of a chosen batch
/// (`$1` now, `$2` owner, `$3` lease ms, `$4` ids) and the group commit
/// (`$1`..`$14`, one array per column, see [`Store::finish_postgres`]).
pub fn hot_statements() -> [(&'static str, &'static str); 3] {
    [
        ("claim candidates", CANDIDATES),
        ("claim", CLAIM),
        ("group commit", FINISH),
    ]
}
