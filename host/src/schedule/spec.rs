//! `ScheduleSpec`: the `[schedule]` table of a job manifest, validated, plus
//! its canonical serialization (the plan version's digest is computed over it).
//!
//! ```toml
//! [schedule]
//! kind = "cron"                 # cron | interval | at | manual (default manual)
//! cron = "0 30 2 * * *"         # kind = "cron": 6 or 7 fields, see cron.rs
//! timezone = "America/New_York" # kind = "cron": IANA zone, default "UTC"
//! # every = "90s"               # kind = "interval": s/m/h/d, may combine: 1h30m
//! # anchor = "2027-01-01T00:00:00Z" # kind = "interval": phase, default Unix epoch
//! # at = "2027-01-01T00:00:00Z" # kind = "at"
//! start = "2027-01-01T00:00:00Z" # optional, inclusive
//! end = "2028-01-01T00:00:00Z"   # optional, exclusive
//! misfire = "skip"              # skip | latest | all | manual
//! misfire_threshold = "60s"     # later than this counts as missed
//! catchup_window = "1h"         # misfire = "all": how far back to catch up
//! max_catchup = 100             # more catch-up fires than this → parked for approval
//! max_in_flight = 1
//! overlap = "forbid"            # allow | forbid | replace
//! ```
//!
//! Invariants kept:
//! - deserializing rejects unknown fields, fields of another `kind`, missing
//!   required fields, bad values (each error names the field), and schedules
//!   that can never fire within `[start, end)`; a `ScheduleSpec` obtained
//!   from serde therefore always compiles with [`ScheduleSpec::compile`];
//! - [`ScheduleSpec::canonical_json`] is a pure function of the *meaning*:
//!   every default is written out, timestamps are UTC RFC 3339 with `Z` and
//!   whole seconds, durations use one normal form (`90s` → `1m30s`), cron
//!   text has its whitespace collapsed, fields appear in a fixed order.
//!   Equal meaning of these forms ⇒ equal bytes ⇒ equal digest.
//!
//! Time values are whole seconds in `[1970-01-01T00:00:00Z, 9999-12-31T23:59:59Z]`.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use super::cron::CronExpr;
use super::error::ScheduleError;
use super::occurrences::Schedule;

/// Largest accepted duration: about 317 years.
const MAX_SPAN_SECS: u64 = 10_000_000_000;

/// A non-negative whole number of seconds written with units (`90s`, `5m`,
/// `1h30m`, `2d`). `d` is 86 400 s (not a calendar day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(u64);

impl Span {
    /// A span of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Span(secs)
    }

    /// Length in seconds.
    pub const fn as_secs(self) -> u64 {
        self.0
    }

    /// As a chrono duration.
    pub fn as_delta(self) -> TimeDelta {
        TimeDelta::seconds(self.0 as i64)
    }

    /// Parses `90s`, `5m`, `1h30m`, `2d`, `0s`: one or more `<digits><unit>`
    /// with units in strictly decreasing order (d, h, m, s).
    pub fn parse(text: &str) -> Option<Self> {
        let mut rest = text.trim().as_bytes();
        if rest.is_empty() {
            return None;
        }
        let mut total: u64 = 0;
        let mut last_rank = usize::MAX;
        while !rest.is_empty() {
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 || digits > 12 || digits >= rest.len() {
                return None;
            }
            let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
            let (rank, unit) = match rest[digits] {
                b'd' => (3, 86_400),
                b'h' => (2, 3_600),
                b'm' => (1, 60),
                b's' => (0, 1),
                _ => return None,
            };
            if rank >= last_rank {
                return None;
            }
            last_rank = rank;
            total = total.checked_add(n.checked_mul(unit)?)?;
            rest = &rest[digits + 1..];
        }
        (total <= MAX_SPAN_SECS).then_some(Span(total))
    }
}

impl fmt::Display for Span {
    /// Canonical form: nonzero components largest first (`1d2h`, `1m30s`), `0s` for zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.0;
        for (unit, suffix) in [(86_400, 'd'), (3_600, 'h'), (60, 'm'), (1, 's')] {
            if rest >= unit {
                write!(f, "{}{}", rest / unit, suffix)?;
                rest %= unit;
            }
        }
        Ok(())
    }
}

