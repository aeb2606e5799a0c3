//! Property tests over random cron expressions (built from each field's
//! grammar), random zones (DST, half-hour DST, 45-minute offsets, negative
//! DST, none) and random windows placed around real transitions:
//! - chunked scans with arbitrary overlaps and crash-restarts (re-scan from
//!   watermark − overlap), unioned with set semantics like `ON CONFLICT DO
//!   NOTHING`, give exactly the one-pass set; every chunk is strictly
//!   increasing and inside its window;
//! - the one-pass output equals the independent brute-force enumeration.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, NaiveDateTime, TimeDelta, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::reference::enumerate_by_minute;
use crate::schedule::{CronError, Schedule, ScheduleError, ScheduleSpec, Span, TriggerSpec};

#[derive(Debug, Clone)]
enum Item {
    Star,
    StarStep(u32),
    Val(u32),
    Range(u32, u32),
    RangeStep(u32, u32, u32),
    FromStep(u32, u32),
    /// Day-of-month `L`.
    Last,
    /// Day-of-week `wL`.
    LastWeekday(u32),
    /// Day-of-week `w#n`.
    Nth(u32, u32),
    /// `?` (alone in a day field).
    Question,
}

impl Item {
    fn text(&self) -> String {
        match self {
            Item::Star => "*".into(),
            Item::StarStep(s) => format!("*/{s}"),
            Item::Val(v) => v.to_string(),
            Item::Range(a, b) => format!("{a}-{b}"),
            Item::RangeStep(a, b, s) => format!("{a}-{b}/{s}"),
            Item::FromStep(a, s) => format!("{a}/{s}"),
            Item::Last => "L".into(),
            Item::LastWeekday(w) => format!("{w}L"),
            Item::Nth(w, n) => format!("{w}#{n}"),
            Item::Question => "?".into(),
        }
    }

    /// Plain values selected, expanded independently of the parser.
    fn values(&self, min: u32, max: u32) -> Vec<u32> {
        let stepped = |a: u32, b: u32, s: u32| (a..=b).step_by(s as usize).collect();
        match *self {
            Item::Star | Item::Question => (min..=max).collect(),
            Item::StarStep(s) => stepped(min, max, s),
            Item::Val(v) => vec![v],
            Item::Range(a, b) => (a..=b).collect(),
            Item::RangeStep(a, b, s) => stepped(a, b, s),
            Item::FromStep(a, s) => stepped(a, max, s),
            Item::Last | Item::LastWeekday(_) | Item::Nth(..) => vec![],
        }
    }
}

fn text(items: &[Item]) -> String {
    items.iter().map(Item::text).collect::<Vec<_>>().join(",")
}

fn set<const N: usize>(items: &[Item], min: u32, max: u32) -> [bool; N] {
    let mut s = [false; N];
    for item in items {
        for v in item.values(min, max) {
            s[v as usize] = true;
        }
    }
    s
}

/// A generated expression and its meaning as plain lookup tables.
#[derive(Clone)]
struct RefExpr {
    text: String,
    sec: [bool; 60],
    min: [bool; 60],
    hour: [bool; 24],
    dom: [bool; 32],
    dom_last: bool,
    month: [bool; 13],
    dow: [bool; 7],
    dow_last: [bool; 7],
    dow_nth: [[bool; 6]; 7],
    dom_star: bool,
    dow_star: bool,
    years: Option<(i32, i32)>,
}

