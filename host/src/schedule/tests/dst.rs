//! DST vectors: real spring-forward and fall-back days of 2026 and 2027 in
//! New York, London, Lord Howe (30-minute shift) and Tokyo (no DST), for
//! several expressions, checked against the independent enumeration in
//! `reference.rs`, plus hand-written instants.

use chrono::{
    DateTime, Datelike, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc,
    Weekday,
};
use chrono_tz::Tz;

use super::reference::{Step, enumerate};
use crate::schedule::{Schedule, fmt_instant};

type Pred = fn(NaiveDateTime) -> bool;

/// Expressions with their meaning written as plain comparisons.
const VECTORS: &[(&str, Step, Pred)] = &[
    ("0 30 2 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() == 30 && n.hour() == 2
    }),
    ("0 */15 * * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() % 15 == 0
    }),
    ("0 0 * * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() == 0
    }),
    ("0 45 1 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() == 45 && n.hour() == 1
    }),
    ("*/30 * 1-3 * * *", Step::Second, |n| {
        n.second() % 30 == 0 && (1..=3).contains(&n.hour())
    }),
    ("0 30 1 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() == 30 && n.hour() == 1
    }),
    ("0 0,15,30,45 2 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() % 15 == 0 && n.hour() == 2
    }),
    ("0 */20 1-2 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() % 20 == 0 && (1..=2).contains(&n.hour())
    }),
    ("15 59 1 * * SUN", Step::Second, |n| {
        n.second() == 15 && n.minute() == 59 && n.hour() == 1 && n.weekday() == Weekday::Sun
    }),
    ("0 * 2 * * *", Step::Minute, |n| {
        n.second() == 0 && n.hour() == 2
    }),
    ("0 0 0 * * *", Step::Minute, |n| {
        n.second() == 0 && n.minute() == 0 && n.hour() == 0
    }),
    ("5 5 * * * *", Step::Second, |n| {
        n.second() == 5 && n.minute() == 5
    }),
];

/// (zone, local dates of its 2026/2027 transitions; for Tokyo, ordinary days).
type Ymd = (i32, u32, u32);

const ZONES: &[(&str, [Ymd; 4])] = &[
    (
        "America/New_York",
        [(2026, 3, 8), (2026, 11, 1), (2027, 3, 14), (2027, 11, 7)],
    ),
    (
        "Europe/London",
        [(2026, 3, 29), (2026, 10, 25), (2027, 3, 28), (2027, 10, 31)],
    ),
    (
        "Australia/Lord_Howe",
        [(2026, 4, 5), (2026, 10, 4), (2027, 4, 4), (2027, 10, 3)],
    ),
    (
        "Asia/Tokyo",
        [(2026, 3, 8), (2026, 11, 1), (2027, 3, 14), (2027, 11, 7)],
    ),
];

fn has_transition(tz: Tz, date: NaiveDate) -> bool {
    (0..24 * 60).any(|m| {
        let n = date.and_hms_opt(0, 0, 0).unwrap() + TimeDelta::minutes(m);
        !matches!(tz.from_local_datetime(&n), chrono::LocalResult::Single(_))
    })
}

#[test]
fn transition_days_really_have_a_gap_or_an_overlap() {
    for (zone, dates) in ZONES {
        let tz: Tz = zone.parse().unwrap();
        for (y, m, d) in dates {
            let date = NaiveDate::from_ymd_opt(*y, *m, *d).unwrap();
            assert_eq!(
                has_transition(tz, date),
                *zone != "Asia/Tokyo",
                "{zone} {date}"
            );
        }
    }
}

