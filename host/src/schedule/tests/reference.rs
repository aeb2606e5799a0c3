//! Independent reference: enumerate local wall-clock times one by one and map
//! each match to UTC with the policy (gap → first instant after the gap,
//! ambiguous → earliest), deduplicating with a set.

use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDateTime, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// Granularity of the walk: every minute at second 0, or every second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Minute,
    Second,
}

/// The policy, written independently of `wall.rs`: a nonexistent local time
/// maps to the instant of the first existing local time after it (found by
/// walking forward second by second); an ambiguous one to its earlier instant.
pub struct PolicyMapper {
    tz: Tz,
    /// Last gap walked: every local time in `(.0, .1)` is nonexistent and
    /// `.1` exists with instant `.2`.
    gap: Option<(NaiveDateTime, NaiveDateTime, DateTime<Utc>)>,
}

impl PolicyMapper {
    pub fn new(tz: Tz) -> Self {
        PolicyMapper { tz, gap: None }
    }

    pub fn map(&mut self, local: NaiveDateTime) -> DateTime<Utc> {
        match self.tz.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => t.with_timezone(&Utc),
            chrono::LocalResult::Ambiguous(a, b) => a.min(b).with_timezone(&Utc),
            chrono::LocalResult::None => {
                if let Some((lo, hi, t)) = self.gap
                    && lo < local
                    && local < hi
                {
                    return t;
                }
                let mut m = local;
                loop {
                    m += TimeDelta::seconds(1);
                    if let Some(t) = self.tz.from_local_datetime(&m).earliest() {
                        let t = t.with_timezone(&Utc);
                        self.gap = Some((local, m, t));
                        return t;
                    }
                }
            }
        }
    }
}

/// Every instant in `[from, to)` produced by local times matching `pred`.
pub fn enumerate(
    tz: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: Step,
    pred: impl Fn(NaiveDateTime) -> bool,
) -> Vec<DateTime<Utc>> {
    // Local range with a margin wider than any DST shift.
    let margin = TimeDelta::hours(3);
    let local_from = from.with_timezone(&tz).naive_local() - margin;
    let local_from = local_from.with_nanosecond(0).unwrap();
    let local_to = to.with_timezone(&tz).naive_local() + margin;
    let (mut n, inc) = match step {
        Step::Minute => (
            local_from.date().and_hms_opt(0, 0, 0).unwrap(),
            TimeDelta::minutes(1),
        ),
        Step::Second => (local_from, TimeDelta::seconds(1)),
    };
    let mut mapper = PolicyMapper::new(tz);
    let mut out = BTreeSet::new();
    while n < local_to {
        if pred(n) {
            let t = mapper.map(n);
            if from <= t && t < to {
                out.insert(t);
            }
        }
        n += inc;
    }
    out.into_iter().collect()
}

/// Like [`enumerate`] at one-second granularity, but walks minutes and only
/// looks at the seconds of minutes that `minute_ok` accepts (same result,
/// much faster for sparse expressions).
pub fn enumerate_by_minute(
    tz: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    minute_ok: impl Fn(NaiveDateTime) -> bool,
    second_ok: impl Fn(u32) -> bool,
) -> Vec<DateTime<Utc>> {
    let margin = TimeDelta::hours(3);
    let local_from = from.with_timezone(&tz).naive_local() - margin;
    let local_to = to.with_timezone(&tz).naive_local() + margin;
    let mut minute = local_from
        .with_second(0)
        .and_then(|n| n.with_nanosecond(0))
        .unwrap();
    let mut mapper = PolicyMapper::new(tz);
    let mut out = BTreeSet::new();
    while minute < local_to {
        if minute_ok(minute) {
            for s in (0..60).filter(|s| second_ok(*s)) {
                let t = mapper.map(minute + TimeDelta::seconds(i64::from(s)));
                if from <= t && t < to {
                    out.insert(t);
                }
            }
        }
        minute += TimeDelta::minutes(1);
    }
    out.into_iter().collect()
}
