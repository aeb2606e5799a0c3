//! Scanner arithmetic: plan keys, shard assignment, scan windows and the
//! watermark rule (DESIGN §2 identities, §5 scanning).
//!
//! Invariants kept:
//! - a plan key is `job_id @ scheduled_at @ v<version> [# partition]` with
//!   `scheduled_at` in UTC RFC 3339, seconds precision, `Z` suffix
//!   (`nightly@2027-03-14T07:00:00Z@v3#eu`); [`PlanKey::parse`] inverts
//!   [`plan_key`] for every job id that does not itself contain
//!   `@<timestamp>@v<digits>`;
//! - [`shard_of`] is FNV-1a 64 of the job id's UTF-8 bytes modulo the shard
//!   count: stable across Rust releases, platforms and processes (pinned by
//!   tests), unlike `std`'s `DefaultHasher`;
//! - a scan covers the half-open window `[watermark - overlap, now + lookahead)`
//!   (`[now - initial_lookback, now + lookahead)` with no watermark yet); the
//!   new watermark is the window's end, never moved backwards, so consecutive
//!   windows overlap by at least `overlap` and leave no gap.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};

use super::error::ScheduleError;
use super::spec::fmt_instant;

/// Formats a plan key: `job@2027-03-14T07:00:00Z@v3#p`. Sub-second parts of
/// `scheduled_at` are dropped (schedules only produce whole seconds).
pub fn plan_key(
    job_id: &str,
    scheduled_at: DateTime<Utc>,
    version: u32,
    partition: Option<&str>,
) -> String {
    let mut key = format!("{job_id}@{}@v{version}", fmt_instant(scheduled_at));
    if let Some(p) = partition {
        key.push('#');
        key.push_str(p);
    }
    key
}

/// A parsed plan key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanKey {
    /// Job id.
    pub job_id: String,
    /// Scheduled instant (whole seconds, UTC).
    pub scheduled_at: DateTime<Utc>,
    /// Plan version.
    pub version: u32,
    /// Optional partition.
    pub partition: Option<String>,
}

impl PlanKey {
    /// Parses `job@YYYY-MM-DDTHH:MM:SSZ@vN[#partition]`: the job id ends at
    /// the first `@` that is followed by a valid timestamp and `@v<digits>`;
    /// the partition is everything after the `#` that follows the version.
    pub fn parse(key: &str) -> Result<PlanKey, ScheduleError> {
        let bad = |reason| ScheduleError::BadPlanKey {
            key: key.to_string(),
            reason,
        };
        const TS_LEN: usize = "2027-03-14T07:00:00Z".len();
        for (at, _) in key.match_indices('@') {
            let rest = &key[at + 1..];
            let (Some(ts), Some(tail)) = (rest.get(..TS_LEN), rest.get(TS_LEN..)) else {
                continue;
            };
            let Some(tail) = tail.strip_prefix("@v") else {
                continue;
            };
            if !ts.ends_with('Z') {
                continue;
            }
            let Ok(scheduled_at) = DateTime::parse_from_rfc3339(ts) else {
                continue;
            };
            let (digits, partition) = match tail.split_once('#') {
                Some((d, p)) => (d, Some(p.to_string())),
                None => (tail, None),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let version = digits.parse().map_err(|_| bad("version is not a u32"))?;
            if at == 0 {
                return Err(bad("empty job id"));
            }
            return Ok(PlanKey {
                job_id: key[..at].to_string(),
                scheduled_at: scheduled_at.with_timezone(&Utc),
                version,
                partition,
            });
        }
        Err(bad("expected job@YYYY-MM-DDTHH:MM:SSZ@vN[#partition]"))
    }
}

impl fmt::Display for PlanKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&plan_key(
            &self.job_id,
            self.scheduled_at,
            self.version,
            self.partition.as_deref(),
        ))
    }
}

impl FromStr for PlanKey {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlanKey::parse(s)
    }
}

/// FNV-1a, 64 bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The logical shard of a job: `fnv1a64(job_id) % shard_count`. A
/// `shard_count` of 0 is treated as 1 (everything in shard 0).
pub fn shard_of(job_id: &str, shard_count: u32) -> u32 {
    (fnv1a64(job_id.as_bytes()) % u64::from(shard_count.max(1))) as u32
}

/// One scan's half-open window `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// Inclusive start.
    pub from: DateTime<Utc>,
    /// Exclusive end; the new watermark.
    pub to: DateTime<Utc>,
}

impl Window {
    /// True if the window holds no instant.
    pub fn is_empty(&self) -> bool {
        self.from >= self.to
    }

    /// The watermark to store after this window was fully scanned (and its
    /// triggers inserted): the window's end, but never behind the previous
    /// watermark (a clock that stepped back must not rewind it).
    pub fn next_watermark(&self, previous: Option<DateTime<Utc>>) -> DateTime<Utc> {
        previous.map_or(self.to, |p| p.max(self.to))
    }
}

