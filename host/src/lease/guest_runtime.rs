//! The runtime guests run on. Attempts are CPU work (instantiate, run the
//! guest on a fiber, tear down); the runner's claim loop, the group commit
//! and the store's I/O are latency work that the guests' results wait for.
//! On one runtime they shared a run queue, so a commit's continuation
//! queued behind a claim's worth of guests and the database sat idle
//! meanwhile (measured on `benches/throughput`: SQLite in-process 20k →
//! 25k jobs/s with guests moved here, one guest thread on two cores).
//! Heartbeats have a runtime of their own for the same reason
//! ([`super::heartbeat`]).

use std::sync::OnceLock;
use tokio::runtime::{Handle, Runtime};

static THREADS: OnceLock<usize> = OnceLock::new();

/// Worker threads of the guest runtime unless configured: every core but
/// one, which stays free for the store, the claim loop and commits.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_sub(1)
        .max(1)
}

/// Set the guest runtime's worker threads; only before its first use
/// (`paddock serve --guest-threads`). Returns false if it already started
/// with another number.
pub fn configure(threads: usize) -> bool {
    *THREADS.get_or_init(|| threads.max(1)) == threads.max(1)
}

/// The process's guest runtime, started on first use.
pub fn handle() -> Handle {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(*THREADS.get_or_init(default_threads))
                .thread_name("paddock-guest")
                .enable_all()
                .build()
                .expect("start the guest runtime")
        })
        .handle()
        .clone()
}
