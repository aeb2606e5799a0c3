//! `flood`: a hostile job that hands the host more than it should, for the
//! size-cap tests. Every param is optional (bytes or counts):
//!
//! - `log_lines`: log this many lines first;
//! - `effects`: invoke this many effects (connector `connector`, key
//!   `flood-<i>`, payload `payload_bytes` bytes) and go on whatever each
//!   answers;
//! - `checkpoint_bytes`: save a checkpoint this large;
//! - `error_bytes`: return an error (transient) with a message this large;
//! - `result_bytes`: return a result this large (default 2 bytes: `ok`).

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

impl Guest for Flood {
    fn run() -> Result<Vec<u8>, JobError> {
        let params = minijson::parse(&context::current().params).unwrap_or(minijson::Value::Null);
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
