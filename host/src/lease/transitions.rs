//! Pure transition logic: the trigger state machine, what an attempt's
//! result means for its trigger, and retry backoff with jitter.
//!
//! ```text
//! manual ──approve──▶ pending ──claim──▶ running ──▶ succeeded | failed | cancelled | skipped
//!                       ▲  ▲                │  └──▶ retry_wait ──(next_run_at)──▶ claimable again
//!                       │  └──(overlap wait)┘
//!                       └──(lease expires: claimable by another runner, token + 1)
//! ```
//! `succeeded`, `failed`, `cancelled` and `skipped` are terminal: a completed
//! trigger is never rewritten. `running → pending` is also how a drain at
//! shutdown releases an attempt from its last checkpoint (see
//! [`super::drain`]).

use crate::registry::manifest::RetryPolicy;
use crate::sandbox::report::error_class_name;
use crate::sandbox::wit::types::ErrorClass;
use crate::sandbox::{RunReport, RunResult, TrapKind};
use crate::store::AttemptEnd;

/// Trigger states.
pub const STATES: &[&str] = &[
    "pending",
    "running",
    "retry_wait",
    "succeeded",
    "failed",
    "cancelled",
];

/// Whether the state machine allows `from → to`.
pub fn is_legal(from: &str, to: &str) -> bool {
    matches!(
        (from, to),
        ("pending", "running")
            | ("retry_wait", "running")
            | ("running", "running") // takeover of an expired lease
            | ("running", "succeeded")
            | ("running", "failed")
            | ("running", "retry_wait")
            | ("running", "cancelled")
            | ("running", "skipped") // overlap `forbid`
            | ("running", "pending") // overlap `wait` (released unrun), or drained at shutdown (released from its checkpoint)
            | ("manual", "pending") // approved by a person
            | ("pending", "cancelled")
            | ("retry_wait", "cancelled")
            | ("manual", "cancelled")
    )
}

/// Whether the guest itself gave up for now: a transient or unknown job
/// error, its answer to a refused effect, an open breaker or a pause
/// request. (Retries, breaker parking and the drain all start from this.)
pub fn gave_up_for_now(result: &RunResult) -> bool {
    matches!(
        result,
        RunResult::JobFailed {
            class: ErrorClass::Transient | ErrorClass::Unknown,
            ..
        }
    )
}

