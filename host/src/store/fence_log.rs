//! The one structured log line of a fenced write refused
//! ([`super::Store::lease_lost`]): the fields every refusal carries, so
//! that `paddock serve --log-format json` gives one machine-readable line
//! per refusal. Field names are those of the runner's state-change lines
//! (`lease/log.rs`): `trigger_id`, `plan_key`, `attempt` (the attempt's
//! id), `fencing_token` (the writer's, stale), `found_token`, `state`,
//! `write`, and for an effect write `idempotency_key`, `request_id` and
//! `params_digest` — never the params themselves.

use crate::model::{FencingToken, LeaseRef, TriggerState};

/// The effect an effect write was about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EffectRef<'a> {
    pub key: &'a str,
    pub request_id: Option<&'a str>,
    pub params_digest: Option<&'a str>,
}

/// A fenced write refused, as logged.
pub(crate) struct FenceRefusal<'a> {
    pub lease: &'a LeaseRef,
    /// The write (`heartbeat`, `checkpoint`, `result_commit`, ...).
    pub kind: &'a str,
    pub plan_key: Option<&'a str>,
    pub found: Option<FencingToken>,
    pub state: Option<TriggerState>,
    pub effect: Option<&'a EffectRef<'a>>,
}

impl FenceRefusal<'_> {
    /// One `warn` line, `event = "fenced_write_refused"`.
    pub(crate) fn log(&self, message: &str) {
        tracing::warn!(
            event = "fenced_write_refused",
            trigger_id = self.lease.trigger_id,
            plan_key = self.plan_key,
            attempt = self.lease.attempt_id,
            fencing_token = self.lease.fencing_token.get(),
            found_token = self.found.map(|t| t.get()),
            state = self.state.map(|s| s.as_str()),
            write = self.kind,
            idempotency_key = self.effect.map(|e| e.key),
            request_id = self.effect.and_then(|e| e.request_id),
            params_digest = self.effect.and_then(|e| e.params_digest),
            owner = %self.lease.owner,
            "{message}"
        );
    }
}
