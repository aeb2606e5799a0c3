//! How an attempt ends, and what that means for its trigger — decided in
//! one pure function, [`decide_end`], from typed inputs: the guest's result,
//! the stop the host asked for, a circuit breaker's refusal, and the retry
//! budget. The runner gathers the inputs (I/O), calls it, and applies the
//! decision (I/O); nothing else decides an attempt's end.
//!
//! | input | decision |
//! |---|---|
//! | the commit gate closed (lease lost or unconfirmed) | **abandon**: the result must not count; the lease lapses and another runner takes over with token + 1 |
//! | a drain asked it to pause and the guest gave up for now (or was interrupted) | **release** (`drained`): due now, from the last checkpoint, no retry budget spent |
//! | an open breaker refused an effect and the guest gave up for now, and the clock still allows the wait | **release** (`circuit_open`): due when the breaker lets a probe through, no attempt spent |
//! | a cancel was requested and the guest did not succeed | **commit** `cancelled` |
//! | output | **commit** `succeeded` |
//! | a transient or unknown failure (or a host error) within the budget | **commit** `retry_wait`, after backoff with jitter |
//! | anything else | **commit** `failed` (saying why a retriable failure was not retried) |

use super::retry::{Budget, RetryPolicy, backoff_ms, budget_spent, clock_allows, jittered};
use super::state::{AttemptOutcome, TriggerState};
use std::time::Duration;

/// How the guest classified its own failure (`paddock:job/types.error-class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Transient,
    Permanent,
    Unknown,
    InvalidInput,
}

impl ErrorClass {
    /// The name stored in `error_class`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Permanent => "permanent",
            ErrorClass::Unknown => "unknown",
            ErrorClass::InvalidInput => "invalid_input",
        }
    }
}

/// Why a guest did not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// Ran out of its group's fuel.
    FuelExhausted,
    /// Tried to grow memory past its group's cap.
    MemoryLimit,
    /// Ran past its group's wall-clock deadline.
    Deadline,
    /// The guest panicked or hit `unreachable`.
    GuestPanic,
    /// Call stack exhausted.
    StackOverflow,
    /// Any other wasm trap (out-of-bounds access, bad cast, ...).
    GuestTrap,
    /// Interrupted because its lease was lost.
    LeaseLost,
    /// Interrupted because the host was shutting down (drain) and the guest
    /// did not reach a safe point in time.
    Drained,
    /// The host failed (a bug or an unavailable dependency), not the guest.
    HostError,
    /// Handed the host something over one of its group's size caps (a
    /// result, an error message, a checkpoint, an effect's payload or
    /// response): the guest's fault, never retried, nothing stored past
    /// the cap.
    OutputTooLarge,
    /// Called something no grant can give (`wasi:http` outgoing requests).
    NotGranted,
}

impl TrapKind {
    /// The name stored in `error_class` and shown by `trigger show`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TrapKind::FuelExhausted => "fuel_exhausted",
            TrapKind::MemoryLimit => "memory_limit",
            TrapKind::Deadline => "deadline_exceeded",
            TrapKind::GuestPanic => "guest_panic",
            TrapKind::StackOverflow => "stack_overflow",
            TrapKind::GuestTrap => "guest_trap",
            TrapKind::LeaseLost => "lease_lost",
            TrapKind::Drained => "drained",
            TrapKind::HostError => "host_error",
            TrapKind::OutputTooLarge => "output_too_large",
            TrapKind::NotGranted => "not_granted",
        }
    }
}

/// The three ways a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// `run` returned `ok(output)`.
    Output(Vec<u8>),
    /// `run` returned `err(job-error)`: the guest's own verdict.
    JobFailed { class: ErrorClass, message: String },
    /// The guest did not return: a limit, a trap or the host stopped it.
    Trapped { kind: TrapKind, message: String },
}

impl RunResult {
    /// Whether the guest itself gave up for now: a transient or unknown job
    /// error — also its answer to a refused effect, an open breaker or a
    /// pause request. (Retries, breaker parking and the drain all start
    /// from this.)
    pub fn gave_up_for_now(&self) -> bool {
        matches!(
            self,
            RunResult::JobFailed {
                class: ErrorClass::Transient | ErrorClass::Unknown,
                ..
            }
        )
    }

