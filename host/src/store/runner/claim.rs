//! Claims: the one write every job starts with, so the one the throughput
//! of the whole host follows. Each database gets the statements that suit
//! it; both keep the same contract (see [`RunnerStore::claim`]): the batch
//! is chosen in lane order inside one write transaction, every claimed
//! trigger gets `fencing_token + 1`, a lease on the database clock and a new
//! attempt row, and an attempt a previous holder left open (a lapsed lease,
//! or a crash between two statements of an older host) is closed as
//! `expired` — on both databases, for every trigger claimed again.
//!
//! Quotas bite here: a claim takes from each resource group at most its
//! room — its effective concurrency (`resource_groups.effective_concurrency`,
//! see [`crate::model::group::effective_concurrency`]) less its running
//! triggers, counted inside the claim's transaction after every earlier
//! claim committed — so no group ever runs more than its limit, whatever
//! the number of processes. Takeovers of lapsed leases need no room (the
//! trigger is already counted).
//!
//! - PostgreSQL: a transaction: the candidates of every lane locked with
//!   `FOR UPDATE SKIP LOCKED` and scored here, the claim of the batch
//!   [`choose`] picks, then — under the groups' rows, locked (claims
//!   serialize on them, so each counts the others' claims) — a check that
//!   the batch left every group and tenant within its limits, and the
//!   commit; a batch the check refuses is rolled back and claimed again
//!   with the lock taken before the first read (see [`super::postgres`]).
//! - SQLite: one transaction on the writer thread (see
//!   [`super::sqlite_writer`]). The write lock is held from the first read
//!   (`BEGIN IMMEDIATE`), so nothing can move between choosing the batch
//!   and claiming it: the room of each group is read, each tenant's queue
//!   in a group with room is read as deep as the fair-share order could
//!   reach into it (`claim/queues.rs`: its ask, and a second read of a
//!   short queue the choice took whole), the shares are chosen in Rust
//!   ([`choose_batch`], then [`within_room`]), and the chosen batch is
//!   claimed by two statements whatever its size, its `UPDATE` and its
//!   attempts' `INSERT` — in-thread calls on cached statements, so a row
//!   costs SQLite's work and nothing more.

use super::super::*;
use crate::model::shares::recovery_cap;
use crate::model::{Claim, FencingToken};
use crate::trigger_state;
use std::collections::HashMap;

/// A claimable trigger as a claim's candidate scan reports it: what the
/// choice of a batch needs ([`choose`], the same on both databases).
pub(super) struct Candidate {
    pub id: i64,
    /// 0 the recovery lane (due retries, catch-up fires, backfills), 1 due
    /// fresh work, 2 lapsed leases (1 and 2 are the fresh lane).
    pub lane: i64,
    pub priority: i64,
    pub next_run_at: i64,
    pub tenant: String,
    pub resource_group: String,
    /// Its place in its lane's order ([`fair_score`]; takeovers first).
    pub score: f64,
}

/// What SQLite's claim reads of a chosen trigger ([`CLAIMABLES`]) to make
/// its [`Claim`] (PostgreSQL's claim returns it from the `UPDATE`).
struct Claimable {
    attempts: i64,
    fencing_token: i64,
    job_id: String,
    plan_version: i64,
    plan_key: String,
    scheduled_at: i64,
    params: String,
    origin: String,
    /// When its first attempt started, if it had one.
    first_started_at: Option<i64>,
}

/// A chosen trigger's row as [`CLAIMABLES`] reads it, with its id.
fn claimable_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Claimable)> {
    Ok((
        row.get(0)?,
        Claimable {
            attempts: row.get(1)?,
            fencing_token: row.get(2)?,
            job_id: row.get(3)?,
            plan_version: row.get(4)?,
            plan_key: row.get(5)?,
            scheduled_at: row.get(6)?,
            params: row.get(7)?,
            origin: row.get(8)?,
            first_started_at: row.get(9)?,
        },
    ))
}

/// A candidate row of SQLite's scan: id, lane, priority and due time (the
/// walked index's columns), then group and tenant.
fn candidate_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Candidate> {
    Ok(Candidate {
        id: row.get(0)?,
        lane: row.get(1)?,
        priority: row.get(2)?,
        next_run_at: row.get(3)?,
        resource_group: row.get(4)?,
        tenant: row.get(5)?,
        score: TAKEOVER_SCORE,
    })
}

