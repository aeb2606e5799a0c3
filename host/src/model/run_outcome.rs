//! What became of an attempt, as the runner reports it: in its log lines,
//! in a drain's report and to tests. Where the end moved the trigger, the
//! state is the one the database wrote — the fenced finish and release
//! return it — not the one the runner asked for: a retry of a trigger a
//! gate asked to pause lands `paused`, a retry or failure an open ticket
//! holds lands `manual`, and a release of a paused trigger lands `paused`.

use super::attempt::ReleaseReason;
use super::state::TriggerState;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The attempt has not ended.
    NotEnded,
    /// Its end was committed; the trigger is now in this state.
    Committed(TriggerState),
    /// It ended without a result and its trigger is due again — or held,
    /// `paused`, where a gate asked it to pause — from its last checkpoint
    /// (`Drained`: a drain or a pause; `CircuitOpen`: parked behind an open
    /// breaker; `OverlapWait`: waiting for older runs of its job).
    Released {
        reason: ReleaseReason,
        to: TriggerState,
    },
    /// The commit gate closed or the token went stale: nothing it did
    /// counts, and the trigger is left to its lease.
    LeaseLost,
    /// Whether older runs of its job are in flight could not be read, so
    /// the guest did not run; the lease lapses and a takeover judges again.
    OverlapCheckFailed,
    /// The database failed the release; the lease lapses.
    ReleaseFailed,
    /// The database failed the commit; the lease lapses.
    CommitFailed,
}

impl RunOutcome {
    /// Its name in log lines and reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunOutcome::NotEnded => "not_ended",
            RunOutcome::Committed(state) => state.as_str(),
            RunOutcome::Released { reason, .. } => match reason {
                ReleaseReason::Drained => "released",
                ReleaseReason::CircuitOpen => "parked",
                ReleaseReason::OverlapWait => "overlap_wait",
            },
            RunOutcome::LeaseLost => "lease_lost",
            RunOutcome::OverlapCheckFailed => "overlap_check_failed",
            RunOutcome::ReleaseFailed => "release_failed",
            RunOutcome::CommitFailed => "commit_failed",
        }
    }

    /// The state the end wrote, where it moved the trigger.
    pub const fn moved_to(self) -> Option<TriggerState> {
        match self {
            RunOutcome::Committed(state) | RunOutcome::Released { to: state, .. } => Some(state),
            _ => None,
        }
    }

    /// Whether its end was committed.
    pub const fn committed(self) -> bool {
        matches!(self, RunOutcome::Committed(_))
    }

    /// Whether its trigger is finished: committed to a final state.
    pub const fn finished(self) -> bool {
        matches!(self, RunOutcome::Committed(state) if state.is_terminal())
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_reports_where_the_database_put_the_trigger() {
        let paused = RunOutcome::Released {
            reason: ReleaseReason::Drained,
            to: TriggerState::Paused,
        };
        assert_eq!(paused.moved_to(), Some(TriggerState::Paused));
        assert_eq!(paused.to_string(), "released");
        assert!(!paused.committed() && !paused.finished());
    }

    #[test]
    fn only_a_committed_final_state_finishes_the_trigger() {
        assert!(RunOutcome::Committed(TriggerState::Succeeded).finished());
        assert!(!RunOutcome::Committed(TriggerState::RetryWait).finished());
        assert!(RunOutcome::Committed(TriggerState::Manual).committed());
        assert_eq!(RunOutcome::LeaseLost.moved_to(), None);
        assert_eq!(
            RunOutcome::Committed(TriggerState::Manual).to_string(),
            "manual"
        );
    }
}