#[test]
fn every_vector_matches_the_independent_enumeration_around_real_transitions() {
    let mut checked = 0usize;
    for (zone, dates) in ZONES {
        let tz: Tz = zone.parse().unwrap();
        for (y, m, d) in dates {
            let day = NaiveDate::from_ymd_opt(*y, *m, *d).unwrap();
            let from = (day - TimeDelta::days(1))
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc();
            let to = (day + TimeDelta::days(2))
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc();
            for (expr, step, pred) in VECTORS {
                let schedule = Schedule::cron(expr, tz).unwrap();
                let got: Vec<DateTime<Utc>> = schedule.occurrences(from, to).collect();
                assert!(
                    got.windows(2).all(|w| w[0] < w[1]),
                    "{zone} {day} {expr}: not strictly increasing"
                );
                let want = enumerate(tz, from, to, *step, pred);
                assert!(!want.is_empty(), "{zone} {day} {expr}: vacuous vector");
                assert_eq!(got, want, "{zone} {day} {expr}");
                checked += got.len();
            }
        }
    }
    assert!(checked > 10_000, "only {checked} instants compared");
}

fn fires(zone: &str, expr: &str, from: &str, to: &str) -> Vec<String> {
    let tz: Tz = zone.parse().unwrap();
    Schedule::cron(expr, tz)
        .unwrap()
        .occurrences(from.parse().unwrap(), to.parse().unwrap())
        .map(fmt_instant)
        .collect()
}

#[test]
fn hand_written_new_york_vectors() {
    // Spring forward 2027-03-14 02:00 EST → 03:00 EDT (07:00Z).
    assert_eq!(
        fires(
            "America/New_York",
            "0 30 2 * * *",
            "2027-03-14T00:00:00Z",
            "2027-03-15T00:00:00Z"
        ),
        ["2027-03-14T07:00:00Z"]
    );
    // Spring forward 2026-03-08: same rule.
    assert_eq!(
        fires(
            "America/New_York",
            "0 30 2 * * *",
            "2026-03-08T00:00:00Z",
            "2026-03-09T00:00:00Z"
        ),
        ["2026-03-08T07:00:00Z"]
    );
    // Fall back 2026-11-01 02:00 EDT → 01:00 EST: 01:30 happens twice, fires once at EDT.
    assert_eq!(
        fires(
            "America/New_York",
            "0 30 1 * * *",
            "2026-11-01T00:00:00Z",
            "2026-11-02T00:00:00Z"
        ),
        ["2026-11-01T05:30:00Z"]
    );
    // Every 30 s during 01:00-03:59 on spring-forward day: 01:59:30 EST then 03:00:00 EDT,
    // the whole 02:xx hour collapsing onto 07:00:00Z.
    let got = fires(
        "America/New_York",
        "*/30 * 1-3 * * *",
        "2027-03-14T06:59:00Z",
        "2027-03-14T07:01:00Z",
    );
    assert_eq!(
        got,
        [
            "2027-03-14T06:59:00Z",
            "2027-03-14T06:59:30Z",
            "2027-03-14T07:00:00Z",
            "2027-03-14T07:00:30Z"
        ]
    );
    // Fall back 2027-11-07: 01:45 fires once, at EDT (05:45Z).
    assert_eq!(
        fires(
            "America/New_York",
            "0 45 1 * * *",
            "2027-11-07T00:00:00Z",
            "2027-11-08T00:00:00Z"
        ),
        ["2027-11-07T05:45:00Z"]
    );
}

#[test]
fn hand_written_london_vectors() {
    // 2026-03-29 01:00 GMT → 02:00 BST at 01:00Z: 01:30 does not exist.
    assert_eq!(
        fires(
            "Europe/London",
            "0 30 1 * * *",
            "2026-03-29T00:00:00Z",
            "2026-03-30T00:00:00Z"
        ),
        ["2026-03-29T01:00:00Z"]
    );
    // 2026-10-25 02:00 BST → 01:00 GMT: 01:30 fires at BST (00:30Z) only.
    assert_eq!(
        fires(
            "Europe/London",
            "0 30 1 * * *",
            "2026-10-24T12:00:00Z",
            "2026-10-25T12:00:00Z"
        ),
        ["2026-10-25T00:30:00Z"]
    );
    // Hourly across the 2027-10-31 fall back: 00:00Z (01:00 BST), skip 01:00Z (01:00 GMT), 02:00Z.
    assert_eq!(
        fires(
            "Europe/London",
            "0 0 * * * *",
            "2027-10-30T23:00:00Z",
            "2027-10-31T02:00:01Z"
        ),
        [
            "2027-10-30T23:00:00Z",
            "2027-10-31T00:00:00Z",
            "2027-10-31T02:00:00Z"
        ]
    );
}

