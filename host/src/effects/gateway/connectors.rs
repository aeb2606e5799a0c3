//! The connectors this process calls: each one's row, reloaded at most
//! every TTL, with the in-memory state that makes it safe to call (permits,
//! circuit breaker, rate limit).

use crate::effects::breaker::{Breaker, BreakerConfig, BreakerState, RateLimit};
use crate::effects::protocol;
use crate::model::secret::ConnectorSecret;
use crate::sandbox::wit::effects::EffectError;
use crate::store::{ConnectorRecord, EffectStore, StoreError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// In-memory state of one connector in this process.
pub(super) struct Live {
    pub(super) record: ConnectorRecord,
    /// The credential the host adds to every call, if an admin set one.
    pub(super) secret: Option<ConnectorSecret>,
    loaded: Instant,
    pub(super) permits: Arc<Semaphore>,
    pub(super) breaker: Mutex<Breaker>,
    pub(super) rate: Mutex<RateLimit>,
}

impl Live {
    fn new(record: ConnectorRecord, secret: Option<ConnectorSecret>) -> Self {
        Self {
            secret,
            permits: Arc::new(Semaphore::new(record.permits.max(1) as usize)),
            breaker: Mutex::new(Breaker::new(BreakerConfig {
                failure_rate: record.breaker_failure_rate,
                min_calls: record.breaker_min_calls.max(1) as u32,
                window_ms: record.breaker_window_ms.max(1) as u64,
                open_ms: record.breaker_open_ms.max(1) as u64,
            })),
            rate: Mutex::new(RateLimit::new(record.rate_per_sec)),
            loaded: Instant::now(),
            record,
        }
    }

    /// The same connector under a freshly read, unchanged row: its permits
    /// are shared and its breaker and rate limit carry over.
    fn reloaded(&self, record: ConnectorRecord, secret: Option<ConnectorSecret>) -> Self {
        Self {
            record,
            secret,
            loaded: Instant::now(),
            permits: self.permits.clone(),
            breaker: Mutex::new(self.breaker.lock().unwrap().clone()),
            rate: Mutex::new(self.rate.lock().unwrap().clone()),
        }
    }

    /// Where its calls go, reading at most `max_body` of an answer.
    pub(super) fn endpoint(&self, max_body: usize) -> crate::effects::http::Endpoint<'_> {
        crate::effects::http::Endpoint {
            record: &self.record,
            secret: self.secret.as_ref(),
            max_body,
        }
    }

    pub(super) fn breaker_state(&self) -> BreakerState {
        self.breaker.lock().unwrap().state()
    }
}

/// The connectors loaded in this process, by name.
pub(super) struct Connectors {
    store: Arc<dyn EffectStore>,
    ttl: Duration,
    live: Mutex<HashMap<String, Arc<Live>>>,
}

impl Connectors {
    pub(super) fn new(store: Arc<dyn EffectStore>, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// The connector's live state, reloading its row at most every TTL
    /// (breaker state survives a reload if the row did not change).
    pub(super) async fn get(&self, name: &str) -> Result<Option<Arc<Live>>, StoreError> {
        if let Some(live) = self.live.lock().unwrap().get(name)
            && live.loaded.elapsed() < self.ttl
        {
            return Ok(Some(live.clone()));
        }
        let Some(record) = self.store.connector_get(name).await? else {
            self.live.lock().unwrap().remove(name);
            return Ok(None);
        };
        // A rotated secret is picked up at the next reload, like the row.
        let secret = self.store.connector_secret(name).await?;
        let mut map = self.live.lock().unwrap();
        let live = match map.get(name) {
            Some(old) if old.record == record => Arc::new(old.reloaded(record, secret)),
            _ => Arc::new(Live::new(record, secret)),
        };
        map.insert(name.to_string(), live.clone());
        Ok(Some(live))
    }

    /// A connector the caller may use: granted to its job and configured on
    /// this host.
    pub(super) async fn granted(
        &self,
        granted: &[String],
        name: &str,
    ) -> Result<Arc<Live>, EffectError> {
        protocol::check_grant(granted, name)?;
        protocol::configured(name, self.get(name).await)
    }

    /// The connectors whose breaker is open at `now_ms` (monotonic, the
    /// breakers' clock) and will not yet let a probe through.
    pub(super) fn open(&self, now_ms: u64) -> Vec<String> {
        self.live
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, live)| {
                matches!(live.breaker_state(), BreakerState::Open { until_ms } if until_ms > now_ms)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The breaker state of a connector, if loaded.
    pub(super) fn breaker_state(&self, name: &str) -> Option<BreakerState> {
        self.live
            .lock()
            .unwrap()
            .get(name)
            .map(|live| live.breaker_state())
    }

    /// Every loaded connector's breaker state, by name.
    pub(super) fn breaker_states(&self) -> Vec<(String, BreakerState)> {
        self.live
            .lock()
            .unwrap()
            .iter()
            .map(|(name, live)| (name.clone(), live.breaker_state()))
            .collect()
    }
}
