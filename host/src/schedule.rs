//! Trigger control: computing *what should run when* (DESIGN §5).
//! Everything here is pure — no I/O, no database, no clock: every function
//! takes `now` as an argument — except `scanner.rs`, which applies it to the
//! store under shard leases, and `preview.rs`, which reads the plan it previews.
//!
//! | file | owns |
//! |---|---|
//! | `spec.rs` | `ScheduleSpec` — the manifest's `[schedule]` table, validation, canonical JSON |
//! | `cron.rs` | cron-with-seconds grammar, field bitsets, next matching wall-clock second |
//! | `wall.rs` | wall-clock ↔ instant in an IANA zone: the DST policy |
//! | `occurrences.rs` | `Schedule` — fire times in a window, `next_after` |
//! | `misfire.rs` | fire / skip / park decisions for late fire times |
//! | `overlap.rs` | start / skip / replace / wait when runs are in flight |
//! | `scan.rs` | plan keys, `shard_of`, scan windows and the watermark rule |
//! | `error.rs` | `ScheduleError` |
//! | `scanner.rs` | **I/O**: shard leases, windows on the database clock, batched inserts, watermarks |
//! | `preview.rs` | trigger sets on request (`schedule preview`, `diff`, `backfill`); **I/O** only to read a plan |
//! | `tests.rs`, `tests/` | independent brute-force reference, DST vectors, property tests |
//!
//! # DST policy (enforced in `wall.rs`, tested against an independent enumeration)
//!
//! Cron schedules are evaluated in the local wall time of their IANA zone.
//! - A local time that does not exist (spring-forward gap) fires **once**, at
//!   the first instant after the gap. Several nonexistent times, and a real
//!   time right after the gap, collapse onto that one instant — never a
//!   duplicate. NY 2027-03-14 `0 30 2 * * *` → 2027-03-14T07:00:00Z (03:00 EDT);
//!   Lord Howe 2026-10-04 `0 15 2 * * *` → 2026-10-03T15:30:00Z (02:30 +11).
//! - An ambiguous local time (fall-back) fires **once**, at its **first**
//!   occurrence (the earlier instant). NY 2026-11-01 `0 30 1 * * *` →
//!   05:30:00Z only; `0 0 * * * *` fires 05:00Z and then 07:00Z, not 06:00Z.
//!
//! The policy is the same for fixed-time and wildcard/step expressions
//! (unlike croner 3, which repeats wildcard jobs in the repeated hour).
//! Interval and `at` schedules are pure UTC arithmetic and have no DST.
//!
//! # Invariants
//!
//! - Fire times are whole seconds in `[MIN_INSTANT, MAX_INSTANT]`, strictly
//!   increasing, never duplicated, and a window's output equals the union of
//!   its sub-windows' outputs (property-tested with overlapping re-scans).
//! - A schedule that can never fire is rejected when the spec is read.
//! - Every search is bounded (field-by-field jumps, year ≤ 9999).
//! - `shard_of` and the plan-key format are pinned by tests.

mod cron;
mod error;
mod misfire;
mod occurrences;
mod overlap;
pub mod preview;
mod scan;
pub mod scanner;
mod spec;
mod wall;

use chrono::{DateTime, Utc};

pub use self::cron::{CronError, CronExpr};
pub use self::error::ScheduleError;
pub use self::misfire::{MisfireAction, MisfireOutcome, classify_misfires};
pub use self::occurrences::{Occurrences, Schedule};
pub use self::overlap::{OverlapDecision, decide_overlap};
pub use self::scan::{PlanKey, Window, fnv1a64, plan_key, scan_window, shard_of};
pub use self::spec::{
    Kind, MisfirePolicy, MisfireSpec, OverlapPolicy, OverlapSpec, ScheduleSpec, Span, TriggerSpec,
    fmt_instant,
};

/// Earliest instant any schedule produces or accepts: 1970-01-01T00:00:00Z.
pub const MIN_INSTANT: DateTime<Utc> = DateTime::UNIX_EPOCH;

/// Latest instant any schedule produces or accepts: 9999-12-31T23:59:59Z.
pub const MAX_INSTANT: DateTime<Utc> = match DateTime::from_timestamp(253_402_300_799, 0) {
    Some(t) => t,
    None => panic!("9999-12-31T23:59:59Z is representable"),
};

#[cfg(test)]
mod tests;
