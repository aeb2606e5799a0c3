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
//! One keeper per runner, not one task per attempt: an attempt registers
//! its lease in the keeper's table when it starts and leaves it when it
//! ends (a mutex insert and remove; nothing is spawned and no other thread
//! is woken), and the keeper, ticking on the heartbeat runtime, renews each
//! lease that is due. Most attempts end long before their first renewal is
//! due, and spawning a task per attempt on another runtime cost more than a
//! no-op guest's whole run (benches/throughput).
//!
//! Behaviour per attempt (unchanged from the first runner): renew every
//! `heartbeat_every` (checked every quarter period, at most every 250 ms),
//! only while owner, token and state match (the store's `lease_renew`);
//! renewals of different attempts run concurrently, so one slow renewal
//! does not delay the others; a renewal that finds the lease lost, or
//! `max_missed_heartbeats` consecutive failed or timed-out renewals, close
//! the commit gate (`StopReason::LeaseLost`): the guest is interrupted at
//! the next epoch tick, no new effect starts, and the attempt is recorded
//! as `lease_lost` with the reason.

use super::RunnerConfig;
use super::clock::ProcessClock;
use super::metrics::LeaseMetrics;
use crate::model::LeaseRef;
use crate::sandbox::{StopReason, StopSignal};
use crate::store::{RunnerStore, Store, StoreError, StoreResult};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::runtime::{Handle, Runtime};

/// Worker threads of the heartbeat runtime. Renewals are short database
/// writes; two threads keep one slow renewal from delaying the others.
pub const HEARTBEAT_THREADS: usize = 2;

/// The keeper's longest tick.
const MAX_TICK: Duration = Duration::from_millis(250);

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
    store: Arc<dyn RunnerStore>,
    table: Arc<Table>,
}

/// The attempts a keeper renews, by attempt id.
struct Table {
    attempts: Mutex<HashMap<i64, Kept>>,
    /// The keeper's tick in ms: a quarter of the shortest heartbeat period
    /// registered so far, at most [`MAX_TICK`].
    tick_ms: AtomicU64,
    keeper: OnceLock<()>,
    /// Renewal latency and leases given up, for `/metrics`.
    metrics: LeaseMetrics,
    /// What paces the renewals (see [`ProcessClock`]).
    clock: ProcessClock,
}

impl Table {
    fn new(clock: ProcessClock) -> Arc<Self> {
        Arc::new(Self {
            attempts: Mutex::default(),
            tick_ms: AtomicU64::new(MAX_TICK.as_millis() as u64),
            keeper: OnceLock::new(),
            metrics: LeaseMetrics::default(),
            clock,
        })
    }
}

/// One attempt's heartbeat state.
struct Kept {
    lease: LeaseRef,
    stop: Arc<StopSignal>,
    progress: Arc<AtomicI64>,
    every: Duration,
    lease_ms: i64,
    max_missed: u32,
    due: Instant,
    missed: u32,
    renewing: bool,
}

impl Heartbeats {
    /// Heartbeats on the heartbeat runtime, renewing through `store` (the
    /// runner's own pool).
    pub fn on(store: Arc<dyn RunnerStore>) -> Self {
        Self::on_clock(store, ProcessClock::Monotonic)
    }

    /// [`Heartbeats::on`], paced by `clock` instead of the process's
    /// monotonic clock.
    pub fn on_clock(store: Arc<dyn RunnerStore>, clock: ProcessClock) -> Self {
        Self {
            runtime: runtime(),
            store,
            table: Table::new(clock),
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
        Ok(Self {
            runtime: rt,
            store: Arc::new(store),
            table: Table::new(ProcessClock::Monotonic),
        })
    }

    /// The execution plane's instruments, shared with the runner these
    /// heartbeats serve.
    pub fn metrics(&self) -> &LeaseMetrics {
        &self.table.metrics
    }

    /// Keep renewing `lease` until the returned handle is ended (or
    /// dropped) or the gate closes.
    pub(super) fn start(
        &self,
        lease: LeaseRef,
        config: &RunnerConfig,
        stop: Arc<StopSignal>,
        progress: Arc<AtomicI64>,
    ) -> Heartbeat {
        let every = config.heartbeat_every.max(Duration::from_millis(1));
        let tick = (every / 4).min(MAX_TICK).as_millis().max(1) as u64;
        self.table.tick_ms.fetch_min(tick, Ordering::Relaxed);
        let attempt_id = lease.attempt_id;
        self.table.attempts.lock().expect("heartbeat table").insert(
            attempt_id,
            Kept {
                lease,
                stop,
                progress,
                every,
                lease_ms: config.lease.as_millis() as i64,
                max_missed: config.max_missed_heartbeats,
                due: self.table.clock.now() + every,
                missed: 0,
                renewing: false,
            },
        );
        self.table.keeper.get_or_init(|| {
            self.runtime.spawn(keep(
                Arc::downgrade(&self.table),
                self.store.clone(),
                self.runtime.clone(),
            ));
        });
        Heartbeat {
            table: self.table.clone(),
            attempt_id,
        }
    }
}

/// An attempt's place in the keeper's table; leaving it stops the renewals.
pub(super) struct Heartbeat {
    table: Arc<Table>,
    attempt_id: i64,
}

impl Heartbeat {
    pub(super) fn end(self) {}
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.table
            .attempts
            .lock()
            .expect("heartbeat table")
            .remove(&self.attempt_id);
    }
}

