//! Wake-ups across processes. A process that creates work announces when it
//! comes due; every runner listening wakes then instead of at its next poll.
//!
//! PostgreSQL: `pg_notify` on [`WAKE_CHANNEL`]`:<schema>` inside the statement's own
//! transaction (delivered at commit, never for a rolled-back insert), with
//! the delay until the work is due as the payload, so a trigger created for
//! 3 s from now wakes runners in 3 s rather than now. SQLite: one process
//! owns the file and wakes its runner in memory, so there is nothing to send.
//!
//! The channel carries the schema's name because channels are per database,
//! not per schema: Paddock installations that share one database in
//! separate schemas (the test suite does, one schema per test) must not wake
//! each other.
//!
//! Notifications are a latency optimisation only. A listener that loses its
//! connection reconnects with backoff and the runners keep polling, so a lost
//! notification delays work by at most one poll interval and loses nothing.

use super::dialect::now_ms;
use super::{Dialect, Store, StoreResult};
use std::sync::Arc;
use std::time::Duration;

/// The channel every Paddock process listens on, followed by `:` and the
/// schema its tables live in.
pub const WAKE_CHANNEL: &str = "paddock_wake";

/// Stops the listener task when dropped.
pub struct WakeListener {
    task: tokio::task::JoinHandle<()>,
    /// True while the connection is up and `LISTEN` has returned: from then
    /// on every announcement committed reaches `on_wake`.
    listening: tokio::sync::watch::Receiver<bool>,
}

impl WakeListener {
    /// Resolves once the listener is connected and `LISTEN`ing (again,
    /// after a reconnect), so a caller can tell an announcement made from
    /// now on will be heard. Never resolves if the listener cannot connect.
    pub async fn listening(&self) {
        let mut rx = self.listening.clone();
        // The sender lives as long as the task; the task outlives `self`.
        let _ = rx.wait_for(|up| *up).await;
    }
}

impl Drop for WakeListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Store {
    /// Tell other processes that work comes due at `due_at` (ms, database
    /// clock). Sent inside `executor`'s transaction when it is one. The
    /// payload is the delay from the database's now, so listeners need no
    /// agreement between their own clocks and the database's.
    pub(super) async fn announce_due<'e, E>(&self, executor: E, due_at: i64) -> StoreResult<()>
    where
        E: sqlx::Executor<'e, Database = sqlx::Any>,
    {
        if self.dialect == Dialect::Postgres {
            sqlx::query(self.sql(concat!(
                "SELECT pg_notify('paddock_wake:' || coalesce(current_schema(), 'public'), CAST(?1 - ",
                now_ms!(),
                " AS TEXT))"
            )))
            .bind(due_at)
            .execute(executor)
            .await?;
        }
        Ok(())
    }

    /// Call `on_wake` whenever another process announces work, at the time
    /// the work comes due. `None` on SQLite (nothing crosses processes).
    pub fn listen_wakes(&self, on_wake: Arc<dyn Fn() + Send + Sync>) -> Option<WakeListener> {
        if self.dialect != Dialect::Postgres {
            return None;
        }
        let url = self.url.to_string();
        let (listening_tx, listening) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let result = listen_once(&url, &on_wake, &listening_tx).await;
                listening_tx.send_replace(false);
                match result {
                    Ok(()) => backoff = Duration::from_millis(100),
                    Err(e) => {
                        tracing::warn!(error = %crate::model::text::Esc(&e), "wake listener lost its connection; polling covers the gap");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
        Some(WakeListener { task, listening })
    }
}

/// Listen until the connection fails.
async fn listen_once(
    url: &str,
    on_wake: &Arc<dyn Fn() + Send + Sync>,
    listening: &tokio::sync::watch::Sender<bool>,
) -> sqlx::Result<()> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    // The URL's search_path (if any) applies to this connection too.
    let schema: String = sqlx::query_scalar("SELECT coalesce(current_schema(), 'public')::text")
        .fetch_one(&mut listener)
        .await?;
    listener.listen(&format!("{WAKE_CHANNEL}:{schema}")).await?;
    listening.send_replace(true);
    loop {
        let note = listener.recv().await?;
        // Negative (already due) or unreadable: wake now.
        let delay_ms: u64 = note.payload().parse().unwrap_or(0);
        if delay_ms == 0 {
            on_wake();
        } else {
            let on_wake = on_wake.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                on_wake();
            });
        }
    }
}
