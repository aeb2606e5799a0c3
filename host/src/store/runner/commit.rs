//! How attempts end in the store: group commits of their verdicts
//! ([`crate::model::Transition::Finish`]), releases without a verdict
//! ([`crate::model::Transition::Release`]) and abandons — each one
//! transaction, in this process's write turn, every trigger write fenced by
//! the attempt's token in the statement that makes it.

use super::super::dialect::now_ms;
use super::super::fence::lease_fence;
use super::super::*;
use crate::model::{AttemptEnd, LeaseRef, ReleaseReason, Transition};
use crate::trigger_state;
use std::collections::HashSet;

/// The ends of a batch whose fenced transition applied, as (trigger,
/// token): a trigger's id alone would not tell a current end from a stale
/// end of the same trigger in one batch (a runner that lost its lease and
/// the one that took the trigger over, both in this process).
type Moved = HashSet<(i64, i64)>;

fn moved_key(lease: &LeaseRef) -> (i64, i64) {
    (lease.trigger_id, lease.fencing_token.get())
}

/// The fenced `running → pending` of a release (SQLite spelling; `?1`
/// trigger, `?2` token, `?3` delay ms).
pub(in crate::store) const RELEASE_TRIGGER: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(pending),
    ", lease_owner = NULL, lease_until = NULL, next_run_at = ",
    now_ms!(),
    " + ?3, updated_at = ",
    now_ms!(),
    " WHERE ",
    lease_fence!("triggers", id = "?1", token = "?2")
);

/// The fenced transition of one attempt's end (SQLite's group commit, per
/// row; `?3` is the new state, one of [`Transition::Finish`]'s targets).
pub(in crate::store) const FINISH_TRIGGER: &str = concat!(
    "UPDATE triggers SET state = ?3, result = ?4, error_class = ?5, error_message = ?6, \
         next_run_at = CASE WHEN ?7 IS NULL THEN next_run_at ELSE ?9 + ?7 END, \
         lease_owner = NULL, lease_until = NULL, \
         finished_at = CASE WHEN ?8 <> 0 THEN ?9 ELSE NULL END, updated_at = ?9 \
     WHERE ",
    lease_fence!("triggers", id = "?1", token = "?2")
);

/// PostgreSQL's group-commit transition, set-based: `column1` trigger,
/// `column2` token, `column3` state, `column4` result, `column5` error
/// class, `column6` error message, `column7` retry after, `column8`
/// terminal (0/1). The rows follow `FROM (` at run time.
const FINISH_TRIGGERS_HEAD: &str = concat!(
    "UPDATE triggers SET state = v.column3, result = v.column4, \
         error_class = v.column5, error_message = v.column6, \
         next_run_at = CASE WHEN v.column7 IS NULL THEN next_run_at ELSE ",
    now_ms!(),
    " + v.column7 END, lease_owner = NULL, lease_until = NULL, \
         finished_at = CASE WHEN v.column8 <> 0 THEN ",
    now_ms!(),
    " ELSE NULL END, updated_at = ",
    now_ms!(),
    " FROM ("
);
const FINISH_TRIGGERS_TAIL: &str = concat!(
    ") AS v WHERE ",
    lease_fence!("triggers", id = "v.column1", token = "v.column2"),
    " RETURNING id, fencing_token"
);

/// The attempt rows of a batch, closed once their triggers moved.
const CLOSE_ATTEMPTS_HEAD: &str = concat!(
    "UPDATE attempts SET outcome = v.column3, ended_at = ",
    now_ms!(),
    ", error_class = v.column4, error_message = v.column5, \
       fuel_used = v.column6, peak_memory_bytes = v.column7, \
       wall_ms = v.column8, log = v.column9 FROM ("
);
const CLOSE_ATTEMPTS_TAIL: &str =
    ") AS v WHERE attempts.id = v.column1 AND attempts.fencing_token = v.column2";

impl Store {
    /// [`RunnerStore::attempt_finish_batch`] on either database.
    pub(in crate::store) async fn finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        if ends.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((_, end)) = ends
            .iter()
            .find(|(_, end)| !Transition::Finish.ends_in(end.trigger_state))
        {
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
        let mut results: Vec<StoreResult<()>> = ends.iter().map(|_| Ok(())).collect();
        for (i, (lease, end)) in ends.iter().enumerate() {
            if !moved.contains(&moved_key(lease)) {
                self.close_abandoned(lease, end, "result refused: stale fencing token")
                    .await?;
                results[i] = Err(self.lease_lost(lease, "result commit").await);
            }
        }
        Ok(results)
    }

