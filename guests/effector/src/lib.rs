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

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::effects::{self, EffectError, Outcome, Request};
use paddock::job::types::ErrorClass;
use paddock::job::{context, log};

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
                match effects::invoke(&req) {
                    Ok(outcome) => map_outcome(outcome),
                    Err(e) => Err(map_effect_error(e)),
                }
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
