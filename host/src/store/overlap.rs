//! The overlap rule, in one place: whether a run of a scheduled job may
//! start while others of the same job are in flight.
//!
//! A run is *in flight* from its admission until its trigger leaves
//! `running`: admitted, it holds `triggers.overlap_token` (the token it was
//! admitted under). Its holder dying does not end it — the trigger stays
//! `running` with a lapsed lease until a takeover resumes it or it ends —
//! so a run whose holder is gone still counts against its job's
//! `max_in_flight`. Every attempt of a scheduled trigger asks here before
//! its guest runs:
//!
//! - a takeover of an admitted run keeps the admission (the claim leaves
//!   `overlap_token` of a `running` trigger as it is) and goes on: it was
//!   in flight all along;
//! - any other attempt — a new fire, a retry, a resumed trigger, a takeover
//!   of a run that never got as far as admission (the claim of a queued
//!   trigger clears the token) — is admitted only if fewer than
//!   `max_in_flight` other runs of its job are in flight, an older
//!   scheduled fire still to be judged counting as one (so of two fires
//!   claimed together the older runs, whichever is judged first).
//!
//! The count and the admission are one fenced `UPDATE` (a runner whose
//! token is stale admits nothing). SQLite runs it under its one write
//! lock; PostgreSQL takes a transaction-scoped advisory lock per job first,
//! so two attempts of one job are judged one after the other and the
//! second counts the first. Older and newer runs count alike: there is no
//! order to get wrong when a newer fire is claimed while an older run's
//! lease has lapsed.

use super::dialect::Dialect;
use super::fence::lease_fence;
use super::*;
use crate::model::LeaseRef;

/// What the rule decided for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The run is in flight: admitted now, or before the takeover.
    Admitted,
    /// The job has `max_in_flight` runs in flight (trigger ids, oldest
    /// fire first); this one is not admitted.
    Full(Vec<i64>),
}

/// Whether `o` counts against `m`'s admission: another `running` trigger
/// of the same job that is admitted — or an older scheduled fire that is
/// still to be judged, so that of two fires claimed together the older is
/// the one that runs (a newer one never holds an older back, so the two
/// never wait for each other).
macro_rules! counts_against {
    () => {
        concat!(
            "o.tenant = m.tenant AND o.job_id = m.job_id AND o.id <> m.id AND o.state = ",
            crate::trigger_state!(running),
            " AND (o.overlap_token IS NOT NULL OR (o.origin = ",
            crate::trigger_origin!(schedule),
            " AND (o.scheduled_at < m.scheduled_at \
                    OR (o.scheduled_at = m.scheduled_at AND o.id < m.id))))"
        )
    };
}

/// Admit trigger `?1` at token `?2` if it was admitted before in this run
/// or fewer than `?3` runs count against it.
const ADMIT: &str = concat!(
    "UPDATE triggers SET overlap_token = fencing_token WHERE ",
    lease_fence!("triggers", id = "?1", token = "?2"),
    " AND (overlap_token IS NOT NULL OR (SELECT count(*) FROM triggers o, triggers m \
       WHERE m.id = triggers.id AND ",
    counts_against!(),
    ") < ?3)"
);

/// The runs that count against trigger `?1`, oldest first.
const IN_FLIGHT: &str = concat!(
    "SELECT o.id FROM triggers o, triggers m WHERE m.id = ?1 AND ",
    counts_against!(),
    " ORDER BY o.scheduled_at, o.id"
);

/// PostgreSQL: judge one job's attempts one at a time (the lock is keyed
/// by the job's qualified name and released at commit).
const JOB_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended(\
     (SELECT tenant || '/' || job_id FROM triggers WHERE id = $1), 7263520))";

impl Store {
    /// [`RunnerStore::overlap_admit`].
    pub(super) async fn admit_run(
        &self,
        lease: &LeaseRef,
        max_in_flight: u32,
    ) -> StoreResult<Admission> {
        let (mut tx, _turn) = self.begin_write().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query(JOB_LOCK)
                .bind(lease.trigger_id)
                .execute(&mut *tx)
                .await?;
        }
        let admitted = sqlx::query(self.sql(ADMIT))
            .bind(lease.trigger_id)
            .bind(lease.fencing_token.get())
            .bind(i64::from(max_in_flight.max(1)))
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        let in_flight: Vec<i64> = if admitted {
            Vec::new()
        } else {
            sqlx::query_scalar(self.sql(IN_FLIGHT))
                .bind(lease.trigger_id)
                .fetch_all(&mut *tx)
                .await?
        };
        tx.commit().await?;
        if admitted {
            Ok(Admission::Admitted)
        } else if in_flight.len() >= max_in_flight.max(1) as usize {
            Ok(Admission::Full(in_flight))
        } else {
            // Room, yet not admitted: the lease is no longer this attempt's.
            Err(self.lease_lost(lease, "overlap admission").await)
        }
    }
}
