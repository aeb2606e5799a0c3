//! Liveness bound to the database session (PostgreSQL): a runner holds an
//! advisory lock for as long as it runs, on a connection of its own
//! ([`Liveness`]), and registers its owner name in `runner_sessions`
//! (migration 0036). When its process dies, the kernel closes the socket,
//! the server ends the session and the lock is free; a live runner's
//! sweep ([`Store::expire_dead_holders`]) then ends the leases of that
//! owner at once, and the next claim takes the triggers over with token
//! + 1. Nothing else about the lease changes:
//!
//! - a *stopped* process (SIGSTOP, a stall) keeps its session and its
//!   lock, so its leases run their full length and it is refused by its
//!   token only once they are taken over — as before;
//! - a holder whose connection alone dropped (a network fault) is taken
//!   over early, and every write it still attempts is refused by its
//!   token, exactly as after a lapsed lease: ending a lease early is as
//!   safe as ending it on time, because no write is ever trusted to a
//!   lease but through the fenced statement;
//! - owners not registered (older versions, direct claims in tools) keep
//!   the lease alone.
//!
//! The lock's key is `(7263521, hashtext(schema || '/' || owner))`: two
//! schemas of one server (tests, tenants of one cluster) never share one.
//! A collision between two owners makes a dead one look alive: its
//! leases then run out as they would have anyway.

use super::dialect::now_ms;
use super::*;
use crate::trigger_state;

/// The advisory lock class of runner liveness.
const LIVENESS_CLASS: i32 = 7_263_521;

/// A runner's hold on its liveness lock: the connection that holds it.
/// Dropped, the connection closes and the lock is free.
pub struct Liveness {
    connection: sqlx::postgres::PgConnection,
}

impl Liveness {
    /// Whether the connection (and so the lock) is still there.
    pub async fn alive(&mut self) -> bool {
        sqlx::query("SELECT 1")
            .execute(&mut self.connection)
            .await
            .is_ok()
    }
}

/// End the leases of registered owners whose lock nobody holds, but the
/// caller's own (`$1`): each becomes a lapsed lease, taken over by the next
/// claim. Returns the triggers set free.
const EXPIRE_DEAD: &str = concat!(
    "WITH alive AS (SELECT s.owner FROM runner_sessions s JOIN pg_locks l \
       ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 \
      AND l.classid = CAST(7263521 AS oid) \
      AND l.objid = CAST(hashtext(coalesce(current_schema(), 'public') || '/' || s.owner) AS oid)) \
     UPDATE triggers SET lease_until = ",
    now_ms!(),
    " - 1 WHERE state = ",
    trigger_state!(running),
    " AND lease_until >= ",
    now_ms!(),
    " AND lease_owner <> ?1 \
      AND lease_owner IN (SELECT owner FROM runner_sessions) \
      AND lease_owner NOT IN (SELECT owner FROM alive) \
     RETURNING id"
);

impl Store {
    /// PostgreSQL: take `owner`'s liveness lock on a connection of its own
    /// and register the owner; `None` on SQLite (one process: nothing to
    /// watch) or when a live session already holds the owner name.
    pub(super) async fn hold_liveness(&self, owner: &str) -> StoreResult<Option<Liveness>> {
        if self.dialect != Dialect::Postgres {
            return Ok(None);
        }
        use sqlx::Connection;
        let mut connection = sqlx::postgres::PgConnection::connect(&self.url).await?;
        // Not waited for: a second runner of the same name in a live
        // process is covered by that one's session.
        let held: bool = sqlx::query_scalar(
            "SELECT pg_try_advisory_lock($1, hashtext(coalesce(current_schema(), 'public') || '/' || $2))",
        )
        .bind(LIVENESS_CLASS)
        .bind(owner)
        .fetch_one(&mut connection)
        .await?;
        if !held {
            return Ok(None);
        }
        sqlx::query(self.sql(concat!(
            "INSERT INTO runner_sessions (owner, registered_at) VALUES (?, ",
            now_ms!(),
            ") ON CONFLICT (owner) DO NOTHING"
        )))
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(Some(Liveness { connection }))
    }

    /// PostgreSQL: end the leases of registered owners whose session is
    /// gone, but `me`'s (see the module comment), and wake the claimers;
    /// the triggers set free. Nothing on SQLite.
    pub(super) async fn expire_dead(&self, me: &str) -> StoreResult<Vec<i64>> {
        if self.dialect != Dialect::Postgres {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;
        let freed: Vec<i64> = sqlx::query_scalar(self.sql(EXPIRE_DEAD))
            .bind(me)
            .fetch_all(&mut *tx)
            .await?;
        if !freed.is_empty() {
            let now: i64 = sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
                .fetch_one(&mut *tx)
                .await?;
            // The open attempt's lease ends where the trigger's did: the
            // takeover's latency is measured from here.
            for id in &freed {
                sqlx::query(self.sql(
                    "UPDATE attempts SET lease_until = ?1 - 1 WHERE trigger_id = ?2 AND ended_at IS NULL",
                ))
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            self.announce_due(&mut *tx, now).await?;
        }
        tx.commit().await?;
        Ok(freed)
    }
}
