//! `spin`: a job that never returns and never calls the host.
//!
//! Demonstrates that the host, not the guest, bounds CPU: the loop makes no
//! host calls (so there is no safe point to answer with a `control` signal),
//! and `black_box` keeps the optimiser from removing it. Only fuel or an
//! epoch deadline can stop it.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

struct Spin;

impl Guest for Spin {
    fn run() -> Result<Vec<u8>, JobError> {
        let mut n = 0u64;
        loop {
            n = core::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spin);
