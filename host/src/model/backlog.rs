//! A resource group's backlog and how long it takes to drain (DESIGN §8):
//! the backlog, the arrival and effective success rates over a window, and
//! the drain ETA `backlog / (success rate − arrival rate)` — "not
//! recovering" while that net rate is zero or negative.
//!
//! The terms, as `paddock status` counts them (`store/backlog.rs`):
//!
//! - **backlog**: the group's triggers that are due (`next_run_at <= now`)
//!   and waiting for a claim — `pending` or `retry_wait`, in either claim
//!   lane. Running triggers are not backlog (they are `running / limit`);
//!   triggers not yet due are not either.
//! - **arrival**: a trigger *arrives* once, when it first becomes due:
//!   at `max(created_at, scheduled_at)`. A scheduled trigger created ahead
//!   arrives at its fire time; a catch-up fire or backfill at its creation;
//!   a retry is the same trigger arriving again and is not counted (its
//!   cost shows as a lower *effective* success rate). A trigger waiting for
//!   approval (`manual`) has not arrived.
//! - **success**: a trigger *succeeds* when it reaches `succeeded`
//!   (`finished_at`). Failed, cancelled and skipped triggers leave the
//!   backlog without succeeding; attempts that fail and retry are not
//!   successes — hence "effective".
//! - **window**: the half-open interval `(now − window, now]` on the
//!   database clock; rates are counts divided by the window's length.
//!
//! Everything here is arithmetic on those counts: whether a group
//! recovers is decided on the integer counts, never on rounded rates.

use serde::Serialize;

/// The window `paddock status` measures over unless told otherwise: five
/// minutes — long enough to smooth a claim batch's burst, short enough to
/// show a fix within minutes.
pub const DEFAULT_WINDOW_MS: i64 = 5 * 60_000;
/// The shortest window accepted: rates over less are noise.
pub const MIN_WINDOW_MS: i64 = 1_000;
/// The longest window accepted: a day (the arrival count reads every
/// trigger created or due in the window).
pub const MAX_WINDOW_MS: i64 = 24 * 3_600_000;

/// A window length checked against [`MIN_WINDOW_MS`] and
/// [`MAX_WINDOW_MS`], the problem named for `field`.
pub fn check_window(field: &str, window_ms: i64) -> Result<i64, String> {
    if (MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&window_ms) {
        return Ok(window_ms);
    }
    Err(format!(
        "{field}: a window of {} s is outside 1s to 24h",
        window_ms as f64 / 1_000.0
    ))
}

/// What one group's window measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// Due triggers waiting for a claim now.
    pub backlog: i64,
    /// Triggers that arrived (became due) in the window.
    pub arrivals: i64,
    /// Triggers that succeeded in the window.
    pub successes: i64,
    /// The window's length in ms (positive).
    pub window_ms: i64,
}

/// How the backlog drains at the window's rates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Eta {
    /// Nothing is waiting.
    NoBacklog,
    /// At the net rate the backlog is gone in this many seconds.
    Drains { seconds: f64 },
    /// A backlog, and successes do not outpace arrivals: it does not shrink.
    NotRecovering,
}

impl Flow {
    /// Arrivals per second over the window.
    pub fn arrival_per_s(&self) -> f64 {
        per_second(self.arrivals, self.window_ms)
    }

    /// Successes per second over the window.
    pub fn success_per_s(&self) -> f64 {
        per_second(self.successes, self.window_ms)
    }

    /// Success rate less arrival rate: the speed the backlog shrinks at.
    pub fn net_per_s(&self) -> f64 {
        per_second(self.successes - self.arrivals, self.window_ms)
    }

    /// `backlog / (success rate − arrival rate)`, computed from the counts
    /// as `backlog × window / (successes − arrivals)`; whether the group
    /// recovers at all is decided on the integer difference.
    pub fn eta(&self) -> Eta {
        if self.backlog <= 0 {
            return Eta::NoBacklog;
        }
        let net = self.successes - self.arrivals;
        if net <= 0 || self.window_ms <= 0 {
            return Eta::NotRecovering;
        }
        // One division of exact products: a whole answer comes out whole.
        let numerator = i128::from(self.backlog) * i128::from(self.window_ms);
        Eta::Drains {
            seconds: numerator as f64 / (i128::from(net) * 1_000) as f64,
        }
    }
}

/// `count` per `window_ms`, in events per second.
fn per_second(count: i64, window_ms: i64) -> f64 {
    if window_ms <= 0 {
        return 0.0;
    }
    count as f64 * 1_000.0 / window_ms as f64
}

