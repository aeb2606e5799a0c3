//! The trigger state machine — the one home of a trigger's states, the
//! transitions between them, and which of them are final.
//!
//! ```text
//!                    ┌──────────────────────── cancel ───────────────────────┐
//!                    │                                                        ▼
//! (created) ──▶ manual ──approve──▶ pending ──claim──▶ running ──finish──▶ succeeded | failed
//!     │           ▲  │               ▲   ▲ │             │  ▲                 | cancelled | skipped
//!     └───────────┼──┼───────────────┘   │ └── cancel ─▶ │  └─ take over (lease lapsed, token + 1)
//!                 │  │                   │               ├──finish──▶ retry_wait ──claim──▶ running
//!                 │  │                   └── release ────┘              └── cancel ──▶ cancelled
//!                 │  └── resolve (last ticket) ──▶ pending (a new attempt, token + 1) | failed
//!                 └── hold (a ticket opens over pending | retry_wait)
//!                     finish (retry_wait | failed while a ticket is open)
//! ```
//!
//! - A trigger is created `pending` (due at `next_run_at`) or `manual`
//!   (parked by the misfire policy until a person approves it).
//! - **Claim** moves `pending` or `retry_wait` to `running` with a new
//!   fencing token; a `running` trigger whose lease lapsed is **taken over**
//!   the same way (`running → running`, token + 1).
//! - **Finish** commits an attempt's end: `succeeded`, `failed`,
//!   `cancelled`, `skipped` (overlap `forbid`) or `retry_wait` — or
//!   `manual` instead of `retry_wait` or `failed` while an open exception
//!   ticket owns the trigger (see *manual handling* below).
//! - **Release** puts a `running` trigger back to `pending` without a
//!   result: an overlap wait, a drain at shutdown, or a park behind an open
//!   circuit breaker. The attempt is closed as `released` and does not
//!   spend the retry budget.
//! - **Cancel** ends a trigger that has not started (or is paused); a
//!   running one is asked to stop and ends through *finish*.
//! - **Pause** (a gate closes, `model::gates`) moves queued triggers of the
//!   gate's scope (`pending`, `retry_wait`) to `paused`; a running one is
//!   asked to pause and ends through *release* (or *finish* to a retry) in
//!   `paused`. **Resume** (the last gate covering it reopens) moves it to
//!   `pending` — or, for a scheduled fire never started and now late, to
//!   what its job's misfire policy says (`pending`, `manual`, `skipped`).
//! - `succeeded`, `failed`, `cancelled` and `skipped` are final: a completed
//!   trigger is never rewritten (DESIGN §3).
//!
//! **Manual handling.** `manual` is the one state that waits for a person:
//! approval of a fire the misfire policy parked (never started, so no
//! ticket can own it), or the answer to an exception ticket opened for one
//! of the trigger's effects. No claim takes a `manual` trigger and no retry
//! time wakes it. A ticket takes its trigger there where the trigger is
//! when the ticket opens: a queued one (`pending`, `retry_wait`) at once,
//! in the ticket's transaction (**hold**); a running one when its attempt
//! ends, in the attempt's fenced commit (**finish** writes `manual` where
//! it would have written `retry_wait` or `failed`; a success stands). A
//! paused trigger stays paused and, resumed, is held by its next attempt's
//! end; a final one stays final. **Resolve**, in the transaction that
//! resolves the trigger's last open ticket, moves it on by the ticket's
//! action ([`after_resolution`]); `approve` refuses a trigger a ticket
//! holds.
//!
//! Every state change the host makes names a [`Transition`]; the store's
//! statements write exactly the transition's target and guard on exactly
//! its sources (`store::guards` checks each statement against this table),
//! and both migrations hold a CHECK constraint on the same set of states.

use std::fmt;
use std::str::FromStr;

/// A trigger's state, as stored in `triggers.state`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TriggerState {
    /// Due at `next_run_at`; claimable from then on.
    Pending,
    /// Held by a runner under a lease and a fencing token.
    Running,
    /// Failed transiently; claimable again at `next_run_at`.
    RetryWait,
    /// Final: the guest's output is the result.
    Succeeded,
    /// Final: a permanent failure, or the retry budget is spent.
    Failed,
    /// Final: cancelled by a person (or replaced by a newer run).
    Cancelled,
    /// Final: not run, by the overlap policy `forbid`.
    Skipped,
    /// Waits for a person: parked by the misfire policy until approved,
    /// or held by an open exception ticket until it is resolved.
    Manual,
    /// Held by a closed gate (`paddock pause`): not claimable until the
    /// gates covering it reopen; resumes from its last checkpoint.
    Paused,
}

