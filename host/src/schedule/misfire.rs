//! Misfire classification: which fire times of one scan to fire, skip, or
//! park for approval, given `now` and the plan version's [`MisfireSpec`].
//!
//! A time `t` is **missed** when `t < now - misfire_threshold`; every other
//! time (late by at most the threshold, or still in the future) is
//! **on time** and always fires. Missed times are handled by policy:
//!
//! | policy | missed times |
//! |---|---|
//! | `skip` | all skipped |
//! | `latest` | the most recent fires (catch-up), the others are skipped |
//! | `all` | those at or after `now - catchup_window` fire (catch-up), older are skipped |
//! | `manual` | all parked for approval |
//!
//! If the number of catch-up fires exceeds `max_catchup`, every one of them
//! is parked for approval instead (a flood guard; `overflowed` is set).
//!
//! Invariants kept: pure function of its inputs; one decision per input time,
//! in input order; `fired + skipped + parked == times.len()`. Re-classifying
//! a time already inserted by an earlier scan is harmless: the plan key makes
//! the second insert a no-op whatever its decision.

use chrono::{DateTime, Utc};

use super::spec::{MisfirePolicy, MisfireSpec};

/// What to do with one fire time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MisfireAction {
    /// Create the trigger, runnable.
    Fire,
    /// Do not run it (counted).
    Skip,
    /// Create the trigger waiting for approval.
    Park,
}

/// The decisions for one job's fire times in one scan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MisfireOutcome {
    /// One `(scheduled_at, action)` per input time, in input order.
    pub decisions: Vec<(DateTime<Utc>, MisfireAction)>,
    /// Times that fire (on time + catch-up).
    pub fired: usize,
    /// Of `fired`, the missed times that fire as catch-up.
    pub caught_up: usize,
    /// Times skipped.
    pub skipped: usize,
    /// Times parked for approval.
    pub parked: usize,
    /// True if catch-up exceeded `max_catchup` and was parked instead.
    pub overflowed: bool,
}

