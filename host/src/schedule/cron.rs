//! Cron expressions with seconds: parsing into field bitsets and finding the
//! next matching *local wall-clock* date-time. No time zones here — mapping a
//! wall-clock time to an instant (and the DST policy) lives in `wall.rs`.
//!
//! Grammar (case-insensitive, fields separated by whitespace):
//!
//! ```text
//! sec min hour dom month dow [year]
//! ```
//!
//! | field | values | extras |
//! |---|---|---|
//! | `second` | 0-59 | |
//! | `minute` | 0-59 | |
//! | `hour` | 0-23 | |
//! | `day-of-month` | 1-31 | `?`, `L` (last day of the month) |
//! | `month` | 1-12, `JAN`-`DEC` | |
//! | `day-of-week` | 0-7 (0 and 7 are Sunday), `SUN`-`SAT` | `?`, `5L` (last Friday), `MON#2` (second Monday) |
//! | `year` | 1970-2199 | |
//!
//! Every field takes `*`, single values, ranges `a-b`, steps `*/n`, `a-b/n`,
//! `a/n` (from `a` to the field's maximum) and comma lists of these. Ranges
//! must ascend (`FRI-MON` is rejected, write `FRI-SAT,SUN-MON`). Aliases
//! (always with second 0): `@yearly`/`@annually` = `0 0 0 1 1 *`,
//! `@monthly` = `0 0 0 1 * *`, `@weekly` = `0 0 0 * * 0`,
//! `@daily`/`@midnight` = `0 0 0 * * *`, `@hourly` = `0 0 * * * *`.
//!
//! Day-of-month / day-of-week rule (Vixie cron): a day field is
//! *unrestricted* when its text begins with `*` or is `?`. When both day
//! fields are restricted, a day matches if EITHER matches
//! (`0 0 0 1,15 * MON` = the 1st, the 15th and every Monday); otherwise a day
//! must match both (an unrestricted field that is plain `*`/`?` matches every
//! day, so `*/2` with `MON` means "odd days that are Mondays").
//!
//! Invariants kept:
//! - a parsed [`CronExpr`] has at least one matching wall-clock second in
//!   every 400-year Gregorian cycle (or, with a year field, in one of its
//!   years): expressions that can never match (`0 0 0 30 2 *`) are rejected
//!   with [`CronError::NeverFires`], so [`CronExpr::next_match`] always ends;
//! - [`CronExpr::next_match`] never searches past year [`MAX_YEAR`] and jumps
//!   field by field (year, month, day via a per-month bitmask, hour, minute,
//!   second), so one call costs a handful of bit operations, never a scan of
//!   seconds.

use std::fmt;

/// Last year any schedule can produce; searches stop here.
pub(super) const MAX_YEAR: i32 = 9999;
/// Earliest / latest value accepted in the optional year field.
pub(super) const YEAR_FIELD_MIN: i32 = 1970;
/// See [`YEAR_FIELD_MIN`].
pub(super) const YEAR_FIELD_MAX: i32 = 2199;

const YEAR_WORDS: usize = ((YEAR_FIELD_MAX - YEAR_FIELD_MIN) as usize / 64) + 1;

/// Why a cron expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// Neither 6 nor 7 fields (nor a known `@alias`).
    #[error(
        "cron expression has {count} fields; expected 6 (sec min hour dom month dow) or 7 (sec min hour dom month dow year)"
    )]
    FieldCount {
        /// How many whitespace-separated fields were found.
        count: usize,
    },
    /// `@something` that is not one of the documented aliases.
    #[error(
        "unknown cron alias '{alias}' (allowed @yearly @annually @monthly @weekly @daily @midnight @hourly)"
    )]
    UnknownAlias {
        /// The alias as written.
        alias: String,
    },
    /// One comma-separated item of a field could not be parsed or is out of range.
    #[error("cron field '{field}' has bad token '{token}' (allowed {allowed})")]
    BadToken {
        /// Field name: `second`, `minute`, `hour`, `day-of-month`, `month`, `day-of-week`, `year`.
        field: &'static str,
        /// The offending comma-separated item, as written.
        token: String,
        /// What the field accepts.
        allowed: &'static str,
    },
    /// The fields are each valid but no calendar date satisfies them all.
    #[error("schedule never fires: cron expression '{expr}' matches no date")]
    NeverFires {
        /// The expression as written.
        expr: String,
    },
}

