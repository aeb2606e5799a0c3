//! The governor: each serving process recomputes its groups' effective
//! concurrency from what their recent attempts measured (service time,
//! peak memory — [`crate::model::group::effective_concurrency`]) and
//! stores it for the claims of every process to enforce; a change is
//! logged. Processes computing at once agree (the same inputs, the same
//! window), so the last write wins harmlessly.

use crate::store::{ReadStore, Store, StoreResult, capacity_now};
use std::time::Duration;

/// Recompute every group once; returns how many moved.
pub async fn govern_once(store: &Store) -> StoreResult<usize> {
    let mut moved = 0;
    for group in store.groups_list().await? {
        let (observed, capacity) = capacity_now(store, &group).await?;
        if store.group_effective_set(&group.name, &capacity).await? {
            moved += 1;
            tracing::info!(
                group = %group.name,
                effective_concurrency = capacity.effective,
                binding = capacity.binding,
                samples = observed.samples,
                service_time_ms = observed.service_time_ms,
                "effective concurrency moved"
            );
        }
    }
    Ok(moved)
}

/// Stops the governor's task when dropped.
pub struct GovernorGuard(tokio::task::JoinHandle<()>);

impl Drop for GovernorGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run [`govern_once`] every `every` until the guard is dropped.
pub fn spawn_governor(store: Store, every: Duration) -> GovernorGuard {
    GovernorGuard(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = govern_once(&store).await {
                tracing::warn!(error = %e, "could not recompute effective concurrency; will retry");
            }
        }
    }))
}