/// Classifies `times` (any order, no duplicates expected) at `now`.
pub fn classify_misfires(
    times: &[DateTime<Utc>],
    now: DateTime<Utc>,
    spec: &MisfireSpec,
) -> MisfireOutcome {
    let missed_before = now
        .checked_sub_signed(spec.threshold.as_delta())
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let catchup_from = now
        .checked_sub_signed(spec.catchup_window.as_delta())
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let latest_missed = times.iter().copied().filter(|t| *t < missed_before).max();

    // First pass: the policy alone; `None` marks a catch-up fire.
    let mut decisions: Vec<(DateTime<Utc>, Option<MisfireAction>)> = times
        .iter()
        .map(|&t| {
            let action = if t >= missed_before {
                Some(MisfireAction::Fire)
            } else {
                match spec.policy {
                    MisfirePolicy::Skip => Some(MisfireAction::Skip),
                    MisfirePolicy::Latest if Some(t) == latest_missed => None,
                    MisfirePolicy::Latest => Some(MisfireAction::Skip),
                    MisfirePolicy::All if t >= catchup_from => None,
                    MisfirePolicy::All => Some(MisfireAction::Skip),
                    MisfirePolicy::Manual => Some(MisfireAction::Park),
                }
            };
            (t, action)
        })
        .collect();

    let catchup = decisions.iter().filter(|(_, a)| a.is_none()).count();
    let overflowed = catchup > spec.max_catchup as usize;
    let catchup_action = if overflowed {
        MisfireAction::Park
    } else {
        MisfireAction::Fire
    };
    let mut out = MisfireOutcome {
        overflowed,
        caught_up: if overflowed { 0 } else { catchup },
        ..MisfireOutcome::default()
    };
    out.decisions = decisions
        .drain(..)
        .map(|(t, a)| {
            let a = a.unwrap_or(catchup_action);
            match a {
                MisfireAction::Fire => out.fired += 1,
                MisfireAction::Skip => out.skipped += 1,
                MisfireAction::Park => out.parked += 1,
            }
            (t, a)
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::super::spec::Span;
    use super::*;
    use MisfireAction::{Fire, Park, Skip};

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// `count` fire times one minute apart from `09:{from_minute}:00Z`.
    fn minutes(from_minute: u32, count: u32) -> Vec<DateTime<Utc>> {
        (from_minute..from_minute + count)
            .map(|m| t(&format!("2027-01-01T09:{m:02}:00Z")))
            .collect()
    }

    fn spec(policy: MisfirePolicy) -> MisfireSpec {
        MisfireSpec {
            policy,
            threshold: Span::from_secs(60),
            catchup_window: Span::from_secs(300),
            max_catchup: 100,
        }
    }

    fn actions(o: &MisfireOutcome) -> Vec<MisfireAction> {
        o.decisions.iter().map(|(_, a)| *a).collect()
    }

    // Times 09:00..09:11, now 09:10:00 → missed: t < 09:09:00, i.e. 09:00..=09:08 (9);
    // on time: 09:09 (late 60 s, not more), 09:10 (now), 09:11 (future).
    const NOW: &str = "2027-01-01T09:10:00Z";

    #[test]
    fn skip_policy_skips_every_missed_time_and_fires_on_time_ones() {
        let o = classify_misfires(&minutes(0, 12), t(NOW), &spec(MisfirePolicy::Skip));
        assert_eq!((o.fired, o.skipped, o.parked, o.caught_up), (3, 9, 0, 0));
        assert_eq!(&actions(&o)[8..], [Skip, Fire, Fire, Fire]);
        assert!(!o.overflowed);
    }

    #[test]
    fn latest_policy_fires_only_the_most_recent_missed_time() {
        let o = classify_misfires(&minutes(0, 12), t(NOW), &spec(MisfirePolicy::Latest));
        assert_eq!((o.fired, o.skipped, o.parked, o.caught_up), (4, 8, 0, 1));
        assert_eq!(o.decisions[8], (t("2027-01-01T09:08:00Z"), Fire));
        assert!(actions(&o)[..8].iter().all(|a| *a == Skip));
    }

    #[test]
    fn latest_policy_works_on_unsorted_input() {
        let mut times = minutes(0, 9);
        times.reverse();
        let o = classify_misfires(&times, t(NOW), &spec(MisfirePolicy::Latest));
        assert_eq!(o.decisions[0], (t("2027-01-01T09:08:00Z"), Fire));
        assert_eq!((o.fired, o.skipped), (1, 8));
    }

    #[test]
    fn all_policy_fires_missed_times_inside_the_catchup_window_only() {
        // catchup_window 300 s → from 09:05:00 inclusive: 09:05..=09:08 catch up (4),
        // 09:00..=09:04 skipped (5), 09:09..=09:11 on time (3).
        let o = classify_misfires(&minutes(0, 12), t(NOW), &spec(MisfirePolicy::All));
        assert_eq!((o.fired, o.skipped, o.parked, o.caught_up), (7, 5, 0, 4));
        assert_eq!(
            actions(&o),
            [
                Skip, Skip, Skip, Skip, Skip, Fire, Fire, Fire, Fire, Fire, Fire, Fire
            ]
        );
    }

    #[test]
    fn manual_policy_parks_every_missed_time() {
        let o = classify_misfires(&minutes(0, 12), t(NOW), &spec(MisfirePolicy::Manual));
        assert_eq!((o.fired, o.skipped, o.parked, o.caught_up), (3, 0, 9, 0));
        assert!(!o.overflowed);
    }

    #[test]
    fn catchup_larger_than_max_catchup_is_parked_instead() {
        let mut s = spec(MisfirePolicy::All);
        s.max_catchup = 3;
        let o = classify_misfires(&minutes(0, 12), t(NOW), &s);
        assert!(o.overflowed);
        // The 4 catch-ups are parked; skips and on-time fires are unchanged.
        assert_eq!((o.fired, o.skipped, o.parked, o.caught_up), (3, 5, 4, 0));
        assert_eq!(&actions(&o)[5..9], [Park, Park, Park, Park]);
        // Exactly max_catchup is still allowed.
        s.max_catchup = 4;
        let o = classify_misfires(&minutes(0, 12), t(NOW), &s);
        assert!(!o.overflowed);
        assert_eq!((o.fired, o.parked), (7, 0));
    }

    #[test]
    fn latest_with_zero_max_catchup_parks_the_one_catchup() {
        let mut s = spec(MisfirePolicy::Latest);
        s.max_catchup = 0;
        let o = classify_misfires(&minutes(0, 12), t(NOW), &s);
        assert!(o.overflowed);
        assert_eq!((o.fired, o.skipped, o.parked), (3, 8, 1));
    }

    #[test]
    fn on_time_fires_are_never_subject_to_the_flood_guard() {
        let mut s = spec(MisfirePolicy::All);
        s.max_catchup = 0;
        let times = minutes(9, 3);
        let o = classify_misfires(&times, t(NOW), &s);
        assert_eq!((o.fired, o.skipped, o.parked), (3, 0, 0));
        assert!(!o.overflowed);
    }

    #[test]
    fn counters_always_add_up_to_the_input() {
        for policy in [
            MisfirePolicy::Skip,
            MisfirePolicy::Latest,
            MisfirePolicy::All,
            MisfirePolicy::Manual,
        ] {
            for max_catchup in [0, 2, 100] {
                let mut s = spec(policy);
                s.max_catchup = max_catchup;
                let o = classify_misfires(&minutes(0, 12), t(NOW), &s);
                assert_eq!(o.fired + o.skipped + o.parked, 12);
                assert_eq!(o.decisions.len(), 12);
            }
        }
        let empty = classify_misfires(&[], t(NOW), &spec(MisfirePolicy::All));
        assert_eq!(empty, MisfireOutcome::default());
    }
}
