//! A serving process's own high-water marks: the database pool's
//! saturation and its guests' memory in use. At a mark the runner stops
//! claiming — attempts in flight run on and keep their checkpoints — and
//! it resumes once the level is back at the low-water mark
//! ([`crate::model::shares::Watermark`]). Each hold is logged and
//! counted (`claims_held_pool`, `claims_held_memory`); logged at `info`:
//! it is routine back-pressure (a busy SQLite file fills its pool with
//! writers waiting their turn), not a fault.

use super::runner::RunnerConfig;
use crate::model::shares::Watermark;
use crate::store::RunnerStore;
use std::sync::atomic::{AtomicBool, Ordering};

/// Memory's marks, as fractions of [`RunnerConfig::memory_high_water`].
const MEMORY_WATER: Watermark = Watermark {
    high: 1.0,
    low: 0.8,
};

/// Which marks hold the runner's claims now.
#[derive(Debug, Default)]
pub struct HighWater {
    pool: AtomicBool,
    memory: AtomicBool,
}

impl HighWater {
    /// Whether a mark holds the claims now, judged on the levels as they
    /// stand: the store's pool, and `guest_memory` (bytes the sandbox's
    /// live guests hold, [`crate::sandbox::Sandbox::memory_in_use`]).
    pub async fn holds(
        &self,
        config: &RunnerConfig,
        store: &dyn RunnerStore,
        guest_memory: u64,
    ) -> bool {
        let (in_use, max) = store.pool_load();
        let pool_level = f64::from(in_use) / f64::from(max.max(1));
        let memory_level = config
            .memory_high_water
            .map_or(0.0, |high| guest_memory as f64 / high.max(1) as f64);
        let mut held = false;
        for (flag, mark, level, counter) in [
            (
                &self.pool,
                config.pool_water,
                pool_level,
                "claims_held_pool",
            ),
            (
                &self.memory,
                MEMORY_WATER,
                memory_level,
                "claims_held_memory",
            ),
        ] {
            let was = flag.load(Ordering::Relaxed);
            let now = mark.holds(was, level);
            flag.store(now, Ordering::Relaxed);
            if now && !was {
                tracing::info!(
                    mark = counter,
                    level,
                    "high-water mark reached: claims held"
                );
                if let Err(e) = store.counter_add(counter, 1).await {
                    tracing::warn!(counter, error = %crate::model::text::Esc(&e), "counter not written");
                }
            } else if was && !now {
                tracing::info!(
                    mark = counter,
                    level,
                    "back under the low-water mark: claims resume"
                );
            }
            held |= now;
        }
        held
    }
}
