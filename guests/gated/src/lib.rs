//! `gated`: a job whose pace the test sets, so no test has to guess how
//! long a guest runs.
//!
//! It resumes from its checkpoint (a `u32` step counter, little-endian) and
//! saves one after every step, like `hello`, and it can wait at a *gate*: an
//! effect through connector `gate` (pointed at the reference ledger) that
//! the test holds at the ledger (`POST /admin/hold`) for as long as it wants
//! the attempt to be "still running", and releases when it wants it to go
//! on. Every host call is a safe point, so the attempt answers pause, cancel
//! and a lost lease as `hello` does.
//!
//! Params (all optional):
//! - `steps` (integer, default 1): steps to run, each one checkpoint.
//! - `gate_at` (integer): wait at the gate once this many steps are saved
//!   (0: before the first). A run resumed past that point does not wait.
//!   The gate is the effect `gate-<name>-<attempt>/reserve` (amount 1)
//!   under the idempotency key `gate/<name>/<attempt>`, so the test can
//!   hold one attempt of one trigger and let its successor through.
//! - `gate_name` (string, default the trigger's id): the `<name>` of its
//!   gate. A test with runners already serving names the gate and holds it
//!   before it creates the trigger, which a runner may claim at once.
//! - `gate` (string, default `"gate"`): the connector the gate goes through.
//! - `burn` (bool, default false): after the steps, burn CPU until the host
//!   says stop (`context::poll` between bursts), for tests that need busy
//!   guests for as long as they choose; a cancel ends the attempt
//!   `cancelled`, a pause or a lost lease with a transient error.
//! - `effect` (bool, default false): after the steps, reserve 1 of resource
//!   `effect-<trigger>` under the key `effect/<trigger>` — the same key on
//!   every attempt, so a retry's call is answered from the host's record
//!   (an idempotency hit), never a second reservation.
//! - `fail_until` (integer, default 0): end every attempt numbered up to
//!   this with a transient error (after the steps and the effect), so
//!   attempt `fail_until + 1` is the first that can succeed; a job whose
//!   `max_attempts` is not above it spends its retry budget and fails.
//!
//! Output: `{"steps":N,"resumed_from":K,"attempt":A,"gated":G}`.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::effects::{self, EffectError, Outcome, Request};
use paddock::job::types::{Control, ErrorClass};
use paddock::job::{checkpoint, context, log};

struct Gated;

fn error(class: ErrorClass, message: impl Into<String>) -> JobError {
    JobError {
        class,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> JobError {
    error(ErrorClass::InvalidInput, message)
}

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

/// What a control answer means for the attempt: carry on, or end with this
/// error (after the checkpoint that was already accepted).
fn obey(control: Control, at: &str) -> Result<(), JobError> {
    match control {
        Control::Proceed => Ok(()),
        Control::PauseRequested => Err(error(ErrorClass::Transient, format!("paused {at}"))),
        Control::CancelRequested => Err(error(ErrorClass::Permanent, format!("cancelled {at}"))),
        Control::LeaseLost => Err(error(ErrorClass::Transient, format!("lease lost {at}"))),
    }
}

/// Wait at the gate: one effect the test holds at the ledger.
fn wait_at_gate(connector: &str, name: &str, attempt: u32) -> Result<(), JobError> {
    let key = format!("gate/{name}/{attempt}");
    log::log(log::Level::Info, &format!("gated: waiting at {key}"));
    reserve(connector, &format!("gate-{name}-{attempt}"), &key)?;
    log::log(log::Level::Info, &format!("gated: through {key}"));
    Ok(())
}

/// Reserve 1 of `resource` at the ledger behind `connector` under `key`.
fn reserve(connector: &str, resource: &str, key: &str) -> Result<(), JobError> {
    let answer = effects::invoke(&Request {
        connector: connector.to_string(),
        action: format!("{resource}/reserve"),
        idempotency_key: key.to_string(),
        payload: b"{\"amount\":1}".to_vec(),
        compensates: None,
    });
    let fail = |class, what: String| Err(error(class, format!("effect {key}: {what}")));
    match answer {
        Ok(Outcome::Done(_) | Outcome::Replayed(_)) => Ok(()),
        Ok(Outcome::Failed(reason)) => fail(ErrorClass::Permanent, format!("failed: {reason}")),
        Ok(Outcome::Unknown(reason)) => fail(ErrorClass::Unknown, format!("unknown: {reason}")),
        Err(EffectError::LeaseLost) => fail(ErrorClass::Transient, "lease lost".into()),
        Err(EffectError::CircuitOpen(d)) => {
            fail(ErrorClass::Transient, format!("circuit open: {d}"))
        }
        Err(e) => fail(ErrorClass::Permanent, format!("{e:?}")),
    }
}

impl Guest for Gated {
    fn run() -> Result<Vec<u8>, JobError> {
        let inv = context::current();
        let params = if inv.params.trim().is_empty() {
            minijson::Value::Object(Vec::new())
        } else {
            minijson::parse(&inv.params).map_err(|e| invalid(format!("params: {e}")))?
        };
        if !matches!(params, minijson::Value::Object(_)) {
            return Err(invalid("params must be a JSON object"));
        }
        let steps = int_param(&params, "steps", u32::MAX as u64)?.unwrap_or(1) as u32;
        let gate_at = int_param(&params, "gate_at", u32::MAX as u64)?.map(|n| n as u32);
        let connector = match params.get("gate") {
            None => "gate".to_string(),
            Some(v) => v
                .as_str()
                .ok_or_else(|| invalid("param `gate` must be a string"))?
                .to_string(),
        };
        let gate_name = match params.get("gate_name") {
            None => inv.trigger_id.clone(),
            Some(v) => v
                .as_str()
                .ok_or_else(|| invalid("param `gate_name` must be a string"))?
                .to_string(),
        };
        let burn = match params.get("burn") {
            None => false,
            Some(minijson::Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("param `burn` must be true or false")),
        };
        let effect = match params.get("effect") {
            None => false,
            Some(minijson::Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("param `effect` must be true or false")),
        };
        let fail_until = int_param(&params, "fail_until", u32::MAX as u64)?.unwrap_or(0);

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
        let mut gated = false;
        let mut step = resumed_from;
        loop {
            if gate_at == Some(step) {
                wait_at_gate(&connector, &gate_name, inv.attempt)?;
                gated = true;
            }
            if step >= steps {
                break;
            }
            step += 1;
            obey(
                checkpoint::save(&step.to_le_bytes()),
                &format!("at step {step}"),
            )?;
        }
        if effect {
            let trigger = &inv.trigger_id;
            reserve(&connector, &format!("effect-{trigger}"), &format!("effect/{trigger}"))?;
        }
        if u64::from(inv.attempt) <= fail_until {
            return Err(error(
                ErrorClass::Transient,
                format!("failing attempt {} on purpose (fail_until {fail_until})", inv.attempt),
            ));
        }
        if burn {
            // Busy until told otherwise: the burst only sets how often the
            // guest asks, not how long it runs.
            loop {
                let mut acc = 0u64;
                for i in 0..1_000_000u64 {
                    acc = core::hint::black_box(acc.wrapping_add(i));
                }
                core::hint::black_box(acc);
                obey(context::poll(), "while burning")?;
            }
        }
        Ok(format!(
            "{{\"steps\":{step},\"resumed_from\":{resumed_from},\"attempt\":{},\"gated\":{gated}}}",
            inv.attempt
        )
        .into_bytes())
    }
}

export!(Gated);