/// Which kind of trigger a schedule produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Cron expression in a time zone.
    Cron,
    /// Fixed interval.
    Interval,
    /// One instant.
    At,
    /// Never fires by itself (only manual runs).
    #[default]
    Manual,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cron => "cron",
            Kind::Interval => "interval",
            Kind::At => "at",
            Kind::Manual => "manual",
        }
    }
}

/// What to do with fire times that were missed (see `misfire.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MisfirePolicy {
    /// Missed times are skipped (counted).
    #[default]
    Skip,
    /// Only the most recent missed time fires.
    Latest,
    /// Every missed time within `catchup_window` fires.
    All,
    /// Missed times are parked for approval.
    Manual,
}

/// What to do when a fire time arrives while runs are in flight (see `overlap.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverlapPolicy {
    /// Run concurrently up to `max_in_flight`; beyond that, wait for a slot.
    Allow,
    /// At `max_in_flight`, the new run is skipped.
    #[default]
    Forbid,
    /// At `max_in_flight`, the oldest run is cancelled and the new one starts.
    Replace,
}

/// When the schedule fires.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TriggerSpec {
    /// Cron with seconds, evaluated in the local wall time of `timezone`.
    Cron {
        /// Expression text, whitespace collapsed.
        cron: String,
        /// IANA zone.
        timezone: Tz,
    },
    /// Every `every`, at `anchor + k * every` for every integer k.
    Interval {
        /// Period, at least one second.
        every: Span,
        /// Phase of the grid (default the Unix epoch); not a start bound.
        anchor: DateTime<Utc>,
    },
    /// Exactly once.
    At {
        /// The instant.
        at: DateTime<Utc>,
    },
    /// Never by itself.
    #[default]
    Manual,
}

impl TriggerSpec {
    /// The manifest `kind` of this trigger.
    pub fn kind(&self) -> Kind {
        match self {
            TriggerSpec::Cron { .. } => Kind::Cron,
            TriggerSpec::Interval { .. } => Kind::Interval,
            TriggerSpec::At { .. } => Kind::At,
            TriggerSpec::Manual => Kind::Manual,
        }
    }
}

/// Misfire handling, fixed in the plan version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MisfireSpec {
    /// Policy (default `skip`).
    pub policy: MisfirePolicy,
    /// A fire time older than `now - threshold` is missed (default 60 s).
    pub threshold: Span,
    /// `all`: missed times older than `now - catchup_window` are skipped (default 1 h).
    pub catchup_window: Span,
    /// More catch-up fires than this are parked for approval instead (default 100).
    pub max_catchup: u32,
}

impl Default for MisfireSpec {
    fn default() -> Self {
        MisfireSpec {
            policy: MisfirePolicy::Skip,
            threshold: Span(60),
            catchup_window: Span(3_600),
            max_catchup: 100,
        }
    }
}

/// Overlap handling per job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlapSpec {
    /// Policy (default `forbid`: with the default `max_in_flight = 1` a slow
    /// job never piles up a queue; skipped runs are counted).
    pub policy: OverlapPolicy,
    /// Concurrent runs allowed, at least 1 (default 1).
    pub max_in_flight: u32,
}

impl Default for OverlapSpec {
    fn default() -> Self {
        OverlapSpec {
            policy: OverlapPolicy::Forbid,
            max_in_flight: 1,
        }
    }
}

/// A validated `[schedule]` table. `Default` is what an absent table means:
/// manual, with every default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "RawSpec", into = "RawSpec")]
pub struct ScheduleSpec {
    /// When it fires.
    pub trigger: TriggerSpec,
    /// Inclusive lower bound on fire times.
    pub start: Option<DateTime<Utc>>,
    /// Exclusive upper bound on fire times.
    pub end: Option<DateTime<Utc>>,
    /// Misfire handling.
    pub misfire: MisfireSpec,
    /// Overlap handling.
    pub overlap: OverlapSpec,
}

impl ScheduleSpec {
    /// The schedule a plan fires on (stored canonical in the plan spec).
    pub fn of_plan(plan: &crate::model::PlanSpec) -> Result<Self, String> {
        serde_json::from_value(plan.schedule.clone())
            .map_err(|e| format!("stored schedule unreadable: {e}"))
    }

    /// Compiles into an evaluator. Re-checks everything deserialization
    /// checks, so a hand-built spec gets the same errors.
    pub fn compile(&self) -> Result<Schedule, ScheduleError> {
        Schedule::new(self)
    }

