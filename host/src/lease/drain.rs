//! Draining a runner at shutdown: which attempts park instead of
//! committing, and the list of what was left unfinished.
//!
//! The sequence (driven by [`super::Runner::run_and_drain`]): stop claiming;
//! let attempts in flight finish within `drain_timeout`; then ask each to
//! checkpoint and pause at its next host call (`StopReason::Pause`, no new
//! effects start); after `drain_grace` interrupt whatever still runs
//! (`StopReason::Shutdown`, at the next epoch tick). A paused or
//! interrupted attempt is *released*, not committed: its trigger goes back
//! to `pending`, due now, so any runner claims it with token + 1 and
//! resumes from the last checkpoint; the attempt row says `released` /
//! `drained` and does not count against the retry budget. An effect
//! already sent when the pause came settles as usual (or stays `intent` /
//! `unknown`, which the next attempt and the recovery scanner query by key
//! before resending): its intent was written, fenced, before the send.

use super::runner::AttemptSummary;
use crate::sandbox::{RunResult, StopReason, TrapKind};
use crate::store::Store;
use std::fmt;
use std::time::Duration;

/// Whether an attempt that ended with `result` while `reason` was set
/// parks (is released from its checkpoint) rather than commits. Only a
/// drain parks, and only an ending that is not the guest's own verdict: a
/// transient or unknown job error (the answer to `pause-requested`) or the
/// drain's interrupt. Output, permanent and invalid-input errors and limit
/// traps commit as usual.
pub fn parks(reason: Option<StopReason>, result: &RunResult) -> bool {
    if !matches!(reason, Some(StopReason::Pause | StopReason::Shutdown)) {
        return false;
    }
    match result {
        RunResult::Output(_) => false,
        RunResult::JobFailed { .. } => super::transitions::gave_up_for_now(result),
        RunResult::Trapped { kind, .. } => matches!(kind, TrapKind::Drained),
    }
}

/// One trigger an attempt of this runner held at shutdown that is not
/// finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    pub trigger_id: i64,
    pub job_id: String,
    /// The trigger's state now (`pending` once released).
    pub state: String,
    /// Attempts so far (claims, released ones included).
    pub attempts: i64,
    /// The last checkpoint's sequence number, if any was saved.
    pub checkpoint_seq: Option<i64>,
    /// How this runner's attempt ended (`released`, `lease_lost`, ...).
    pub attempt_outcome: String,
    /// Effects of the trigger whose outcome is not known yet (`intent` or
    /// `unknown`), by idempotency key: the next attempt queries them first.
    pub unknown_effects: Vec<String>,
}

impl fmt::Display for Unfinished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unfinished trigger {} job {} state {} attempts {} checkpoint {} attempt {}",
            self.trigger_id,
            self.job_id,
            self.state,
            self.attempts,
            self.checkpoint_seq
                .map_or_else(|| "-".to_string(), |s| s.to_string()),
            self.attempt_outcome,
        )?;
        if !self.unknown_effects.is_empty() {
            write!(f, " unknown_effects {}", self.unknown_effects.join(","))?;
        }
        Ok(())
    }
}

/// What a drain did.
#[derive(Debug, Clone, Default)]
pub struct DrainReport {
    /// Attempts that ended during the drain, by how.
    pub ended: Vec<AttemptSummary>,
    /// Those whose trigger is not finished, read back from the store.
    pub unfinished: Vec<Unfinished>,
    /// Whether the drain timeout passed (attempts were asked to pause).
    pub paused: bool,
    /// Whether the grace passed too (guests were interrupted).
    pub interrupted: bool,
    pub took: Duration,
}

impl DrainReport {
    /// How many attempts were released from their checkpoint.
    pub fn released(&self) -> usize {
        self.ended
            .iter()
            .filter(|s| s.outcome == "released")
            .count()
    }
}

const FINISHED: &[&str] = &["succeeded", "failed", "cancelled", "skipped"];

/// Read back every trigger whose attempt ended during the drain and list
/// those not finished.
pub(super) async fn report(
    store: &Store,
    ended: Vec<AttemptSummary>,
    took: Duration,
    paused: bool,
    interrupted: bool,
) -> DrainReport {
    let mut unfinished = Vec::new();
    for summary in &ended {
        if summary.committed && FINISHED.contains(&summary.outcome.as_str()) {
            continue;
        }
        let mut entry = Unfinished {
            trigger_id: summary.trigger_id,
            job_id: summary.job_id.clone(),
            state: "?".into(),
            attempts: 0,
            checkpoint_seq: None,
            attempt_outcome: summary.outcome.clone(),
            unknown_effects: Vec::new(),
        };
        match store.trigger_get(summary.trigger_id).await {
            Ok(t) => {
                if FINISHED.contains(&t.state.as_str()) {
                    continue;
                }
                entry.state = t.state;
                entry.attempts = t.attempts;
            }
            Err(e) => {
                tracing::warn!(trigger_id = summary.trigger_id, error = %e, "drain: could not read trigger")
            }
        }
        if let Ok(Some((seq, _))) = store.checkpoint_load(summary.trigger_id).await {
            entry.checkpoint_seq = Some(seq);
        }
        if let Ok(effects) = store.effects_for_trigger(summary.trigger_id).await {
            entry.unknown_effects = effects
                .into_iter()
                .filter(|e| matches!(e.state.as_str(), "intent" | "unknown"))
                .map(|e| e.idempotency_key)
                .collect();
        }
        unfinished.push(entry);
    }
    unfinished.sort_by_key(|u| u.trigger_id);
    DrainReport {
        ended,
        unfinished,
        paused,
        interrupted,
        took,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::wit::types::ErrorClass;

    fn failed(class: ErrorClass) -> RunResult {
        RunResult::JobFailed {
            class,
            message: "x".into(),
        }
    }

    #[test]
    fn only_a_drain_parks_and_only_endings_that_are_not_a_verdict() {
        let pause = Some(StopReason::Pause);
        assert!(parks(pause, &failed(ErrorClass::Transient)));
        assert!(parks(pause, &failed(ErrorClass::Unknown)));
        assert!(!parks(pause, &failed(ErrorClass::Permanent)));
        assert!(!parks(pause, &failed(ErrorClass::InvalidInput)));
        assert!(!parks(pause, &RunResult::Output(vec![])));
        let drained = RunResult::Trapped {
            kind: TrapKind::Drained,
            message: "x".into(),
        };
        assert!(parks(Some(StopReason::Shutdown), &drained));
        let fuel = RunResult::Trapped {
            kind: TrapKind::FuelExhausted,
            message: "x".into(),
        };
        assert!(!parks(Some(StopReason::Shutdown), &fuel));
        // Not draining: a transient failure is a retry, a lost lease is
        // abandoned, a cancel commits.
        assert!(!parks(None, &failed(ErrorClass::Transient)));
        assert!(!parks(
            Some(StopReason::LeaseLost),
            &failed(ErrorClass::Transient)
        ));
        assert!(!parks(
            Some(StopReason::Cancel),
            &failed(ErrorClass::Transient)
        ));
    }

    #[test]
    fn the_unfinished_line_names_trigger_job_state_attempts_and_checkpoint() {
        let u = Unfinished {
            trigger_id: 7,
            job_id: "long".into(),
            state: "pending".into(),
            attempts: 1,
            checkpoint_seq: Some(12),
            attempt_outcome: "released".into(),
            unknown_effects: vec![],
        };
        assert_eq!(
            u.to_string(),
            "unfinished trigger 7 job long state pending attempts 1 checkpoint 12 attempt released"
        );
    }
}
