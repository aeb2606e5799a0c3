//! Liveness bound to the holder's process: a runner holds a lock for as
//! long as it runs ([`Liveness`]) and registers its owner name in
//! `runner_sessions` (migration 0036). On PostgreSQL the lock is an
//! advisory lock on a connection of its own: when its process dies, the
//! kernel closes the socket and the server ends the session. On SQLite it
//! is an exclusive lock on a file of its own beside the database
//! (`<database>.runners/`), which the operating system releases when the
//! process dies — so a restart takes over at once. Either way a live runner's
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

/// A runner's hold on its liveness lock: the connection (PostgreSQL) or
/// the open file (SQLite) that holds it. Dropped, the lock is free.
pub enum Liveness {
    Session(sqlx::postgres::PgConnection),
    File(std::fs::File),
}

impl Liveness {
    /// Whether the lock is still held (a session can drop; a file lock
    /// lasts as long as the file is open).
    pub async fn alive(&mut self) -> bool {
        match self {
            Liveness::Session(connection) => {
                sqlx::query("SELECT 1").execute(connection).await.is_ok()
            }
            Liveness::File(_) => true,
        }
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
    /// Take `owner`'s liveness lock and register the owner: on PostgreSQL
    /// an advisory lock on a connection of its own, on SQLite a file lock.
    /// `None` when a live holder already holds the owner name (it covers
    /// this one).
    pub(super) async fn hold_liveness(&self, owner: &str) -> StoreResult<Option<Liveness>> {
        if self.dialect != Dialect::Postgres {
            return self.hold_lock_file(owner).await;
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
        Ok(Some(Liveness::Session(connection)))
    }

    /// End the leases of registered owners whose lock is free, but `me`'s
    /// (see the module comment), and wake the claimers; the triggers set
    /// free.
    pub(super) async fn expire_dead(&self, me: &str) -> StoreResult<Vec<i64>> {
        if self.dialect != Dialect::Postgres {
            return self.expire_dead_files(me).await;
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

    /// SQLite: the file whose lock stands for `owner`'s life.
    fn lock_file(&self, owner: &str) -> Option<std::path::PathBuf> {
        use sha2::{Digest, Sha256};
        use std::str::FromStr;
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&self.url).ok()?;
        let mut dir = options.get_filename().as_os_str().to_owned();
        dir.push(".runners");
        Some(std::path::PathBuf::from(dir).join(hex::encode(Sha256::digest(owner.as_bytes()))))
    }

    /// SQLite: lock `owner`'s file (not waited for) and register the owner.
    async fn hold_lock_file(&self, owner: &str) -> StoreResult<Option<Liveness>> {
        let Some(path) = self.lock_file(owner) else {
            return Ok(None);
        };
        let locked = (|| -> std::io::Result<Option<std::fs::File>> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            match file.try_lock() {
                Ok(()) => Ok(Some(file)),
                Err(std::fs::TryLockError::WouldBlock) => Ok(None),
                Err(std::fs::TryLockError::Error(e)) => Err(e),
            }
        })();
        let Ok(Some(file)) = locked else {
            return Ok(None);
        };
        sqlx::query(self.sql(concat!(
            "INSERT INTO runner_sessions (owner, registered_at) VALUES (?, ",
            now_ms!(),
            ") ON CONFLICT (owner) DO NOTHING"
        )))
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(Some(Liveness::File(file)))
    }

    /// SQLite: whether `owner`'s file is locked by a live process (a file
    /// that cannot be read or locked counts as live: leases then run out
    /// as they would without liveness).
    fn lock_held(&self, owner: &str) -> bool {
        let Some(path) = self.lock_file(owner) else {
            return true;
        };
        match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(file) => !matches!(file.try_lock(), Ok(())),
            Err(_) => true,
        }
    }

    /// SQLite: [`Store::expire_dead`] by file locks.
    async fn expire_dead_files(&self, me: &str) -> StoreResult<Vec<i64>> {
        let owners: Vec<String> = sqlx::query_scalar(self.sql(concat!(
            "SELECT DISTINCT t.lease_owner FROM triggers t JOIN runner_sessions s \
             ON s.owner = t.lease_owner WHERE t.state = ",
            trigger_state!(running),
            " AND t.lease_until >= ",
            now_ms!(),
            " AND t.lease_owner <> ?"
        )))
        .bind(me)
        .fetch_all(&self.pool)
        .await?;
        let dead: Vec<String> = owners.into_iter().filter(|o| !self.lock_held(o)).collect();
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let (mut tx, _turn) = self.begin_write().await?;
        let mut freed = Vec::new();
        for owner in &dead {
            let ids: Vec<i64> = sqlx::query_scalar(self.sql(concat!(
                "UPDATE triggers SET lease_until = ",
                now_ms!(),
                " - 1 WHERE state = ",
                trigger_state!(running),
                " AND lease_owner = ? AND lease_until >= ",
                now_ms!(),
                " RETURNING id"
            )))
            .bind(owner)
            .fetch_all(&mut *tx)
            .await?;
            freed.extend(ids);
        }
        for id in &freed {
            sqlx::query(self.sql(concat!(
                "UPDATE attempts SET lease_until = ",
                now_ms!(),
                " - 1 WHERE trigger_id = ? AND ended_at IS NULL"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(freed)
    }
}