/// A local wall-clock date-time broken into fields. Ordering of the derived
/// `Ord` is chronological because fields are declared most-significant first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Civil {
    /// Proleptic Gregorian year.
    pub(super) year: i32,
    /// 1-12.
    pub(super) month: u32,
    /// 1-31.
    pub(super) day: u32,
    /// 0-23.
    pub(super) hour: u32,
    /// 0-59.
    pub(super) minute: u32,
    /// 0-59.
    pub(super) second: u32,
}

impl Civil {
    fn year_start(year: i32) -> Self {
        Civil {
            year,
            month: 1,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    fn next_month_start(self) -> Self {
        if self.month >= 12 {
            Civil::year_start(self.year + 1)
        } else {
            Civil {
                month: self.month + 1,
                day: 1,
                hour: 0,
                minute: 0,
                second: 0,
                ..self
            }
        }
    }

    fn next_day_start(self) -> Self {
        if self.day >= days_in_month(self.year, self.month) {
            self.next_month_start()
        } else {
            Civil {
                day: self.day + 1,
                hour: 0,
                minute: 0,
                second: 0,
                ..self
            }
        }
    }

    fn next_hour_start(self) -> Self {
        if self.hour >= 23 {
            self.next_day_start()
        } else {
            Civil {
                hour: self.hour + 1,
                minute: 0,
                second: 0,
                ..self
            }
        }
    }

    fn next_minute_start(self) -> Self {
        if self.minute >= 59 {
            self.next_hour_start()
        } else {
            Civil {
                minute: self.minute + 1,
                second: 0,
                ..self
            }
        }
    }

    /// The wall-clock second right after this one.
    pub(super) fn succ(self) -> Self {
        if self.second >= 59 {
            self.next_minute_start()
        } else {
            Civil {
                second: self.second + 1,
                ..self
            }
        }
    }

    /// Converts to chrono's naive date-time (None only for years chrono cannot represent).
    pub(super) fn to_naive(self) -> Option<chrono::NaiveDateTime> {
        chrono::NaiveDate::from_ymd_opt(self.year, self.month, self.day)?.and_hms_opt(
            self.hour,
            self.minute,
            self.second,
        )
    }

    /// Breaks a naive date-time into fields (sub-second part dropped).
    pub(super) fn from_naive(n: chrono::NaiveDateTime) -> Self {
        use chrono::{Datelike, Timelike};
        Civil {
            year: n.year(),
            month: n.month(),
            day: n.day(),
            hour: n.hour(),
            minute: n.minute(),
            second: n.second(),
        }
    }
}

/// Whether `year` is a Gregorian leap year.
fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` (1-12) of `year`.
fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if is_leap(year) {
                29
            } else {
                28
            }
        }
    }
}

/// Days since 1970-01-01 (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Day of week, 0 = Sunday.
fn weekday(y: i32, m: u32, d: u32) -> u32 {
    // 1970-01-01 was a Thursday (4).
    (days_from_civil(y, m, d) + 4).rem_euclid(7) as u32
}

#[inline]
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = mask & (!0u64 << from);
    if m == 0 {
        None
    } else {
        Some(m.trailing_zeros())
    }
}

/// A parsed cron expression: one bitset per field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1..=31.
    days: u32,
    /// `L` in day-of-month.
    last_day: bool,
    /// Bits 1..=12.
    months: u64,
    /// Bits 0..=6 (0 = Sunday).
    weekdays: u8,
    /// `xL` in day-of-week: bit w = last weekday w of the month.
    last_weekdays: u8,
    /// `x#n` in day-of-week: `nth[w]` bit n = n-th weekday w of the month.
    nth_weekdays: [u8; 7],
    /// Day-of-month field begins with `*` or is `?`.
    dom_star: bool,
    /// Day-of-week field begins with `*` or is `?`.
    dow_star: bool,
    /// `plain_dow_masks[w1]`: days 1..=31 whose weekday is in `weekdays`,
    /// for a month whose 1st is weekday `w1`.
    plain_dow_masks: [u32; 7],
    /// Bit i = year `YEAR_FIELD_MIN + i`; `None` = any year.
    years: Option<[u64; YEAR_WORDS]>,
}

#[derive(Clone, Copy)]
struct FieldDef {
    name: &'static str,
    min: u32,
    max: u32,
    allowed: &'static str,
    names: &'static [&'static str],
}