    /// Whether a failure of this kind is worth another attempt.
    pub fn retriable(&self) -> bool {
        match self {
            RunResult::Output(_) => false,
            RunResult::JobFailed { .. } => self.gave_up_for_now(),
            // Limits are deterministic for the same code and limits:
            // retrying burns the same budget again. Host errors are ours,
            // not the guest's. A drained attempt is normally released, not
            // committed; if it is committed after all, the host stopped it,
            // not the guest.
            RunResult::Trapped { kind, .. } => {
                matches!(kind, TrapKind::HostError | TrapKind::Drained)
            }
        }
    }

    /// The stored error class and message, if the run failed.
    fn error(&self) -> (Option<&'static str>, Option<&str>) {
        match self {
            RunResult::Output(_) => (None, None),
            RunResult::JobFailed { class, message } => (Some(class.as_str()), Some(message)),
            RunResult::Trapped { kind, message } => (Some(kind.as_str()), Some(message)),
        }
    }
}

/// Everything the execution plane records about one run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub result: RunResult,
    pub fuel_used: u64,
    pub peak_memory_bytes: u64,
    pub wall: Duration,
    pub log: String,
}

impl RunReport {
    /// The report of an attempt the host could not start (its plan, group
    /// or component could not be loaded): the host's fault, not the guest's.
    pub fn host_error(message: String) -> Self {
        Self {
            result: RunResult::Trapped {
                kind: TrapKind::HostError,
                message,
            },
            fuel_used: 0,
            peak_memory_bytes: 0,
            wall: Duration::ZERO,
            log: String::new(),
        }
    }
}

/// Why the host wants a guest to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopReason {
    /// Pause requested (a drain, or a closed gate seen by a heartbeat):
    /// answered at the next host call; not forced.
    Pause,
    /// Cancel requested: answered at the next host call; not forced.
    Cancel,
    /// The host is shutting down and the drain's grace for a safe point has
    /// passed: the guest is interrupted at the next epoch tick. Its lease is
    /// still current, so the runner releases the trigger (from its last
    /// checkpoint) instead of committing a result.
    Shutdown,
    /// The lease is lost: the guest is interrupted at the next epoch tick,
    /// whether or not it calls the host. Closes the commit gate.
    LeaseLost,
}

/// How an attempt ended, written in one fenced transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    /// The trigger's next state (a target of [`super::Transition::Finish`]).
    pub trigger_state: TriggerState,
    /// For retry_wait: run again this many ms after the database's now.
    pub retry_after_ms: Option<i64>,
    pub result: Option<Vec<u8>>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    /// The attempt's own outcome.
    pub attempt_outcome: AttemptOutcome,
    pub fuel_used: i64,
    pub peak_memory_bytes: i64,
    pub wall_ms: i64,
    pub log: String,
}

fn saturating_i64(n: u128) -> i64 {
    n.min(i64::MAX as u128) as i64
}

impl AttemptEnd {
    /// A success with `result`, using nothing (for tests and tools).
    pub fn succeeded(result: Vec<u8>) -> Self {
        Self {
            trigger_state: TriggerState::Succeeded,
            retry_after_ms: None,
            result: Some(result),
            error_class: None,
            error_message: None,
            attempt_outcome: AttemptOutcome::Succeeded,
            fuel_used: 0,
            peak_memory_bytes: 0,
            wall_ms: 0,
            log: String::new(),
        }
    }

    /// An attempt that ends before its guest ran: no result, no usage.
    pub fn not_run() -> Self {
        Self {
            result: None,
            ..Self::succeeded(Vec::new())
        }
    }

    /// A trigger the overlap policy `forbid` does not run.
    pub fn skipped(message: String) -> Self {
        Self {
            trigger_state: TriggerState::Skipped,
            result: None,
            error_class: Some("overlap_forbidden".into()),
            error_message: Some(message),
            attempt_outcome: AttemptOutcome::Skipped,
            ..Self::succeeded(Vec::new())
        }
    }

    /// The usage columns of a report, with no verdict yet.
    fn of(report: &RunReport, trigger_state: TriggerState, outcome: AttemptOutcome) -> Self {
        let (class, message) = report.result.error();
        Self {
            trigger_state,
            retry_after_ms: None,
            result: match &report.result {
                RunResult::Output(out) => Some(out.clone()),
                _ => None,
            },
            error_class: class.map(str::to_string),
            error_message: message.map(str::to_string),
            attempt_outcome: outcome,
            fuel_used: saturating_i64(report.fuel_used.into()),
            peak_memory_bytes: saturating_i64(report.peak_memory_bytes.into()),
            wall_ms: saturating_i64(report.wall.as_millis()),
            log: report.log.clone(),
        }
    }
}

