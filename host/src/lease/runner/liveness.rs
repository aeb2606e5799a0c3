//! The runner's side of liveness bound to the database session
//! ([`crate::store::Liveness`]): before it claims, a runner holds its
//! liveness lock, and at most every [`SWEEP`] it ends the leases of
//! holders whose session is gone, so their triggers are taken over within
//! a sweep of a process's death instead of at the end of its lease.

use super::Runner;
use crate::store::Liveness;
use std::time::{Duration, Instant};

/// How often a runner looks for holders whose session is gone.
pub(super) const SWEEP: Duration = Duration::from_millis(200);

/// This runner's liveness lock, and when it last swept.
#[derive(Default)]
pub(super) struct Keeper {
    held: Option<Liveness>,
    last_sweep: Option<Instant>,
}

impl Runner {
    /// Hold this runner's liveness lock (again, if its connection dropped)
    /// and, at most every [`SWEEP`], set free the triggers of holders whose
    /// session is gone. Failures are logged and leave leases to run out as
    /// they would without liveness: never a reason not to claim.
    pub(super) async fn keep_alive(&self) {
        let mut keeper = self.liveness.lock().await;
        if keeper.last_sweep.is_some_and(|at| at.elapsed() < SWEEP) {
            return;
        }
        keeper.last_sweep = Some(Instant::now());
        let alive = match keeper.held.as_mut() {
            Some(held) => held.alive().await,
            None => false,
        };
        if !alive {
            keeper.held = match self.store.liveness_hold(&self.config.runner_id).await {
                Ok(held) => held,
                Err(e) => {
                    tracing::warn!(error = %crate::model::text::Esc(&e), "liveness lock not held; leases will run their length");
                    None
                }
            };
        }
        match self.store.expire_dead_holders(&self.config.runner_id).await {
            Ok(freed) if !freed.is_empty() => {
                tracing::info!(triggers = ?freed, "holders' sessions are gone: their leases ended for takeover");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %crate::model::text::Esc(&e), "could not look for holders whose session is gone");
            }
        }
    }
}