    /// Canonical JSON (see the module header): the input of the plan-version digest.
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(&RawSpec::from(self.clone())).expect("RawSpec always serializes")
    }

    /// Checks field-level rules that are not about firing (bounds order,
    /// `max_in_flight`, interval length, ...). Firing is checked by [`Schedule::new`].
    pub(super) fn check_fields(&self) -> Result<(), ScheduleError> {
        if let (Some(s), Some(e)) = (self.start, self.end)
            && s >= e
        {
            return Err(ScheduleError::Invalid {
                field: "end",
                reason: format!(
                    "end {} is not after start {}",
                    fmt_instant(e),
                    fmt_instant(s)
                ),
            });
        }
        if self.overlap.max_in_flight == 0 {
            return Err(ScheduleError::Invalid {
                field: "max_in_flight",
                reason: "must be at least 1".into(),
            });
        }
        use crate::model::bounds::{Bound, MAX_CATCHUP, SCHEDULE_MAX_IN_FLIGHT};
        for (bound, value) in [
            (&SCHEDULE_MAX_IN_FLIGHT, self.overlap.max_in_flight),
            (&MAX_CATCHUP, self.misfire.max_catchup),
        ] {
            let bound: &Bound = bound;
            if let Err(refusal) = bound.check(i64::from(value)) {
                return Err(ScheduleError::Invalid {
                    field: bound.field,
                    reason: refusal
                        .split_once(" must ")
                        .map_or(refusal.clone(), |(_, rest)| format!("must {rest}")),
                });
            }
        }
        if let TriggerSpec::Interval { every, .. } = &self.trigger
            && every.as_secs() == 0
        {
            return Err(ScheduleError::Invalid {
                field: "every",
                reason: "must be at least 1s".into(),
            });
        }
        let mut stamps = vec![("start", self.start), ("end", self.end)];
        match &self.trigger {
            TriggerSpec::Interval { anchor, .. } => stamps.push(("anchor", Some(*anchor))),
            TriggerSpec::At { at } => stamps.push(("at", Some(*at))),
            _ => {}
        }
        for (field, t) in stamps {
            if let Some(t) = t {
                check_instant(field, t, &fmt_instant(t))?;
            }
        }
        Ok(())
    }
}

pub use crate::model::time::fmt_instant;

fn check_instant(field: &'static str, t: DateTime<Utc>, text: &str) -> Result<(), ScheduleError> {
    let bad = |reason| ScheduleError::BadTimestamp {
        field,
        value: text.to_string(),
        reason,
    };
    if t.timestamp_subsec_nanos() != 0 {
        return Err(bad("must be a whole second"));
    }
    if t < super::MIN_INSTANT || t > super::MAX_INSTANT {
        return Err(bad(
            "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
        ));
    }
    Ok(())
}

fn parse_instant(field: &'static str, text: &str) -> Result<DateTime<Utc>, ScheduleError> {
    let t = DateTime::parse_from_rfc3339(text.trim())
        .map_err(|_| ScheduleError::BadTimestamp {
            field,
            value: text.to_string(),
            reason: "expected RFC 3339, e.g. 2027-01-01T00:00:00Z",
        })?
        .with_timezone(&Utc);
    check_instant(field, t, text)?;
    Ok(t)
}

fn parse_span(field: &'static str, text: &str) -> Result<Span, ScheduleError> {
    Span::parse(text).ok_or_else(|| ScheduleError::BadDuration {
        field,
        value: text.to_string(),
    })
}

/// The key under which the `toml` crate passes a native TOML datetime
/// (`at = 2027-01-01T00:00:00Z`, unquoted) through serde: a one-entry map.
const TOML_DATETIME_KEY: &str = "$__toml_private_datetime";

/// A timestamp as written in the manifest: a string, or a native TOML
/// datetime. Parsed (and its offset required) by `parse_instant`.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
struct StampText(String);