const SECOND: FieldDef = FieldDef {
    name: "second",
    min: 0,
    max: 59,
    allowed: "0-59",
    names: &[],
};
const MINUTE: FieldDef = FieldDef {
    name: "minute",
    min: 0,
    max: 59,
    allowed: "0-59",
    names: &[],
};
const HOUR: FieldDef = FieldDef {
    name: "hour",
    min: 0,
    max: 23,
    allowed: "0-23",
    names: &[],
};
const DOM: FieldDef = FieldDef {
    name: "day-of-month",
    min: 1,
    max: 31,
    allowed: "1-31, L or ?",
    names: &[],
};
const MONTH: FieldDef = FieldDef {
    name: "month",
    min: 1,
    max: 12,
    allowed: "1-12 or JAN-DEC",
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const DOW: FieldDef = FieldDef {
    name: "day-of-week",
    min: 0,
    max: 7,
    allowed: "0-7 or SUN-SAT, xL, x#n (n 1-5) or ?",
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};
const YEAR: FieldDef = FieldDef {
    name: "year",
    min: YEAR_FIELD_MIN as u32,
    max: YEAR_FIELD_MAX as u32,
    allowed: "1970-2199",
    names: &[],
};

impl FieldDef {
    fn bad(&self, token: &str) -> CronError {
        CronError::BadToken {
            field: self.name,
            token: token.to_string(),
            allowed: self.allowed,
        }
    }

    fn value(&self, s: &str, item: &str) -> Result<u32, CronError> {
        let v = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse::<u32>().map_err(|_| self.bad(item))?
        } else {
            let pos = self
                .names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(s))
                .ok_or_else(|| self.bad(item))?;
            pos as u32 + if self.min == 1 { 1 } else { 0 }
        };
        if v < self.min || v > self.max {
            return Err(self.bad(item));
        }
        Ok(v)
    }

    /// Parses one comma-separated item that is a value, range or step into
    /// the set of values it selects (calls `set` for each).
    fn range_item(&self, item: &str, mut set: impl FnMut(u32)) -> Result<(), CronError> {
        let (base, step) = match item.split_once('/') {
            Some((b, s)) => {
                let step: u32 = if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) {
                    s.parse().map_err(|_| self.bad(item))?
                } else {
                    return Err(self.bad(item));
                };
                if step == 0 {
                    return Err(self.bad(item));
                }
                (b, Some(step))
            }
            None => (item, None),
        };
        let (lo, hi) = if base == "*" {
            (self.min, self.max)
        } else if let Some((a, b)) = base.split_once('-') {
            let (a, b) = (self.value(a, item)?, self.value(b, item)?);
            if a > b {
                return Err(self.bad(item));
            }
            (a, b)
        } else {
            let a = self.value(base, item)?;
            if step.is_some() {
                (a, self.max)
            } else {
                (a, a)
            }
        };
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            set(v);
            v += step;
        }
        Ok(())
    }
}

/// Parses a simple (no `L`/`#`) field into a u64 bitset.
fn simple_field(def: &FieldDef, text: &str) -> Result<u64, CronError> {
    let mut bits = 0u64;
    for item in text.split(',') {
        if item == "?" {
            return Err(def.bad(item));
        }
        def.range_item(item, |v| bits |= 1 << v)?;
    }
    Ok(bits)
}

fn expand_alias(alias: &str) -> Result<&'static str, CronError> {
    Ok(match alias.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 0 1 1 *",
        "@monthly" => "0 0 0 1 * *",
        "@weekly" => "0 0 0 * * 0",
        "@daily" | "@midnight" => "0 0 0 * * *",
        "@hourly" => "0 0 * * * *",
        _ => {
            return Err(CronError::UnknownAlias {
                alias: alias.to_string(),
            });
        }
    })
}

/// The day-of-month field: (days as bits 1..=31, `L`, whether it is `*`/`?`).
fn day_of_month_field(dom_text: &str) -> Result<(u32, bool, bool), CronError> {
    let dom_star = dom_text.starts_with('*') || dom_text == "?";
    let mut days = 0u32;
    let mut last_day = false;
    for item in dom_text.split(',') {
        if item.eq_ignore_ascii_case("L") {
            last_day = true;
        } else if item == "?" {
            if dom_text != "?" {
                return Err(DOM.bad(item));
            }
            days = !1; // bits 1..=31
        } else {
            DOM.range_item(item, |v| days |= 1 << v)?;
        }
    }
    Ok((days, last_day, dom_star))
}