/// Whether a failure of this kind is worth another attempt.
fn retriable(result: &RunResult) -> bool {
    match result {
        RunResult::Output(_) => false,
        RunResult::JobFailed { .. } => gave_up_for_now(result),
        // Limits are deterministic for the same code and limits: retrying
        // burns the same budget again. Host errors are ours, not the guest's.
        // A drained attempt is normally released, not committed; if it is
        // committed after all, the host stopped it, not the guest.
        RunResult::Trapped { kind, .. } => matches!(kind, TrapKind::HostError | TrapKind::Drained),
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
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// This attempt's number (1 for the first).
    pub attempt_no: u32,
    /// ms from the trigger's scheduled time to the end of this attempt.
    pub age_ms: u64,
    /// ms from the first attempt's start to the end of this attempt.
    pub elapsed_ms: u64,
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

/// What an attempt's report means for its trigger.
pub fn attempt_end(
    report: &RunReport,
    budget: Budget,
    policy: &RetryPolicy,
    unit: f64,
) -> AttemptEnd {
    let attempt_no = budget.attempt_no;
    let (result, class, message) = match &report.result {
        RunResult::Output(out) => (Some(out.clone()), None, None),
        RunResult::JobFailed { class, message } => (
            None,
            Some(error_class_name(*class).to_string()),
            Some(message.clone()),
        ),
        RunResult::Trapped { kind, message } => {
            (None, Some(kind.as_str().to_string()), Some(message.clone()))
        }
    };
    let succeeded = matches!(report.result, RunResult::Output(_));
    let delay = backoff_ms(policy, attempt_no, unit);
    let spent = budget_spent(policy, budget, delay);
    let retry = !succeeded && retriable(&report.result) && spent.is_none();
    // Say why a retriable failure was not retried.
    let message = match (&spent, retriable(&report.result), message) {
        (Some(why), true, Some(m)) if !succeeded => Some(format!("{m} (not retried: {why})")),
        (_, _, m) => m,
    };
    AttemptEnd {
        trigger_state: if succeeded {
            "succeeded"
        } else if retry {
            "retry_wait"
        } else {
            "failed"
        },
        retry_after_ms: retry.then_some(delay as i64),
        result,
        error_class: class,
        error_message: message,
        attempt_outcome: if succeeded { "succeeded" } else { "failed" },
        fuel_used: report.fuel_used.min(i64::MAX as u64) as i64,
        peak_memory_bytes: report.peak_memory_bytes.min(i64::MAX as u64) as i64,
        wall_ms: report.wall.as_millis().min(i64::MAX as u128) as i64,
        log: report.log.clone(),
    }
}

/// Whether an attempt that an open circuit breaker refused parks its
/// trigger instead of spending an attempt: the gateway noted a wait
/// (`parked_for`) and the guest gave up with a transient or unknown error,
/// which is what a refused effect becomes. Returns the wait in ms. Any other
/// end (output, a permanent error, a trap) is judged as usual.
pub fn breaker_park(parked_for: Option<u64>, result: &RunResult) -> Option<u64> {
    parked_for.filter(|_| gave_up_for_now(result))
}

/// `ms` spread over `[ms, 1.25 ms]`, so triggers parked behind one breaker
/// do not all come back in the same instant (it lets one probe through).
pub fn jittered(ms: u64, unit: f64) -> u64 {
    ms + (ms as f64 * 0.25 * unit.clamp(0.0, 1.0)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn policy(max_attempts: u32, jitter: bool) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            backoff_ms: 1000,
            backoff_max_ms: 10_000,
            jitter,
            max_age_ms: None,
            max_elapsed_ms: None,
        }
    }

    fn at(attempt_no: u32) -> Budget {
        Budget {
            attempt_no,
            ..Budget::default()
        }
    }

    #[test]
    fn retries_stop_at_max_age_and_max_elapsed_judged_when_the_retry_would_run() {
        let r = report(RunResult::JobFailed {
            class: ErrorClass::Transient,
            message: "busy".into(),
        });
        let mut p = policy(10, false);
        p.max_age_ms = Some(60_000);
        let young = Budget {
            attempt_no: 1,
            age_ms: 10_000,
            elapsed_ms: 0,
        };
        assert_eq!(attempt_end(&r, young, &p, 0.5).trigger_state, "retry_wait");
        // 59.5 s old + a 1 s backoff would run past the 60 s age limit.
        let old = Budget {
            attempt_no: 1,
            age_ms: 59_500,
            elapsed_ms: 0,
        };
        let end = attempt_end(&r, old, &p, 0.5);
        assert_eq!(end.trigger_state, "failed");
        assert!(end.error_message.unwrap().contains("max_age"));
        let mut p = policy(10, false);
        p.max_elapsed_ms = Some(5_000);
        let long = Budget {
            attempt_no: 2,
            age_ms: 0,
            elapsed_ms: 4_000,
        };
        assert_eq!(attempt_end(&r, long, &p, 0.5).trigger_state, "failed");
    }

    fn report(result: RunResult) -> RunReport {
        RunReport {
            result,
            fuel_used: 10,
            peak_memory_bytes: 65536,
            wall: Duration::from_millis(3),
            log: String::new(),
        }
    }

    #[test]
    fn completed_triggers_are_never_rewritten() {
        for to in STATES {
            for terminal in ["succeeded", "failed", "cancelled", "skipped"] {
                assert!(!is_legal(terminal, to), "{terminal} -> {to}");
            }
        }
        assert!(is_legal("pending", "running"));
        assert!(!is_legal("pending", "succeeded"));
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
    fn transient_failures_retry_within_the_budget_then_fail() {
        let r = report(RunResult::JobFailed {
            class: ErrorClass::Transient,
            message: "busy".into(),
        });
        let end = attempt_end(&r, at(1), &policy(3, false), 0.5);
        assert_eq!(end.trigger_state, "retry_wait");
        assert_eq!(end.retry_after_ms, Some(1000));
        assert_eq!(
            attempt_end(&r, at(3), &policy(3, false), 0.5).trigger_state,
            "failed"
        );
    }

    #[test]
    fn permanent_failures_and_limits_are_not_retried() {
        let permanent = report(RunResult::JobFailed {
            class: ErrorClass::Permanent,
            message: "no".into(),
        });
        assert_eq!(
            attempt_end(&permanent, at(1), &policy(3, true), 0.5).trigger_state,
            "failed"
        );
        let fuel = report(RunResult::Trapped {
            kind: TrapKind::FuelExhausted,
            message: "fuel".into(),
        });
        let end = attempt_end(&fuel, at(1), &policy(3, true), 0.5);
        assert_eq!(end.trigger_state, "failed");
        assert_eq!(end.error_class.as_deref(), Some("fuel_exhausted"));
    }

    #[test]
    fn only_a_guest_that_gave_up_transiently_behind_an_open_breaker_parks() {
        let transient = RunResult::JobFailed {
            class: ErrorClass::Transient,
            message: "circuit-open".into(),
        };
        let permanent = RunResult::JobFailed {
            class: ErrorClass::Permanent,
            message: "no".into(),
        };
        assert_eq!(breaker_park(Some(800), &transient), Some(800));
        assert_eq!(breaker_park(None, &transient), None, "no breaker refused");
        assert_eq!(breaker_park(Some(800), &permanent), None);
        assert_eq!(breaker_park(Some(800), &RunResult::Output(vec![])), None);
        assert_eq!(jittered(800, 0.0), 800);
        assert_eq!(jittered(800, 1.0), 1000);
    }
}
