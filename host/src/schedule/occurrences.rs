//! `Schedule`: a compiled [`ScheduleSpec`] and the fire times it produces.
//!
//! - cron: local wall time of the zone, DST policy of `wall.rs` (gap → first
//!   instant after the gap, collapsed; ambiguous → first occurrence);
//! - interval: instants `anchor + k * every` for every integer `k` (the
//!   anchor is a phase, not a start — use `start` for that); without an
//!   anchor the grid is aligned to the Unix epoch, so `every = "1h"` fires on
//!   the hour UTC and `every = "1d"` at 00:00:00Z. `d` means 86 400 s;
//! - at: the one instant;
//! - manual: nothing.
//!
//! Invariants kept:
//! - [`Schedule::occurrences`] yields instants in the half-open window
//!   `[from, to)` ∩ `[start, end)` ∩ `[MIN_INSTANT, MAX_INSTANT]`, whole seconds, strictly
//!   increasing, no duplicates; it is lazy and every step is bounded (cron
//!   jumps field by field, see `cron.rs`), so it never loops forever;
//! - the output for a window is a pure function of the schedule and the
//!   window: splitting `[a, c)` at any `b` gives exactly `[a, b)` followed by
//!   `[b, c)` (checked by a property test), which is what makes overlapping
//!   re-scans + `ON CONFLICT DO NOTHING` exact;
//! - sub-second window bounds round up to the next whole second on both
//!   ends, which keeps the split property for any instants.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cron::{Civil, CronExpr};
use super::error::ScheduleError;
use super::spec::{ScheduleSpec, TriggerSpec, fmt_instant};
use super::{MAX_INSTANT, MIN_INSTANT, wall};

/// A compiled schedule: ready to enumerate fire times, cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    trigger: Compiled,
    /// Effective bounds in Unix seconds: `[lo, hi)`.
    lo: i64,
    hi: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Compiled {
    Cron { expr: CronExpr, tz: Tz },
    Interval { every: i64, anchor: i64 },
    At(i64),
    Manual,
}

/// Unix seconds of `t` rounded up to a whole second.
fn ceil_secs(t: DateTime<Utc>) -> i64 {
    t.timestamp() + i64::from(t.timestamp_subsec_nanos() > 0)
}

fn instant(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).expect("within MIN_INSTANT..=MAX_INSTANT")
}

impl Schedule {
    /// Compiles a spec; rejects it if it is invalid or can never fire inside
    /// its `[start, end)` bounds (manual schedules never fire and are fine).
    pub fn new(spec: &ScheduleSpec) -> Result<Schedule, ScheduleError> {
        spec.check_fields()?;
        let trigger = match &spec.trigger {
            TriggerSpec::Cron { cron, timezone } => Compiled::Cron {
                expr: CronExpr::parse(cron)?,
                tz: *timezone,
            },
            TriggerSpec::Interval { every, anchor } => Compiled::Interval {
                every: every.as_secs() as i64,
                anchor: anchor.timestamp(),
            },
            TriggerSpec::At { at } => Compiled::At(at.timestamp()),
            TriggerSpec::Manual => Compiled::Manual,
        };
        let schedule = Schedule {
            trigger,
            lo: spec.start.map_or(MIN_INSTANT.timestamp(), ceil_secs),
            hi: spec
                .end
                .map_or(MAX_INSTANT.timestamp() + 1, ceil_secs)
                .min(MAX_INSTANT.timestamp() + 1),
        };
        if schedule.trigger != Compiled::Manual
            && schedule
                .occurrences(MIN_INSTANT, instant(schedule.hi))
                .next()
                .is_none()
        {
            let bounds = format!(
                "no fire time in [{}, {})",
                fmt_instant(instant(schedule.lo)),
                spec.end.map_or("end of time".to_string(), fmt_instant)
            );
            return Err(ScheduleError::NeverFires { reason: bounds });
        }
        Ok(schedule)
    }