/// The day-of-week field, parsed.
struct DayOfWeek {
    weekdays: u8,
    last_weekdays: u8,
    nth_weekdays: [u8; 7],
    star: bool,
}

fn day_of_week_field(dow_text: &str) -> Result<DayOfWeek, CronError> {
    let star = dow_text.starts_with('*') || dow_text == "?";
    let mut weekdays = 0u8;
    let mut last_weekdays = 0u8;
    let mut nth_weekdays = [0u8; 7];
    for item in dow_text.split(',') {
        if item == "?" {
            if dow_text != "?" {
                return Err(DOW.bad(item));
            }
            weekdays = 0x7f;
        } else if let Some((w, n)) = item.split_once('#') {
            let w = DOW.value(w, item)? % 7;
            let n = match n.as_bytes() {
                [b @ b'1'..=b'5'] => u32::from(b - b'0'),
                _ => return Err(DOW.bad(item)),
            };
            nth_weekdays[w as usize] |= 1 << n;
        } else if item.len() > 1 && (item.ends_with('L') || item.ends_with('l')) {
            let w = DOW.value(&item[..item.len() - 1], item)? % 7;
            last_weekdays |= 1 << w;
        } else {
            DOW.range_item(item, |v| weekdays |= 1 << (v % 7))?;
        }
    }
    Ok(DayOfWeek {
        weekdays,
        last_weekdays,
        nth_weekdays,
        star,
    })
}

/// For each weekday of the 1st of a month, the days of that month that
/// fall on one of `weekdays`.
fn plain_dow_masks(weekdays: u8) -> [u32; 7] {
    let mut masks = [0u32; 7];
    for (w1, mask) in masks.iter_mut().enumerate() {
        for d in 1..=31u32 {
            let w = (w1 as u32 + d - 1) % 7;
            if weekdays & (1 << w) != 0 {
                *mask |= 1 << d;
            }
        }
    }
    masks
}

impl CronExpr {
    /// Parses and validates an expression (see the module docs for the grammar).
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let trimmed = text.trim();
        let expanded;
        let fields: Vec<&str> = if trimmed.starts_with('@') {
            if trimmed.split_whitespace().count() != 1 {
                return Err(CronError::UnknownAlias {
                    alias: trimmed.to_string(),
                });
            }
            expanded = expand_alias(trimmed)?;
            expanded.split_whitespace().collect()
        } else {
            trimmed.split_whitespace().collect()
        };
        if fields.len() != 6 && fields.len() != 7 {
            return Err(CronError::FieldCount {
                count: fields.len(),
            });
        }
        let seconds = simple_field(&SECOND, fields[0])?;
        let minutes = simple_field(&MINUTE, fields[1])?;
        let hours = simple_field(&HOUR, fields[2])?;
        let months = simple_field(&MONTH, fields[4])?;

        let (days, last_day, dom_star) = day_of_month_field(fields[3])?;
        let dow = day_of_week_field(fields[5])?;
        let (weekdays, last_weekdays, nth_weekdays, dow_star) =
            (dow.weekdays, dow.last_weekdays, dow.nth_weekdays, dow.star);
        let plain_dow_masks = plain_dow_masks(weekdays);
        let years = match fields.get(6) {
            None => None,
            Some(&"*") | Some(&"?") => None,
            Some(text) => {
                let mut words = [0u64; YEAR_WORDS];
                for item in text.split(',') {
                    YEAR.range_item(item, |v| {
                        let i = (v as i32 - YEAR_FIELD_MIN) as usize;
                        words[i / 64] |= 1 << (i % 64);
                    })?;
                }
                Some(words)
            }
        };

