//! Draining a runner at shutdown, and the list of what was left
//! unfinished. Which attempts are released instead of committed is decided
//! with every other attempt end, in [`crate::model::attempt::decide_end`].
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
use crate::model::{ReleaseReason, RunOutcome};
use crate::store::RunnerStore;
use std::fmt;
use std::time::Duration;

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
            .filter(|s| {
                matches!(
                    s.outcome,
                    RunOutcome::Released {
                        reason: ReleaseReason::Drained,
                        ..
                    }
                )
            })
            .count()
    }
}

/// Read back every trigger whose attempt ended during the drain and list
/// those not finished.
pub(super) async fn report(
    store: &dyn RunnerStore,
    ended: Vec<AttemptSummary>,
    took: Duration,
    paused: bool,
    interrupted: bool,
) -> DrainReport {
    let mut unfinished = Vec::new();
    for summary in &ended {
        if summary.outcome.finished() {
            continue;
        }
        let mut entry = Unfinished {
            trigger_id: summary.trigger_id,
            job_id: summary.job_id.clone(),
            state: "?".into(),
            attempts: 0,
            checkpoint_seq: None,
            attempt_outcome: summary.outcome.to_string(),
            unknown_effects: Vec::new(),
        };
        match store.trigger_get(summary.trigger_id).await {
            Ok(t) => {
                if t.state.is_terminal() {
                    continue;
                }
                entry.state = t.state.to_string();
                entry.attempts = t.attempts;
            }
            Err(e) => {
                tracing::warn!(trigger_id = summary.trigger_id, error = %crate::model::text::Esc(&e), "drain: could not read trigger")
            }
        }
        if let Ok(Some((seq, _))) = store.checkpoint_load(summary.trigger_id).await {
            entry.checkpoint_seq = Some(seq);
        }
        if let Ok(effects) = store.effects_for_trigger(summary.trigger_id).await {
            entry.unknown_effects = effects
                .into_iter()
                .filter(|e| e.state.is_in_doubt())
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