impl<'de> Deserialize<'de> for StampText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StampText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp (string or TOML datetime)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StampText, E> {
                Ok(StampText(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<StampText, A::Error> {
                match map.next_entry::<String, String>()? {
                    Some((k, v))
                        if k == TOML_DATETIME_KEY && map.next_key::<String>()?.is_none() =>
                    {
                        Ok(StampText(v))
                    }
                    _ => Err(serde::de::Error::custom(
                        "expected an RFC 3339 timestamp (string or TOML datetime), found a table",
                    )),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The wire shape: flat, every field optional, unknown fields rejected.
/// Serialized with every default filled in, this is the canonical form.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    kind: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anchor: Option<StampText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<StampText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<StampText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<StampText>,
    misfire: Option<MisfirePolicy>,
    misfire_threshold: Option<String>,
    catchup_window: Option<String>,
    max_catchup: Option<u32>,
    max_in_flight: Option<u32>,
    overlap: Option<OverlapPolicy>,
}

impl TryFrom<RawSpec> for ScheduleSpec {
    type Error = ScheduleError;

    fn try_from(raw: RawSpec) -> Result<Self, Self::Error> {
        let kind = raw.kind.unwrap_or_default();
        let k = kind.name();
        // Fields that belong to one kind only.
        let owned: [(&'static str, bool, Kind); 5] = [
            ("cron", raw.cron.is_some(), Kind::Cron),
            ("timezone", raw.timezone.is_some(), Kind::Cron),
            ("every", raw.every.is_some(), Kind::Interval),
            ("anchor", raw.anchor.is_some(), Kind::Interval),
            ("at", raw.at.is_some(), Kind::At),
        ];
        for (field, present, owner) in owned {
            if present && owner != kind {
                return Err(ScheduleError::UnexpectedField { kind: k, field });
            }
        }
        let missing = |field| ScheduleError::MissingField { kind: k, field };
        let trigger = match kind {
            Kind::Cron => {
                let text = raw.cron.ok_or_else(|| missing("cron"))?;
                CronExpr::parse(&text)?;
                let zone = raw.timezone.unwrap_or_else(|| "UTC".to_string());
                let timezone = Tz::from_str(zone.trim())
                    .map_err(|_| ScheduleError::UnknownTimezone(zone.clone()))?;
                TriggerSpec::Cron {
                    cron: text.split_whitespace().collect::<Vec<_>>().join(" "),
                    timezone,
                }
            }
            Kind::Interval => TriggerSpec::Interval {
                every: parse_span("every", &raw.every.ok_or_else(|| missing("every"))?)?,
                anchor: match raw.anchor {
                    Some(a) => parse_instant("anchor", &a.0)?,
                    None => DateTime::UNIX_EPOCH,
                },
            },
            Kind::At => TriggerSpec::At {
                at: parse_instant("at", &raw.at.ok_or_else(|| missing("at"))?.0)?,
            },
            Kind::Manual => TriggerSpec::Manual,
        };
        let d = MisfireSpec::default();
        let spec = ScheduleSpec {
            trigger,
            start: raw
                .start
                .map(|s| parse_instant("start", &s.0))
                .transpose()?,
            end: raw.end.map(|s| parse_instant("end", &s.0)).transpose()?,
            misfire: MisfireSpec {
                policy: raw.misfire.unwrap_or(d.policy),
                threshold: raw
                    .misfire_threshold
                    .map(|s| parse_span("misfire_threshold", &s))
                    .transpose()?
                    .unwrap_or(d.threshold),
                catchup_window: raw
                    .catchup_window
                    .map(|s| parse_span("catchup_window", &s))
                    .transpose()?
                    .unwrap_or(d.catchup_window),
                max_catchup: raw.max_catchup.unwrap_or(d.max_catchup),
            },
            overlap: OverlapSpec {
                policy: raw.overlap.unwrap_or_default(),
                max_in_flight: raw.max_in_flight.unwrap_or(1),
            },
        };
        // Compiling checks field rules and that the schedule can fire.
        spec.compile()?;
        Ok(spec)
    }
}

impl From<ScheduleSpec> for RawSpec {
    fn from(s: ScheduleSpec) -> Self {
        let mut raw = RawSpec {
            kind: Some(s.trigger.kind()),
            start: s.start.map(|t| StampText(fmt_instant(t))),
            end: s.end.map(|t| StampText(fmt_instant(t))),
            misfire: Some(s.misfire.policy),
            misfire_threshold: Some(s.misfire.threshold.to_string()),
            catchup_window: Some(s.misfire.catchup_window.to_string()),
            max_catchup: Some(s.misfire.max_catchup),
            max_in_flight: Some(s.overlap.max_in_flight),
            overlap: Some(s.overlap.policy),
            ..RawSpec::default()
        };
        match s.trigger {
            TriggerSpec::Cron { cron, timezone } => {
                raw.cron = Some(cron);
                raw.timezone = Some(timezone.name().to_string());
            }
            TriggerSpec::Interval { every, anchor } => {
                raw.every = Some(every.to_string());
                raw.anchor = Some(StampText(fmt_instant(anchor)));
            }
            TriggerSpec::At { at } => raw.at = Some(StampText(fmt_instant(at))),
            TriggerSpec::Manual => {}
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_json(v: serde_json::Value) -> Result<ScheduleSpec, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn spans_parse_with_units_and_print_canonically() {
        for (text, secs, canon) in [
            ("90s", 90, "1m30s"),
            ("5m", 300, "5m"),
            ("2h", 7_200, "2h"),
            ("1d", 86_400, "1d"),
            ("1h30m", 5_400, "1h30m"),
            ("0s", 0, "0s"),
            ("1d1s", 86_401, "1d1s"),
        ] {
            let s = Span::parse(text).unwrap();
            assert_eq!(s.as_secs(), secs, "{text}");
            assert_eq!(s.to_string(), canon, "{text}");
            assert_eq!(Span::parse(canon), Some(s));
        }
        for bad in [
            "",
            "90",
            "s",
            "1x",
            "1m1h",
            "1s1s",
            "-5s",
            "1.5h",
            "99999999999999d",
        ] {
            assert_eq!(Span::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn absent_table_means_manual_with_defaults() {
        let spec = ScheduleSpec::default();
        assert_eq!(spec.trigger, TriggerSpec::Manual);
        assert_eq!(from_json(serde_json::json!({})).unwrap(), spec);
        assert_eq!(
            spec.canonical_json(),
            r#"{"kind":"manual","misfire":"skip","misfire_threshold":"1m","catchup_window":"1h","max_catchup":100,"max_in_flight":1,"overlap":"forbid"}"#
        );
    }

    #[test]
    fn cron_spec_canonical_json_fills_in_every_default() {
        let spec = from_json(serde_json::json!({
            "kind": "cron", "cron": "  0 30   2 * * * ", "timezone": "America/New_York"
        }))
        .unwrap();
        assert_eq!(
            spec.canonical_json(),
            r#"{"kind":"cron","cron":"0 30 2 * * *","timezone":"America/New_York","misfire":"skip","misfire_threshold":"1m","catchup_window":"1h","max_catchup":100,"max_in_flight":1,"overlap":"forbid"}"#
        );
        // Canonical JSON reads back to the same spec.
        let again: ScheduleSpec = serde_json::from_str(&spec.canonical_json()).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn equal_meaning_gives_equal_canonical_json() {
        let a = from_json(serde_json::json!({
            "kind": "interval", "every": "90s", "start": "2027-01-01T01:00:00+01:00"
        }))
        .unwrap();
        let b = from_json(serde_json::json!({
            "kind": "interval", "every": "1m30s", "anchor": "1970-01-01T00:00:00Z",
            "start": "2027-01-01T00:00:00Z", "misfire": "skip", "misfire_threshold": "60s",
            "overlap": "forbid", "max_in_flight": 1
        }))
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.canonical_json(), b.canonical_json());
        assert!(
            a.canonical_json()
                .contains(r#""start":"2027-01-01T00:00:00Z""#)
        );
    }

    #[test]
    fn native_toml_datetimes_are_accepted_like_strings() {
        // What the `toml` crate hands serde for `at = 2027-01-01T01:00:00+01:00`.
        let spec = from_json(serde_json::json!({
            "kind": "at", "at": {"$__toml_private_datetime": "2027-01-01T01:00:00+01:00"}
        }))
        .unwrap();
        assert_eq!(
            spec.trigger,
            TriggerSpec::At {
                at: "2027-01-01T00:00:00Z".parse().unwrap()
            }
        );
        // A local datetime (no offset) is rejected: the instant would be ambiguous.
        let e = from_json(serde_json::json!({
            "kind": "at", "at": {"$__toml_private_datetime": "2027-01-01T00:00:00"}
        }))
        .unwrap_err();
        assert!(e.contains("expected RFC 3339"), "{e}");
        // Any other table is not a timestamp.
        let e =
            from_json(serde_json::json!({"kind": "at", "at": {"when": "2027-01-01T00:00:00Z"}}))
                .unwrap_err();
        assert!(e.contains("found a table"), "{e}");
    }

    #[test]
    fn cron_defaults_to_utc_zone() {
        let spec = from_json(serde_json::json!({"kind": "cron", "cron": "@daily"})).unwrap();
        assert!(matches!(
            spec.trigger,
            TriggerSpec::Cron {
                timezone: Tz::UTC,
                ..
            }
        ));
    }

    #[test]
    fn unknown_fields_and_fields_of_another_kind_are_rejected() {
        let e = from_json(serde_json::json!({"kind": "cron", "cron": "@daily", "tz": "UTC"}))
            .unwrap_err();
        assert!(e.contains("unknown field `tz`"), "{e}");
        let e = from_json(serde_json::json!({"kind": "interval", "every": "1m", "cron": "@daily"}))
            .unwrap_err();
        assert_eq!(e, "schedule kind 'interval' does not take field 'cron'");
        let e = from_json(serde_json::json!({"every": "1m"})).unwrap_err();
        assert_eq!(e, "schedule kind 'manual' does not take field 'every'");
    }

    #[test]
    fn missing_required_fields_are_named() {
        for (kind, field) in [("cron", "cron"), ("interval", "every"), ("at", "at")] {
            let e = from_json(serde_json::json!({ "kind": kind })).unwrap_err();
            assert_eq!(
                e,
                format!("schedule kind '{kind}' requires field '{field}'")
            );
        }
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            (
                serde_json::json!({"kind": "cron", "cron": "0 0 25 * * *"}),
                "cron field 'hour' has bad token '25' (allowed 0-23)",
            ),
            (
                serde_json::json!({"kind": "cron", "cron": "0 0 0 30 2 *"}),
                "schedule never fires: cron expression '0 0 0 30 2 *' matches no date",
            ),
            (
                serde_json::json!({"kind": "cron", "cron": "@daily", "timezone": "Mars/Olympus"}),
                "schedule field 'timezone' has unknown IANA time zone 'Mars/Olympus'",
            ),
            (
                serde_json::json!({"kind": "interval", "every": "90"}),
                "schedule field 'every' has bad duration '90' (expected a whole number of seconds written like 90s, 5m, 1h30m or 2d)",
            ),
            (
                serde_json::json!({"kind": "interval", "every": "0s"}),
                "schedule field 'every' is invalid: must be at least 1s",
            ),
            (
                serde_json::json!({"kind": "at", "at": "tomorrow"}),
                "schedule field 'at' has bad timestamp 'tomorrow': expected RFC 3339, e.g. 2027-01-01T00:00:00Z",
            ),
            (
                serde_json::json!({"kind": "at", "at": "2027-01-01T00:00:00.5Z"}),
                "schedule field 'at' has bad timestamp '2027-01-01T00:00:00.5Z': must be a whole second",
            ),
            (
                serde_json::json!({"max_in_flight": 0}),
                "schedule field 'max_in_flight' is invalid: must be at least 1",
            ),
            (
                serde_json::json!({"start": "2027-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}),
                "schedule field 'end' is invalid: end 2027-01-01T00:00:00Z is not after start 2027-01-01T00:00:00Z",
            ),
        ];
        for (json, want) in cases {
            assert_eq!(from_json(json.clone()).unwrap_err(), want, "{json}");
        }
        let e = from_json(serde_json::json!({"misfire": "sometimes"})).unwrap_err();
        assert!(e.contains("unknown variant `sometimes`"), "{e}");
    }

    #[test]
    fn schedules_with_no_fire_time_inside_their_bounds_are_rejected() {
        let cases = [
            serde_json::json!({"kind": "at", "at": "2027-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}),
            serde_json::json!({"kind": "interval", "every": "1h",
                "start": "2027-01-01T00:00:01Z", "end": "2027-01-01T00:59:59Z"}),
            serde_json::json!({"kind": "cron", "cron": "0 0 0 1 1 *",
                "start": "2027-01-02T00:00:00Z", "end": "2027-12-31T00:00:00Z"}),
            serde_json::json!({"kind": "cron", "cron": "0 0 0 1 1 * 2030", "end": "2029-01-01T00:00:00Z"}),
        ];
        for json in cases {
            let e = from_json(json.clone()).unwrap_err();
            assert!(e.starts_with("schedule never fires"), "{json}: {e}");
        }
    }
}
