//! Releasing an attempt without a result — drained at shutdown (due now, so
//! any runner may claim it at once with token + 1 and resume from the last
//! checkpoint) or parked behind an open circuit breaker (due when the
//! breaker lets a probe through): the trigger goes back to `pending` and the attempt is closed as `released`, in one
//! transaction fenced by the attempt's token. A released attempt does not
//! count against the retry budget (see `lease::runner`).

use super::dialect::now_ms;
use super::*;

impl Store {
    /// Release a running attempt's trigger without a result: `pending`,
    /// due in `delay_ms` (0: now), lease cleared; the attempt closed as `released` with
    /// `error_class` = `why_class` and its fuel, memory, wall and log.
    /// Fenced by token and state; a stale token is [`StoreError::LeaseLost`]
    /// (and counted), and nothing is written.
    pub async fn attempt_release(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why_class: &str,
        why: &str,
        delay_ms: i64,
    ) -> StoreResult<()> {
        let (mut tx, turn) = self.begin_write().await?;
        let updated = sqlx::query(self.sql(concat!(
            "UPDATE triggers SET state = 'pending', lease_owner = NULL, lease_until = NULL, \
             next_run_at = ",
            now_ms!(),
            " + ?, updated_at = ",
            now_ms!(),
            " WHERE id = ? AND fencing_token = ? AND state = 'running'"
        )))
        .bind(delay_ms.max(0))
        .bind(lease.trigger_id)
        .bind(lease.fencing_token)
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
        .bind(why_class)
        .bind(why)
        .bind(end.fuel_used)
        .bind(end.peak_memory_bytes)
        .bind(end.wall_ms)
        .bind(&end.log)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
