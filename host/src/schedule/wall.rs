//! Wall-clock time ↔ instants in an IANA zone, with Paddock's DST policy.
//!
//! Policy (DESIGN §5), enforced here and nowhere else:
//! - a local time that exists once maps to that instant;
//! - a local time that does **not** exist (spring-forward gap) maps to the
//!   **first instant after the gap**, i.e. the transition instant itself
//!   (NY 2027-03-14 02:30 → 07:00:00Z = 03:00 EDT). Several nonexistent local
//!   times, and the real local time right after the gap, therefore collapse
//!   onto ONE instant; callers dedupe consecutive equal instants;
//! - an ambiguous local time (fall-back) maps to its **first** occurrence,
//!   the earlier instant (NY 2026-11-01 01:30 → 05:30Z, never 06:30Z).
//!
//! Invariant kept: [`resolve`] is monotone non-decreasing in the local time
//! (for zones whose transitions are further apart than their own size, which
//! holds for every transition in the tz database used by chrono-tz), so
//! walking local times in order and dropping consecutive duplicates yields
//! strictly increasing instants.

use chrono::{DateTime, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

/// Local wall-clock time of instant `t` in `tz`.
pub(super) fn local_of(tz: Tz, t: DateTime<Utc>) -> NaiveDateTime {
    let off = tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    t.naive_utc() + TimeDelta::seconds(i64::from(off.local_minus_utc()))
}

/// The earliest local time whose [`resolve`]d instant can be `>= t`.
///
/// Usually the local time of `t`; when `t` is exactly a spring-forward
/// transition instant it is the start of the gap, because the nonexistent
/// local times of that gap resolve to `t` itself.
pub(super) fn search_start(tz: Tz, t: DateTime<Utc>) -> NaiveDateTime {
    let here = local_of(tz, t);
    match t.checked_sub_signed(TimeDelta::seconds(1)) {
        Some(before) => {
            let just_before = local_of(tz, before) + TimeDelta::seconds(1);
            here.min(just_before)
        }
        None => here,
    }
}

/// Maps a local time to an instant under the policy above. The second value
/// is `Some(local)` when `local` fell in a gap: the local time at which the
/// gap ends (every local time before it, back to `local`, resolves to the
/// same instant, so a caller walking forward may jump there).
pub(super) fn resolve(tz: Tz, local: NaiveDateTime) -> (DateTime<Utc>, Option<NaiveDateTime>) {
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(t) => (t.with_timezone(&Utc), None),
        chrono::LocalResult::Ambiguous(a, b) => (a.min(b).with_timezone(&Utc), None),
        chrono::LocalResult::None => {
            let t = gap_end(tz, local);
            (t, Some(local_of(tz, t)))
        }
    }
}

/// The first instant whose local time is later than `local`, where `local`
/// lies in a spring-forward gap: the transition instant. Binary search over
/// one day either side (every UTC offset is within ±14h, so the transition
/// is inside) on whole seconds, since transitions fall on whole seconds.
fn gap_end(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let base = local.and_utc().timestamp();
    let mut lo = base - 86_400; // local(lo) < local
    let mut hi = base + 86_400; // local(hi) > local
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let t = DateTime::from_timestamp(mid, 0).expect("in chrono's range");
        if local_of(tz, t) > local {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    DateTime::from_timestamp(hi, 0).expect("in chrono's range")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn nonexistent_new_york_time_resolves_to_the_end_of_the_gap() {
        let tz: Tz = "America/New_York".parse().unwrap();
        let (t, jump) = resolve(tz, local(2027, 3, 14, 2, 30));
        assert_eq!(t, utc("2027-03-14T07:00:00Z"));
        assert_eq!(jump, Some(local(2027, 3, 14, 3, 0)));
    }

    #[test]
    fn ambiguous_new_york_time_resolves_to_its_first_occurrence() {
        let tz: Tz = "America/New_York".parse().unwrap();
        assert_eq!(
            resolve(tz, local(2026, 11, 1, 1, 30)),
            (utc("2026-11-01T05:30:00Z"), None)
        );
    }

    #[test]
    fn lord_howe_half_hour_gap_ends_at_the_transition() {
        let tz: Tz = "Australia/Lord_Howe".parse().unwrap();
        // 2026-10-04 02:00 +10:30 → 02:30 +11:00, i.e. 2026-10-03T15:30Z.
        let (t, jump) = resolve(tz, local(2026, 10, 4, 2, 15));
        assert_eq!(t, utc("2026-10-03T15:30:00Z"));
        assert_eq!(jump, Some(local(2026, 10, 4, 2, 30)));
    }

    #[test]
    fn search_start_at_a_gap_transition_is_the_start_of_the_gap() {
        let tz: Tz = "America/New_York".parse().unwrap();
        assert_eq!(
            search_start(tz, utc("2027-03-14T07:00:00Z")),
            local(2027, 3, 14, 2, 0)
        );
        assert_eq!(
            search_start(tz, utc("2027-03-14T07:00:01Z")),
            local(2027, 3, 14, 3, 0) + TimeDelta::seconds(1)
        );
    }
}
