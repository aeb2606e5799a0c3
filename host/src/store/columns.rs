//! The column lists of the rows read back as records, as literals for
//! `concat!` (one list per table, so every statement reads the same shape).

/// The columns of a [`super::TriggerRecord`].
macro_rules! trigger_columns {
    () => {
        "id, plan_key, job_id, plan_version, tenant, resource_group, origin, scheduled_at, \
         partition_key, params, state, priority, next_run_at, fencing_token, lease_owner, \
         lease_until, attempts, result, error_class, error_message, created_at, updated_at, \
         finished_at"
    };
}
pub(crate) use trigger_columns;

/// The columns of an [`super::AttemptRecord`].
macro_rules! attempt_columns {
    () => {
        "id, trigger_id, attempt_no, runner_id, fencing_token, started_at, lease_until, \
         heartbeat_at, ended_at, outcome, error_class, error_message, fuel_used, \
         peak_memory_bytes, wall_ms, log"
    };
}
pub(crate) use attempt_columns;

/// The columns of an [`super::EffectRecord`].
macro_rules! effect_columns {
    () => {
        "id, tenant, idempotency_key, downstream_key, trigger_id, attempt_id, connector, action, \
         params_digest, request_id, fencing_token, state, response, error, compensates, sends, \
         last_status, resolved_by, created_at, updated_at"
    };
}
pub(crate) use effect_columns;

/// The columns of a [`super::ConnectorRecord`].
macro_rules! connector_columns {
    () => {
        "name, kind, base_url, timeout_ms, permits, rate_per_sec, compares_tokens, queryable, \
         idempotent, breaker_failure_rate, breaker_min_calls, breaker_window_ms, breaker_open_ms"
    };
}
pub(crate) use connector_columns;

/// The columns of an [`super::ExceptionRecord`].
macro_rules! exception_columns {
    () => {
        "id, kind, tenant, subject, trigger_id, effect_key, evidence, allowed_actions, state, resolution, \
         resolved_by, reason, before_digest, after_digest, created_at, resolved_at, \
         proposed_action, proposed_by, proposed_reason, proposed_at"
    };
}
pub(crate) use exception_columns;
