//! Heartbeats on a small runtime of their own.
//!
//! Renewals must not wait behind anything else the process does: not behind
//! claim and commit tasks on the main runtime, not behind a task that blocks
//! one of its workers, and not behind guests. So every heartbeat loop runs
//! on the `paddock-heartbeat` runtime (two worker threads), and a runner can
//! give them a store of their own (a small pool whose connections are opened
//! on that runtime, so even their I/O is driven by its threads).
//!
//! The runtime lives for the whole process (a `static`): a tokio runtime
//! cannot be dropped inside an async context, and a database connection
//! opened on a runtime stays bound to its I/O driver, so shutting a
//! per-runner runtime down would strand the pool's connections.
//!
//! Behaviour per attempt (unchanged from the first runner): renew every
//! `heartbeat_every`, only while owner, token and state match (the store's
//! `lease_renew`); a renewal that finds the lease lost, or
//! `max_missed_heartbeats` consecutive failed or timed-out renewals, close
//! the commit gate (`StopReason::LeaseLost`): the guest is interrupted at
//! the next epoch tick, no new effect starts, and the attempt is recorded
//! as `lease_lost` with the reason.

use super::RunnerConfig;
use crate::sandbox::{StopReason, StopSignal};
use crate::store::{LeaseRef, Store, StoreError, StoreResult};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

/// Worker threads of the heartbeat runtime. Renewals are short database
/// writes; two threads keep one slow renewal from delaying the others.
pub const HEARTBEAT_THREADS: usize = 2;

/// The process's heartbeat runtime, started on first use.
pub fn runtime() -> Handle {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(HEARTBEAT_THREADS)
                .thread_name("paddock-heartbeat")
                .enable_all()
                .build()
                .expect("start the heartbeat runtime")
        })
        .handle()
        .clone()
}

/// Where a runner's heartbeats run and which store they renew through.
#[derive(Clone)]
pub struct Heartbeats {
    runtime: Handle,
    store: Store,
}

impl Heartbeats {
    /// Heartbeats on the heartbeat runtime, renewing through `store` (the
    /// runner's own pool).
    pub fn on(store: Store) -> Self {
        Self {
            runtime: runtime(),
            store,
        }
    }

    /// Heartbeats on the heartbeat runtime with a pool of their own
    /// (`connections` connections to `url`, opened on that runtime), so a
    /// runner whose pool is busy or whose runtime is stalled still renews.
    pub async fn dedicated(url: &str, connections: u32) -> StoreResult<Self> {
        let rt = runtime();
        let url = url.to_string();
        let store = rt
            .spawn(async move { Store::open_with(&url, Some(connections)).await })
            .await
            .map_err(|e| StoreError::Conflict(format!("heartbeat store task failed: {e}")))??;
        Ok(Self { runtime: rt, store })
    }

    /// Start renewing `lease` until the returned handle is aborted or the
    /// gate closes.
    pub(super) fn spawn(
        &self,
        lease: LeaseRef,
        config: RunnerConfig,
        stop: Arc<StopSignal>,
        progress: Arc<AtomicI64>,
    ) -> JoinHandle<()> {
        self.runtime.spawn(heartbeat_loop(
            self.store.clone(),
            lease,
            config,
            stop,
            progress,
        ))
    }
}

/// Renew the lease every `heartbeat_every`; close the gate when the lease
/// is lost or renewals keep failing.
async fn heartbeat_loop(
    store: Store,
    lease: LeaseRef,
    config: RunnerConfig,
    stop: Arc<StopSignal>,
    progress: Arc<AtomicI64>,
) {
    let mut missed = 0;
    let mut ticker = tokio::time::interval(config.heartbeat_every);
    ticker.tick().await; // the first tick is immediate; the claim just set the lease
    loop {
        ticker.tick().await;
        let renew = tokio::time::timeout(
            config.heartbeat_every,
            store.lease_renew(
                &lease,
                config.lease.as_millis() as i64,
                progress.load(Ordering::Relaxed),
            ),
        )
        .await;
        match renew {
            Ok(Ok((_, cancel_requested))) => {
                missed = 0;
                if cancel_requested {
                    stop.request(StopReason::Cancel);
                }
            }
            Ok(Err(StoreError::LeaseLost {
                expected, found, ..
            })) => {
                tracing::warn!(
                    trigger_id = lease.trigger_id,
                    expected,
                    ?found,
                    "lease lost; interrupting guest"
                );
                stop.request(StopReason::LeaseLost);
                return;
            }
            Ok(Err(e)) => {
                missed += 1;
                tracing::warn!(trigger_id = lease.trigger_id, missed, error = %e, "heartbeat failed");
            }
            Err(_) => {
                missed += 1;
                tracing::warn!(trigger_id = lease.trigger_id, missed, "heartbeat timed out");
            }
        }
        if missed >= config.max_missed_heartbeats {
            tracing::warn!(
                trigger_id = lease.trigger_id,
                missed,
                "cannot confirm lease; closing commit gate"
            );
            stop.request(StopReason::LeaseLost);
            return;
        }
    }
}
