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
    /// reads what the trigger holds now, counts the stale write, logs it,
    /// and returns [`StoreError::LeaseLost`] — or the database's error if
    /// even that read fails.
    pub(crate) async fn lease_lost(&self, lease: &LeaseRef, what: &str) -> StoreError {
        let found: Option<(i64, String)> = match sqlx::query_as(
            self.sql("SELECT fencing_token, state FROM triggers WHERE id = ?"),
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
        let (found, state) = match found {
            Some((token, state)) => (Some(token.into()), state.parse().ok()),
            None => (None, None),
        };
        tracing::warn!(
            trigger_id = lease.trigger_id,
            expected = %lease.fencing_token,
            found = ?found,
            state = ?state,
            owner = %lease.owner,
            "stale {what} rejected"
        );
        StoreError::LeaseLost {
            trigger_id: lease.trigger_id,
            expected: lease.fencing_token,
            found,
            state,
        }
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