impl std::fmt::Debug for RefExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl RefExpr {
    #[allow(clippy::too_many_arguments)]
    fn new(
        sec: Vec<Item>,
        min: Vec<Item>,
        hour: Vec<Item>,
        dom: Vec<Item>,
        month: Vec<Item>,
        dow: Vec<Item>,
        years: Option<(i32, i32)>,
    ) -> Self {
        let (dom_t, dow_t) = (text(&dom), text(&dow));
        let mut text = format!(
            "{} {} {} {} {} {}",
            text(&sec),
            text(&min),
            text(&hour),
            dom_t,
            text(&month),
            dow_t
        );
        if let Some((a, b)) = years {
            text.push_str(&format!(" {a}-{b}"));
        }
        let mut dow_set = [false; 7];
        let mut dow_last = [false; 7];
        let mut dow_nth = [[false; 6]; 7];
        for item in &dow {
            for v in item.values(0, 7) {
                dow_set[(v % 7) as usize] = true;
            }
            match *item {
                Item::LastWeekday(w) => dow_last[(w % 7) as usize] = true,
                Item::Nth(w, n) => dow_nth[(w % 7) as usize][n as usize] = true,
                _ => {}
            }
        }
        RefExpr {
            sec: set(&sec, 0, 59),
            min: set(&min, 0, 59),
            hour: set(&hour, 0, 23),
            dom: set(&dom, 1, 31),
            dom_last: dom.iter().any(|i| matches!(i, Item::Last)),
            month: set(&month, 1, 12),
            dow: dow_set,
            dow_last,
            dow_nth,
            dom_star: dom_t.starts_with('*') || dom_t == "?",
            dow_star: dow_t.starts_with('*') || dow_t == "?",
            years,
            text,
        }
    }

    /// Whether the minute of `n` matches every field but the seconds.
    fn minute_matches(&self, n: NaiveDateTime) -> bool {
        if !(self.min[n.minute() as usize] && self.hour[n.hour() as usize]) {
            return false;
        }
        let date = n.date();
        let in_month = |d: chrono::NaiveDate| d.month() == date.month();
        let d = date.day();
        let w = date.weekday().num_days_from_sunday() as usize;
        let dom_m = self.dom[d as usize] || (self.dom_last && !in_month(date + TimeDelta::days(1)));
        let dow_m = self.dow[w]
            || (self.dow_last[w] && !in_month(date + TimeDelta::days(7)))
            || self.dow_nth[w][((d - 1) / 7 + 1) as usize];
        let day_ok = if self.dom_star || self.dow_star {
            dom_m && dow_m
        } else {
            dom_m || dow_m
        };
        self.years
            .is_none_or(|(a, b)| (a..=b).contains(&date.year()))
            && self.month[date.month() as usize]
            && day_ok
    }

    /// Expected matches per second of a day, ignoring the day rules.
    fn density(&self) -> f64 {
        let count = |s: &[bool]| s.iter().filter(|b| **b).count() as f64;
        count(&self.sec) * count(&self.min) * count(&self.hour) / 86_400.0
    }
}

fn item(min: u32, max: u32) -> impl Strategy<Value = Item> {
    let span = max - min + 1;
    prop_oneof![
        Just(Item::Star),
        (1..=span).prop_map(Item::StarStep),
        (min..=max).prop_map(Item::Val),
        (min..=max, min..=max).prop_map(|(a, b)| Item::Range(a.min(b), a.max(b))),
        (min..=max, min..=max, 1..=span).prop_map(|(a, b, s)| Item::RangeStep(
            a.min(b),
            a.max(b),
            s
        )),
        (min..=max, 1..=span).prop_map(|(a, s)| Item::FromStep(a, s)),
    ]
}

fn field(min: u32, max: u32) -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec(item(min, max), 1..=3)
}

fn star() -> impl Strategy<Value = Vec<Item>> {
    Just(vec![Item::Star])
}

fn expr() -> impl Strategy<Value = RefExpr> {
    let sec = prop_oneof![3 => Just(vec![Item::Val(0)]), 2 => field(0, 59)];
    let min = prop_oneof![2 => field(0, 59), 1 => star()];
    let hour = prop_oneof![
        2 => field(0, 23),
        1 => star(),
        1 => Just(vec![Item::Range(1, 3)]),
    ];
    let dom_extra = prop_oneof![
        Just(vec![Item::Last]),
        Just(vec![Item::Question]),
        field(1, 31).prop_map(|mut v| {
            v.push(Item::Last);
            v
        }),
    ];
    let dom = prop_oneof![5 => star(), 2 => field(1, 31), 1 => dom_extra];
    let month = prop_oneof![5 => star(), 1 => field(1, 12)];
    let dow_extra = prop_oneof![
        (0..=7u32).prop_map(|w| vec![Item::LastWeekday(w)]),
        (0..=7u32, 1..=5u32).prop_map(|(w, n)| vec![Item::Nth(w, n)]),
        Just(vec![Item::Question]),
    ];
    let dow = prop_oneof![5 => star(), 2 => field(0, 7), 1 => dow_extra];
    let years = prop_oneof![
        6 => Just(None),
        1 => (2025..=2028i32, 0..=2i32).prop_map(|(a, n)| Some((a, a + n))),
    ];
    (sec, min, hour, dom, month, dow, years)
        .prop_map(|(s, mi, h, d, mo, w, y)| RefExpr::new(s, mi, h, d, mo, w, y))
}

