//! Overlap decision: what to do with a trigger that is due while runs of the
//! same job are in flight.
//!
//! | in flight | `allow` | `forbid` | `replace` |
//! |---|---|---|---|
//! | `< max_in_flight` | `Start` | `Start` | `Start` |
//! | `>= max_in_flight` | `Wait` (until a slot frees) | `SkipNew` | `ReplaceOldest` (ask it to stop; start once it has ended) |
//!
//! What counts as in flight, and the admission itself, is the store's one
//! rule (`store/overlap.rs`): this table only says what to do when a job
//! is full.
//!
//! Invariants kept: pure; never returns `Start` at or above the limit;
//! `max_in_flight = 0` is treated as 1 (the spec rejects 0, this keeps a
//! hand-built value from starving the job).

use super::spec::OverlapPolicy;

/// What the executor should do with a due trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverlapDecision {
    /// Start it now.
    Start,
    /// Do not run it (record it as skipped for overlap).
    SkipNew,
    /// Ask the oldest in-flight run to stop, and start this one once it
    /// has ended (never beside it).
    ReplaceOldest,
    /// Leave it pending until a run finishes.
    Wait,
}

/// Decides per the table in the module header.
pub fn decide_overlap(
    policy: OverlapPolicy,
    max_in_flight: u32,
    in_flight: usize,
) -> OverlapDecision {
    if in_flight < max_in_flight.max(1) as usize {
        return OverlapDecision::Start;
    }
    match policy {
        OverlapPolicy::Allow => OverlapDecision::Wait,
        OverlapPolicy::Forbid => OverlapDecision::SkipNew,
        OverlapPolicy::Replace => OverlapDecision::ReplaceOldest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OverlapDecision::*;

    #[test]
    fn every_policy_starts_while_below_the_limit() {
        for p in [
            OverlapPolicy::Allow,
            OverlapPolicy::Forbid,
            OverlapPolicy::Replace,
        ] {
            assert_eq!(decide_overlap(p, 1, 0), Start);
            assert_eq!(decide_overlap(p, 3, 2), Start);
        }
    }

    #[test]
    fn at_the_limit_allow_waits_forbid_skips_replace_replaces() {
        assert_eq!(decide_overlap(OverlapPolicy::Allow, 1, 1), Wait);
        assert_eq!(decide_overlap(OverlapPolicy::Forbid, 1, 1), SkipNew);
        assert_eq!(decide_overlap(OverlapPolicy::Replace, 1, 1), ReplaceOldest);
        assert_eq!(decide_overlap(OverlapPolicy::Allow, 3, 3), Wait);
        assert_eq!(decide_overlap(OverlapPolicy::Forbid, 3, 5), SkipNew);
        assert_eq!(decide_overlap(OverlapPolicy::Replace, 3, 4), ReplaceOldest);
    }

    #[test]
    fn zero_max_in_flight_behaves_as_one() {
        assert_eq!(decide_overlap(OverlapPolicy::Forbid, 0, 0), Start);
        assert_eq!(decide_overlap(OverlapPolicy::Forbid, 0, 1), SkipNew);
    }
}
