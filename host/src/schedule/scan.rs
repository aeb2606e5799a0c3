//! Scanner arithmetic: scan windows and the watermark rule (DESIGN §5
//! scanning); plan keys and shard assignment are the domain's
//! ([`crate::model::plan`], re-exported here).
//!
//! Invariant kept: a scan covers the half-open window `[watermark - overlap, now + lookahead)`
//!   (`[now - initial_lookback, now + lookahead)` with no watermark yet); the
//!   new watermark is the window's end, never moved backwards, so consecutive
//!   windows overlap by at least `overlap` and leave no gap.

use chrono::{DateTime, TimeDelta, Utc};

// Plan keys and shards are identities of the domain: one definition, in
// `crate::model::plan`.
pub use crate::model::plan::{PlanKey, fnv1a64, plan_key, shard_of};

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
