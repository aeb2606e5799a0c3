//! The structured lines of the trigger state changes the store makes on a
//! person's or the scanner's behalf — creation, approval, cancel, pause,
//! resume, retry-now — one line per trigger, so that `paddock serve
//! --log-format json` (and any CLI command with it) gives a machine one
//! line it can parse per change. The runner logs the
//! changes it makes itself (`lease/log.rs`), and a refused fenced write
//! has its own line (`fence_log.rs`); the field names are theirs:
//!
//! | field | value |
//! |---|---|
//! | `event` | `trigger_created` or `trigger_state` |
//! | `trigger_id`, `plan_key` | the trigger |
//! | `state` | where it went |
//! | `cause` | on creation the origin (`manual`, `schedule`, `backfill`); then `approve`, `cancel`, `stop_requested` (a running trigger asked to stop), `pause`, `resume`, `resume_parked` / `resume_skipped` (a late held fire's misfire policy), `retry` (a waiting retry made due now), `gate_held` (a fire created into a closed gate) |
//! | `actor` | who asked (`local:…`, `token:…`, the scanner's owner) |
//! | `job_id`, `origin`, `params_digest` | on creation: SHA-256 of the params, never the params |
//!
//! A line is written after its transaction commits: a change rolled back
//! is not logged. Logged at `info` (`PADDOCK_LOG=paddock=info`).

use crate::model::plan::sha256_hex;

/// One trigger a statement moved (its `RETURNING id, plan_key`).
pub(crate) type Moved = (i64, String);

/// Why triggers moved, where to, and on whose word.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateChange<'a> {
    pub cause: &'a str,
    pub state: &'a str,
    pub actor: &'a str,
}

impl StateChange<'_> {
    /// One `trigger_state` line per moved trigger.
    pub(crate) fn log(&self, moved: &[Moved]) {
        for (trigger_id, plan_key) in moved {
            tracing::info!(
                event = "trigger_state",
                trigger_id,
                plan_key = %crate::model::text::Esc(&plan_key),
                state = self.state,
                cause = self.cause,
                actor = self.actor,
                "trigger {}: {}",
                self.state,
                self.cause
            );
        }
    }
}

/// A trigger created, as its line carries it.
pub(crate) struct Created<'a> {
    pub trigger_id: i64,
    pub plan_key: &'a str,
    pub job_id: &'a str,
    pub origin: crate::model::TriggerOrigin,
    pub state: &'a str,
    pub params: &'a str,
    pub actor: &'a str,
}

impl<'a> Created<'a> {
    /// The line of a trigger read back after its insert.
    pub(crate) fn of(t: &'a super::TriggerRecord, actor: &'a str) -> Self {
        Self {
            trigger_id: t.id,
            plan_key: &t.plan_key,
            job_id: &t.job_id,
            origin: t.origin,
            state: t.state.as_str(),
            params: &t.params,
            actor,
        }
    }

    /// One `trigger_created` line.
    pub(crate) fn log(&self) {
        tracing::info!(
            event = "trigger_created",
            trigger_id = self.trigger_id,
            plan_key = %crate::model::text::Esc(&self.plan_key),
            job_id = %crate::model::text::Esc(&self.job_id),
            origin = self.origin.as_str(),
            state = self.state,
            cause = self.origin.as_str(),
            actor = self.actor,
            params_digest = %sha256_hex(self.params.as_bytes()),
            "trigger created {}",
            self.state
        );
    }
}
