//! `burn`: a job that burns a fixed amount of fuel, then computes until the
//! host stops it — the way to test that an attempt stopped mid-computation
//! is charged what it burnt.
//!
//! It reads its params (its only host call), counts `rounds` times in a
//! loop with no calls in it, then marks the end of that work by growing its
//! memory by [`MARK_PAGES`] pages with the `memory.grow` instruction (not a
//! call either), which the host's memory gauge and the attempt's peak
//! memory show. Then it returns, or with `spin` set loops forever, again
//! without a call: only the host (deadline, lost lease, drain) ends it, at a
//! point where the guest has stored none of the fuel it counted since the
//! params were read.
//!
//! Params: `rounds` (integer, default 0), `spin` (bool, default false).
//! Output (when it returns): the count, 8 bytes little-endian.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::context;
use paddock::job::types::ErrorClass;

/// Pages (64 KiB each) grown once the counted work is done: 1 MiB.
const MARK_PAGES: usize = 16;

struct Burn;

impl Guest for Burn {
    fn run() -> Result<Vec<u8>, JobError> {
        let params = minijson::parse(&context::current().params).map_err(|e| JobError {
            class: ErrorClass::InvalidInput,
            message: format!("params: {e}"),
        })?;
        let rounds = params.get("rounds").and_then(|v| v.as_u64()).unwrap_or(0);
        let spin = params.get("spin") == Some(&minijson::Value::Bool(true));
        let mut n = 0u64;
        for _ in 0..rounds {
            n = core::hint::black_box(n.wrapping_add(1));
        }
        core::arch::wasm32::memory_grow(0, MARK_PAGES);
        if spin {
            loop {
                n = core::hint::black_box(n.wrapping_add(1));
            }
        }
        Ok(n.to_le_bytes().to_vec())
    }
}

export!(Burn);
