//! `flood`: a hostile job that hands the host more than it should, for the
//! size-cap tests. Every param is optional (bytes or counts):
//!
//! - `log_lines`: log this many lines first;
//! - `effects`: invoke this many effects (connector `connector`, key
//!   `flood-<i>`, payload `payload_bytes` bytes) and go on whatever each
//!   answers;
//! - `checkpoint_bytes`: save a checkpoint this large;
//! - `error_bytes`: return an error (transient) with a message this large;
//! - `result_bytes`: return a result this large (default: `{"refused":N}`,
//!   the effects the host refused);
//! - `recurse`: recurse without end first (a stack overflow);
//! - `poll_loop`: call `context::poll` in a tight loop first, forever.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::effects::{self, Request};
use paddock::job::types::ErrorClass;
use paddock::job::{checkpoint, context, log};

struct Flood;

fn count(params: &minijson::Value, key: &str) -> usize {
    params
        .get(key)
        .and_then(|v| v.as_u64())
        .unwrap_or(0) as usize
}

/// Recurse until wasm's own call stack runs out (no locals in linear
/// memory, so it is the engine's stack that overflows, not the guest's
/// shadow stack; `black_box` keeps the optimiser from making it a loop).
#[allow(unconditional_recursion)]
fn depth(n: u64) -> u64 {
    core::hint::black_box(depth(core::hint::black_box(n + 1))) + 1
}

impl Guest for Flood {
    fn run() -> Result<Vec<u8>, JobError> {
        let params = minijson::parse(&context::current().params).unwrap_or(minijson::Value::Null);
        if count(&params, "recurse") > 0 {
            return Ok(vec![depth(core::hint::black_box(0)) as u8]);
        }
        if count(&params, "poll_loop") > 0 {
            loop {
                core::hint::black_box(context::poll());
            }
        }
        for i in 0..count(&params, "log_lines") {
            log::log(log::Level::Info, &format!("flood line {i}"));
        }
        let connector = params
            .get("connector")
            .and_then(|v| v.as_str())
            .unwrap_or("ledger")
            .to_string();
        let payload = vec![b'p'; count(&params, "payload_bytes")];
        let mut refused = 0;
        for i in 0..count(&params, "effects") {
            let answer = effects::invoke(&Request {
                connector: connector.clone(),
                action: "RES-1/reserve".into(),
                idempotency_key: format!("flood-{i}"),
                payload: payload.clone(),
                compensates: None,
            });
            refused += answer.is_err() as usize;
        }
        let checkpoint_bytes = count(&params, "checkpoint_bytes");
        if checkpoint_bytes > 0 {
            let _ = checkpoint::save(&vec![b'c'; checkpoint_bytes]);
        }
        let error_bytes = count(&params, "error_bytes");
        if error_bytes > 0 {
            return Err(JobError {
                class: ErrorClass::Transient,
                message: "e".repeat(error_bytes),
            });
        }
        match params.get("result_bytes").and_then(|v| v.as_u64()) {
            Some(n) => Ok(vec![b'r'; n as usize]),
            None => Ok(format!("{{\"refused\":{refused}}}").into_bytes()),
        }
    }
}

export!(Flood);
