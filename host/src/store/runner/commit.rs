//! How attempts end in the store: group commits of their verdicts
//! ([`crate::model::Transition::Finish`]), releases without a verdict
//! ([`crate::model::Transition::Release`]) and abandons — each one
//! transaction, in this process's write turn, every trigger write fenced by
//! the attempt's token in the statement that makes it.

use super::super::dialect::now_ms;
use super::super::fence::lease_fence;
use super::super::held::ticket_holds;
use super::super::*;
use crate::model::TriggerState;
use crate::model::{AttemptEnd, LeaseRef, ReleaseReason, Transition};
use crate::trigger_state;
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// The ends of a batch whose fenced transition applied, as (trigger,
/// token): a trigger's id alone would not tell a current end from a stale
/// end of the same trigger in one batch (a runner that lost its lease and
/// the one that took the trigger over, both in this process).
/// The state each end wrote is kept with its key.
pub(super) type Moved = HashMap<(i64, i64), TriggerState>;

fn moved_key(lease: &LeaseRef) -> (i64, i64) {
    (lease.trigger_id, lease.fencing_token.get())
}

/// The fenced `running → pending` of a release (SQLite spelling; `?1`
/// trigger, `?2` token, `?3` delay ms) — `running → paused` when a closed
/// gate asked the trigger to pause (migration 0018). Returns the state.
pub(in crate::store) const RELEASE_TRIGGER: &str = concat!(
    "UPDATE triggers SET state = CASE WHEN pause_requested = 1 THEN ",
    trigger_state!(paused),
    " ELSE ",
    trigger_state!(pending),
    " END, pause_requested = 0, lease_owner = NULL, lease_until = NULL, next_run_at = ",
    now_ms!(),
    " + ?3, updated_at = ",
    now_ms!(),
    " WHERE ",
    lease_fence!("triggers", id = "?1", token = "?2"),
    " RETURNING state"
);

/// The fenced transition of one attempt's end (SQLite's group commit, per
/// row; `?3` is the new state, one of [`Transition::Finish`]'s targets). A
/// retry or a failure of a trigger an open exception ticket owns waits
/// `manual` for the ticket's answer instead (`store/held.rs`); a retry of
/// a trigger a closed gate asked to pause waits `paused`.
macro_rules! finish_trigger {
    () => {
        concat!(
            "UPDATE triggers SET state = CASE WHEN ?3 IN (",
            trigger_state!(retry_wait),
            ", ",
            trigger_state!(failed),
            ") AND ",
            ticket_holds!(),
            " THEN ",
            trigger_state!(manual),
            " WHEN ?3 = ",
            trigger_state!(retry_wait),
            " AND pause_requested = 1 THEN ",
            trigger_state!(paused),
            " ELSE ?3 END, pause_requested = 0, result = ?4, error_class = ?5, error_message = ?6, \
                 next_run_at = CASE WHEN ?7 IS NULL THEN next_run_at ELSE ?9 + ?7 END, \
                 lease_owner = NULL, lease_until = NULL, \
                 finished_at = CASE WHEN ?8 = 0 THEN NULL WHEN ?3 = ",
            trigger_state!(failed),
            " AND ",
            ticket_holds!(),
            " THEN NULL ELSE ?9 END, updated_at = ?9 \
             WHERE ",
            lease_fence!("triggers", id = "?1", token = "?2")
        )
    };
}

/// [`finish_trigger!`] for an end whose state the statement writes as asked
/// (every state but `retry_wait` and `failed`): its row count says whether
/// it moved.
pub(in crate::store) const FINISH_TRIGGER: &str = finish_trigger!();

/// [`finish_trigger!`] for an end the statement may send elsewhere
/// (`retry_wait`, `failed`: see [`TriggerState::finish_may_redirect`]),
/// returning the state it wrote. Kept apart because `RETURNING` costs
/// SQLite an ephemeral table per statement, which the common end — a
/// success — does not need (benches/throughput: 0.92× with it on every end).
const FINISH_TRIGGER_RETURNING: &str = concat!(finish_trigger!(), " RETURNING state");

