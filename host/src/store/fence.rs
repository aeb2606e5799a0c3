//! The fencing rule, in one place (DESIGN §4).
//!
//! A write made under a lease carries the lease's identity, and the
//! database accepts it only if that lease is still the current one —
//! checked **in the same statement** as the write, never by a read before
//! it. There are two kinds of lease and one predicate for each; every
//! statement that writes under a lease splices in its predicate, so a
//! reviewer reads each rule once, here:
//!
//! - [`lease_fence!`] — a trigger lease: the trigger is `running` at the
//!   attempt's fencing token. Claims increment the token, so a paused or
//!   partitioned runner that comes back holds a lower one and writes
//!   nothing. (Heartbeats also check the owner; attempt rows are fenced by
//!   their own token column.)
//! - [`shard_fence!`] — a shard lease: the shard is at the scheduler's
//!   generation and owned by it. A scheduler that stalled past its lease
//!   and was replaced inserts no triggers, records no skipped fires and
//!   moves no watermark.
//!
//! The predicates are the same text on both databases; only the
//! placeholders differ (`?2` / `$2`), and they are the macros' arguments.
//! On PostgreSQL the shard predicate also locks the shard row (`FOR
//! SHARE`), so a rival taking the shard over waits for the fenced
//! transaction to end and then sees what it wrote — the check cannot be
//! overtaken between the statement's read and its write.
//!
//! A fenced write that touches zero rows is turned into an error by one
//! translator per kind of lease: [`Store::lease_lost`] (reads what the
//! trigger holds now, counts `stale_token_rejections` and
//! `stale_token_rejections:<kind of write>`, and returns
//! [`StoreError::LeaseLost`]`{ expected, found }`) and [`Store::shard_lost`]
//! (counts `stale_shard_generation_rejections`, returns
//! [`StoreError::ShardLost`]).

use super::dialect::now_ms;
pub(crate) use super::fence_log::{EffectRef, FenceRefusal};
use super::{STALE_TOKEN_KIND_PREFIX, Store, StoreError};
use crate::model::{LeaseRef, ShardLease};

/// `<t>.id = <id> AND <t>.fencing_token = <token> AND <t>.state = 'running'`:
/// the trigger named by a lease is still running at the lease's token.
/// `$t` is the `triggers` table's name or alias in the statement.
macro_rules! lease_fence {
    ($t:literal, id = $id:literal, token = $token:literal) => {
        concat!(
            $t,
            ".id = ",
            $id,
            " AND ",
            $t,
            ".fencing_token = ",
            $token,
            " AND ",
            $t,
            ".state = ",
            $crate::trigger_state!(running)
        )
    };
}
pub(crate) use lease_fence;

/// `EXISTS (SELECT 1 FROM schedule_shards ... )`: the shard named by a
/// lease is still at the lease's generation and owned by its scheduler.
/// `$lock` is `""` on SQLite (the transaction already holds the database's
/// only write lock) and `" FOR SHARE"` on PostgreSQL (see the module
/// comment).
macro_rules! shard_fence {
    (shard = $shard:literal, generation = $generation:literal, owner = $owner:literal, lock = $lock:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM schedule_shards fence WHERE fence.shard = ",
            $shard,
            " AND fence.generation = ",
            $generation,
            " AND fence.owner = ",
            $owner,
            $lock,
            ")"
        )
    };
}
pub(crate) use shard_fence;

/// A write's name as a counter and label suffix: `result commit` →
/// `result_commit`. The names are the translators' callers' literals, a
/// bounded set.
fn write_kind(what: &str) -> String {
    what.replace(' ', "_")
}

impl Store {
    /// The translator for a trigger-lease write that touched zero rows:
    /// reads what the trigger holds now, counts the stale write, records
    /// it (`stale_writes`, for `paddock report incident`), logs it, and
    /// returns [`StoreError::LeaseLost`] — or the database's error if even
    /// that read fails.
    pub(crate) async fn lease_lost(&self, lease: &LeaseRef, what: &str) -> StoreError {
        self.lease_lost_with(lease, what, None).await
    }

