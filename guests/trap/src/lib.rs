//! `trap`: a job that panics.
//!
//! Demonstrates that a guest panic becomes a wasm trap (guests are built with
//! `panic = "abort"`, and on `wasm32-unknown-unknown` an abort is the
//! `unreachable` instruction), which the host must record as a failed attempt
//! without harming the runner. Because a `wasm32-unknown-unknown` guest has no
//! stderr, a panic hook first sends the panic message to the host's job log at
//! `error` level, so the log explains the trap.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::log;

struct Trap;

impl Guest for Trap {
    fn run() -> Result<Vec<u8>, JobError> {
        std::panic::set_hook(Box::new(|info| {
            log::log(log::Level::Error, &format!("guest panicked: {info}"));
        }));
        panic!("trap guest: deliberate panic (this becomes a wasm trap)");
    }
}

export!(Trap);
