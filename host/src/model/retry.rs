//! The retry budget: how long to wait before the next attempt (exponential
//! backoff with jitter) and when no further attempt is allowed (attempts,
//! age, total time).

use serde::{Deserialize, Serialize};

/// The retry budget as stored in a plan (canonical units).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff_ms: u64,
    pub backoff_max_ms: u64,
    pub jitter: bool,
    /// No retry once the trigger is older than this (ms since scheduled).
    pub max_age_ms: Option<u64>,
    /// No retry once this long has passed since the first attempt (ms).
    pub max_elapsed_ms: Option<u64>,
}

impl RetryPolicy {
    /// The budget an attempt is judged by when its plan could not be read
    /// (the host failed before the guest ran): a few attempts, 1 s to 1 min.
    pub fn host_fallback() -> Self {
        Self {
            max_attempts: 3,
            backoff_ms: 1000,
            backoff_max_ms: 60_000,
            jitter: true,
            max_age_ms: None,
            max_elapsed_ms: None,
        }
    }
}

/// Delay before attempt `attempt_no + 1`: exponential from
/// `backoff_ms`, capped at `backoff_max_ms`; with jitter, uniformly in
/// `[d/2, d]` so synchronized failures spread out but never retry sooner
/// than half the base delay. `unit` is a random number in `[0, 1)`.
pub fn backoff_ms(policy: &RetryPolicy, attempt_no: u32, unit: f64) -> u64 {
    let exp = attempt_no.saturating_sub(1).min(32);
    let base = policy
        .backoff_ms
        .saturating_mul(1u64 << exp)
        .min(policy.backoff_max_ms);
    if policy.jitter {
        let half = base / 2;
        half + ((base - half) as f64 * unit.clamp(0.0, 1.0)) as u64
    } else {
        base
    }
}

/// Where a trigger stands against its retry budget when an attempt ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// This attempt's number (1 for the first), not counting attempts
    /// released before it (see [`budget_attempt_no`]).
    pub attempt_no: u32,
    /// ms from the trigger's scheduled time to the end of this attempt.
    pub age_ms: u64,
    /// ms from the first attempt's start to the end of this attempt.
    pub elapsed_ms: u64,
}

/// The attempt number the retry budget judges: this attempt's number less
/// the attempts released before it (they ended without a verdict).
pub fn budget_attempt_no(attempt_no: i64, released_before: i64) -> u32 {
    (attempt_no - released_before).max(1) as u32
}

/// Why no further retry is allowed, if so: attempts, age or total time,
/// judged at the time the retry would run.
pub fn budget_spent(policy: &RetryPolicy, budget: Budget, delay_ms: u64) -> Option<String> {
    if budget.attempt_no >= policy.max_attempts {
        return Some(format!("all {} attempts used", policy.max_attempts));
    }
    if let Some(max) = policy.max_age_ms
        && budget.age_ms + delay_ms > max
    {
        return Some(format!(
            "the trigger would be older than its max_age of {max} ms"
        ));
    }
    if let Some(max) = policy.max_elapsed_ms
        && budget.elapsed_ms + delay_ms > max
    {
        return Some(format!("retrying would pass the max_elapsed of {max} ms"));
    }
    None
}

/// Whether the clock alone (age and total time, not the attempt count)
/// still allows waiting `delay_ms` before running again.
pub fn clock_allows(policy: &RetryPolicy, budget: Budget, delay_ms: u64) -> bool {
    let clock_only = Budget {
        attempt_no: 0,
        ..budget
    };
    budget_spent(policy, clock_only, delay_ms).is_none()
}

/// `ms` spread over `[ms, 1.25 ms]`, so triggers parked behind one breaker
/// do not all come back in the same instant (it lets one probe through).
pub fn jittered(ms: u64, unit: f64) -> u64 {
    ms + (ms as f64 * 0.25 * unit.clamp(0.0, 1.0)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn policy(max_attempts: u32, jitter: bool) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            backoff_ms: 1000,
            backoff_max_ms: 10_000,
            jitter,
            max_age_ms: None,
            max_elapsed_ms: None,
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_stays_in_the_upper_half() {
        let p = policy(10, false);
        assert_eq!(backoff_ms(&p, 1, 0.0), 1000);
        assert_eq!(backoff_ms(&p, 2, 0.0), 2000);
        assert_eq!(backoff_ms(&p, 5, 0.0), 10_000);
        let j = policy(10, true);
        for unit in [0.0, 0.3, 0.999] {
            let d = backoff_ms(&j, 3, unit);
            assert!((2000..=4000).contains(&d), "{d}");
        }
    }

    #[test]
    fn released_attempts_do_not_spend_the_retry_budget() {
        assert_eq!(budget_attempt_no(1, 0), 1);
        assert_eq!(budget_attempt_no(3, 2), 1);
        assert_eq!(budget_attempt_no(4, 1), 3);
        assert_eq!(budget_attempt_no(2, 5), 1, "never below the first attempt");
    }

    #[test]
    fn parking_jitter_spreads_over_a_quarter_more() {
        assert_eq!(jittered(800, 0.0), 800);
        assert_eq!(jittered(800, 1.0), 1000);
    }

    #[test]
    fn the_clock_alone_ignores_the_attempt_count() {
        let mut p = policy(1, false);
        p.max_age_ms = Some(10_000);
        let b = Budget {
            attempt_no: 5,
            age_ms: 9_000,
            elapsed_ms: 0,
        };
        assert!(clock_allows(&p, b, 500));
        assert!(!clock_allows(&p, b, 2_000));
    }
}