    /// PostgreSQL's group commit, in two set-based statements whatever the
    /// batch size: the fenced transitions, returning the triggers that
    /// moved, then their attempts. Batches are padded with all-NULL rows
    /// (which match nothing) to the next power of two, so each statement
    /// has a handful of distinct texts and stays in the prepared-statement
    /// cache.
    async fn finish_postgres(&self, ends: &[(LeaseRef, AttemptEnd)]) -> StoreResult<Moved> {
        let (mut tx, _turn) = self.begin_write().await?;
        let moved = self.finish_transitions(&mut tx, ends).await?;
        let committed: Vec<&(LeaseRef, AttemptEnd)> = ends
            .iter()
            .filter(|(lease, _)| moved.contains(&moved_key(lease)))
            .collect();
        if !committed.is_empty() {
            let rows = committed.len().next_power_of_two();
            let close = self.dialect.multi_row(
                CLOSE_ATTEMPTS_HEAD,
                "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
                CLOSE_ATTEMPTS_TAIL,
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(close));
            for (lease, end) in &committed {
                q = q
                    .bind(lease.attempt_id)
                    .bind(lease.fencing_token.get())
                    .bind(end.attempt_outcome.as_str())
                    .bind(&end.error_class)
                    .bind(&end.error_message)
                    .bind(end.fuel_used)
                    .bind(end.peak_memory_bytes)
                    .bind(end.wall_ms)
                    .bind(&end.log);
            }
            for _ in committed.len()..rows {
                q = q
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<String>);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// The fenced trigger transitions of [`Store::finish_postgres`], in one
    /// set-based statement: the (trigger, token) pairs that moved.
    async fn finish_transitions(
        &self,
        tx: &mut Tx,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Moved> {
        let rows = ends.len().next_power_of_two();
        let transitions = self.dialect.multi_row(
            FINISH_TRIGGERS_HEAD,
            "(?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
            FINISH_TRIGGERS_TAIL,
        );
        let mut q = sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(transitions));
        for (lease, end) in ends {
            q = q
                .bind(lease.trigger_id)
                .bind(lease.fencing_token.get())
                .bind(end.trigger_state.as_str())
                .bind(&end.result)
                .bind(&end.error_class)
                .bind(&end.error_message)
                .bind(end.retry_after_ms)
                .bind(end.trigger_state.is_terminal() as i64);
        }
        for _ in ends.len()..rows {
            q = q
                .bind(None::<i64>)
                .bind(None::<i64>)
                .bind(None::<String>)
                .bind(None::<Vec<u8>>)
                .bind(None::<String>)
                .bind(None::<String>)
                .bind(None::<i64>)
                .bind(None::<i64>);
        }
        Ok(q.fetch_all(&mut **tx).await?.into_iter().collect())
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
    ) -> StoreResult<()> {
        let (mut tx, turn) = self.begin_write().await?;
        let updated = sqlx::query(self.sql(RELEASE_TRIGGER))
            .bind(lease.trigger_id)
            .bind(lease.fencing_token.get())
            .bind(delay_ms.max(0))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if updated == 0 {
            tx.rollback().await?;
            drop(turn);
            return Err(self.lease_lost(lease, "release").await);
        }
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = 'released', ended_at = ",
            now_ms!(),
            ", error_class = ?, error_message = ?, fuel_used = ?, peak_memory_bytes = ?, \
             wall_ms = ?, log = ? WHERE id = ? AND fencing_token = ?"
        )))
        .bind(reason.as_str())
        .bind(why)
        .bind(end.fuel_used)
        .bind(end.peak_memory_bytes)
        .bind(end.wall_ms)
        .bind(&end.log)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token.get())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
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
    async fn close_abandoned(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<u64> {
        let (mut tx, _turn) = self.begin_write().await?;
        let closed = sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = 'lease_lost', ended_at = ",
            now_ms!(),
            ", error_class = 'lease_lost', error_message = ?, \
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
        tx.commit().await?;
        Ok(closed)
    }
}

/// SQLite's group commit, inside the writer's transaction: per end, one
/// prepared statement makes the fenced transition — its row count says
/// whether the token and state still held — and, if it moved, one closes
/// its attempt. In-thread calls on cached statements, so the batch costs
/// SQLite's work and one hand-off (see [`super::super::sqlite_writer`]).
fn finish_in(
    tx: &rusqlite::Transaction<'_>,
    ends: &[(LeaseRef, AttemptEnd)],
) -> StoreResult<Moved> {
    // One clock for the batch: the commit's.
    let now: i64 = tx.query_row(concat!("SELECT ", now_ms!()), [], |row| row.get(0))?;
    let mut transition = tx.prepare_cached(FINISH_TRIGGER)?;
    let mut close = tx.prepare_cached(
        "UPDATE attempts SET outcome = ?3, ended_at = ?4, error_class = ?5, error_message = ?6, \
             fuel_used = ?7, peak_memory_bytes = ?8, wall_ms = ?9, log = ?10 \
         WHERE id = ?1 AND fencing_token = ?2",
    )?;
    let mut moved = HashSet::with_capacity(ends.len());
    for (lease, end) in ends {
        let changed = transition.execute(rusqlite::params![
            lease.trigger_id,
            lease.fencing_token.get(),
            end.trigger_state.as_str(),
            end.result,
            end.error_class,
            end.error_message,
            end.retry_after_ms,
            end.trigger_state.is_terminal() as i64,
            now,
        ])?;
        if changed == 0 {
            continue;
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
        moved.insert(moved_key(lease));
    }
    Ok(moved)
}
