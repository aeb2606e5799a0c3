//! `effector`: a job that performs one side effect through the host.
//!
//! Demonstrates `effects::invoke` (the host makes the effect idempotent by
//! key, fences it by lease and records it) and how a guest maps each answer to
//! a job result:
//!
//! | host answer                                   | job result                      |
//! |-----------------------------------------------|---------------------------------|
//! | `done(body)` / `replayed(body)`               | `ok({"outcome":"done"/"replayed","body":"…"})` |
//! | `failed(reason)`                              | `err(permanent)`                |
//! | `unknown(reason)`                             | `err(unknown)`                  |
//! | `lease-lost`, `circuit-open`                  | `err(transient)`                |
//! | `not-granted`, `key-conflict`, `invalid`, `budget-exhausted` | `err(permanent)` |
//!
//! Every message is a one-line JSON object: `{"outcome":…,"body":…}` for an
//! outcome, `{"error":"<effect-error case>","detail":…}` for an effect error.
//!
//! Params: `connector`, `action`, `key` (strings, required), `payload`
//! (string, sent as UTF-8 bytes, default empty), `compensates` (string,
//! optional). Optional `mode`: `"invoke"` (default) or `"query"`, which calls
//! `effects::query(connector, key)` instead and returns the recorded outcome
//! (`{"outcome":"none"}` when there is no record) without performing anything.
//!
//! Steps before the effect (for the fault-injection tests), with `mode`
//! `"invoke"` only: `steps` (integer, default 0) and `spin_per_step`
//! (integer, default 0: busy-loop iterations per step). When `steps` is
//! given the guest resumes from its checkpoint (a `u32` step counter,
//! little-endian), saves a checkpoint after every step, invokes the effect,
//! then saves one more checkpoint (`steps + 1`: the effect was answered),
//! and its output gains `"resumed_from":K,"attempt":N` (the counter loaded
//! at the start and the attempt number). A refused checkpoint (`lease-lost`,
//! pause, cancel) ends the run with a transient / permanent error.
//!
//! `busy_attempts` (integer, default 0), with `mode` `"invoke"`: attempts
//! numbered up to this stop after the steps, before the effect, and stay
//! busy until the host says stop: they burn CPU in bursts and save their
//! checkpoint again (the same step) between bursts, so a runner stopped
//! there has nothing in flight, and the first thing it does when it runs
//! again is a fenced write. The run then ends as a refused checkpoint does.
//! A later attempt goes straight on to the effect.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::effects::{self, EffectError, Outcome, Request};
use paddock::job::types::{Control, ErrorClass};
use paddock::job::{checkpoint, context, log};

struct Effector;