#[test]
fn hand_written_lord_howe_vectors() {
    // 2027-10-03 02:00 +10:30 → 02:30 +11 at 2027-10-02T15:30Z: 02:00 and 02:15
    // collapse with the real 02:30 onto one instant.
    assert_eq!(
        fires(
            "Australia/Lord_Howe",
            "0 0,15,30,45 2 * * *",
            "2027-10-02T12:00:00Z",
            "2027-10-02T18:00:00Z"
        ),
        ["2027-10-02T15:30:00Z", "2027-10-02T15:45:00Z"]
    );
    // 2027-04-04 02:00 +11 → 01:30 +10:30: 01:45 fires at +11 (14:45Z) only.
    assert_eq!(
        fires(
            "Australia/Lord_Howe",
            "0 45 1 * * *",
            "2027-04-03T12:00:00Z",
            "2027-04-03T18:00:00Z"
        ),
        ["2027-04-03T14:45:00Z"]
    );
    // Every 15 min through the repeated half hour: 01:30, 01:45 (first pass), then 02:00 +10:30.
    assert_eq!(
        fires(
            "Australia/Lord_Howe",
            "0 */15 * * * *",
            "2027-04-03T14:30:00Z",
            "2027-04-03T15:45:01Z"
        ),
        [
            "2027-04-03T14:30:00Z",
            "2027-04-03T14:45:00Z",
            "2027-04-03T15:30:00Z",
            "2027-04-03T15:45:00Z"
        ]
    );
}

#[test]
fn zones_without_dst_are_a_plain_offset() {
    assert_eq!(
        fires(
            "Asia/Tokyo",
            "0 30 2 * * *",
            "2027-03-13T00:00:00Z",
            "2027-03-15T00:00:00Z"
        ),
        ["2027-03-13T17:30:00Z", "2027-03-14T17:30:00Z"]
    );
    assert_eq!(
        fires(
            "UTC",
            "0 30 2 * * *",
            "2027-03-14T00:00:00Z",
            "2027-03-15T00:00:00Z"
        ),
        ["2027-03-14T02:30:00Z"]
    );
}

/// The UTC instant (to the minute) at which `tz` changes offset on `day`.
fn transition_instant(tz: Tz, day: NaiveDate) -> Option<DateTime<Utc>> {
    let start = (day - TimeDelta::days(1))
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    (1..3 * 24 * 60)
        .map(|m| start + TimeDelta::minutes(m))
        .find(|t| offset(*t) != offset(*t - TimeDelta::minutes(1)))
}

#[test]
fn splitting_a_window_anywhere_near_a_transition_changes_nothing() {
    for (zone, dates) in ZONES.iter().filter(|(z, _)| *z != "Asia/Tokyo") {
        let tz: Tz = zone.parse().unwrap();
        for (y, m, d) in dates {
            let day = NaiveDate::from_ymd_opt(*y, *m, *d).unwrap();
            let at = transition_instant(tz, day).expect("a transition");
            let (from, to) = (at - TimeDelta::hours(4), at + TimeDelta::hours(4));
            let mut splits: Vec<DateTime<Utc>> =
                (-36..=36).map(|k| at + TimeDelta::minutes(5 * k)).collect();
            splits.extend([-1, 1, 29, 30, 31].map(|s| at + TimeDelta::seconds(s)));
            for (expr, _, _) in VECTORS {
                let schedule = Schedule::cron(expr, tz).unwrap();
                let whole: Vec<_> = schedule.occurrences(from, to).collect();
                for b in &splits {
                    let mut joined: Vec<_> = schedule.occurrences(from, *b).collect();
                    joined.extend(schedule.occurrences(*b, to));
                    assert_eq!(joined, whole, "{zone} {expr} split at {b}");
                }
            }
        }
    }
}