use TriggerState::*;

impl TriggerState {
    /// Every state, in the order the migrations' CHECK lists them.
    pub const ALL: [TriggerState; 9] = [
        Pending, Running, RetryWait, Succeeded, Failed, Cancelled, Skipped, Manual, Paused,
    ];

    /// The name stored in the database and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            Pending => "pending",
            Running => "running",
            RetryWait => "retry_wait",
            Succeeded => "succeeded",
            Failed => "failed",
            Cancelled => "cancelled",
            Skipped => "skipped",
            Manual => "manual",
            Paused => "paused",
        }
    }

    /// Final states: a trigger in one is never rewritten, and it gets a
    /// `finished_at`.
    pub const fn is_terminal(self) -> bool {
        matches!(self, Succeeded | Failed | Cancelled | Skipped)
    }

    /// Whether a finish asked to end in `self` may write another state:
    /// `manual` where an open ticket holds the trigger, `paused` (a retry)
    /// where a gate asked it to pause. Every other target is written as
    /// asked.
    pub const fn finish_may_redirect(self) -> bool {
        matches!(self, RetryWait | Failed)
    }

    /// Whether the state machine has any transition `self → to`.
    pub fn can_move_to(self, to: TriggerState) -> bool {
        Transition::ALL
            .iter()
            .any(|t| t.to().contains(&to) && t.from().contains(&self))
    }
}

impl fmt::Display for TriggerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A state name that is not one of [`TriggerState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a trigger state")]
pub struct UnknownState(pub String);

impl FromStr for TriggerState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TriggerState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

impl TryFrom<String> for TriggerState {
    type Error = UnknownState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// Lets tests and reports compare with a state's stored name.
impl PartialEq<&str> for TriggerState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for TriggerState {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// Every state change the host makes, by name. Each has the states it may
/// start from and the states it may end in; the store's statement for it
/// guards on exactly [`Transition::from`] and writes one of
/// [`Transition::to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// A new trigger: created due (`pending`) or parked for approval.
    Create,
    /// A runner takes a due trigger: token + 1, a lease, a new attempt.
    Claim,
    /// A runner takes over a trigger whose lease lapsed: token + 1.
    TakeOver,
    /// An attempt's end is committed under its token.
    Finish,
    /// An attempt ends without a result and its trigger is due again
    /// (overlap wait, drain, circuit-breaker park).
    Release,
    /// A person approves a trigger parked by the misfire policy.
    Approve,
    /// A person cancels a trigger that has not started.
    CancelUnstarted,
    /// A gate closes over a queued trigger (`paddock pause`).
    Pause,
    /// The last gate covering a paused trigger reopens (`paddock resume`):
    /// due again, or judged by its job's misfire policy if it is a
    /// scheduled fire that was never started and is now late.
    Resume,
    /// An exception ticket opens over a queued trigger: it waits for the
    /// ticket's answer instead of its retry time.
    Hold,
    /// The last open ticket holding a trigger is resolved: a new attempt
    /// (the next claim takes token + 1) or failed, by the ticket's action.
    Resolve,
}

impl Transition {
    pub const ALL: [Transition; 11] = [
        Transition::Create,
        Transition::Claim,
        Transition::TakeOver,
        Transition::Finish,
        Transition::Release,
        Transition::Approve,
        Transition::CancelUnstarted,
        Transition::Pause,
        Transition::Resume,
        Transition::Hold,
        Transition::Resolve,
    ];