/// What an attempt's report means for its trigger when it is committed:
/// `succeeded`, `retry_wait` within the budget, else `failed`. `unit` is a
/// random number in `[0, 1)` for the backoff's jitter.
pub fn verdict(report: &RunReport, budget: Budget, policy: &RetryPolicy, unit: f64) -> AttemptEnd {
    if matches!(report.result, RunResult::Output(_)) {
        return AttemptEnd::of(report, TriggerState::Succeeded, AttemptOutcome::Succeeded);
    }
    let delay = backoff_ms(policy, budget.attempt_no, unit);
    let spent = budget_spent(policy, budget, delay);
    let retriable = report.result.retriable();
    let mut end = AttemptEnd::of(report, TriggerState::Failed, AttemptOutcome::Failed);
    match spent {
        None if retriable => {
            end.trigger_state = TriggerState::RetryWait;
            end.retry_after_ms = Some(delay as i64);
        }
        // Say why a retriable failure was not retried.
        Some(why) if retriable => {
            end.error_message = end
                .error_message
                .map(|m| format!("{m} (not retried: {why})"));
        }
        _ => {}
    }
    end
}

/// Why an attempt ends without a verdict and its trigger is due again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReason {
    /// The overlap policy `allow` made it wait for a slot.
    OverlapWait,
    /// A drain at shutdown paused or interrupted it.
    Drained,
    /// An open circuit breaker refused one of its effects.
    CircuitOpen,
}

impl ReleaseReason {
    /// Stored in the attempt's `error_class`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::OverlapWait => "overlap_wait",
            ReleaseReason::Drained => "drained",
            ReleaseReason::CircuitOpen => "circuit_open",
        }
    }
}

/// What to do with an attempt that has ended.
#[derive(Debug, Clone, PartialEq)]
pub enum EndDecision {
    /// Commit `end` under the attempt's token ([`super::Transition::Finish`]).
    Commit(AttemptEnd),
    /// Put the trigger back to `pending`, due in `delay_ms`, without a
    /// result ([`super::Transition::Release`]); the attempt is `released`
    /// and its usage recorded from `end`.
    Release {
        end: AttemptEnd,
        reason: ReleaseReason,
        why: String,
        delay_ms: u64,
    },
    /// Close the attempt as `lease_lost` and leave the trigger to its lease:
    /// the result must not count.
    Abandon { end: AttemptEnd, why: &'static str },
}

/// Everything [`decide_end`] needs to know.
#[derive(Debug, Clone, Copy)]
pub struct EndInputs<'a> {
    pub report: &'a RunReport,
    pub policy: &'a RetryPolicy,
    pub budget: Budget,
    /// The most severe stop the host asked for, if any.
    pub stop: Option<StopReason>,
    /// Set when an open circuit breaker refused one of the attempt's
    /// effects: ms until it lets a probe through.
    pub breaker_wait_ms: Option<u64>,
    /// Random numbers in `[0, 1)`: the backoff's jitter and the park's.
    pub backoff_unit: f64,
    pub park_unit: f64,
}

/// Whether an attempt that ended with `result` while `stop` was set is
/// released from its checkpoint rather than committed. Only a drain
/// releases, and only an ending that is not the guest's own verdict: a
/// transient or unknown job error (the answer to `pause-requested`) or the
/// drain's interrupt. Output, permanent and invalid-input errors and limit
/// traps commit as usual.
pub fn drained(stop: Option<StopReason>, result: &RunResult) -> bool {
    if !matches!(stop, Some(StopReason::Pause | StopReason::Shutdown)) {
        return false;
    }
    match result {
        RunResult::Output(_) => false,
        RunResult::JobFailed { .. } => result.gave_up_for_now(),
        RunResult::Trapped { kind, .. } => matches!(kind, TrapKind::Drained),
    }
}