/// The lanes' shares of a batch: up to `share` retries first, then fresh
/// work for the rest, then — if fresh work left room and the retry lane was
/// not exhausted — more retries. `retries` and `fresh` are each in claim
/// order and hold at least as many rows as the batch could take from them.
pub(super) fn choose_batch(retries: &[i64], fresh: &[i64], limit: usize, share: usize) -> Vec<i64> {
    let first = share.min(retries.len());
    let fresh_taken = (limit - first).min(fresh.len());
    let mut chosen = Vec::with_capacity(limit);
    chosen.extend_from_slice(&retries[..first]);
    chosen.extend_from_slice(&fresh[..fresh_taken]);
    if first == share {
        let spare = limit - first - fresh_taken;
        let more = spare.min(retries.len() - first);
        chosen.extend_from_slice(&retries[first..first + more]);
    }
    chosen
}

/// SQLite's claim of the chosen triggers (in the writer's `BEGIN
/// IMMEDIATE` transaction, after the candidate scan): `?1` owner, `?2` now,
/// `?3` lease ms, `?4` the triggers' ids as a JSON array
/// ([`crate::model::Transition::Claim`] and
/// [`crate::model::Transition::TakeOver`]). One statement for the batch:
/// SQLite opens a cursor on the table and on each of its indexes per
/// statement, so a statement per row paid that once per job. (Returning
/// the claimed rows from it — `RETURNING`, in place of [`CLAIMABLES`] —
/// made a one-tenant claim ~8% slower: tried and dropped.)
pub(in crate::store) const CLAIM_ROW: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(running),
    ", lease_owner = ?1, lease_until = ?2 + ?3, \
         fencing_token = fencing_token + 1, attempts = attempts + 1, updated_at = ?2, \
         recovery = CASE WHEN state = ",
    trigger_state!(retry_wait),
    " THEN 1 ELSE recovery END, overlap_token = CASE WHEN state = ",
    trigger_state!(running),
    " THEN overlap_token END \
     WHERE id IN (SELECT value FROM json_each(?4)) AND (state = ",
    trigger_state!(pending),
    " OR state = ",
    trigger_state!(retry_wait),
    " OR state = ",
    trigger_state!(running),
    ")"
);

/// What SQLite's claim reads of each chosen trigger ([`Claimable`]),
/// `?1` the batch's ids as a JSON array: after the choice, so a claim
/// reads the rows it claims and no other — a candidate scan over several
/// tenants' queues walks more candidates than it claims, and only their
/// index columns.
const CLAIMABLES: &str = "SELECT t.id, t.attempts, t.fencing_token, t.job_id, t.plan_version, \
         t.plan_key, t.scheduled_at, t.params, t.origin, \
         CASE WHEN t.attempts > 0 THEN (SELECT min(f.started_at) FROM attempts f \
             WHERE f.trigger_id = t.id) END \
     FROM json_each(?1) AS j JOIN triggers t ON t.id = j.value";

/// The batch's attempts, one statement: `?4` the triggers' ids as a JSON
/// array; attempt number and token are the rows' own, as the claim just
/// incremented them.
const OPEN_ATTEMPTS: &str = "INSERT INTO attempts (trigger_id, attempt_no, runner_id, \
         fencing_token, started_at, lease_until) \
     SELECT t.id, t.attempts, ?1, t.fencing_token, ?2, ?3 \
     FROM json_each(?4) AS j JOIN triggers t ON t.id = j.value \
     RETURNING trigger_id, id";

impl Store {
    /// [`RunnerStore::claim`] on either database.
    pub(in crate::store) async fn claim_batch(
        &self,
        request: &ClaimRequest<'_>,
    ) -> StoreResult<Vec<Claim>> {
        let limit = request.limit.max(0);
        let share = request.retry_slots.clamp(0, limit);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let ask = Ask {
            owner: request.owner,
            lease_ms: request.lease_ms,
            limit,
            share,
            now: request.now,
        };
        match self.dialect {
            Dialect::Sqlite => self.claim_sqlite(ask).await,
            Dialect::Postgres => self.claim_postgres(ask).await,
        }
    }

