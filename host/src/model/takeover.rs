//! Takeover latency: how long a trigger whose holder is gone stood still —
//! from the end of its holder's lease (when the lease ran out, or when the
//! holder's database session was seen gone and the lease ended then;
//! `store/liveness.rs`) to the start of the attempt that took it over.
//! Read from the attempts table: the expired attempt's `lease_until` and
//! its successor's `started_at`, both on the database clock.

use serde::{Deserialize, Serialize};

/// The takeovers of a window and their latency, nearest-rank percentiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Takeovers {
    pub count: i64,
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

impl Takeovers {
    /// The figures of these latencies (ms; a negative one — the holder's
    /// lease was ended after the takeover had already started, which the
    /// claim never does — counts as 0).
    pub fn of(latencies: &[i64]) -> Self {
        let mut sorted: Vec<i64> = latencies.iter().map(|ms| (*ms).max(0)).collect();
        sorted.sort_unstable();
        let rank = |p: f64| -> Option<i64> {
            let n = sorted.len();
            (n > 0).then(|| sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
        };
        Self {
            count: sorted.len() as i64,
            p50_ms: rank(0.5),
            p99_ms: rank(0.99),
            max_ms: sorted.last().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_takeover_has_no_latency() {
        assert_eq!(Takeovers::of(&[]), Takeovers::default());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let latencies: Vec<i64> = (1..=100).rev().collect();
        let t = Takeovers::of(&latencies);
        assert_eq!(
            (t.count, t.p50_ms, t.p99_ms, t.max_ms),
            (100, Some(50), Some(99), Some(100))
        );
        let one = Takeovers::of(&[-5]);
        assert_eq!((one.p50_ms, one.p99_ms), (Some(0), Some(0)));
    }
}
