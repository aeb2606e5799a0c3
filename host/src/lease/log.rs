//! The runner's structured lines for trigger state changes, one per
//! change, so that `paddock serve --log-format json` gives a machine a
//! line it can parse per change (DESIGN §9). Fields, the
//! same as a fenced write refusal's (`store/fence_log.rs`):
//!
//! | field | value |
//! |---|---|
//! | `event` | `trigger_claimed` (→ `running`), `trigger_state` (the attempt's end moved the trigger: `state` is where to), `attempt_ended` (it did not: the lease was lost, a write failed) |
//! | `trigger_id`, `plan_key`, `job_id` | the trigger |
//! | `attempt`, `attempt_no` | the attempt's id and number |
//! | `fencing_token` | the attempt's token |
//! | `params_digest` | SHA-256 of the trigger's params (never the params) |
//! | `state` / `outcome` | the state the database wrote / what became of the attempt ([`crate::model::RunOutcome`]) |
//!
//! Logged at `info`: `PADDOCK_LOG=paddock=info` shows them; a field's
//! value is computed only when the line is enabled.

use super::runner::AttemptSummary;
use crate::model::Claim;
use crate::model::plan::sha256_hex;

/// A claim moved the trigger to `running`.
pub(super) fn claimed(claim: &Claim) {
    tracing::info!(
        event = "trigger_claimed",
        trigger_id = claim.trigger_id,
        plan_key = %crate::model::text::Esc(&claim.plan_key),
        job_id = %crate::model::text::Esc(&claim.job_id),
        attempt = claim.attempt_id,
        attempt_no = claim.attempt_no,
        fencing_token = claim.fencing_token.get(),
        params_digest = %sha256_hex(claim.params.as_bytes()),
        state = "running",
        "trigger claimed"
    );
}

/// The attempt of `claim` ended as `summary` says.
pub(super) fn ended(claim: &Claim, summary: &AttemptSummary) {
    let state = summary.outcome.moved_to().map(|s| s.as_str());
    let event = if state.is_some() {
        "trigger_state"
    } else {
        "attempt_ended"
    };
    tracing::info!(
        event,
        trigger_id = claim.trigger_id,
        plan_key = %crate::model::text::Esc(&claim.plan_key),
        job_id = %crate::model::text::Esc(&claim.job_id),
        attempt = claim.attempt_id,
        attempt_no = claim.attempt_no,
        fencing_token = claim.fencing_token.get(),
        params_digest = %sha256_hex(claim.params.as_bytes()),
        state,
        outcome = %summary.outcome,
        error_class = summary.error_class.as_deref(),
        "attempt ended: {}",
        summary.outcome
    );
}
