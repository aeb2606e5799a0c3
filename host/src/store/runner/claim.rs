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
//! - PostgreSQL: a transaction of two statements: the groups' rows locked
//!   (claims serialize on them, so each counts the others' claims), then
//!   one statement whose candidates are locked with `FOR UPDATE SKIP
//!   LOCKED` (see [`super::postgres`]).
//! - SQLite: one transaction on the writer thread (see
//!   [`super::sqlite_writer`]). The write lock is held from the first read
//!   (`BEGIN IMMEDIATE`), so nothing can move between choosing the batch
//!   and claiming it: the room of each group is read, one scan per group
//!   with room reads its candidates, the shares are chosen in Rust
//!   ([`choose_batch`], then [`within_room`]), and each chosen trigger is
//!   claimed by a prepared statement of its own — in-thread calls, so a row
//!   costs SQLite's work and nothing more.

use super::super::dialect::now_ms;
use super::super::*;
use crate::model::{Claim, FencingToken};
use crate::trigger_state;
use std::collections::HashMap;

/// A claimable trigger as SQLite's candidate scan reports it, before the
/// claim (columns in this field order).
struct Candidate {
    id: i64,
    /// 0 due retries, 1 due pending triggers, 2 lapsed leases (1 and 2 are
    /// the fresh lane).
    lane: i64,
    priority: i64,
    next_run_at: i64,
    attempts: i64,
    fencing_token: i64,
    job_id: String,
    tenant: String,
    plan_version: i64,
    plan_key: String,
    scheduled_at: i64,
    params: String,
    resource_group: String,
    origin: String,
    /// When its first attempt started, if it had one.
    first_started_at: Option<i64>,
}

impl Candidate {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            lane: row.get(1)?,
            priority: row.get(2)?,
            next_run_at: row.get(3)?,
            attempts: row.get(4)?,
            fencing_token: row.get(5)?,
            job_id: row.get(6)?,
            tenant: row.get(7)?,
            plan_version: row.get(8)?,
            plan_key: row.get(9)?,
            scheduled_at: row.get(10)?,
            params: row.get(11)?,
            resource_group: row.get(12)?,
            origin: row.get(13)?,
            first_started_at: row.get(14)?,
        })
    }
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

/// SQLite's claim of one chosen trigger (in the writer's `BEGIN
/// IMMEDIATE` transaction, after the candidate scan): `?1` owner, `?2` now,
/// `?3` lease ms, `?4` trigger ([`crate::model::Transition::Claim`] and
/// [`crate::model::Transition::TakeOver`]).
pub(in crate::store) const CLAIM_ROW: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(running),
    ", lease_owner = ?1, lease_until = ?2 + ?3, \
         fencing_token = fencing_token + 1, attempts = attempts + 1, updated_at = ?2 \
     WHERE id = ?4 AND (state = ",
    trigger_state!(pending),
    " OR state = ",
    trigger_state!(retry_wait),
    " OR state = ",
    trigger_state!(running),
    ")"
);

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
        let (owner, lease_ms, now) = (request.owner, request.lease_ms, request.now);
        match self.dialect {
            Dialect::Sqlite => self.claim_sqlite(owner, lease_ms, limit, share, now).await,
            Dialect::Postgres => {
                self.claim_postgres(owner, lease_ms, limit, share, now)
                    .await
            }
        }
    }

    /// SQLite's claim: read the candidates, choose, update, insert — one
    /// transaction on the writer thread (see [`super::sqlite_writer`]).
    async fn claim_sqlite(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        share: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<Claim>> {
        let owner = owner.to_string();
        self.sqlite_write(move |tx| claim_in(tx, &owner, lease_ms, limit, share, now))
            .await
    }
}

/// The columns of a [`Candidate`] after its lane's id, lane, priority and
/// next run (`c`), read from its row (`t`).
macro_rules! candidate_columns {
    () => {
        "SELECT c.id, c.lane, c.priority, c.next_run_at, t.attempts, t.fencing_token, t.job_id, \
             t.tenant, t.plan_version, t.plan_key, t.scheduled_at, t.params, t.resource_group, \
             t.origin, CASE WHEN t.attempts > 0 THEN (SELECT min(f.started_at) FROM attempts f \
                 WHERE f.trigger_id = t.id) END FROM ("
    };
}