fn error(class: ErrorClass, message: impl Into<String>) -> JobError {
    JobError {
        class,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> JobError {
    error(ErrorClass::InvalidInput, message)
}

fn str_param(
    params: &minijson::Value,
    key: &str,
    required: bool,
) -> Result<Option<String>, JobError> {
    match params.get(key) {
        None => {
            if required {
                Err(invalid(format!("param `{key}` is required")))
            } else {
                Ok(None)
            }
        }
        Some(v) if v.is_null() && !required => Ok(None),
        Some(v) => match v.as_str() {
            Some(s) => Ok(Some(s.to_string())),
            None => Err(invalid(format!("param `{key}` must be a string"))),
        },
    }
}

/// An optional non-negative integer param.
fn int_param(params: &minijson::Value, key: &str, max: u64) -> Result<Option<u64>, JobError> {
    match params.get(key) {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= max => Ok(Some(n)),
            _ => Err(invalid(format!(
                "param `{key}` must be an integer from 0 to {max}"
            ))),
        },
    }
}

/// Save checkpoint `step`; an error unless the host says proceed.
fn save(step: u32) -> Result<(), JobError> {
    match checkpoint::save(&step.to_le_bytes()) {
        Control::Proceed => Ok(()),
        Control::LeaseLost => {
            log::log(
                log::Level::Warn,
                &format!("effector: lease lost saving step {step}"),
            );
            Err(error(
                ErrorClass::Transient,
                format!("lease lost at step {step}; checkpoint not saved"),
            ))
        }
        Control::PauseRequested => Err(error(
            ErrorClass::Transient,
            format!("paused at step {step}"),
        )),
        Control::CancelRequested => Err(error(
            ErrorClass::Permanent,
            format!("cancelled at step {step}"),
        )),
    }
}

/// Burn CPU and save checkpoint `step` again, in turns, until the host
/// answers a save with anything but proceed.
fn stay_busy(step: u32) -> JobError {
    loop {
        let mut acc = 0u64;
        for i in 0..5_000_000u64 {
            acc = core::hint::black_box(acc.wrapping_add(i));
        }
        core::hint::black_box(acc);
        if let Err(stop) = save(step) {
            return stop;
        }
    }
}

/// Resume from the checkpoint and run the steps up to `steps`. Returns the
/// step the run resumed from.
fn run_steps(steps: u32, spin_per_step: u64) -> Result<u32, JobError> {
    let resumed_from = match checkpoint::load() {
        None => 0,
        Some(bytes) => {
            let raw: [u8; 4] = bytes.as_slice().try_into().map_err(|_| {
                error(
                    ErrorClass::Permanent,
                    format!("corrupt checkpoint: expected 4 bytes, got {}", bytes.len()),
                )
            })?;
            u32::from_le_bytes(raw)
        }
    };
    let mut step = resumed_from;
    while step < steps {
        let mut acc = 0u64;
        for i in 0..spin_per_step {
            acc = core::hint::black_box(acc.wrapping_add(i));
        }
        core::hint::black_box(acc);
        step += 1;
        save(step)?;
    }
    Ok(resumed_from)
}

fn outcome_json(kind: &str, body: &str) -> String {
    format!(
        "{{\"outcome\":{},\"body\":{}}}",
        minijson::quote(kind),
        minijson::quote(body)
    )
}

/// `ok` for done/replayed; the matching job error otherwise.
fn map_outcome(outcome: Outcome) -> Result<Vec<u8>, JobError> {
    match outcome {
        Outcome::Done(body) => {
            Ok(outcome_json("done", &String::from_utf8_lossy(&body)).into_bytes())
        }
        Outcome::Replayed(body) => {
            Ok(outcome_json("replayed", &String::from_utf8_lossy(&body)).into_bytes())
        }
        Outcome::Failed(reason) => Err(error(
            ErrorClass::Permanent,
            outcome_json("failed", &reason),
        )),
        Outcome::Unknown(reason) => {
            Err(error(ErrorClass::Unknown, outcome_json("unknown", &reason)))
        }
    }
}

fn map_effect_error(e: EffectError) -> JobError {
    let (class, case, detail) = match e {
        EffectError::NotGranted(d) => (ErrorClass::Permanent, "not-granted", d),
        EffectError::KeyConflict(d) => (ErrorClass::Permanent, "key-conflict", d),
        EffectError::LeaseLost => (ErrorClass::Transient, "lease-lost", String::new()),
        EffectError::CircuitOpen(d) => (ErrorClass::Transient, "circuit-open", d),
        EffectError::BudgetExhausted(d) => (ErrorClass::Permanent, "budget-exhausted", d),
        EffectError::Invalid(d) => (ErrorClass::Permanent, "invalid", d),
    };
    error(
        class,
        format!(
            "{{\"error\":{},\"detail\":{}}}",
            minijson::quote(case),
            minijson::quote(&detail)
        ),
    )
}

impl Guest for Effector {
    fn run() -> Result<Vec<u8>, JobError> {
        let inv = context::current();
        let params = minijson::parse(&inv.params).map_err(|e| invalid(format!("params: {e}")))?;
        if !matches!(params, minijson::Value::Object(_)) {
            return Err(invalid("params must be a JSON object"));
        }
        let connector = str_param(&params, "connector", true)?.unwrap_or_default();
        let key = str_param(&params, "key", true)?.unwrap_or_default();
        let mode = str_param(&params, "mode", false)?.unwrap_or_else(|| "invoke".to_string());

        match mode.as_str() {
            "invoke" => {
                let action = str_param(&params, "action", true)?.unwrap_or_default();
                let payload = str_param(&params, "payload", false)?.unwrap_or_default();
                let compensates = str_param(&params, "compensates", false)?;
                let steps = int_param(&params, "steps", u32::MAX as u64 - 1)?.map(|n| n as u32);
                let spin_per_step = int_param(&params, "spin_per_step", u64::MAX)?.unwrap_or(0);
                let busy_attempts = int_param(&params, "busy_attempts", u32::MAX as u64)?;
                let resumed_from = match steps {
                    Some(steps) => Some(run_steps(steps, spin_per_step)?),
                    None => None,
                };
                if u64::from(inv.attempt) <= busy_attempts.unwrap_or(0) {
                    return Err(stay_busy(steps.unwrap_or(0)));
                }
                log::log(
                    log::Level::Info,
                    &format!(
                        "effector: invoke {connector}/{action} key={key} ({} payload bytes)",
                        payload.len()
                    ),
                );
                let req = Request {
                    connector,
                    action,
                    idempotency_key: key,
                    payload: payload.into_bytes(),
                    compensates,
                };
                let result = match effects::invoke(&req) {
                    Ok(outcome) => map_outcome(outcome),
                    Err(e) => Err(map_effect_error(e)),
                };
                let (Some(steps), Some(resumed_from)) = (steps, resumed_from) else {
                    return result;
                };
                // The effect was answered (whatever the answer): record it,
                // then report where this run started.
                save(steps + 1)?;
                let mut out = String::from_utf8(result?).unwrap_or_default();
                out.pop(); // the closing brace
                out.push_str(&format!(
                    ",\"resumed_from\":{resumed_from},\"attempt\":{}}}",
                    inv.attempt
                ));
                Ok(out.into_bytes())
            }
            "query" => {
                log::log(
                    log::Level::Info,
                    &format!("effector: query {connector} key={key}"),
                );
                match effects::query(&connector, &key) {
                    Ok(Some(outcome)) => map_outcome(outcome),
                    Ok(None) => Ok(b"{\"outcome\":\"none\"}".to_vec()),
                    Err(e) => Err(map_effect_error(e)),
                }
            }
            other => Err(invalid(format!(
                "param `mode` must be \"invoke\" or \"query\", not {other:?}"
            ))),
        }
    }
}

export!(Effector);
