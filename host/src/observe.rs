//! What an operator, a load balancer and Prometheus see of one node:
//! `/metrics` (Prometheus text format 0.0.4), `/healthz` and `/readyz`, on
//! the listener `paddock serve --metrics ADDR` binds (off unless asked).
//!
//! Two kinds of figures, and each metric's HELP text says which it is:
//!
//! - **cluster-wide**, read from the database at scrape time in one
//!   statement ([`crate::store::MetricsSnapshot`]): trigger counts, oldest
//!   due age, the `counters` table (stale writes, idempotency hits, ...),
//!   unknown effects, compensations, open tickets, effective concurrency,
//!   scanner lag. Every node reports the same values: aggregate them with
//!   `max`, not `sum`;
//! - **this process**, measured where it happens and held in memory
//!   ([`crate::lease::LeaseMetrics`], the effect gateway's breakers):
//!   claims, trigger delay, attempts per job, renewal latency, lost leases
//!   and how fast their guests stopped. Sum them over nodes.
//!
//! Invariants:
//! - a scrape costs one database round trip and never takes a lock the hot
//!   paths hold across an await;
//! - labels are bounded sets an admin defines (groups, tenants, jobs,
//!   connectors, shards, states, kinds of write) — never a trigger id, a
//!   key, a parameter or a secret;
//! - `/readyz` answers 503 from the moment the node starts draining until
//!   the process exits, and while the database is unreachable or behind
//!   this binary's migrations; `/healthz` answers 200 while the process
//!   serves HTTP at all.

mod export;
mod http;

pub use http::MetricsServer;

use crate::effects::EffectGateway;
use crate::lease::LeaseMetrics;
use crate::store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long `/readyz` waits for the database before it answers 503.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Set once a node starts draining; read by `/readyz`. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    pub fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Whether a node should be sent work, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// The reason, in words fit for a probe's log (no URL, no SQL).
    NotReady(String),
}

/// Everything a scrape reads: the store, the runner's instruments, the
/// gateway's breakers, the drain flag.
pub struct Observer {
    store: Store,
    lease: LeaseMetrics,
    gateway: Option<Arc<EffectGateway>>,
    draining: Draining,
}

impl Observer {
    pub fn new(
        store: Store,
        lease: LeaseMetrics,
        gateway: Option<Arc<EffectGateway>>,
        draining: Draining,
    ) -> Self {
        Self {
            store,
            lease,
            gateway,
            draining,
        }
    }

    /// The Prometheus text of one scrape. A database that cannot be read
    /// leaves the cluster-wide figures out and says so in
    /// `paddock_database_up 0`; the process's figures are still there.
    pub async fn render(&self) -> String {
        let snapshot = match self.store.metrics_snapshot().await {
            Ok(snapshot) => Some(snapshot),
            Err(e) => {
                tracing::warn!(error = %crate::model::text::Esc(&e), "metrics: the database could not be read");
                None
            }
        };
        let breakers = self
            .gateway
            .as_ref()
            .map(|g| g.breaker_states())
            .unwrap_or_default();
        let here = export::ProcessFigures {
            lease: &self.lease,
            breakers: &breakers,
            claims_refused: self.store.claims_refused(),
        };
        export::render(&here, snapshot.as_ref())
    }

    /// Ready: not draining, the database reachable within
    /// [`READY_TIMEOUT`] and at this binary's newest migration.
    pub async fn readiness(&self) -> Readiness {
        if self.draining.is_set() {
            return Readiness::NotReady("draining".into());
        }
        match tokio::time::timeout(READY_TIMEOUT, self.store.schema_state()).await {
            Err(_) => Readiness::NotReady("database did not answer in time".into()),
            Ok(Err(e)) => {
                tracing::warn!(error = %crate::model::text::Esc(&e), "readyz: database unreachable");
                Readiness::NotReady("database unreachable".into())
            }
            Ok(Ok(schema)) if !schema.current() => Readiness::NotReady(format!(
                "migrations not current: the database is at {}, this binary at {}",
                schema
                    .applied
                    .map_or_else(|| "none".to_string(), |v| v.to_string()),
                schema.expected
            )),
            Ok(Ok(_)) if self.draining.is_set() => Readiness::NotReady("draining".into()),
            Ok(Ok(_)) => Readiness::Ready,
        }
    }
}