        let expr = CronExpr {
            seconds,
            minutes,
            hours,
            days,
            last_day,
            months,
            weekdays,
            last_weekdays,
            nth_weekdays,
            dom_star,
            dow_star,
            plain_dow_masks,
            years,
        };
        if !expr.matches_some_date() {
            return Err(CronError::NeverFires {
                expr: trimmed.to_string(),
            });
        }
        Ok(expr)
    }

    /// True if some date in the year field's range (or, without a year field,
    /// in one full 400-year Gregorian cycle, after which weekdays and leap
    /// years repeat) satisfies month + day rules. Hours, minutes and seconds
    /// always have at least one value, so this decides "can ever fire".
    fn matches_some_date(&self) -> bool {
        let check_year =
            |y: i32| (1..=12u32).any(|m| self.months & (1 << m) != 0 && self.day_mask(y, m) != 0);
        match &self.years {
            Some(_) => (YEAR_FIELD_MIN..=YEAR_FIELD_MAX).any(|y| self.year_ok(y) && check_year(y)),
            None => (2000..2400).any(check_year),
        }
    }

    fn year_ok(&self, y: i32) -> bool {
        match &self.years {
            None => true,
            Some(words) => {
                if !(YEAR_FIELD_MIN..=YEAR_FIELD_MAX).contains(&y) {
                    return false;
                }
                let i = (y - YEAR_FIELD_MIN) as usize;
                words[i / 64] & (1 << (i % 64)) != 0
            }
        }
    }

    /// First year >= `y` allowed by the year field.
    fn next_year(&self, y: i32) -> Option<i32> {
        match &self.years {
            None => Some(y),
            Some(words) => {
                let mut i = (y.max(YEAR_FIELD_MIN) - YEAR_FIELD_MIN) as usize;
                while i < YEAR_WORDS * 64 {
                    let w = words[i / 64] & (!0u64 << (i % 64));
                    if w != 0 {
                        let found = (i / 64) * 64 + w.trailing_zeros() as usize;
                        return Some(YEAR_FIELD_MIN + found as i32);
                    }
                    i = (i / 64 + 1) * 64;
                }
                None
            }
        }
    }

    /// Bits 1..=31: the days of `month` in `year` that match the day rules.
    fn day_mask(&self, year: i32, month: u32) -> u32 {
        let dim = days_in_month(year, month);
        let valid: u32 = (((1u64 << (dim + 1)) - 1) as u32) & !1;
        let w1 = weekday(year, month, 1);
        let dom = (self.days | if self.last_day { 1 << dim } else { 0 }) & valid;
        let mut dow = self.plain_dow_masks[w1 as usize];
        if self.last_weekdays != 0 {
            let wlast = (w1 + dim - 1) % 7;
            for w in 0..7u32 {
                if self.last_weekdays & (1 << w) != 0 {
                    dow |= 1 << (dim - (wlast + 7 - w) % 7);
                }
            }
        }
        for (w, &nth) in self.nth_weekdays.iter().enumerate() {
            if nth != 0 {
                let first = 1 + (w as u32 + 7 - w1) % 7;
                for n in 1..=5u32 {
                    if nth & (1 << n) != 0 {
                        let d = first + 7 * (n - 1);
                        if d <= dim {
                            dow |= 1 << d;
                        }
                    }
                }
            }
        }
        dow &= valid;
        if self.dom_star || self.dow_star {
            dom & dow
        } else {
            dom | dow
        }
    }

    /// The first matching wall-clock second at or after `start`, or `None`
    /// past [`MAX_YEAR`] / past the year field's last year.
    pub(super) fn next_match(&self, start: Civil) -> Option<Civil> {
        let mut c = start;
        loop {
            if c.year > MAX_YEAR {
                return None;
            }
            if self.years.is_some() {
                let y = self.next_year(c.year)?;
                if y != c.year {
                    c = Civil::year_start(y);
                }
            }
            match next_bit(self.months, c.month) {
                None => {
                    c = Civil::year_start(c.year + 1);
                    continue;
                }
                Some(m) if m != c.month => {
                    c = Civil {
                        month: m,
                        day: 1,
                        hour: 0,
                        minute: 0,
                        second: 0,
                        ..c
                    };
                }
                Some(_) => {}
            }
            match next_bit(u64::from(self.day_mask(c.year, c.month)), c.day) {
                None => {
                    c = c.next_month_start();
                    continue;
                }
                Some(d) if d != c.day => {
                    c = Civil {
                        day: d,
                        hour: 0,
                        minute: 0,
                        second: 0,
                        ..c
                    };
                }
                Some(_) => {}
            }
            match next_bit(self.hours, c.hour) {
                None => {
                    c = c.next_day_start();
                    continue;
                }
                Some(h) if h != c.hour => {
                    c = Civil {
                        hour: h,
                        minute: 0,
                        second: 0,
                        ..c
                    };
                }
                Some(_) => {}
            }
            match next_bit(self.minutes, c.minute) {
                None => {
                    c = c.next_hour_start();
                    continue;
                }
                Some(m) if m != c.minute => {
                    c = Civil {
                        minute: m,
                        second: 0,
                        ..c
                    };
                }
                Some(_) => {}
            }
            match next_bit(self.seconds, c.second) {
                None => {
                    c = c.next_minute_start();
                    continue;
                }
                Some(s) => {
                    c.second = s;
                    return Some(c);
                }
            }
        }
    }
}