fn sub(t: DateTime<Utc>, d: TimeDelta) -> DateTime<Utc> {
    t.checked_sub_signed(d.max(TimeDelta::zero()))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The window of the next scan. Negative durations count as zero. If the
/// watermark is ahead of `now + lookahead` (clock stepped back), the window
/// is empty (`from == to`).
pub fn scan_window(
    watermark: Option<DateTime<Utc>>,
    overlap: TimeDelta,
    now: DateTime<Utc>,
    lookahead: TimeDelta,
    initial_lookback: TimeDelta,
) -> Window {
    let to = now
        .checked_add_signed(lookahead.max(TimeDelta::zero()))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let from = match watermark {
        Some(w) => sub(w, overlap),
        None => sub(now, initial_lookback),
    };
    Window {
        from: from.min(to),
        to,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn plan_key_has_the_documented_format() {
        let at = t("2027-03-14T07:00:00Z");
        assert_eq!(
            plan_key("job", at, 3, Some("p")),
            "job@2027-03-14T07:00:00Z@v3#p"
        );
        assert_eq!(plan_key("job", at, 3, None), "job@2027-03-14T07:00:00Z@v3");
        assert_eq!(
            plan_key("job", t("2027-03-14T07:00:00.999Z"), 3, None),
            "job@2027-03-14T07:00:00Z@v3"
        );
    }

    #[test]
    fn plan_key_parses_back_including_awkward_parts() {
        let at = t("2027-03-14T07:00:00Z");
        for (job, part) in [
            ("job", Some("p")),
            ("job", None),
            ("team@corp/job", Some("eu#west@2")),
            ("a", Some("")),
        ] {
            let key = plan_key(job, at, 42, part);
            let parsed = PlanKey::parse(&key).unwrap();
            assert_eq!(parsed.job_id, job);
            assert_eq!(parsed.scheduled_at, at);
            assert_eq!(parsed.version, 42);
            assert_eq!(parsed.partition.as_deref(), part);
            assert_eq!(parsed.to_string(), key);
        }
    }

    #[test]
    fn malformed_plan_keys_are_rejected() {
        for bad in [
            "",
            "job",
            "job@2027-03-14T07:00:00Z",
            "job@2027-03-14T07:00:00Z@3",
            "job@2027-03-14T07:00:00Z@v",
            "job@2027-03-14T07:00:00+00:00@v3",
            "job@2027-13-14T07:00:00Z@v3",
            "@2027-03-14T07:00:00Z@v3",
            "job@2027-03-14T07:00:00Z@v99999999999",
        ] {
            assert!(PlanKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_of_is_pinned_so_it_can_never_change_silently() {
        // Values computed independently (Python FNV-1a 64).
        assert_eq!(shard_of("nightly-report", 16), 11);
        assert_eq!(shard_of("nightly-report", 1024), 939);
        assert_eq!(shard_of("billing/invoice-sweep", 16), 13);
        assert_eq!(shard_of("billing/invoice-sweep", 1024), 525);
        assert_eq!(shard_of("job-42", 16), 5);
        assert_eq!(shard_of("job-42", 7), 5);
        assert_eq!(shard_of("tenant-a/etl", 1024), 163);
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("anything", 0), 0);
    }

    #[test]
    fn first_scan_looks_back_by_the_initial_lookback() {
        let now = t("2027-01-01T12:00:00Z");
        let w = scan_window(
            None,
            TimeDelta::minutes(5),
            now,
            TimeDelta::seconds(10),
            TimeDelta::hours(1),
        );
        assert_eq!(w.from, t("2027-01-01T11:00:00Z"));
        assert_eq!(w.to, t("2027-01-01T12:00:10Z"));
        assert_eq!(w.next_watermark(None), w.to);
    }

    #[test]
    fn later_scans_start_overlap_before_the_watermark() {
        let now = t("2027-01-01T12:00:00Z");
        let wm = t("2027-01-01T11:59:55Z");
        let w = scan_window(
            Some(wm),
            TimeDelta::seconds(30),
            now,
            TimeDelta::seconds(10),
            TimeDelta::hours(1),
        );
        assert_eq!(w.from, t("2027-01-01T11:59:25Z"));
        assert_eq!(w.to, t("2027-01-01T12:00:10Z"));
        assert_eq!(w.next_watermark(Some(wm)), w.to);
    }

    #[test]
    fn watermark_ahead_of_the_clock_gives_an_empty_window_and_is_kept() {
        let now = t("2027-01-01T12:00:00Z");
        let wm = t("2027-01-01T13:00:00Z");
        let w = scan_window(
            Some(wm),
            TimeDelta::seconds(30),
            now,
            TimeDelta::seconds(10),
            TimeDelta::hours(1),
        );
        assert!(w.is_empty());
        assert_eq!(w.next_watermark(Some(wm)), wm);
    }
}