    /// The states this transition starts from (none: it creates the row).
    pub const fn from(self) -> &'static [TriggerState] {
        match self {
            Transition::Create => &[],
            Transition::Claim => &[Pending, RetryWait],
            Transition::TakeOver => &[Running],
            Transition::Finish => &[Running],
            Transition::Release => &[Running],
            Transition::Approve => &[Manual],
            Transition::CancelUnstarted => &[Pending, RetryWait, Manual, Paused],
            Transition::Pause => &[Pending, RetryWait],
            Transition::Resume => &[Paused],
            Transition::Hold => &[Pending, RetryWait],
            Transition::Resolve => &[Manual],
        }
    }

    /// The states this transition may end in.
    pub const fn to(self) -> &'static [TriggerState] {
        match self {
            Transition::Create => &[Pending, Manual],
            Transition::Claim | Transition::TakeOver => &[Running],
            // `paused`: a retry of a trigger a gate asked to pause; `manual`:
            // a retry or failure while an open ticket owns the trigger.
            Transition::Finish => &[
                Succeeded, Failed, Cancelled, Skipped, RetryWait, Paused, Manual,
            ],
            // `paused`: the attempt answered a gate's pause request.
            Transition::Release => &[Pending, Paused],
            Transition::Approve => &[Pending],
            Transition::CancelUnstarted => &[Cancelled],
            Transition::Pause => &[Paused],
            // `manual` / `skipped`: a late scheduled fire, by its misfire policy.
            Transition::Resume => &[Pending, Manual, Skipped],
            Transition::Hold => &[Manual],
            Transition::Resolve => &[Pending, Failed],
        }
    }

    /// Whether this transition may move `from` to `to`.
    pub fn allows(self, from: TriggerState, to: TriggerState) -> bool {
        self.from().contains(&from) && self.to().contains(&to)
    }

    /// Whether this transition may end in `to`.
    pub fn ends_in(self, to: TriggerState) -> bool {
        self.to().contains(&to)
    }
}

/// Where resolving a trigger's last open ticket with `action` moves the
/// trigger ([`Transition::Resolve`]). `resend` and `mark_succeeded` give
/// it a new attempt: its job decides what follows from the effect's new
/// fact (sent again, or replayed as succeeded), and only a guest's output
/// is a trigger's result. `mark_failed` and `dismiss` record that nothing
/// is to be done: the trigger fails.
pub fn after_resolution(action: &str) -> TriggerState {
    match action {
        "resend" | "mark_succeeded" => Pending,
        _ => Failed,
    }
}

/// A trigger state as a quoted SQL literal, checked at compile time:
/// `trigger_state!(running)` is `"'running'"`. Store statements spell
/// states only through this macro (and the `state!` guards built on it), so
/// a misspelt state does not compile.
#[macro_export]
macro_rules! trigger_state {
    (pending) => {
        "'pending'"
    };
    (running) => {
        "'running'"
    };
    (retry_wait) => {
        "'retry_wait'"
    };
    (succeeded) => {
        "'succeeded'"
    };
    (failed) => {
        "'failed'"
    };
    (cancelled) => {
        "'cancelled'"
    };
    (skipped) => {
        "'skipped'"
    };
    (manual) => {
        "'manual'"
    };
    (paused) => {
        "'paused'"
    };
}

/// How an attempt ended, as stored in `attempts.outcome` (NULL while it
/// runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Its output was committed.
    Succeeded,
    /// Its failure was committed (the trigger failed or waits to retry).
    Failed,
    /// Not run: the overlap policy skipped its trigger.
    Skipped,
    /// Ended without a verdict and its trigger is due again (overlap wait,
    /// drain, breaker park); does not spend the retry budget.
    Released,
    /// Its result was refused: the commit gate closed or its token went
    /// stale. The trigger was left to its lease.
    LeaseLost,
    /// Its lease lapsed and another runner took the trigger over.
    Expired,
}

