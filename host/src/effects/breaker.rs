//! A circuit breaker per connector and a token-bucket rate limit, as pure
//! state machines over an injected clock (ms). No I/O, no sleeping.
//!
//! ```text
//! closed ──(≥ min_calls in window and failure rate ≥ threshold)──▶ open
//! open ──(open_ms elapsed: admit ONE probe)──▶ half_open
//! half_open ──probe ok──▶ closed      half_open ──probe failed──▶ open
//! ```
//! While open, calls are refused without reaching the downstream; only the
//! probe does, so calls/s fall to about one per `open_ms`.

use std::collections::VecDeque;

/// Breaker settings (from the connector row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    pub failure_rate: f64,
    pub min_calls: u32,
    pub window_ms: u64,
    pub open_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open { until_ms: u64 },
    HalfOpen { probe_in_flight: bool },
}

/// A breaker's state as an operator reads it (`paddock_breaker_state`:
/// 0 closed, 1 half-open, 2 open).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BreakerPhase {
    Closed = 0,
    HalfOpen = 1,
    Open = 2,
}

impl BreakerPhase {
    /// `state` at `now_ms`: an open breaker whose wait is over lets a probe
    /// through, so it reads half-open.
    pub fn of(state: BreakerState, now_ms: u64) -> Self {
        match state {
            BreakerState::Closed => Self::Closed,
            BreakerState::Open { until_ms } if until_ms > now_ms => Self::Open,
            BreakerState::Open { .. } | BreakerState::HalfOpen { .. } => Self::HalfOpen,
        }
    }
}

/// What the breaker says to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Allowed,
    /// Allowed as the half-open probe: its result decides the state.
    Probe,
    /// Refused; try again after this many ms.
    Rejected {
        retry_after_ms: u64,
    },
}

#[derive(Debug, Clone)]
pub struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    /// (at_ms, failed) of recent calls, oldest first.
    window: VecDeque<(u64, bool)>,
}

impl Breaker {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: BreakerState::Closed,
            window: VecDeque::new(),
        }
    }

    pub fn state(&self) -> BreakerState {
        self.state
    }

    pub fn admit(&mut self, now_ms: u64) -> Admit {
        match self.state {
            BreakerState::Closed => Admit::Allowed,
            BreakerState::Open { until_ms } if now_ms < until_ms => Admit::Rejected {
                retry_after_ms: until_ms - now_ms,
            },
            BreakerState::Open { .. } => {
                self.state = BreakerState::HalfOpen {
                    probe_in_flight: true,
                };
                Admit::Probe
            }
            BreakerState::HalfOpen {
                probe_in_flight: true,
            } => Admit::Rejected {
                retry_after_ms: self.config.open_ms.min(1000),
            },
            BreakerState::HalfOpen {
                probe_in_flight: false,
            } => {
                self.state = BreakerState::HalfOpen {
                    probe_in_flight: true,
                };
                Admit::Probe
            }
        }
    }

    /// Record the result of an admitted call (`probe` if it was admitted as
    /// one).
    pub fn record(&mut self, now_ms: u64, probe: bool, failed: bool) {
        if probe {
            self.window.clear();
            self.state = if failed {
                BreakerState::Open {
                    until_ms: now_ms + self.config.open_ms,
                }
            } else {
                BreakerState::Closed
            };
            return;
        }
        if !matches!(self.state, BreakerState::Closed) {
            return; // a late answer from before the breaker opened
        }
        self.window.push_back((now_ms, failed));
        let horizon = now_ms.saturating_sub(self.config.window_ms);
        while self.window.front().is_some_and(|(at, _)| *at < horizon) {
            self.window.pop_front();
        }
        let calls = self.window.len() as u32;
        let failures = self.window.iter().filter(|(_, f)| *f).count() as f64;
        if calls >= self.config.min_calls && failures / calls as f64 >= self.config.failure_rate {
            self.state = BreakerState::Open {
                until_ms: now_ms + self.config.open_ms,
            };
            self.window.clear();
        }
    }

    /// A probe that never completed (the caller gave up): let another try.
    pub fn abandon_probe(&mut self) {
        if let BreakerState::HalfOpen {
            probe_in_flight: true,
        } = self.state
        {
            self.state = BreakerState::HalfOpen {
                probe_in_flight: false,
            };
        }
    }
}

/// A token bucket: `rate` tokens per second, bursts up to `max(1, rate)`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    rate: f64,
    tokens: f64,
    last_ms: Option<u64>,
}

impl RateLimit {
    /// `rate <= 0` means unlimited.
    pub fn new(rate: f64) -> Self {
        Self {
            rate,
            tokens: rate.max(1.0),
            last_ms: None,
        }
    }

    /// Take a token now (returns 0), or say how long to wait before asking
    /// again.
    pub fn take(&mut self, now_ms: u64) -> u64 {
        if self.rate <= 0.0 {
            return 0;
        }
        let burst = self.rate.max(1.0);
        if let Some(last) = self.last_ms {
            self.tokens =
                (self.tokens + now_ms.saturating_sub(last) as f64 * self.rate / 1000.0).min(burst);
        }
        self.last_ms = Some(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            0
        } else {
            ((1.0 - self.tokens) * 1000.0 / self.rate).ceil() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_breaker_whose_wait_is_over_reads_half_open() {
        let open = BreakerState::Open { until_ms: 100 };
        assert_eq!(BreakerPhase::of(open, 99), BreakerPhase::Open);
        assert_eq!(BreakerPhase::of(open, 100), BreakerPhase::HalfOpen);
        assert_eq!(
            BreakerPhase::of(BreakerState::Closed, 0),
            BreakerPhase::Closed
        );
        let probing = BreakerState::HalfOpen {
            probe_in_flight: true,
        };
        assert_eq!(BreakerPhase::of(probing, 0), BreakerPhase::HalfOpen);
    }

    fn config() -> BreakerConfig {
        BreakerConfig {
            failure_rate: 0.5,
            min_calls: 4,
            window_ms: 10_000,
            open_ms: 1000,
        }
    }

    #[test]
    fn the_breaker_opens_on_failure_rate_and_probes_half_open() {
        let mut b = Breaker::new(config());
        for t in 0..3 {
            assert_eq!(b.admit(t), Admit::Allowed);
            b.record(t, false, true);
        }
        assert_eq!(b.state(), BreakerState::Closed, "below min_calls");
        b.record(3, false, false);
        assert_eq!(b.state(), BreakerState::Open { until_ms: 1003 });
        assert_eq!(
            b.admit(500),
            Admit::Rejected {
                retry_after_ms: 503
            }
        );
        assert_eq!(b.admit(1003), Admit::Probe);
        assert!(
            matches!(b.admit(1004), Admit::Rejected { .. }),
            "one probe at a time"
        );
        b.record(1010, true, true);
        assert_eq!(b.state(), BreakerState::Open { until_ms: 2010 });
        assert_eq!(b.admit(2010), Admit::Probe);
        b.record(2011, true, false);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(2012), Admit::Allowed);
    }

    #[test]
    fn old_failures_leave_the_window() {
        let mut b = Breaker::new(config());
        for t in 0..3 {
            b.record(t, false, true);
        }
        for t in 0..4 {
            b.record(20_000 + t, false, false);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn the_rate_limit_spaces_calls() {
        let mut r = RateLimit::new(10.0);
        for _ in 0..10 {
            assert_eq!(r.take(0), 0);
        }
        assert_eq!(r.take(0), 100);
        assert_eq!(r.take(100), 0);
        assert_eq!(RateLimit::new(0.0).take(0), 0);
    }
}