impl Store {
    /// [`RunnerStore::attempt_finish_batch`] on either database.
    pub(in crate::store) async fn finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<TriggerState>>> {
        if ends.is_empty() {
            return Ok(Vec::new());
        }
        // `manual` is a target of finish only where an open ticket holds the
        // trigger (the statement decides); no attempt asks for it.
        if let Some((_, end)) = ends.iter().find(|(_, end)| {
            !Transition::Finish.ends_in(end.trigger_state)
                || end.trigger_state == crate::model::TriggerState::Manual
        }) {
            return Err(StoreError::Conflict(format!(
                "an attempt cannot end its trigger as {}: not a target of finish",
                end.trigger_state
            )));
        }
        let moved = match self.dialect {
            Dialect::Sqlite => {
                let owned = ends.to_vec();
                self.sqlite_write(move |tx| finish_in(tx, &owned)).await?
            }
            Dialect::Postgres => self.finish_postgres(ends).await?,
        };
        // Stale ends are closed and counted outside the write turn.
        let mut results = Vec::with_capacity(ends.len());
        for (lease, end) in ends {
            results.push(match moved.get(&moved_key(lease)) {
                Some(state) => Ok(*state),
                None => {
                    self.close_abandoned(lease, end, "result refused: stale fencing token")
                        .await?;
                    Err(self.lease_lost(lease, "result commit").await)
                }
            });
        }
        Ok(results)
    }

    /// [`RunnerStore::attempt_release`]: the trigger's fenced
    /// `running → pending` and the attempt's close, one transaction in the
    /// write turn.
    pub(in crate::store) async fn release(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        reason: ReleaseReason,
        why: &str,
        delay_ms: i64,
    ) -> StoreResult<TriggerState> {
        let (mut tx, turn) = self.begin_write().await?;
        let state: Option<String> = sqlx::query_scalar(self.sql(RELEASE_TRIGGER))
            .bind(lease.trigger_id)
            .bind(lease.fencing_token.get())
            .bind(delay_ms.max(0))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(state) = state else {
            tx.rollback().await?;
            drop(turn);
            // What the guest used up to its stop still counts.
            self.close_abandoned(lease, end, "release refused: stale fencing token")
                .await?;
            return Err(self.lease_lost(lease, "release").await);
        };
        // A gate's pause, whatever ended the attempt (its answer to
        // `pause-requested`, a drain, a breaker park).
        let state: TriggerState = state
            .parse()
            .map_err(|e| StoreError::Conflict(format!("release wrote {e}")))?;
        let paused = state == TriggerState::Paused;
        let (class, why) = if paused {
            ("paused", format!("paused by a gate: {why}"))
        } else {
            (reason.as_str(), why.to_string())
        };
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = ",
            crate::attempt_outcome!(released),
            ", ended_at = ",
            now_ms!(),
            ", error_class = ?, error_message = ?, fuel_used = ?, peak_memory_bytes = ?, \
             wall_ms = ?, log = ? WHERE id = ? AND fencing_token = ?"
        )))
        .bind(class)
        .bind(&why)
        .bind(end.fuel_used)
        .bind(end.peak_memory_bytes)
        .bind(end.wall_ms)
        .bind(&end.log)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token.get())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(state)
    }

    /// [`RunnerStore::attempt_abandon`]: closes the attempt row, fenced by
    /// its own token and only while it is open.
    pub(in crate::store) async fn abandon(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<bool> {
        Ok(self.close_abandoned(lease, end, why).await? == 1)
    }

    /// Close an attempt as `lease_lost`, in its own transaction at this
    /// process's write turn. Returns how many rows it closed (0 or 1).
    ///
    /// An attempt a takeover already closed (`expired`, with no usage:
    /// the claim that took its trigger over could not know it) keeps that
    /// outcome but gets the usage its runner measured — fuel, peak memory,
    /// wall time, log — once, so cost reports count what the guest burnt
    /// up to its stop. Only its own row, by id and its own token.
    async fn close_abandoned(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<u64> {
        let (mut tx, _turn) = self.begin_write().await?;
        let closed = sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = ",
            crate::attempt_outcome!(lease_lost),
            ", ended_at = ",
            now_ms!(),
            // The error class repeats the outcome: nothing else explains it.
            ", error_class = ",
            crate::attempt_outcome!(lease_lost),
            ", error_message = ?, \
             fuel_used = ?, peak_memory_bytes = ?, wall_ms = ?, log = ? \
             WHERE id = ? AND fencing_token = ? AND outcome IS NULL"
        )))
        .bind(why)
        .bind(end.fuel_used)
        .bind(end.peak_memory_bytes)
        .bind(end.wall_ms)
        .bind(&end.log)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token.get())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if closed == 0 {
            sqlx::query(self.sql(
                "UPDATE attempts SET fuel_used = ?, peak_memory_bytes = ?, wall_ms = ?, log = ? \
                 WHERE id = ? AND fencing_token = ? AND fuel_used IS NULL",
            ))
            .bind(end.fuel_used)
            .bind(end.peak_memory_bytes)
            .bind(end.wall_ms)
            .bind(&end.log)
            .bind(lease.attempt_id)
            .bind(lease.fencing_token.get())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(closed)
    }
}