/// Each group's room: its effective concurrency less its running triggers
/// (lapsed leases still count: their holder may only be paused).
pub(in crate::store) const ROOM: &str = concat!(
    "SELECT g.name, g.effective_concurrency - (SELECT count(*) FROM triggers r WHERE r.state = ",
    trigger_state!(running),
    " AND r.resource_group = g.name) FROM resource_groups g"
);

/// SQLite's candidates, by id: per group with room, up to min(room,
/// `limit`) of each claim lane; and up to `limit` lapsed leases, whatever
/// their group's room (a takeover adds nothing to the running count).
fn candidates_in(
    tx: &rusqlite::Transaction<'_>,
    now: i64,
    limit: i64,
    room: &HashMap<String, i64>,
) -> StoreResult<HashMap<i64, Candidate>> {
    // Each lane is an ordered walk of an index that stops after its rows:
    // `triggers_retry` and `triggers_pending` (resource_group, priority,
    // next_run_at, id) per group, `triggers_lease` (lease_until, running
    // rows only) for lapsed leases — so the cost follows the batch, not the
    // backlog, the number running, or a full group's queue. The walks read
    // only index columns; the rows are read once, for what the claim needs.
    let mut due = tx.prepare_cached(concat!(
        candidate_columns!(),
        "SELECT * FROM (SELECT id, 0 AS lane, priority, next_run_at FROM triggers \
             WHERE state = ",
        trigger_state!(retry_wait),
        " AND resource_group = ?3 AND next_run_at <= ?1 \
             ORDER BY priority, next_run_at, id LIMIT CAST(?2 AS INTEGER)) \
         UNION ALL \
         SELECT * FROM (SELECT id, 1 AS lane, priority, next_run_at FROM triggers \
             WHERE state = ",
        trigger_state!(pending),
        " AND resource_group = ?3 AND next_run_at <= ?1 \
             ORDER BY priority, next_run_at, id LIMIT CAST(?2 AS INTEGER))) AS c \
         JOIN triggers t ON t.id = c.id"
    ))?;
    let mut candidates = HashMap::new();
    for (group, room) in room {
        if *room <= 0 {
            continue;
        }
        let rows = due.query_map(
            rusqlite::params![now, limit.min(*room), group],
            Candidate::from_row,
        )?;
        for c in rows {
            let c = c?;
            candidates.insert(c.id, c);
        }
    }
    let mut lapsed = tx.prepare_cached(concat!(
        candidate_columns!(),
        "SELECT id, 2 AS lane, priority, next_run_at FROM triggers WHERE state = ",
        trigger_state!(running),
        " AND lease_until < ?1 ORDER BY lease_until LIMIT CAST(?2 AS INTEGER)) AS c \
         JOIN triggers t ON t.id = c.id"
    ))?;
    for c in lapsed.query_map(rusqlite::params![now, limit], Candidate::from_row)? {
        let c = c?;
        candidates.insert(c.id, c);
    }
    Ok(candidates)
}

/// Each group's room ([`ROOM`]).
fn room_in(tx: &rusqlite::Transaction<'_>) -> StoreResult<HashMap<String, i64>> {
    let mut room = tx.prepare_cached(ROOM)?;
    let rows = room.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The cut of a chosen batch to each group's room: in the order of
/// choice, a group's new claims are kept while it has room; takeovers
/// (`group_of` says `None` for the room) are always kept, since the
/// trigger they take over is already counted as running.
pub(super) fn within_room<'a>(
    chosen: Vec<i64>,
    group_of: impl Fn(i64) -> Option<&'a str>,
    room: &HashMap<String, i64>,
) -> Vec<i64> {
    let mut used: HashMap<&str, i64> = HashMap::new();
    chosen
        .into_iter()
        .filter(|id| match group_of(*id) {
            None => true,
            Some(group) => {
                let taken = used.entry(group).or_insert(0);
                let fits = *taken < room.get(group).copied().unwrap_or(0);
                *taken += i64::from(fits);
                fits
            }
        })
        .collect()
}

