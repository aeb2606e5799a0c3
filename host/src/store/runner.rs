//! The execution plane's store ([`RunnerStore`]): claims ([`claim`]),
//! heartbeats, checkpoints, and how attempts end ([`commit`]). Every write
//! here is made under a trigger lease and fenced by its token in the same
//! statement (see [`super::fence`]).

mod claim;
pub(in crate::store) use claim::{fresh_lane, recovery_lane, running_rows};
mod claimed;
mod commit;
mod postgres;

pub use postgres::hot_statements;
pub(in crate::store) use postgres::{ClaimPath, prepare_claim};

use super::dialect::now_ms;
use super::fence::lease_fence;
use super::*;
use crate::model::{AttemptEnd, Claim, LeaseRef, ReleaseReason};
use crate::trigger_state;
use async_trait::async_trait;

#[cfg(test)]
pub(super) use claim::CLAIM_ROW;
#[cfg(test)]
pub(super) use commit::{FINISH_TRIGGER, RELEASE_TRIGGER};
#[cfg(test)]
pub(super) use postgres::{CLAIM_FRESH, CLAIM_RETRIES, CLAIM_UPDATE, FINISH_MOVE};

/// The fenced heartbeat (SQLite spelling): `?1` lease ms, `?2` trigger,
/// `?3` token, `?4` owner.
pub(in crate::store) const RENEW: &str = concat!(
    "UPDATE triggers SET lease_until = ",
    now_ms!(),
    " + ?1, updated_at = ",
    now_ms!(),
    " WHERE ",
    lease_fence!("triggers", id = "?2", token = "?3"),
    " AND lease_owner = ?4 RETURNING lease_until, cancel_requested, pause_requested"
);

/// The fenced checkpoint write: `?1` trigger, `?2` token, `?3` data.
pub(in crate::store) const CHECKPOINT_SAVE: &str = concat!(
    "INSERT INTO checkpoints (trigger_id, seq, data, fencing_token, saved_at) \
     SELECT t.id, coalesce((SELECT c.seq FROM checkpoints c WHERE c.trigger_id = t.id), 0) + 1, \
         ?3, t.fencing_token, ",
    now_ms!(),
    " FROM triggers t WHERE ",
    lease_fence!("t", id = "?1", token = "?2"),
    " ON CONFLICT (trigger_id) DO UPDATE SET seq = excluded.seq, data = excluded.data, \
         fencing_token = excluded.fencing_token, saved_at = excluded.saved_at \
     RETURNING seq"
);

/// A person's request that a running trigger stop at its next host call
/// (`?` trigger); its state is left to the attempt's end.
pub(in crate::store) const REQUEST_STOP: &str = concat!(
    "UPDATE triggers SET cancel_requested = 1 WHERE id = ? AND state = ",
    trigger_state!(running)
);

#[async_trait]
impl RunnerStore for Store {
    async fn claim(&self, request: &ClaimRequest<'_>) -> StoreResult<Vec<Claim>> {
        self.claim_batch(request).await
    }

    /// PostgreSQL: three. A commit is one round trip that mostly waits on
    /// the WAL flush; measured on `benches/throughput` (see
    /// `docs/architecture.md`).
    fn concurrent_commits(&self) -> usize {
        match self.dialect {
            Dialect::Postgres => 3,
            Dialect::Sqlite => 1,
        }
    }

    fn pool_load(&self) -> (u32, u32) {
        let in_use = self.pool.size().saturating_sub(self.pool.num_idle() as u32);
        (in_use, self.pool.options().get_max_connections())
    }

    async fn lease_renew(
        &self,
        lease: &LeaseRef,
        lease_ms: i64,
        progress_seq: i64,
    ) -> StoreResult<Renewal> {
        let (mut tx, turn) = self.begin_write().await?;
        let renewed: Option<(i64, i64, i64)> = sqlx::query_as(self.sql(RENEW))
            .bind(lease_ms)
            .bind(lease.trigger_id)
            .bind(lease.fencing_token.get())
            .bind(&lease.owner)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((until, cancel, pause)) = renewed else {
            tx.rollback().await?;
            // The next writer need not wait for the bookkeeping.
            drop(turn);
            return Err(self.lease_lost(lease, "heartbeat").await);
        };
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET heartbeat_at = ",
            now_ms!(),
            ", lease_until = ?, progress_seq = ? WHERE id = ? AND fencing_token = ?"
        )))
        .bind(until)
        .bind(progress_seq)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token.get())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Renewal {
            lease_until: until,
            cancel_requested: cancel != 0,
            pause_requested: pause != 0,
        })
    }

    async fn checkpoint_save(&self, lease: &LeaseRef, data: &[u8]) -> StoreResult<i64> {
        let seq: Option<i64> = sqlx::query_scalar(self.sql(CHECKPOINT_SAVE))
            .bind(lease.trigger_id)
            .bind(lease.fencing_token.get())
            .bind(data)
            .fetch_optional(&self.pool)
            .await?;
        match seq {
            Some(seq) => Ok(seq),
            None => Err(self.lease_lost(lease, "checkpoint").await),
        }
    }

    async fn attempt_finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<TriggerState>>> {
        self.finish_batch(ends).await
    }

    async fn attempt_release(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        reason: ReleaseReason,
        why: &str,
        delay_ms: i64,
    ) -> StoreResult<TriggerState> {
        self.release(lease, end, reason, why, delay_ms).await
    }

    async fn attempt_abandon(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<bool> {
        self.abandon(lease, end, why).await
    }

    async fn released_before(&self, trigger_id: i64, attempt_id: i64) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(self.sql(concat!(
            "SELECT count(*) FROM attempts WHERE trigger_id = ? AND id < ? AND outcome = ",
            crate::attempt_outcome!(released)
        )))
        .bind(trigger_id)
        .bind(attempt_id)
        .fetch_one(&self.pool)
        .await?)
    }

    async fn overlap_admit(&self, lease: &LeaseRef, max_in_flight: u32) -> StoreResult<Admission> {
        self.admit_run(lease, max_in_flight).await
    }

    async fn liveness_hold(&self, owner: &str) -> StoreResult<Option<super::Liveness>> {
        self.hold_liveness(owner).await
    }

    async fn expire_dead_holders(&self, me: &str) -> StoreResult<Vec<i64>> {
        self.expire_dead(me).await
    }

    async fn request_stop(&self, trigger_id: i64) -> StoreResult<bool> {
        Ok(sqlx::query(self.sql(REQUEST_STOP))
            .bind(trigger_id)
            .execute(&self.pool)
            .await?
            .rows_affected()
            == 1)
    }
}
