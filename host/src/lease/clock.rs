//! The process clock a runner's heartbeat keeper reads to decide when a
//! lease is due for renewal.
//!
//! Leases themselves are measured on the database clock (every `lease_until`
//! is written by the statement that claims or renews); the process clock
//! only paces the renewals. A runner reads it through [`ProcessClock`] so a
//! test can move it by hand: freeze it to play a process that is stopped
//! (a SIGSTOP, a long stall) while the database's clock runs on, then jump
//! it to play the process waking up with its renewals overdue, without
//! waiting out a 60 s lease in real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where a runner's timers read "now".
#[derive(Debug, Clone, Default)]
pub enum ProcessClock {
    /// The process's monotonic clock (production).
    #[default]
    Monotonic,
    /// A clock that moves only when told to.
    Manual(Arc<ManualClock>),
}

impl ProcessClock {
    pub fn now(&self) -> Instant {
        match self {
            ProcessClock::Monotonic => Instant::now(),
            ProcessClock::Manual(clock) => clock.now(),
        }
    }
}

/// A monotonic clock moved by hand: it starts at its origin and stands
/// still until [`ManualClock::set`] moves it forward.
#[derive(Debug)]
pub struct ManualClock {
    origin: Instant,
    elapsed_ms: AtomicU64,
}

impl ManualClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            elapsed_ms: AtomicU64::new(0),
        })
    }

    /// Move the clock to `elapsed` past its origin. A monotonic clock never
    /// goes back, so an earlier time leaves it where it is.
    pub fn set(&self, elapsed: Duration) {
        self.elapsed_ms
            .fetch_max(elapsed.as_millis() as u64, Ordering::SeqCst);
    }

    /// How far past its origin the clock stands.
    pub fn elapsed(&self) -> Duration {
        Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }

    fn now(&self) -> Instant {
        self.origin + self.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stands_still_until_moved_and_never_goes_back() {
        let manual = ManualClock::new();
        let clock = ProcessClock::Manual(manual.clone());
        let start = clock.now();
        assert_eq!(clock.now(), start);
        manual.set(Duration::from_secs(22));
        assert_eq!(clock.now() - start, Duration::from_secs(22));
        manual.set(Duration::from_secs(3));
        assert_eq!(manual.elapsed(), Duration::from_secs(22));
    }
}