    /// A cron schedule in `tz` with default bounds (convenience for tools and tests).
    pub fn cron(expr: &str, tz: Tz) -> Result<Schedule, ScheduleError> {
        Schedule::new(&ScheduleSpec {
            trigger: TriggerSpec::Cron {
                cron: expr.to_string(),
                timezone: tz,
            },
            ..ScheduleSpec::default()
        })
    }

    /// Fire times in `[from, to)`, strictly increasing (see the module header).
    pub fn occurrences(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Occurrences<'_> {
        let from = ceil_secs(from).max(self.lo);
        let to = ceil_secs(to).min(self.hi);
        let state = if from >= to {
            State::Done
        } else {
            match &self.trigger {
                Compiled::Cron { expr, tz } => State::Cron {
                    expr,
                    tz: *tz,
                    cursor: Civil::from_naive(wall::search_start(*tz, instant(from))),
                    last: None,
                },
                Compiled::Interval { every, anchor } => {
                    // First k with anchor + k*every >= from.
                    let k = (from - anchor).div_euclid(*every)
                        + i64::from((from - anchor).rem_euclid(*every) != 0);
                    State::Interval {
                        next: anchor + k * every,
                        every: *every,
                    }
                }
                Compiled::At(at) => State::At(*at),
                Compiled::Manual => State::Done,
            }
        };
        Occurrences { state, from, to }
    }

    /// The first fire time strictly after `t`, if any.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let from = t.timestamp().checked_add(1)?;
        if from > MAX_INSTANT.timestamp() {
            return None;
        }
        self.occurrences(instant(from), instant(self.hi)).next()
    }
}

/// Iterator returned by [`Schedule::occurrences`].
#[derive(Debug, Clone)]
pub struct Occurrences<'a> {
    state: State<'a>,
    /// Window in Unix seconds, `[from, to)`.
    from: i64,
    to: i64,
}

#[derive(Debug, Clone)]
enum State<'a> {
    Done,
    Cron {
        expr: &'a CronExpr,
        tz: Tz,
        /// Next local wall-clock second to consider.
        cursor: Civil,
        /// Last instant yielded (to collapse a DST gap onto one instant).
        last: Option<i64>,
    },
    Interval {
        next: i64,
        every: i64,
    },
    At(i64),
}

