//! `hello`: a well-behaved Paddock job.
//!
//! Demonstrates everything a guest is expected to do: log through the host,
//! read its invocation (`context::current`), parse its params JSON, resume
//! from the last checkpoint (a `u32` step counter, little-endian), save a
//! checkpoint after every step and honour the host's `control` answer at each
//! safe point (pause → transient error, cancel → permanent error, lease lost →
//! transient error, all after the checkpoint that was already accepted).
//!
//! Params (all optional): `name` (string, default `"world"`), `steps`
//! (integer, default 3), `spin_per_step` (integer, default 0: busy-loop
//! iterations per step, so tests can make the job slow).
//!
//! Output: `{"greeting":"hello <name>","steps":N,"resumed_from":K}` where `N`
//! is the step counter at the end and `K` the counter loaded at the start.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::types::{Control, ErrorClass};
use paddock::job::{checkpoint, context, log};

struct Hello;

fn error(class: ErrorClass, message: impl Into<String>) -> JobError {
    JobError {
        class,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> JobError {
    error(ErrorClass::InvalidInput, message)
}

/// An optional non-negative integer param.
fn int_param(params: &minijson::Value, key: &str, default: u64, max: u64) -> Result<u64, JobError> {
    match params.get(key) {
        None => Ok(default),
        Some(v) if v.is_null() => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if n <= max => Ok(n),
            _ => Err(invalid(format!(
                "param `{key}` must be an integer from 0 to {max}"
            ))),
        },
    }
}

impl Guest for Hello {
    fn run() -> Result<Vec<u8>, JobError> {
        let inv = context::current();
        log::log(
            log::Level::Info,
            &format!(
                "hello: job {} (tenant {}), trigger {}, attempt {}",
                inv.job_id, inv.tenant, inv.trigger_id, inv.attempt
            ),
        );

        let params = if inv.params.trim().is_empty() {
            minijson::Value::Object(Vec::new())
        } else {
            minijson::parse(&inv.params).map_err(|e| invalid(format!("params: {e}")))?
        };
        if !matches!(params, minijson::Value::Object(_)) {
            return Err(invalid("params must be a JSON object"));
        }
        let name = match params.get("name") {
            None => "world".to_string(),
            Some(v) if v.is_null() => "world".to_string(),
            Some(v) => v
                .as_str()
                .ok_or_else(|| invalid("param `name` must be a string"))?
                .to_string(),
        };
        let steps = int_param(&params, "steps", 3, u32::MAX as u64)? as u32;
        let spin_per_step = int_param(&params, "spin_per_step", 0, u64::MAX)?;

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
        if resumed_from > 0 {
            log::log(
                log::Level::Info,
                &format!("hello: resuming from step {resumed_from}"),
            );
        }

        let mut step = resumed_from;
        while step < steps {
            // The "work" of one step.
            let mut acc = 0u64;
            for i in 0..spin_per_step {
                acc = core::hint::black_box(acc.wrapping_add(i));
            }
            core::hint::black_box(acc);

            step += 1;
            match checkpoint::save(&step.to_le_bytes()) {
                Control::Proceed => {
                    log::log(
                        log::Level::Debug,
                        &format!("hello: step {step}/{steps} saved"),
                    );
                }
                Control::PauseRequested => {
                    log::log(log::Level::Info, &format!("hello: pausing at step {step}"));
                    return Err(error(
                        ErrorClass::Transient,
                        format!("paused at step {step}"),
                    ));
                }
                Control::CancelRequested => {
                    log::log(
                        log::Level::Info,
                        &format!("hello: cancelled at step {step}"),
                    );
                    return Err(error(
                        ErrorClass::Permanent,
                        format!("cancelled at step {step}"),
                    ));
                }
                Control::LeaseLost => {
                    // The save was refused: the last durable step is step - 1.
                    log::log(
                        log::Level::Warn,
                        &format!("hello: lease lost saving step {step}"),
                    );
                    return Err(error(
                        ErrorClass::Transient,
                        format!("lease lost at step {step}; checkpoint not saved"),
                    ));
                }
            }
        }

        let out = format!(
            "{{\"greeting\":{},\"steps\":{},\"resumed_from\":{}}}",
            minijson::quote(&format!("hello {name}")),
            step,
            resumed_from
        );
        log::log(log::Level::Info, "hello: done");
        Ok(out.into_bytes())
    }
}

export!(Hello);