/// One (group, tenant)'s successes in a SQLite group commit: `?1` group,
/// `?2` tenant, `?3` the commit's clock, `?4` how many — the pair as the
/// claim recorded it ([`super::claimed`]).
const RECORD_SUCCESSES: &str =
    "INSERT INTO success_counts (resource_group, tenant, at, n) VALUES (?1, ?2, ?3, ?4)";

/// The successes of a SQLite group commit the claims' record did not hold
/// (see [`super::claimed`]), one row per (group, tenant): `?1` the
/// commit's clock, `?2` the triggers' ids (a JSON array), each found by
/// its key. A pair counted both ways gets two rows of the same instant;
/// readers sum them.
const COUNT_SUCCESSES: &str = "INSERT INTO success_counts (resource_group, tenant, at, n) \
     SELECT t.resource_group, t.tenant, ?1, count(*) FROM json_each(?2) AS j \
     JOIN triggers t ON t.id = j.value GROUP BY t.resource_group, t.tenant";

/// SQLite's group commit, inside the writer's transaction: per end, one
/// prepared statement makes the fenced transition — the state it returns
/// says the token and state still held, and what it wrote — and, if it
/// moved, one closes
/// its attempt; then the successes are counted per (group, tenant)
/// (`success_counts`, migration 0024, read by `paddock status`): from the
/// claims' record ([`RECORD_SUCCESSES`]), or for a trigger it does not
/// hold by reading the rows ([`COUNT_SUCCESSES`]). In-thread calls on
/// cached statements, so the batch costs SQLite's work and one hand-off
/// (see [`super::super::sqlite_writer`]).
fn finish_in(
    tx: &rusqlite::Transaction<'_>,
    ends: &[(LeaseRef, AttemptEnd)],
) -> StoreResult<Moved> {
    // One clock for the batch: the commit's.
    let now: i64 = super::super::sqlite_writer::db_now(tx)?;
    let mut transition = tx.prepare_cached(FINISH_TRIGGER)?;
    let mut close = tx.prepare_cached(
        "UPDATE attempts SET outcome = ?3, ended_at = ?4, error_class = ?5, error_message = ?6, \
             fuel_used = ?7, peak_memory_bytes = ?8, wall_ms = ?9, log = ?10 \
         WHERE id = ?1 AND fencing_token = ?2",
    )?;
    let mut moved = HashMap::with_capacity(ends.len());
    // Successes per recorded pair, and those the record did not hold.
    let mut recorded: Vec<(usize, i64)> = Vec::new();
    let mut unrecorded = Vec::new();
    for (lease, end) in ends {
        let pair = super::claimed::with(|r| r.take(lease.trigger_id, lease.fencing_token.get()));
        let params = rusqlite::params![
            lease.trigger_id,
            lease.fencing_token.get(),
            end.trigger_state.as_str(),
            end.result,
            end.error_class,
            end.error_message,
            end.retry_after_ms,
            end.trigger_state.is_terminal() as i64,
            now,
        ];
        let written = if end.trigger_state.finish_may_redirect() {
            let written: Option<String> = tx
                .prepare_cached(FINISH_TRIGGER_RETURNING)?
                .query_row(params, |row| row.get(0))
                .optional()?;
            written
                .map(|state| state.parse::<TriggerState>())
                .transpose()
                .map_err(|e| StoreError::Conflict(format!("finish wrote {e}")))?
        } else {
            (transition.execute(params)? > 0).then_some(end.trigger_state)
        };
        let Some(written) = written else {
            continue;
        };
        if end.trigger_state == crate::model::TriggerState::Succeeded {
            match pair {
                Some(pair) => match recorded.iter_mut().find(|(p, _)| *p == pair) {
                    Some((_, n)) => *n += 1,
                    None => recorded.push((pair, 1)),
                },
                None => unrecorded.push(lease.trigger_id),
            }
        }
        close.execute(rusqlite::params![
            lease.attempt_id,
            lease.fencing_token.get(),
            end.attempt_outcome.as_str(),
            now,
            end.error_class,
            end.error_message,
            end.fuel_used,
            end.peak_memory_bytes,
            end.wall_ms,
            end.log,
        ])?;
        moved.insert(moved_key(lease), written);
    }
    if !recorded.is_empty() {
        let mut count = tx.prepare_cached(RECORD_SUCCESSES)?;
        super::claimed::with(|record| -> rusqlite::Result<()> {
            for (pair, n) in recorded {
                let (group, tenant) = record.pair(pair);
                count.execute(rusqlite::params![group, tenant, now, n])?;
            }
            Ok(())
        })?;
    }
    if !unrecorded.is_empty() {
        let ids = serde_json::to_string(&unrecorded).expect("ids serialize");
        tx.prepare_cached(COUNT_SUCCESSES)?
            .execute(rusqlite::params![now, ids])?;
    }
    Ok(moved)
}