/// The backlog after `seconds` at steady rates, starting from `start`: it
/// grows by the excess of arrivals over successes and never falls below
/// zero (a group cannot succeed at work that has not arrived).
pub fn backlog_after(start: i64, arrival_per_s: i64, success_per_s: i64, seconds: i64) -> i64 {
    (start + (arrival_per_s - success_per_s) * seconds).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's backlog scenario: 600 arrivals/s against 400 successes/s
    /// for 20 minutes leave (600 − 400) × 1,200 = 240,000 waiting; raising
    /// successes to 800/s drains them at a net 200/s in 1,200 s.
    #[test]
    fn twenty_minutes_at_600_in_400_out_leave_240000_and_800_out_drains_them_in_1200_s() {
        let backlog = backlog_after(0, 600, 400, 20 * 60);
        assert_eq!(backlog, 240_000);

        // While it builds, any window of it says "not recovering".
        let building = Flow {
            backlog,
            arrivals: 600 * 300,
            successes: 400 * 300,
            window_ms: DEFAULT_WINDOW_MS,
        };
        assert_eq!(building.arrival_per_s(), 600.0);
        assert_eq!(building.success_per_s(), 400.0);
        assert_eq!(building.net_per_s(), -200.0);
        assert_eq!(building.eta(), Eta::NotRecovering);

        // A window at the raised rate: net 200/s, 1,200 s to drain.
        let draining = Flow {
            backlog,
            arrivals: 600 * 300,
            successes: 800 * 300,
            window_ms: DEFAULT_WINDOW_MS,
        };
        assert_eq!(draining.net_per_s(), 200.0);
        assert_eq!(draining.eta(), Eta::Drains { seconds: 1_200.0 });
        // The ETA is when the steady model reaches zero, not a second before.
        assert_eq!(backlog_after(backlog, 600, 800, 1_199), 200);
        assert_eq!(backlog_after(backlog, 600, 800, 1_200), 0);
    }

    #[test]
    fn the_window_length_does_not_change_the_eta_at_the_same_rates() {
        for window_s in [1, 60, 300, 3_600, 86_400] {
            let flow = Flow {
                backlog: 240_000,
                arrivals: 600 * window_s,
                successes: 800 * window_s,
                window_ms: window_s * 1_000,
            };
            assert_eq!(flow.eta(), Eta::Drains { seconds: 1_200.0 }, "{window_s} s");
        }
    }

    #[test]
    fn equal_rates_with_a_backlog_are_not_recovering_and_no_backlog_needs_no_eta() {
        let eta = |backlog, arrivals, successes| {
            Flow {
                backlog,
                arrivals,
                successes,
                window_ms: 60_000,
            }
            .eta()
        };
        assert_eq!(eta(10, 60, 60), Eta::NotRecovering, "net 0");
        assert_eq!(eta(10, 61, 60), Eta::NotRecovering, "net below 0");
        assert_eq!(eta(10, 0, 0), Eta::NotRecovering, "an idle window");
        assert_eq!(eta(0, 60, 10), Eta::NoBacklog);
        assert_eq!(eta(0, 0, 0), Eta::NoBacklog);
        assert_eq!(eta(10, 60, 61), Eta::Drains { seconds: 600.0 });
    }

    #[test]
    fn a_fractional_eta_is_the_exact_quotient_rounded_once() {
        // 10 waiting, net 3 per 7 s: 10 × 7 / 3 = 23.333… s.
        let flow = Flow {
            backlog: 10,
            arrivals: 0,
            successes: 3,
            window_ms: 7_000,
        };
        assert_eq!(
            flow.eta(),
            Eta::Drains {
                seconds: 70.0 / 3.0
            }
        );
    }

    #[test]
    fn the_backlog_never_falls_below_zero() {
        assert_eq!(backlog_after(100, 600, 800, 3_600), 0);
        assert_eq!(backlog_after(0, 0, 10, 60), 0);
    }

    #[test]
    fn a_window_outside_one_second_to_a_day_is_refused_by_name() {
        assert_eq!(check_window("--window", 300_000), Ok(300_000));
        assert_eq!(check_window("--window", 1_000), Ok(1_000));
        assert_eq!(check_window("--window", MAX_WINDOW_MS), Ok(MAX_WINDOW_MS));
        assert_eq!(
            check_window("--window", 999),
            Err("--window: a window of 0.999 s is outside 1s to 24h".into())
        );
        assert_eq!(
            check_window("--since", MAX_WINDOW_MS + 1_000),
            Err("--since: a window of 86401 s is outside 1s to 24h".into())
        );
    }
}