impl Iterator for Occurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        match &mut self.state {
            State::Done => None,
            State::At(at) => {
                let at = *at;
                self.state = State::Done;
                (self.from <= at && at < self.to).then(|| instant(at))
            }
            State::Interval { next, every } => {
                let t = *next;
                if t >= self.to {
                    self.state = State::Done;
                    return None;
                }
                *next = t + *every;
                Some(instant(t))
            }
            State::Cron {
                expr,
                tz,
                cursor,
                last,
            } => loop {
                let Some(found) = expr.next_match(*cursor) else {
                    self.state = State::Done;
                    return None;
                };
                let Some(local) = found.to_naive() else {
                    self.state = State::Done;
                    return None;
                };
                let (at, gap_end) = wall::resolve(*tz, local);
                let secs = at.timestamp();
                if secs >= self.to {
                    self.state = State::Done;
                    return None;
                }
                *cursor = match gap_end {
                    // Every local time up to the gap's end resolves to `at` too.
                    Some(end) => Civil::from_naive(end).max(found.succ()),
                    None => found.succ(),
                };
                if secs < self.from || *last == Some(secs) {
                    continue;
                }
                *last = Some(secs);
                return Some(at);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn tz(name: &str) -> Tz {
        name.parse().unwrap()
    }

    fn all(s: &Schedule, from: &str, to: &str) -> Vec<String> {
        s.occurrences(utc(from), utc(to)).map(fmt_instant).collect()
    }

    fn spec(json: serde_json::Value) -> Schedule {
        serde_json::from_value::<ScheduleSpec>(json)
            .unwrap()
            .compile()
            .unwrap()
    }

    #[test]
    fn new_york_spring_forward_fires_two_thirty_once_at_three_edt() {
        let s = Schedule::cron("0 30 2 * * *", tz("America/New_York")).unwrap();
        assert_eq!(
            all(&s, "2027-03-13T00:00:00Z", "2027-03-16T00:00:00Z"),
            [
                "2027-03-13T07:30:00Z",
                "2027-03-14T07:00:00Z",
                "2027-03-15T06:30:00Z"
            ]
        );
    }

    #[test]
    fn new_york_fall_back_fires_one_thirty_once_at_its_first_occurrence() {
        let s = Schedule::cron("0 30 1 * * *", tz("America/New_York")).unwrap();
        assert_eq!(
            all(&s, "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z"),
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
        );
    }

    #[test]
    fn quarter_hours_in_the_gap_collapse_onto_the_first_instant_after_it() {
        let s = Schedule::cron("0 */15 * * * *", tz("America/New_York")).unwrap();
        assert_eq!(
            all(&s, "2027-03-14T06:30:00Z", "2027-03-14T07:30:00Z"),
            [
                "2027-03-14T06:30:00Z",
                "2027-03-14T06:45:00Z",
                "2027-03-14T07:00:00Z",
                "2027-03-14T07:15:00Z"
            ]
        );
    }

    #[test]
    fn hourly_in_the_repeated_hour_fires_only_the_first_pass() {
        let s = Schedule::cron("0 0 * * * *", tz("America/New_York")).unwrap();
        assert_eq!(
            all(&s, "2026-11-01T04:00:00Z", "2026-11-01T08:00:01Z"),
            [
                "2026-11-01T04:00:00Z",
                "2026-11-01T05:00:00Z",
                "2026-11-01T07:00:00Z",
                "2026-11-01T08:00:00Z"
            ]
        );
    }

    #[test]
    fn lord_howe_half_hour_shifts_follow_the_policy() {
        let z = tz("Australia/Lord_Howe");
        // Spring forward 2026-10-04 02:00 +10:30 → 02:30 +11.
        let s = Schedule::cron("0 15 2 * * *", z).unwrap();
        assert_eq!(
            all(&s, "2026-10-03T12:00:00Z", "2026-10-03T18:00:00Z"),
            ["2026-10-03T15:30:00Z"]
        );
        // Fall back 2026-04-05 02:00 +11 → 01:30 +10:30; 01:45 is ambiguous.
        let s = Schedule::cron("0 45 1 * * *", z).unwrap();
        assert_eq!(
            all(&s, "2026-04-04T12:00:00Z", "2026-04-04T18:00:00Z"),
            ["2026-04-04T14:45:00Z"]
        );
    }

    #[test]
    fn window_is_half_open() {
        let s = Schedule::cron("0 0 * * * *", Tz::UTC).unwrap();
        assert_eq!(
            all(&s, "2027-01-01T00:00:00Z", "2027-01-01T02:00:00Z"),
            ["2027-01-01T00:00:00Z", "2027-01-01T01:00:00Z"]
        );
        assert!(all(&s, "2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z").is_empty());
        assert!(all(&s, "2027-01-01T02:00:00Z", "2027-01-01T01:00:00Z").is_empty());
    }

    #[test]
    fn sub_second_window_bounds_round_up() {
        let s = Schedule::cron("* * * * * *", Tz::UTC).unwrap();
        assert_eq!(
            all(&s, "2027-01-01T00:00:00.5Z", "2027-01-01T00:00:02.5Z"),
            ["2027-01-01T00:00:01Z", "2027-01-01T00:00:02Z"]
        );
    }

    #[test]
    fn start_and_end_bound_the_output() {
        let s = spec(serde_json::json!({
            "kind": "cron", "cron": "0 0 * * * *",
            "start": "2027-01-01T01:00:00Z", "end": "2027-01-01T03:00:00Z"
        }));
        assert_eq!(
            all(&s, "2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z"),
            ["2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"]
        );
        assert_eq!(s.next_after(utc("2027-01-01T02:00:00Z")), None);
        assert_eq!(
            s.next_after(utc("2026-01-01T00:00:00Z")),
            Some(utc("2027-01-01T01:00:00Z"))
        );
    }

    #[test]
    fn interval_without_anchor_is_aligned_to_the_unix_epoch() {
        let s = spec(serde_json::json!({"kind": "interval", "every": "90s"}));
        // 2027-01-01T00:00:00Z = 1798761600 s = 19986240 * 90.
        assert_eq!(
            all(&s, "2027-01-01T00:00:00Z", "2027-01-01T00:04:00Z"),
            [
                "2027-01-01T00:00:00Z",
                "2027-01-01T00:01:30Z",
                "2027-01-01T00:03:00Z"
            ]
        );
    }

    #[test]
    fn interval_with_anchor_fires_on_the_anchor_grid_both_sides() {
        let s = spec(serde_json::json!({
            "kind": "interval", "every": "1h", "anchor": "2027-01-01T00:20:00Z"
        }));
        assert_eq!(
            all(&s, "2026-12-31T22:00:00Z", "2027-01-01T01:00:00Z"),
            [
                "2026-12-31T22:20:00Z",
                "2026-12-31T23:20:00Z",
                "2027-01-01T00:20:00Z"
            ]
        );
        assert_eq!(
            s.next_after(utc("2027-01-01T00:20:00Z")),
            Some(utc("2027-01-01T01:20:00Z"))
        );
    }

    #[test]
    fn at_fires_once_and_manual_never() {
        let s = spec(serde_json::json!({"kind": "at", "at": "2027-01-01T00:00:00Z"}));
        assert_eq!(
            all(&s, "2026-01-01T00:00:00Z", "2028-01-01T00:00:00Z"),
            ["2027-01-01T00:00:00Z"]
        );
        assert!(all(&s, "2027-01-01T00:00:01Z", "2028-01-01T00:00:00Z").is_empty());
        assert_eq!(
            s.next_after(utc("2026-12-31T23:59:59.9Z")),
            Some(utc("2027-01-01T00:00:00Z"))
        );
        assert_eq!(s.next_after(utc("2027-01-01T00:00:00Z")), None);
        let m = ScheduleSpec::default().compile().unwrap();
        assert!(all(&m, "1970-01-01T00:00:00Z", "9999-01-01T00:00:00Z").is_empty());
        assert_eq!(m.next_after(utc("2027-01-01T00:00:00Z")), None);
    }

    #[test]
    fn next_after_is_strict_and_handles_sub_seconds() {
        let s = Schedule::cron("0 30 2 * * *", tz("America/New_York")).unwrap();
        assert_eq!(
            s.next_after(utc("2027-03-14T07:00:00Z")),
            Some(utc("2027-03-15T06:30:00Z"))
        );
        assert_eq!(
            s.next_after(utc("2027-03-14T06:59:59.999Z")),
            Some(utc("2027-03-14T07:00:00Z"))
        );
    }

    #[test]
    fn year_limited_cron_runs_out() {
        let s = Schedule::cron("0 0 0 1 1 * 2027", Tz::UTC).unwrap();
        assert_eq!(
            s.next_after(utc("2020-01-01T00:00:00Z")),
            Some(utc("2027-01-01T00:00:00Z"))
        );
        assert_eq!(s.next_after(utc("2027-01-01T00:00:00Z")), None);
    }

    #[test]
    fn sparse_cron_far_from_its_date_is_found_without_scanning_seconds() {
        let s = Schedule::cron("0 0 0 29 2 MON", Tz::UTC).unwrap();
        // Restricted day-of-month and day-of-week: the 29th of Feb OR any Monday in Feb.
        let t = s.next_after(utc("2027-03-01T00:00:00Z")).unwrap();
        assert_eq!(t, utc("2028-02-07T00:00:00Z"));
        let s = Schedule::cron("0 0 0 29 2 ?", Tz::UTC).unwrap();
        assert_eq!(
            s.next_after(utc("2028-02-29T00:00:00Z")),
            Some(utc("2032-02-29T00:00:00Z"))
        );
    }
}
