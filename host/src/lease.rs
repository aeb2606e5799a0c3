//! The execution plane's control loop: claim due triggers with a lease and a
//! fencing token, heartbeat while the guest runs, and commit the result only
//! if the token is still current.
//!
//! Invariants:
//! - a claim increments the trigger's fencing token in the claiming
//!   statement, with the lease measured on the database clock;
//! - every write an attempt makes carries its token in the same statement
//!   (see [`crate::store`]); a refused write closes the attempt's commit
//!   gate and the guest is told `lease-lost` at its next host call, or
//!   interrupted at the next epoch tick;
//! - after `max_missed_heartbeats` consecutive failed renewals the runner
//!   closes the gate itself rather than trust a lease it cannot confirm;
//! - heartbeats run on a small runtime of their own (`paddock-heartbeat`,
//!   [`heartbeat`]) while guests run on blocking threads, so neither busy
//!   guests nor a stalled main runtime can starve renewals; [`clock`] paces
//!   them (a test moves it by hand);
//! - a runner holds its liveness for its whole life (a PostgreSQL session
//!   lock, a SQLite file lock: `runner/liveness.rs`), and before it claims
//!   it ends the leases of holders whose liveness is gone, so a dead
//!   process's work is taken over at once while a stopped one keeps its
//!   lease until it lapses;
//! - an attempt's end is reported as a [`crate::model::RunOutcome`] with
//!   the state the database wrote;
//! - a drain at shutdown releases unfinished attempts from their last
//!   checkpoint without spending retry budget, and lists them ([`drain`]);
//! - quotas move outside the claim statement: the [`governor`] recomputes
//!   each group's effective concurrency, moves its recovery ramp, holds
//!   tenants over their fuel per hour and groups whose downstream's
//!   breaker is open; a process stops claiming at its own high-water marks
//!   ([`high_water`]).

pub mod clock;
pub mod drain;
pub mod governor;
pub mod group_commit;
pub mod guest_runtime;
pub mod heartbeat;
pub mod high_water;
mod log;
pub mod metrics;
pub mod runner;
mod services;

pub use clock::{ManualClock, ProcessClock};
pub use drain::{DrainReport, Unfinished};
pub use heartbeat::Heartbeats;
pub use metrics::LeaseMetrics;
pub use runner::{AttemptSummary, Runner, RunnerConfig};
