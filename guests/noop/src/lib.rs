//! `noop`: the smallest useful job, for benchmarks.
//!
//! Makes exactly one host call (`context::poll`, a safe point) and returns
//! `ok`, so an instantiate-and-run measures the host's per-invocation
//! overhead rather than guest work.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::context;

struct Noop;

impl Guest for Noop {
    fn run() -> Result<Vec<u8>, JobError> {
        let _ = context::poll();
        Ok(b"ok".to_vec())
    }
}

export!(Noop);