impl AttemptOutcome {
    pub const ALL: [AttemptOutcome; 6] = [
        AttemptOutcome::Succeeded,
        AttemptOutcome::Failed,
        AttemptOutcome::Skipped,
        AttemptOutcome::Released,
        AttemptOutcome::LeaseLost,
        AttemptOutcome::Expired,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Skipped => "skipped",
            AttemptOutcome::Released => "released",
            AttemptOutcome::LeaseLost => "lease_lost",
            AttemptOutcome::Expired => "expired",
        }
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for AttemptOutcome {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AttemptOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

impl TryFrom<String> for AttemptOutcome {
    type Error = UnknownState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// An attempt outcome as a quoted SQL literal, checked at compile time:
/// `attempt_outcome!(expired)` is `"'expired'"`.
#[macro_export]
macro_rules! attempt_outcome {
    (succeeded) => {
        "'succeeded'"
    };
    (failed) => {
        "'failed'"
    };
    (skipped) => {
        "'skipped'"
    };
    (released) => {
        "'released'"
    };
    (lease_lost) => {
        "'lease_lost'"
    };
    (expired) => {
        "'expired'"
    };
}

impl PartialEq<&str> for AttemptOutcome {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_triggers_are_never_rewritten() {
        for from in TriggerState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in TriggerState::ALL {
                assert!(!from.can_move_to(to), "{from} -> {to}");
            }
            for t in Transition::ALL {
                assert!(!t.from().contains(&from), "{t:?} starts from final {from}");
            }
        }
    }

    #[test]
    fn every_state_is_reachable_and_every_live_state_can_end() {
        for state in TriggerState::ALL {
            let reachable = Transition::ALL.iter().any(|t| t.to().contains(&state));
            assert!(reachable, "{state} is never entered");
            if !state.is_terminal() {
                let leaves = TriggerState::ALL
                    .into_iter()
                    .any(|to| to != state && state.can_move_to(to));
                assert!(leaves, "{state} has no way out");
            }
        }
    }

    #[test]
    fn the_legal_moves_are_exactly_these() {
        let legal: Vec<(TriggerState, TriggerState)> = TriggerState::ALL
            .into_iter()
            .flat_map(|from| TriggerState::ALL.into_iter().map(move |to| (from, to)))
            .filter(|(from, to)| from.can_move_to(*to))
            .collect();
        let expected = [
            (Pending, Running),
            (Pending, Cancelled),
            (Running, Pending),
            (Running, Running),
            (Running, RetryWait),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Cancelled),
            (Running, Skipped),
            (RetryWait, Running),
            (RetryWait, Cancelled),
            (Manual, Pending),
            (Manual, Cancelled),
            (Running, Paused),
            (Pending, Paused),
            (RetryWait, Paused),
            (Paused, Pending),
            (Paused, Manual),
            (Paused, Skipped),
            (Paused, Cancelled),
            (Running, Manual),
            (Pending, Manual),
            (RetryWait, Manual),
            (Manual, Failed),
        ];
        let mut expected = expected.to_vec();
        expected.sort();
        let mut legal = legal;
        legal.sort();
        assert_eq!(legal, expected);
    }

    #[test]
    fn a_resolution_gives_a_new_attempt_or_fails_and_never_skips_the_guest() {
        assert_eq!(after_resolution("resend"), Pending);
        assert_eq!(after_resolution("mark_succeeded"), Pending);
        assert_eq!(after_resolution("mark_failed"), Failed);
        assert_eq!(after_resolution("dismiss"), Failed);
        for action in ["resend", "mark_succeeded", "mark_failed", "dismiss"] {
            assert!(Transition::Resolve.allows(Manual, after_resolution(action)));
        }
        // A ticket holds a queued trigger; nothing but a person lets it go.
        assert!(Transition::Hold.allows(RetryWait, Manual));
        assert!(!Transition::Claim.from().contains(&Manual));
        assert!(!Transition::TakeOver.from().contains(&Manual));
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for state in TriggerState::ALL {
            assert_eq!(state.as_str().parse::<TriggerState>(), Ok(state));
        }
        for outcome in AttemptOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<AttemptOutcome>(), Ok(outcome));
        }
        assert_eq!(
            "done".parse::<TriggerState>(),
            Err(UnknownState("done".into()))
        );
    }

    #[test]
    fn the_sql_literals_are_the_stored_names() {
        // An exhaustive match: a new state does not compile until it has a
        // literal here and an arm in `trigger_state!`.
        for state in TriggerState::ALL {
            let literal = match state {
                Pending => trigger_state!(pending),
                Running => trigger_state!(running),
                RetryWait => trigger_state!(retry_wait),
                Succeeded => trigger_state!(succeeded),
                Failed => trigger_state!(failed),
                Cancelled => trigger_state!(cancelled),
                Skipped => trigger_state!(skipped),
                Manual => trigger_state!(manual),
                Paused => trigger_state!(paused),
            };
            assert_eq!(literal, format!("'{state}'"));
        }
    }
}