    /// SQLite's claim: read the candidates, choose, update, insert — one
    /// transaction on the writer thread (see [`super::sqlite_writer`]).
    async fn claim_sqlite(&self, ask: Ask<'_>) -> StoreResult<Vec<Claim>> {
        let owner = ask.owner.to_string();
        let Ask {
            lease_ms,
            limit,
            share,
            now,
            ..
        } = ask;
        self.sqlite_write(move |tx| {
            let ask = Ask {
                owner: &owner,
                lease_ms,
                limit,
                share,
                now,
            };
            claim_in(tx, ask)
        })
        .await
    }
}

/// What a claim asks for ([`RunnerStore::claim`]): its owner, lease,
/// limit (above 0), the recovery lane's share of it (`0..=limit`), and an
/// injected now (tests; `None` reads the database clock).
#[derive(Clone, Copy)]
pub(super) struct Ask<'a> {
    pub owner: &'a str,
    pub lease_ms: i64,
    pub limit: i64,
    pub share: i64,
    pub now: Option<i64>,
}

/// The claims' lock on PostgreSQL: every resource group's row, in name
/// order (no column: it is sent in the claim's simple queries, whose
/// rows are read, see `store/runner/postgres/literal.rs`). A claim takes it before it counts (see
/// `store/runner/postgres.rs`): from its first read, or only to check and
/// commit a batch it chose without it.
macro_rules! lock_groups {
    () => {
        "SELECT FROM resource_groups ORDER BY name FOR NO KEY UPDATE"
    };
}

/// Running triggers, spelled as `triggers_running`'s predicate is (a
/// running trigger always has a lease; saying so lets the partial index
/// serve every count of running rows and the lapsed-lease walk).
macro_rules! running_rows {
    ($t:literal) => {
        concat!(
            $t,
            "state = ",
            $crate::trigger_state!(running),
            " AND ",
            $t,
            "lease_until IS NOT NULL"
        )
    };
}

/// Each group's settings as a claim needs them: whether a high-water mark
/// holds it, its aging period, effective concurrency, minimum share,
/// recovery share and ramp. Its running counts come from the claim's one
/// walk of `triggers_running` ([`running_counts_in`], summed by
/// [`room_in`]), as PostgreSQL's `claim_room` sums `running_counts`.
const ROOM: &str = "SELECT name, held IS NOT NULL, aging_ms, effective_concurrency, min_share, \
     recovery_share_pct, recovery_ramp_pct FROM resource_groups";

/// A group as a claim sees it ([`ROOM`]).
#[derive(Clone, Copy)]
pub(super) struct Room {
    pub room: i64,
    pub aging_ms: i64,
    pub effective: i64,
    pub running: i64,
    pub min_share: i64,
    pub recovery_share_pct: i64,
    pub recovery_ramp_pct: i64,
    pub recovering: i64,
}

/// Where a takeover goes in its lane: first (its attempt already started
/// and is stuck; it needs no room).
pub(super) const TAKEOVER_SCORE: f64 = -1e9;

/// The fair-share score of a tenant's `k`-th (1-based, in its queue's
/// order) candidate in a lane: its running attempts plus `k`, over its
/// weight — so slots go to the tenant with the fewest per unit of weight,
/// k by k (stride scheduling) — less an aging bonus of up to one slot as
/// its oldest candidate waits (`head_wait_ms` of `aging_ms`): a waiting
/// tenant gains on equals, and a flood's backlog, however old, never buys
/// more than one slot. Lower goes first. Both databases' claims score
/// with it ([`score_queue`]).
pub(super) fn fair_score(
    running: i64,
    k: i64,
    weight: i64,
    head_wait_ms: i64,
    aging_ms: i64,
) -> f64 {
    (running + k) as f64 / weight.max(1) as f64
        - (head_wait_ms.max(0) as f64 / aging_ms.max(1) as f64).min(1.0)
}