impl fmt::Display for Civil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(year: i32, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Civil {
        Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
        }
    }

    #[test]
    fn bad_hour_token_names_field_token_and_range() {
        let err = CronExpr::parse("0 0 25 * * *").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cron field 'hour' has bad token '25' (allowed 0-23)"
        );
    }

    #[test]
    fn bad_tokens_in_every_field_name_that_field() {
        let cases = [
            ("60 * * * * *", "second", "60"),
            ("* 5-3 * * * *", "minute", "5-3"),
            ("* * 1,,2 * * *", "hour", ""),
            ("* * * 0 * *", "day-of-month", "0"),
            ("* * * 32 * *", "day-of-month", "32"),
            ("* * * * 13 *", "month", "13"),
            ("* * * * FOO *", "month", "FOO"),
            ("* * * * * 8", "day-of-week", "8"),
            ("* * * * * MON#6", "day-of-week", "MON#6"),
            ("* * * * * L", "day-of-week", "L"),
            ("*/0 * * * * *", "second", "*/0"),
            ("* * ? * * *", "hour", "?"),
            ("* * * 1,? * *", "day-of-month", "?"),
            ("* * * * * * 1969", "year", "1969"),
            ("* * * * * * 2200", "year", "2200"),
            ("* * * * * * x", "year", "x"),
            ("1/x * * * * *", "second", "1/x"),
        ];
        for (expr, field, token) in cases {
            match CronExpr::parse(expr) {
                Err(CronError::BadToken {
                    field: f, token: t, ..
                }) => {
                    assert_eq!((f, t.as_str()), (field, token), "{expr}");
                }
                other => panic!("{expr}: expected BadToken, got {other:?}"),
            }
        }
    }

    #[test]
    fn wrong_field_count_names_the_count() {
        let err = CronExpr::parse("0 30 2 * *").unwrap_err();
        assert_eq!(err, CronError::FieldCount { count: 5 });
        assert!(err.to_string().contains("has 5 fields"), "{err}");
        assert_eq!(
            CronExpr::parse("0 0 0 1 1 * 2030 x").unwrap_err(),
            CronError::FieldCount { count: 8 }
        );
        assert_eq!(
            CronExpr::parse("   ").unwrap_err(),
            CronError::FieldCount { count: 0 }
        );
    }

    #[test]
    fn february_thirtieth_is_rejected_as_never_firing() {
        let err = CronExpr::parse("0 0 0 30 2 *").unwrap_err();
        assert!(matches!(err, CronError::NeverFires { .. }));
        assert!(err.to_string().starts_with("schedule never fires"), "{err}");
        // Also with a year field whose years hold no such date.
        assert!(matches!(
            CronExpr::parse("0 0 0 29 2 * 2025-2027"),
            Err(CronError::NeverFires { .. })
        ));
        // But Feb 29 is fine: it recurs every four years.
        assert!(CronExpr::parse("0 0 0 29 2 *").is_ok());
        assert!(CronExpr::parse("0 0 0 29 2 * 2028").is_ok());
    }

    #[test]
    fn unknown_alias_is_rejected_by_name() {
        let err = CronExpr::parse("@fortnightly").unwrap_err();
        assert_eq!(
            err,
            CronError::UnknownAlias {
                alias: "@fortnightly".into()
            }
        );
    }

    #[test]
    fn aliases_expand_to_second_zero_forms() {
        let pairs = [
            ("@yearly", "0 0 0 1 1 *"),
            ("@annually", "0 0 0 1 1 *"),
            ("@monthly", "0 0 0 1 * *"),
            ("@weekly", "0 0 0 * * 0"),
            ("@daily", "0 0 0 * * *"),
            ("@midnight", "0 0 0 * * *"),
            ("@hourly", "0 0 * * * *"),
            ("@HOURLY", "0 0 * * * *"),
        ];
        for (alias, long) in pairs {
            assert_eq!(
                CronExpr::parse(alias).unwrap(),
                CronExpr::parse(long).unwrap(),
                "{alias}"
            );
        }
    }

    #[test]
    fn names_are_case_insensitive_and_equal_numbers() {
        assert_eq!(
            CronExpr::parse("0 0 0 * jan-Mar mon,WED,fri").unwrap(),
            CronExpr::parse("0 0 0 * 1-3 1,3,5").unwrap()
        );
        assert_eq!(
            CronExpr::parse("0 0 0 * * 7").unwrap(),
            CronExpr::parse("0 0 0 * * SUN").unwrap()
        );
        assert_eq!(
            CronExpr::parse("0 0 0 * * 5-7").unwrap(),
            CronExpr::parse("0 0 0 * * 0,5,6").unwrap()
        );
    }

    #[test]
    fn next_match_jumps_by_field() {
        let e = CronExpr::parse("0 30 2 * * *").unwrap();
        assert_eq!(
            e.next_match(c(2027, 3, 14, 2, 30, 1)),
            Some(c(2027, 3, 15, 2, 30, 0))
        );
        let e = CronExpr::parse("*/10 * * * * *").unwrap();
        assert_eq!(
            e.next_match(c(2026, 12, 31, 23, 59, 51)),
            Some(c(2027, 1, 1, 0, 0, 0))
        );
        let e = CronExpr::parse("0 0 0 29 2 *").unwrap();
        assert_eq!(
            e.next_match(c(2024, 2, 29, 0, 0, 1)),
            Some(c(2028, 2, 29, 0, 0, 0))
        );
    }

    #[test]
    fn last_day_last_weekday_and_nth_weekday_match_the_calendar() {
        let e = CronExpr::parse("0 0 0 L * *").unwrap();
        assert_eq!(
            e.next_match(c(2028, 2, 1, 0, 0, 0)),
            Some(c(2028, 2, 29, 0, 0, 0))
        );
        assert_eq!(
            e.next_match(c(2027, 2, 1, 0, 0, 0)),
            Some(c(2027, 2, 28, 0, 0, 0))
        );
        // Last Friday of 2027-01 is the 29th; 2nd Monday is the 11th.
        let e = CronExpr::parse("0 0 0 ? * 5L").unwrap();
        assert_eq!(
            e.next_match(c(2027, 1, 1, 0, 0, 0)),
            Some(c(2027, 1, 29, 0, 0, 0))
        );
        let e = CronExpr::parse("0 0 0 ? * MON#2").unwrap();
        assert_eq!(
            e.next_match(c(2027, 1, 1, 0, 0, 0)),
            Some(c(2027, 1, 11, 0, 0, 0))
        );
    }

    #[test]
    fn restricted_day_of_month_and_day_of_week_match_either() {
        // 2027-01: the 1st is a Friday; Mondays are 4, 11, 18, 25.
        let e = CronExpr::parse("0 0 0 15 * MON").unwrap();
        let mut t = c(2027, 1, 1, 0, 0, 0);
        let mut days = vec![];
        while let Some(m) = e.next_match(t) {
            if m.month != 1 {
                break;
            }
            days.push(m.day);
            t = m.succ();
        }
        assert_eq!(days, vec![4, 11, 15, 18, 25]);
        // A star-led day-of-month means AND: odd days that are Mondays.
        let e = CronExpr::parse("0 0 0 */2 * MON").unwrap();
        let m = e.next_match(c(2027, 1, 1, 0, 0, 0)).unwrap();
        assert_eq!(m, c(2027, 1, 11, 0, 0, 0));
    }

    #[test]
    fn year_field_limits_the_search_and_ends_it() {
        let e = CronExpr::parse("0 0 12 1 1 * 2030,2032").unwrap();
        assert_eq!(
            e.next_match(c(2026, 5, 1, 0, 0, 0)),
            Some(c(2030, 1, 1, 12, 0, 0))
        );
        assert_eq!(
            e.next_match(c(2030, 1, 1, 12, 0, 1)),
            Some(c(2032, 1, 1, 12, 0, 0))
        );
        assert_eq!(e.next_match(c(2032, 1, 1, 12, 0, 1)), None);
    }

    #[test]
    fn weekday_agrees_with_chrono() {
        use chrono::Datelike;
        for y in [1900, 1970, 2000, 2026, 2027, 2100, 2400] {
            for m in 1..=12 {
                let d = chrono::NaiveDate::from_ymd_opt(y, m, 1).unwrap();
                assert_eq!(
                    weekday(y, m, 1),
                    d.weekday().num_days_from_sunday(),
                    "{y}-{m}"
                );
            }
        }
    }
}