const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Tokyo",
    "UTC",
    "Pacific/Chatham",
    "Europe/Dublin",
    "Australia/Sydney",
];

/// Days with a transition in at least one zone above (00:00Z).
const NEAR: &[&str] = &[
    "2026-03-08T00:00:00Z",
    "2026-03-29T00:00:00Z",
    "2026-04-05T00:00:00Z",
    "2026-09-27T00:00:00Z",
    "2026-10-04T00:00:00Z",
    "2026-10-25T00:00:00Z",
    "2026-11-01T00:00:00Z",
    "2027-03-14T00:00:00Z",
    "2027-03-28T00:00:00Z",
    "2027-04-04T00:00:00Z",
    "2027-10-03T00:00:00Z",
    "2027-10-31T00:00:00Z",
    "2027-11-07T00:00:00Z",
];

fn zone() -> impl Strategy<Value = Tz> {
    prop::sample::select(ZONES).prop_map(|z| z.parse::<Tz>().unwrap())
}

/// A window start near a transition, and a length that keeps the expected
/// number of fire times within `budget` (debug builds are slow).
fn window(density: f64, budget: f64) -> impl Strategy<Value = (DateTime<Utc>, i64)> {
    let max_len = ((budget / density.max(1e-9)) as i64).clamp(60, 3 * 86_400);
    (
        prop::sample::select(NEAR),
        -2 * 86_400..=86_400i64,
        0..1000u32,
        0..=max_len,
    )
        .prop_map(|(day, shift, ms, len)| {
            let from = day.parse::<DateTime<Utc>>().unwrap()
                + TimeDelta::seconds(shift)
                + TimeDelta::milliseconds(i64::from(ms));
            (from, len)
        })
}

/// One scan of the simulated scanner.
#[derive(Debug, Clone)]
struct Tick {
    /// Where this tick's window ends, as a fraction of the whole window.
    at_permille: u32,
    /// Sub-second jitter on the end.
    ms: u32,
    /// Re-scan overlap before the watermark.
    overlap_s: i64,
    /// Crash after inserting this share (permille) of the chunk, without
    /// advancing the watermark.
    crash_keep_permille: Option<u32>,
}

fn ticks() -> impl Strategy<Value = Vec<Tick>> {
    prop::collection::vec(
        (
            0..=1000u32,
            prop_oneof![Just(0u32), 0..1000u32],
            0..=7_200i64,
            prop::option::weighted(0.3, 0..=1000u32),
        )
            .prop_map(|(at_permille, ms, overlap_s, crash_keep_permille)| Tick {
                at_permille,
                ms,
                overlap_s,
                crash_keep_permille,
            }),
        0..10,
    )
}

fn compile(e: &RefExpr, tz: Tz) -> Option<Schedule> {
    match Schedule::cron(&e.text, tz) {
        Ok(s) => Some(s),
        Err(ScheduleError::Cron(CronError::NeverFires { .. })) => None,
        Err(other) => panic!("{:?} failed to parse: {other}", e.text),
    }
}