/// The predicates of the two claim lanes' indexes, spelled as the indexes
/// are (`triggers_recovery`, `triggers_pending`) so their partial indexes
/// serve them: the recovery lane — retries, and pending catch-up fires and
/// backfills — and fresh work.
macro_rules! recovery_lane {
    ($t:literal) => {
        concat!(
            "(",
            $t,
            "state = ",
            trigger_state!(retry_wait),
            " OR (",
            $t,
            "state = ",
            trigger_state!(pending),
            " AND ",
            $t,
            "recovery = 1))"
        )
    };
}
macro_rules! fresh_lane {
    ($t:literal) => {
        concat!(
            $t,
            "state = ",
            trigger_state!(pending),
            " AND ",
            $t,
            "recovery = 0"
        )
    };
}
pub(in crate::store) use {fresh_lane, lock_groups, recovery_lane, running_rows};

mod queues;
mod tenants;
use queues::Scan;
use tenants::{Running, RunningCounts, running_counts_in};

/// Score one tenant's queue in a group ([`fair_score`]): in each lane, its
/// k-th candidate in (priority, next_run_at, id) order, aged by the lane's
/// oldest.
pub(super) fn score_queue(
    queue: &mut [Candidate],
    running: i64,
    weight: i64,
    now: i64,
    aging_ms: i64,
) {
    queue.sort_unstable_by_key(|c| (c.lane, c.priority, c.next_run_at, c.id));
    for lane in [0, 1] {
        let head = queue
            .iter()
            .filter(|c| c.lane == lane)
            .map(|c| c.next_run_at)
            .min()
            .unwrap_or(now);
        for (k, c) in queue.iter_mut().filter(|c| c.lane == lane).enumerate() {
            c.score = fair_score(running, k as i64 + 1, weight, now - head, aging_ms);
        }
    }
}