/// The one decision of how an attempt ends (see the module table).
pub fn decide_end(inputs: EndInputs<'_>) -> EndDecision {
    let EndInputs {
        report,
        policy,
        budget,
        stop,
        ..
    } = inputs;
    let mut end = verdict(report, budget, policy, inputs.backoff_unit);
    if stop == Some(StopReason::Cancel) && end.trigger_state != TriggerState::Succeeded {
        end.trigger_state = TriggerState::Cancelled;
        end.retry_after_ms = None;
        end.error_class = Some("cancelled".into());
    }
    if stop == Some(StopReason::LeaseLost) {
        // Even if the token happens to be current (the database may only
        // have been unreachable): the gate decided.
        return EndDecision::Abandon {
            end,
            why: "commit gate closed: lease lost or unconfirmed",
        };
    }
    if drained(stop, &report.result) {
        let why = match &report.result {
            RunResult::JobFailed { message, .. } | RunResult::Trapped { message, .. } => {
                format!("paused at a safe point (drain or gate): {message}")
            }
            RunResult::Output(_) => "paused at a safe point (drain or gate)".to_string(),
        };
        return EndDecision::Release {
            end,
            reason: ReleaseReason::Drained,
            why,
            delay_ms: 0,
        };
    }
    // An open breaker refused this attempt's effect and the guest gave up
    // for now: park the trigger until the breaker lets a probe through,
    // without spending an attempt — the downstream is down, not the job.
    // Time still counts: a trigger that would outlive its max_age /
    // max_elapsed while parked is judged as usual instead.
    let park_ms = inputs
        .breaker_wait_ms
        .filter(|_| report.result.gave_up_for_now())
        .map(|ms| jittered(ms, inputs.park_unit))
        .filter(|ms| clock_allows(policy, budget, *ms));
    if let Some(delay_ms) = park_ms {
        return EndDecision::Release {
            end,
            reason: ReleaseReason::CircuitOpen,
            why: format!("parked {delay_ms} ms: a connector's circuit breaker is open"),
            delay_ms,
        };
    }
    EndDecision::Commit(end)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn report(result: RunResult) -> RunReport {
        RunReport {
            result,
            fuel_used: 10,
            peak_memory_bytes: 65536,
            wall: Duration::from_millis(3),
            log: String::new(),
        }
    }

    fn failed(class: ErrorClass) -> RunResult {
        RunResult::JobFailed {
            class,
            message: "x".into(),
        }
    }

    fn trapped(kind: TrapKind) -> RunResult {
        RunResult::Trapped {
            kind,
            message: "x".into(),
        }
    }

    fn decide(result: RunResult, stop: Option<StopReason>, breaker: Option<u64>) -> EndDecision {
        decide_end(EndInputs {
            report: &report(result),
            policy: &policy(3, false),
            budget: at(1),
            stop,
            breaker_wait_ms: breaker,
            backoff_unit: 0.5,
            park_unit: 0.0,
        })
    }

    fn committed(decision: EndDecision) -> TriggerState {
        match decision {
            EndDecision::Commit(end) => end.trigger_state,
            other => panic!("expected a commit, got {other:?}"),
        }
    }

    #[test]
    fn retries_stop_at_max_age_and_max_elapsed_judged_when_the_retry_would_run() {
        let r = report(failed(ErrorClass::Transient));
        let mut p = policy(10, false);
        p.max_age_ms = Some(60_000);
        let young = Budget {
            attempt_no: 1,
            age_ms: 10_000,
            elapsed_ms: 0,
        };
        assert_eq!(
            verdict(&r, young, &p, 0.5).trigger_state,
            TriggerState::RetryWait
        );
        // 59.5 s old + a 1 s backoff would run past the 60 s age limit.
        let old = Budget {
            attempt_no: 1,
            age_ms: 59_500,
            elapsed_ms: 0,
        };
        let end = verdict(&r, old, &p, 0.5);
        assert_eq!(end.trigger_state, TriggerState::Failed);
        assert!(end.error_message.unwrap().contains("max_age"));
        let mut p = policy(10, false);
        p.max_elapsed_ms = Some(5_000);
        let long = Budget {
            attempt_no: 2,
            age_ms: 0,
            elapsed_ms: 4_000,
        };
        assert_eq!(
            verdict(&r, long, &p, 0.5).trigger_state,
            TriggerState::Failed
        );
    }

    #[test]
    fn transient_failures_retry_within_the_budget_then_fail() {
        let r = report(failed(ErrorClass::Transient));
        let end = verdict(&r, at(1), &policy(3, false), 0.5);
        assert_eq!(end.trigger_state, TriggerState::RetryWait);
        assert_eq!(end.retry_after_ms, Some(1000));
        assert_eq!(end.attempt_outcome, AttemptOutcome::Failed);
        let last = verdict(&r, at(3), &policy(3, false), 0.5);
        assert_eq!(last.trigger_state, TriggerState::Failed);
        assert!(
            last.error_message
                .unwrap()
                .contains("not retried: all 3 attempts used")
        );
    }

    #[test]
    fn permanent_failures_and_limits_are_not_retried() {
        let permanent = report(failed(ErrorClass::Permanent));
        assert_eq!(
            verdict(&permanent, at(1), &policy(3, true), 0.5).trigger_state,
            TriggerState::Failed
        );
        let fuel = report(trapped(TrapKind::FuelExhausted));
        let end = verdict(&fuel, at(1), &policy(3, true), 0.5);
        assert_eq!(end.trigger_state, TriggerState::Failed);
        assert_eq!(end.error_class.as_deref(), Some("fuel_exhausted"));
        let host = report(trapped(TrapKind::HostError));
        assert_eq!(
            verdict(&host, at(1), &policy(3, true), 0.5).trigger_state,
            TriggerState::RetryWait,
            "the host's failure is worth another attempt"
        );
    }

    #[test]
    fn every_finish_target_is_a_state_the_finish_transition_allows() {
        use super::super::Transition;
        for result in [
            RunResult::Output(vec![]),
            failed(ErrorClass::Transient),
            failed(ErrorClass::Permanent),
            trapped(TrapKind::Deadline),
        ] {
            for stop in [None, Some(StopReason::Cancel)] {
                if let EndDecision::Commit(end) = decide(result.clone(), stop, None) {
                    assert!(Transition::Finish.ends_in(end.trigger_state), "{end:?}");
                }
            }
        }
        assert!(Transition::Finish.ends_in(AttemptEnd::skipped("x".into()).trigger_state));
    }

    #[test]
    fn a_closed_gate_abandons_whatever_the_guest_returned() {
        for result in [RunResult::Output(vec![1]), failed(ErrorClass::Transient)] {
            let d = decide(result, Some(StopReason::LeaseLost), Some(500));
            assert!(matches!(d, EndDecision::Abandon { .. }), "{d:?}");
        }
    }

    #[test]
    fn a_cancel_ends_anything_but_a_success_as_cancelled() {
        assert_eq!(
            committed(decide(
                failed(ErrorClass::Transient),
                Some(StopReason::Cancel),
                None
            )),
            TriggerState::Cancelled
        );
        assert_eq!(
            committed(decide(
                RunResult::Output(vec![]),
                Some(StopReason::Cancel),
                None
            )),
            TriggerState::Succeeded,
            "a cancel that lost the race to a success changes nothing"
        );
    }

    #[test]
    fn only_a_drain_releases_and_only_endings_that_are_not_a_verdict() {
        let released = |result, stop| {
            matches!(
                decide(result, stop, None),
                EndDecision::Release {
                    reason: ReleaseReason::Drained,
                    delay_ms: 0,
                    ..
                }
            )
        };
        let pause = Some(StopReason::Pause);
        assert!(released(failed(ErrorClass::Transient), pause));
        assert!(released(failed(ErrorClass::Unknown), pause));
        assert!(!released(failed(ErrorClass::Permanent), pause));
        assert!(!released(failed(ErrorClass::InvalidInput), pause));
        assert!(!released(RunResult::Output(vec![]), pause));
        let shutdown = Some(StopReason::Shutdown);
        assert!(released(trapped(TrapKind::Drained), shutdown));
        assert!(!released(trapped(TrapKind::FuelExhausted), shutdown));
        // Not draining: a transient failure is a retry, a cancel commits.
        assert!(!released(failed(ErrorClass::Transient), None));
        assert!(!released(
            failed(ErrorClass::Transient),
            Some(StopReason::Cancel)
        ));
    }

    #[test]
    fn only_a_guest_that_gave_up_transiently_behind_an_open_breaker_parks() {
        let parked = |result, breaker| match decide(result, None, breaker) {
            EndDecision::Release {
                reason: ReleaseReason::CircuitOpen,
                delay_ms,
                ..
            } => Some(delay_ms),
            _ => None,
        };
        assert_eq!(parked(failed(ErrorClass::Transient), Some(800)), Some(800));
        assert_eq!(parked(failed(ErrorClass::Transient), None), None);
        assert_eq!(parked(failed(ErrorClass::Permanent), Some(800)), None);
        assert_eq!(parked(RunResult::Output(vec![]), Some(800)), None);
    }

    #[test]
    fn a_park_that_would_outlive_max_age_is_judged_as_a_failure_instead() {
        let mut p = policy(1, false);
        p.max_age_ms = Some(1_000);
        let d = decide_end(EndInputs {
            report: &report(failed(ErrorClass::Transient)),
            policy: &p,
            budget: Budget {
                attempt_no: 1,
                age_ms: 900,
                elapsed_ms: 0,
            },
            stop: None,
            breaker_wait_ms: Some(5_000),
            backoff_unit: 0.0,
            park_unit: 0.0,
        });
        assert_eq!(committed(d), TriggerState::Failed);
    }
}