fn check_chunk(
    out: &[DateTime<Utc>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), TestCaseError> {
    prop_assert!(
        out.windows(2).all(|w| w[0] < w[1]),
        "chunk not strictly increasing"
    );
    prop_assert!(
        out.iter().all(|t| from <= *t && *t < to),
        "chunk output outside its window"
    );
    Ok(())
}

/// Simulates a scanner over `[from, to)`: one scan per tick from
/// `watermark - overlap` to the tick's end, crash-restarts that insert only
/// part of a chunk and keep the watermark, a final scan to `to`; the table
/// has set semantics (`ON CONFLICT DO NOTHING`). Checks each chunk.
fn rescan_union(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    plan: &[Tick],
) -> Result<Vec<DateTime<Utc>>, TestCaseError> {
    let len = (to - from).num_seconds();
    let mut ends: Vec<(DateTime<Utc>, &Tick)> = plan
        .iter()
        .map(|t| {
            (
                from + TimeDelta::milliseconds(len * i64::from(t.at_permille) + i64::from(t.ms)),
                t,
            )
        })
        .map(|(end, t)| (end.min(to), t))
        .collect();
    ends.sort_by_key(|(end, _)| *end);
    let last = Tick {
        at_permille: 1000,
        ms: 0,
        overlap_s: 0,
        crash_keep_permille: None,
    };
    ends.push((to, &last));

    let mut table = BTreeSet::new();
    let mut watermark = from;
    for (end, tick) in ends {
        let start = (watermark - TimeDelta::seconds(tick.overlap_s)).max(from);
        let chunk: Vec<_> = schedule.occurrences(start, end).collect();
        check_chunk(&chunk, start, end)?;
        match tick.crash_keep_permille {
            Some(keep) => {
                // Partial insert, then crash: the watermark stays put.
                let n = chunk.len() * keep as usize / 1000;
                table.extend(chunk.into_iter().take(n));
            }
            None => {
                table.extend(chunk);
                watermark = watermark.max(end);
            }
        }
    }
    Ok(table.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn chunked_rescans_with_overlaps_and_restarts_union_to_the_one_pass_set(
        (e, tz, (from, len), plan) in (expr(), zone()).prop_flat_map(|(e, tz)| {
            let d = e.density();
            (Just(e), Just(tz), window(d, 40_000.0), ticks())
        })
    ) {
        let Some(schedule) = compile(&e, tz) else { return Ok(()) };
        let to = from + TimeDelta::seconds(len);
        let one: Vec<_> = schedule.occurrences(from, to).collect();
        check_chunk(&one, from, to)?;

        let union = rescan_union(&schedule, from, to, &plan)?;
        prop_assert_eq!(union, one);
    }

    #[test]
    fn interval_rescans_union_to_the_one_pass_grid(
        every in 1..=7_200i64,
        anchor_shift in -100_000i64..=100_000,
        (from, len) in window(1.0, 40_000.0),
        plan in ticks(),
    ) {
        let anchor = "2027-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
            + TimeDelta::seconds(anchor_shift);
        let spec = ScheduleSpec {
            trigger: TriggerSpec::Interval { every: Span::from_secs(every as u64), anchor },
            ..ScheduleSpec::default()
        };
        let schedule = spec.compile().unwrap();
        let to = from + TimeDelta::seconds(len);
        let one: Vec<_> = schedule.occurrences(from, to).collect();
        check_chunk(&one, from, to)?;
        for t in &one {
            prop_assert_eq!((*t - anchor).num_seconds().rem_euclid(every), 0);
        }
        // Nothing on the grid was left out at either end.
        if let Some(first) = one.first() {
            prop_assert!(*first - TimeDelta::seconds(every) < from);
        }
        prop_assert!(one.windows(2).all(|w| (w[1] - w[0]).num_seconds() == every));
        prop_assert_eq!(rescan_union(&schedule, from, to, &plan)?, one);
    }

    #[test]
    fn one_pass_output_equals_the_brute_force_enumeration(
        (e, tz, (from, len)) in (expr(), zone()).prop_flat_map(|(e, tz)| {
            let d = e.density();
            (Just(e), Just(tz), window(d, 20_000.0))
        })
    ) {
        let Some(schedule) = compile(&e, tz) else { return Ok(()) };
        let to = from + TimeDelta::seconds(len);
        let got: Vec<_> = schedule.occurrences(from, to).collect();
        let want = enumerate_by_minute(tz, from, to, |n| e.minute_matches(n), |s| e.sec[s as usize]);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn next_after_agrees_with_occurrences(
        (e, tz, (from, _len)) in (expr(), zone()).prop_flat_map(|(e, tz)| {
            let d = e.density();
            (Just(e), Just(tz), window(d, 1_000.0))
        })
    ) {
        let Some(schedule) = compile(&e, tz) else { return Ok(()) };
        let mut t = from;
        for _ in 0..5 {
            let Some(next) = schedule.next_after(t) else { break };
            prop_assert!(next > t);
            let expect = schedule
                .occurrences(t + TimeDelta::milliseconds(1), next + TimeDelta::seconds(1))
                .next();
            prop_assert_eq!(Some(next), expect);
            t = next;
        }
    }
}