    /// [`Store::lease_lost`] for an effect write: the refusal names the
    /// effect (its key, request id and params digest) too.
    pub(crate) async fn lease_lost_with(
        &self,
        lease: &LeaseRef,
        what: &str,
        effect: Option<&EffectRef<'_>>,
    ) -> StoreError {
        let found: Option<(i64, String, String)> = match sqlx::query_as(
            self.sql("SELECT fencing_token, state, plan_key FROM triggers WHERE id = ?"),
        )
        .bind(lease.trigger_id)
        .fetch_optional(self.pool())
        .await
        {
            Ok(found) => found,
            Err(e) => return e.into(),
        };
        // The total and the kind of write, in one statement
        // (`stale_token_rejections:heartbeat`: `/metrics` labels by kind).
        if let Err(e) = sqlx::query(self.sql(
            "INSERT INTO counters (name, value) VALUES ('stale_token_rejections', 1), (?, 1) \
             ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
        ))
        .bind(format!("{STALE_TOKEN_KIND_PREFIX}{}", write_kind(what)))
        .execute(self.pool())
        .await
        {
            return e.into();
        }
        if let Err(e) = self
            .stale_write_record(lease, what, found.as_ref().map(|f| f.0), effect)
            .await
        {
            return e;
        }
        let (found, state, plan_key) = match found {
            Some((token, state, key)) => (Some(token.into()), state.parse().ok(), Some(key)),
            None => (None, None, None),
        };
        let refusal = FenceRefusal {
            lease,
            kind: &write_kind(what),
            plan_key: plan_key.as_deref(),
            found,
            state,
            effect,
        };
        refusal.log(&format!("stale {what} rejected"));
        StoreError::LeaseLost {
            trigger_id: lease.trigger_id,
            expected: lease.fencing_token,
            found,
            state,
        }
    }

    /// One `stale_writes` row: the refusal, attributable to its trigger
    /// and window. Written only on a refusal (never on the success path).
    async fn stale_write_record(
        &self,
        lease: &LeaseRef,
        what: &str,
        found: Option<i64>,
        effect: Option<&EffectRef<'_>>,
    ) -> Result<(), StoreError> {
        sqlx::query(self.sql(concat!(
            "INSERT INTO stale_writes (trigger_id, attempt_id, kind, fencing_token, found_token, \
             idempotency_key, at) VALUES (?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ")"
        )))
        .bind(lease.trigger_id)
        .bind(lease.attempt_id)
        .bind(write_kind(what))
        .bind(lease.fencing_token.get())
        .bind(found)
        .bind(effect.map(|e| e.key))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The translator for a shard-lease write that touched zero rows:
    /// reads the shard's generation and owner now, counts the stale write,
    /// logs it, and returns [`StoreError::ShardLost`].
    pub(crate) async fn shard_lost(&self, lease: &ShardLease, what: &str) -> StoreError {
        let found: Option<(i64, Option<String>)> = match sqlx::query_as(
            self.sql("SELECT generation, owner FROM schedule_shards WHERE shard = ?"),
        )
        .bind(lease.shard)
        .fetch_optional(self.pool())
        .await
        {
            Ok(found) => found,
            Err(e) => return e.into(),
        };
        if let Err(e) = self
            .counter_add_in(self.pool(), "stale_shard_generation_rejections", 1)
            .await
        {
            return e;
        }
        let (found, owner) = match found {
            Some((generation, owner)) => (Some(generation.into()), owner),
            None => (None, None),
        };
        tracing::warn!(
            shard = lease.shard,
            expected = %lease.generation,
            found = ?found,
            owner = ?owner,
            "stale {what} rejected: the shard moved to another scheduler"
        );
        StoreError::ShardLost {
            shard: lease.shard,
            expected: lease.generation,
            found,
            owner,
        }
    }
}