/// SQLite's claim, inside the writer's `BEGIN IMMEDIATE` transaction: the
/// write lock is held from the first read, so nothing moves between
/// choosing the batch and claiming it.
fn claim_in(
    tx: &rusqlite::Transaction<'_>,
    owner: &str,
    lease_ms: i64,
    limit: i64,
    share: i64,
    now: Option<i64>,
) -> StoreResult<Vec<Claim>> {
    let now: i64 = match now {
        Some(now) => now,
        None => tx.query_row(concat!("SELECT ", now_ms!()), [], |row| row.get(0))?,
    };
    let room = room_in(tx)?;
    let mut candidates = candidates_in(tx, now, limit, &room)?;
    // Claim order within each lane: (priority, next_run_at, id).
    let mut order: Vec<(bool, i64, i64, i64)> = candidates
        .values()
        .map(|c| (c.lane != 0, c.priority, c.next_run_at, c.id))
        .collect();
    order.sort_unstable();
    let (retries, fresh): (Vec<_>, Vec<_>) = order.into_iter().partition(|o| !o.0);
    let ids = |lane: Vec<(bool, i64, i64, i64)>| lane.into_iter().map(|o| o.3).collect::<Vec<_>>();
    let chosen = choose_batch(&ids(retries), &ids(fresh), limit as usize, share as usize);
    let chosen = within_room(
        chosen,
        |id| {
            let c = &candidates[&id];
            (c.lane != 2).then_some(c.resource_group.as_str())
        },
        &room,
    );
    let mut claim = tx.prepare_cached(CLAIM_ROW)?;
    // An attempt left open by a previous holder (a lapsed lease) is
    // closed as taken over now. Every release path ends its attempt in the
    // transaction that moves the trigger, so only a lapsed lease should
    // leave one — but the claim does not rely on it, exactly as on
    // PostgreSQL: any trigger claimed again gets its open attempts closed.
    let mut close_open = tx.prepare_cached(
        "UPDATE attempts SET outcome = 'expired', ended_at = ?1, \
             error_class = 'lease_expired', error_message = 'lease expired; trigger taken over' \
         WHERE ended_at IS NULL AND trigger_id = ?2",
    )?;
    let mut open_attempt = tx.prepare_cached(
        "INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, started_at, \
             lease_until) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let lease_until = now + lease_ms;
    let mut claims = Vec::with_capacity(chosen.len());
    for id in chosen {
        let c = candidates.remove(&id).expect("chosen from the candidates");
        let updated = claim.execute(rusqlite::params![owner, now, lease_ms, id])?;
        if updated != 1 {
            return Err(StoreError::Conflict(format!(
                "claim of trigger {id} updated {updated} rows"
            )));
        }
        if c.attempts > 0 {
            close_open.execute(rusqlite::params![now, id])?;
        }
        let (attempt_no, fencing_token) = (c.attempts + 1, c.fencing_token + 1);
        open_attempt.execute(rusqlite::params![
            id,
            attempt_no,
            owner,
            fencing_token,
            now,
            lease_until
        ])?;
        claims.push(Claim {
            trigger_id: id,
            attempt_id: tx.last_insert_rowid(),
            attempt_no,
            fencing_token: FencingToken::new(fencing_token),
            lease_until,
            job_id: c.job_id,
            tenant: c.tenant,
            plan_version: c.plan_version,
            plan_key: c.plan_key,
            scheduled_at: c.scheduled_at,
            params: c.params,
            resource_group: c.resource_group,
            origin: c.origin,
            started_at: now,
            first_started_at: c.first_started_at.unwrap_or(now),
        });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::{choose_batch, within_room};
    use std::collections::HashMap;

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

    #[test]
    fn each_group_keeps_its_room_and_takeovers_need_none() {
        let room = HashMap::from([("a".to_string(), 2), ("b".to_string(), 0)]);
        // 1..=4 new work of group a, 5 of b, 6 a takeover of group b.
        let group_of = |id: i64| match id {
            1..=4 => Some("a"),
            5 => Some("b"),
            _ => None,
        };
        assert_eq!(
            within_room(vec![3, 5, 1, 6, 2, 4], group_of, &room),
            vec![3, 1, 6]
        );
        // A group the claim has no room row for gets nothing.
        assert_eq!(
            within_room(vec![7], |_| Some("gone"), &room),
            Vec::<i64>::new()
        );
    }
}