/// Each group's [`Room`]: its settings ([`ROOM`]) and its running
/// triggers, summed over its tenants' `counts` (lapsed leases still count:
/// their holder may only be paused). Its room is its effective concurrency
/// less those, none while a high-water mark holds it.
fn room_in(
    tx: &rusqlite::Transaction<'_>,
    counts: &RunningCounts,
) -> StoreResult<HashMap<String, Room>> {
    let mut running_in: HashMap<&str, Running> = HashMap::new();
    for ((group, _), n) in counts {
        let sum = running_in.entry(group.as_str()).or_default();
        sum.n += n.n;
        sum.recovering += n.recovering;
    }
    let mut room = tx.prepare_cached(ROOM)?;
    let rows = room.query_map([], |row| {
        let (name, held, effective): (String, bool, i64) = (row.get(0)?, row.get(1)?, row.get(3)?);
        let running = running_in.get(name.as_str()).copied().unwrap_or_default();
        Ok((
            name,
            Room {
                room: if held { 0 } else { effective - running.n },
                aging_ms: row.get(2)?,
                effective,
                running: running.n,
                min_share: row.get(4)?,
                recovery_share_pct: row.get(5)?,
                recovery_ramp_pct: row.get(6)?,
                recovering: running.recovering,
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Minimum shares: in each lane's order, a group's first candidates — as
/// many as it runs short of its minimum share (`short_of`) — move ahead of
/// every other candidate but takeovers, keeping their order; the rest
/// keep theirs behind them. `key` says whether a candidate is in the
/// recovery lane and its group (`None` for a takeover, which stays first).
pub(super) fn guaranteed_first<'a, T: Copy>(
    order: &mut [T],
    key: impl Fn(&T) -> (bool, Option<&'a str>),
    short_of: impl Fn(&str) -> i64,
) {
    let mut rank: HashMap<(bool, &'a str), i64> = HashMap::new();
    let mut classed: Vec<((bool, u8), T)> = order
        .iter()
        .map(|c| match key(c) {
            (lane, None) => ((!lane, 0), *c),
            (lane, Some(group)) => {
                let k = rank.entry((lane, group)).or_insert(0);
                *k += 1;
                ((!lane, if *k <= short_of(group) { 1 } else { 2 }), *c)
            }
        })
        .collect();
    // Stable: each class keeps the fair-share order it came in.
    classed.sort_by_key(|(class, _)| *class);
    for (slot, (_, c)) in order.iter_mut().zip(classed) {
        *slot = c;
    }
}

/// One new claim as [`within_room`] sees it.
pub(super) struct Pick<'a> {
    pub group: &'a str,
    pub tenant: &'a str,
    /// In the recovery lane (a retry, a catch-up fire or a backfill).
    pub recovery: bool,
}

/// What a claim may still start: per group (its effective concurrency
/// less its running), per tenant with a max in flight or held, and per
/// group's recovery lane (its ceiling less its running recovery).
pub(super) struct Rooms {
    pub group: HashMap<String, i64>,
    pub tenant: HashMap<String, i64>,
    pub recovery: HashMap<String, i64>,
}

/// The cut of a chosen batch to the rooms: in the order of choice, a new
/// claim of the recovery lane is kept only within its group's recovery
/// room; then a new claim is kept if it is within its group's room and
/// within its tenant's (those ranks count every new claim chosen before
/// it that the recovery cut left, kept or not). A tenant without a room
/// entry has no max in flight; a group without a recovery entry has no
/// recovery ceiling. Takeovers (`of` says `None`) are always kept, since
/// the trigger they take over is already counted as running.
pub(super) fn within_room<'a>(
    chosen: Vec<i64>,
    of: impl Fn(i64) -> Option<Pick<'a>>,
    rooms: &Rooms,
) -> Vec<i64> {
    let mut group_rank: HashMap<&str, i64> = HashMap::new();
    let mut tenant_rank: HashMap<&str, i64> = HashMap::new();
    let mut recovery_rank: HashMap<&str, i64> = HashMap::new();
    let rank = |ranks: &mut HashMap<&'a str, i64>, key: &'a str| {
        let r = ranks.entry(key).or_insert(0);
        *r += 1;
        *r
    };
    chosen
        .into_iter()
        .filter(|id| match of(*id) {
            None => true,
            Some(pick) => {
                // The recovery lane's ceiling first: a pick it cuts takes
                // no group or tenant room from those after it.
                if pick.recovery {
                    let r = rank(&mut recovery_rank, pick.group);
                    if rooms.recovery.get(pick.group).is_some_and(|room| r > *room) {
                        return false;
                    }
                }
                let g = rank(&mut group_rank, pick.group);
                let t = rank(&mut tenant_rank, pick.tenant);
                g <= rooms.group.get(pick.group).copied().unwrap_or(0)
                    && rooms.tenant.get(pick.tenant).is_none_or(|room| t <= *room)
            }
        })
        .collect()
}

/// Each group's recovery-lane ceiling in this claim ([`recovery_cap`]):
/// its share applies while fresh work of the group waits (a lane-1
/// candidate).
pub(super) fn recovery_ceilings(
    candidates: &HashMap<i64, Candidate>,
    rooms: &HashMap<String, Room>,
) -> HashMap<String, i64> {
    let fresh_waiting: std::collections::HashSet<&str> = candidates
        .values()
        .filter(|c| c.lane == 1)
        .map(|c| c.resource_group.as_str())
        .collect();
    rooms
        .iter()
        .map(|(g, r)| {
            let cap = recovery_cap(
                r.effective,
                r.recovery_share_pct,
                r.recovery_ramp_pct,
                fresh_waiting.contains(g.as_str()),
            );
            (g.clone(), cap)
        })
        .collect()
}

/// The batch, in claim order: each lane in fair-share order with groups
/// short of their minimum share first ([`guaranteed_first`]), the lanes'
/// shares ([`choose_batch`]), then the cut to the rooms ([`within_room`]).
pub(super) fn choose(
    candidates: &HashMap<i64, Candidate>,
    rooms: &HashMap<String, Room>,
    tenant_rooms: HashMap<String, i64>,
    limit: i64,
    share: i64,
) -> Vec<i64> {
    let taken = take(candidates, rooms, limit, share);
    cut(taken, candidates, rooms, tenant_rooms)
}

/// What [`choose`] takes before its cut to the rooms: each lane in
/// fair-share order, groups short of their minimum share first, then the
/// lanes' shares.
fn take(
    candidates: &HashMap<i64, Candidate>,
    rooms: &HashMap<String, Room>,
    limit: i64,
    share: i64,
) -> Vec<i64> {
    // Claim order within each lane: fair share (takeovers first), then
    // (priority, next_run_at, id).
    let mut order: Vec<&Candidate> = candidates.values().collect();
    order.sort_unstable_by(|a, b| {
        (a.lane != 0)
            .cmp(&(b.lane != 0))
            .then(a.score.total_cmp(&b.score))
            .then((a.priority, a.next_run_at, a.id).cmp(&(b.priority, b.next_run_at, b.id)))
    });
    // Minimum shares reorder only while some group runs short of one.
    if rooms.values().any(|r| r.min_share > r.running) {
        guaranteed_first(
            &mut order,
            |c| {
                (
                    c.lane == 0,
                    (c.lane != 2).then_some(c.resource_group.as_str()),
                )
            },
            |group| rooms.get(group).map_or(0, |r| r.min_share - r.running),
        );
    }
    let (retries, fresh): (Vec<i64>, Vec<i64>) = {
        let (r, f): (Vec<&&Candidate>, Vec<&&Candidate>) = order.iter().partition(|c| c.lane == 0);
        (
            r.iter().map(|c| c.id).collect(),
            f.iter().map(|c| c.id).collect(),
        )
    };
    choose_batch(&retries, &fresh, limit as usize, share as usize)
}

/// [`choose`]'s cut of what it took to the rooms ([`within_room`]).
fn cut(
    taken: Vec<i64>,
    candidates: &HashMap<i64, Candidate>,
    rooms: &HashMap<String, Room>,
    tenant_rooms: HashMap<String, i64>,
) -> Vec<i64> {
    let room = Rooms {
        group: rooms.iter().map(|(g, r)| (g.clone(), r.room)).collect(),
        tenant: tenant_rooms,
        recovery: recovery_ceilings(candidates, rooms)
            .into_iter()
            .map(|(g, cap)| {
                let recovering = rooms[&g].recovering;
                (g, cap - recovering)
            })
            .collect(),
    };
    within_room(
        taken,
        |id| {
            let c = &candidates[&id];
            (c.lane != 2).then_some(Pick {
                group: c.resource_group.as_str(),
                tenant: c.tenant.as_str(),
                recovery: c.lane == 0,
            })
        },
        &room,
    )
}

/// SQLite's claim, inside the writer's `BEGIN IMMEDIATE` transaction: the
/// write lock is held from the first read, so nothing moves between
/// choosing the batch and claiming it.
fn claim_in(tx: &rusqlite::Transaction<'_>, ask: Ask<'_>) -> StoreResult<Vec<Claim>> {
    let Ask {
        owner,
        lease_ms,
        limit,
        share,
        now,
    } = ask;
    let now: i64 = match now {
        Some(now) => now,
        None => super::super::sqlite_writer::db_now(tx)?,
    };
    let counts = running_counts_in(tx)?;
    let rooms = room_in(tx, &counts)?;
    let mut tenant_rooms = HashMap::new();
    let mut scan = Scan::read(tx, now, limit, &rooms, &counts, &mut tenant_rooms)?;
    let taken = loop {
        let taken = take(&scan.candidates, &rooms, limit, share);
        if !scan.read_deeper(tx, &taken)? {
            break taken;
        }
    };
    let candidates = scan.candidates;
    let chosen = cut(taken, &candidates, &rooms, tenant_rooms);
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    claim_chosen(tx, owner, now, lease_ms, chosen, candidates)
}

/// Claim the `chosen` triggers (ids, in claim order) and open their
/// attempts: three statements whatever the batch's size, and one per
/// trigger among them claimed again ([`close_taken_over`]).
fn claim_chosen(
    tx: &rusqlite::Transaction<'_>,
    owner: &str,
    now: i64,
    lease_ms: i64,
    chosen: Vec<i64>,
    mut candidates: HashMap<i64, Candidate>,
) -> StoreResult<Vec<Claim>> {
    let ids = serde_json::to_string(&chosen).expect("ids serialize");
    // Read before the claim: the attempt number and token the claim
    // increments, and the first start of a trigger claimed again.
    let mut claimables: HashMap<i64, Claimable> = tx
        .prepare_cached(CLAIMABLES)?
        .query_map([&ids], claimable_from_row)?
        .collect::<rusqlite::Result<_>>()?;
    let updated = tx
        .prepare_cached(CLAIM_ROW)?
        .execute(rusqlite::params![owner, now, lease_ms, ids])?;
    if updated != chosen.len() {
        return Err(StoreError::Conflict(format!(
            "claim of {} triggers updated {updated} rows",
            chosen.len()
        )));
    }
    let again: Vec<i64> = chosen
        .iter()
        .copied()
        .filter(|id| claimables[id].attempts > 0)
        .collect();
    close_taken_over(tx, now, &again)?;
    let lease_until = now + lease_ms;
    let opened: HashMap<i64, i64> = tx
        .prepare_cached(OPEN_ATTEMPTS)?
        .query_map(rusqlite::params![owner, now, lease_until, ids], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut claims = Vec::with_capacity(chosen.len());
    for id in chosen {
        let c = candidates.remove(&id).expect("chosen from the candidates");
        let r = claimables.remove(&id).expect("read before the claim");
        let (attempt_no, fencing_token) = (r.attempts + 1, r.fencing_token + 1);
        let attempt_id = *opened.get(&id).ok_or_else(|| {
            StoreError::Conflict(format!("claim of trigger {id} opened no attempt"))
        })?;
        claims.push(Claim {
            trigger_id: id,
            attempt_id,
            attempt_no,
            fencing_token: FencingToken::new(fencing_token),
            lease_until,
            job_id: r.job_id,
            tenant: c.tenant,
            plan_version: r.plan_version,
            plan_key: r.plan_key,
            scheduled_at: r.scheduled_at,
            params: r.params,
            resource_group: c.resource_group,
            origin: r
                .origin
                .parse()
                .map_err(|e| StoreError::Conflict(format!("trigger {id}: {e}")))?,
            started_at: now,
            first_started_at: r.first_started_at.unwrap_or(now),
        });
    }
    // For the group commit's success counts (`claimed.rs`).
    super::claimed::with(|record| {
        for c in &claims {
            record.record(
                c.trigger_id,
                c.fencing_token.get(),
                &c.resource_group,
                &c.tenant,
            );
        }
    });
    Ok(claims)
}

/// Close any attempt a previous holder left open (a lapsed lease) of the
/// triggers a claim claims again (`again`), as taken over now. Every
/// release path ends its attempt in the transaction that moves the
/// trigger, so only a lapsed lease should leave one — but the claim does
/// not rely on it, exactly as on PostgreSQL: any trigger claimed again
/// gets its open attempts closed.
fn close_taken_over(tx: &rusqlite::Transaction<'_>, now: i64, again: &[i64]) -> StoreResult<()> {
    if again.is_empty() {
        return Ok(());
    }
    let mut close_open = tx.prepare_cached(concat!(
        "UPDATE attempts SET outcome = ",
        crate::attempt_outcome!(expired),
        ", ended_at = ?1, \
             error_class = 'lease_expired', error_message = 'lease expired; trigger taken over' \
         WHERE ended_at IS NULL AND trigger_id = ?2"
    ))?;
    for id in again {
        close_open.execute(rusqlite::params![now, id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Pick, Rooms, choose_batch, fair_score, guaranteed_first, within_room};

    #[test]
    fn retries_get_their_share_then_fresh_work_then_the_spare() {
        let retries = [1, 2, 3, 4, 5, 6];
        let fresh = [10, 11, 12, 13, 14, 15];
        // Both lanes full: the share, then fresh work.
        assert_eq!(choose_batch(&retries, &fresh, 4, 2), vec![1, 2, 10, 11]);
        // Fresh work runs short: its room goes back to retries.
        assert_eq!(choose_batch(&retries, &fresh[..1], 4, 2), vec![1, 2, 10, 3]);
        // Retries run short of their share: fresh work takes the room.
        assert_eq!(
            choose_batch(&retries[..1], &fresh, 4, 2),
            vec![1, 10, 11, 12]
        );
        // No share: retries only fill what fresh work leaves.
        assert_eq!(
            choose_batch(&retries, &fresh[..2], 4, 0),
            vec![10, 11, 1, 2]
        );
        assert_eq!(choose_batch(&[], &[], 4, 2), Vec::<i64>::new());
    }

    fn pick(group: &'static str, tenant: &'static str, recovery: bool) -> Option<Pick<'static>> {
        Some(Pick {
            group,
            tenant,
            recovery,
        })
    }

    fn rooms(group: &[(&str, i64)], tenant: &[(&str, i64)], recovery: &[(&str, i64)]) -> Rooms {
        let map = |pairs: &[(&str, i64)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        Rooms {
            group: map(group),
            tenant: map(tenant),
            recovery: map(recovery),
        }
    }

    #[test]
    fn each_group_and_tenant_keeps_its_room_and_takeovers_need_none() {
        let room = rooms(&[("a", 2), ("b", 0)], &[], &[]);
        // 1..=4 new work of group a, 5 of b, 6 a takeover of group b.
        let of = |id: i64| match id {
            1..=4 => pick("a", "t", false),
            5 => pick("b", "t", false),
            _ => None,
        };
        assert_eq!(
            within_room(vec![3, 5, 1, 6, 2, 4], of, &room),
            vec![3, 1, 6]
        );
        // A group the claim has no room row for gets nothing.
        assert_eq!(
            within_room(vec![7], |_| pick("gone", "t", false), &room),
            Vec::<i64>::new()
        );
        // Tenant u may run one more: its second pick is cut, and still
        // counts in its group's rank.
        let room = rooms(&[("a", 3)], &[("u", 1)], &[]);
        let of = |id: i64| pick("a", if id < 10 { "u" } else { "v" }, false);
        assert_eq!(within_room(vec![1, 2, 10, 11], of, &room), vec![1, 10]);
    }

    #[test]
    fn the_recovery_lane_keeps_to_its_room_and_fresh_work_takes_the_rest() {
        // Group a: room 5, of which the recovery lane may take 2.
        let room = rooms(&[("a", 5)], &[], &[("a", 2)]);
        // 1..=4 recovery, 10..=14 fresh.
        let of = |id: i64| pick("a", "t", id < 10);
        assert_eq!(
            within_room(vec![1, 2, 3, 10, 4, 11, 12, 13], of, &room),
            vec![1, 2, 10, 11, 12]
        );
        // A recovery lane already at its ceiling takes nothing.
        let full = rooms(&[("a", 5)], &[], &[("a", 0)]);
        assert_eq!(within_room(vec![1, 10], of, &full), vec![10]);
    }

    #[test]
    fn groups_short_of_their_minimum_share_go_first_in_each_lane() {
        // (recovery lane?, group; None a takeover), in fair-share order.
        let order = [
            (false, Some("big")),
            (false, Some("big")),
            (false, None),
            (false, Some("small")),
            (false, Some("small")),
            (false, Some("small")),
            (true, Some("small")),
            (true, Some("big")),
        ];
        let mut ids: Vec<usize> = (0..order.len()).collect();
        // small runs 1 of its minimum share of 3: two of its candidates per
        // lane go first; big has no minimum share.
        guaranteed_first(
            &mut ids,
            |i| order[*i],
            |group| if group == "small" { 2 } else { 0 },
        );
        assert_eq!(ids, vec![6, 7, 2, 3, 4, 0, 1, 5]);
    }

    #[test]
    fn fair_scores_share_by_weight_and_age_buys_at_most_one_slot() {
        // A holds 8 slots, B none: B's first 8 candidates go before A's next.
        let a_next = fair_score(8, 1, 1, 0, 60_000);
        assert!(fair_score(0, 8, 1, 0, 60_000) < a_next + 1e-9);
        // Twice the weight, twice the slots for the same score.
        assert_eq!(
            fair_score(4, 2, 2, 0, 60_000),
            fair_score(2, 1, 1, 0, 60_000)
        );
        // A flood's hour-old head earns one slot, no more.
        assert_eq!(fair_score(8, 1, 1, 3_600_000, 60_000), 8.0);
        // Half an aging period earns half a slot; a head from the future none.
        assert_eq!(fair_score(0, 1, 1, 30_000, 60_000), 0.5);
        assert_eq!(fair_score(0, 1, 1, -5, 60_000), 1.0);
    }
}