/// The keeper: every tick, start a renewal for each lease that is due.
/// Ends when the runner's [`Heartbeats`] are gone.
async fn keep(table: Weak<Table>, store: Arc<dyn RunnerStore>, runtime: Handle) {
    loop {
        let tick = match table.upgrade() {
            Some(t) => Duration::from_millis(t.tick_ms.load(Ordering::Relaxed).max(1)),
            None => return,
        };
        tokio::time::sleep(tick).await;
        let Some(strong) = table.upgrade() else {
            return;
        };
        let now = strong.clock.now();
        let mut attempts = strong.attempts.lock().expect("heartbeat table");
        for kept in attempts.values_mut() {
            if kept.renewing || kept.due > now {
                continue;
            }
            kept.renewing = true;
            runtime.spawn(renew(
                table.clone(),
                store.clone(),
                kept.lease.clone(),
                kept.lease_ms,
                kept.every,
                kept.progress.load(Ordering::Relaxed),
            ));
        }
    }
}

/// One renewal, then its verdict in the table.
async fn renew(
    table: Weak<Table>,
    store: Arc<dyn RunnerStore>,
    lease: LeaseRef,
    lease_ms: i64,
    every: Duration,
    progress: i64,
) {
    let started = Instant::now();
    let renewed = tokio::time::timeout(every, store.lease_renew(&lease, lease_ms, progress)).await;
    let Some(table) = table.upgrade() else {
        return;
    };
    table.metrics.renewed(started.elapsed());
    let mut attempts = table.attempts.lock().expect("heartbeat table");
    // Gone: the attempt ended while its renewal was in flight.
    let Some(kept) = attempts.get_mut(&lease.attempt_id) else {
        return;
    };
    kept.renewing = false;
    kept.due = table.clock.now() + every;
    let trigger_id = lease.trigger_id;
    match renewed {
        Ok(Ok(renewal)) => {
            let cancel_requested = renewal.cancel_requested;
            kept.missed = 0;
            if cancel_requested {
                kept.stop.request(StopReason::Cancel);
            }
            if renewal.pause_requested && kept.stop.reason().is_none() {
                // Tests and the pause-latency figure read this line.
                tracing::info!(trigger_id, "gate closed: asking the attempt to pause");
                kept.stop.request(StopReason::Pause);
            }
            return;
        }
        Ok(Err(StoreError::LeaseLost {
            expected, found, ..
        })) => {
            tracing::warn!(
                trigger_id,
                expected = %crate::model::text::Esc(&expected),
                ?found,
                "lease lost; interrupting guest"
            );
            kept.stop.request(StopReason::LeaseLost);
            attempts.remove(&lease.attempt_id);
            table.metrics.lease_given_up("lost");
            return;
        }
        Ok(Err(e)) => {
            kept.missed += 1;
            table.metrics.heartbeat_missed();
            tracing::warn!(trigger_id, missed = kept.missed, error = %crate::model::text::Esc(&e), "heartbeat failed");
        }
        Err(_) => {
            kept.missed += 1;
            table.metrics.heartbeat_missed();
            tracing::warn!(trigger_id, missed = kept.missed, "heartbeat timed out");
        }
    }
    if kept.missed >= kept.max_missed {
        tracing::warn!(
            trigger_id,
            missed = kept.missed,
            "cannot confirm lease; closing commit gate"
        );
        kept.stop.request(StopReason::LeaseLost);
        attempts.remove(&lease.attempt_id);
        table.metrics.lease_given_up("unconfirmed");
    }
}
