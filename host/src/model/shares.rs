//! How a group's capacity is shared out beyond its tenants' weights: its
//! minimum share among groups, and the recovery lane — catch-up fires,
//! backfills and retries — held to a share of the group's capacity and
//! ramped up step by step, so a backlog that piles up during an outage
//! does not hit the recovering downstream all at once. Pure: the claims
//! (`store/runner`) and the governor (`lease/governor.rs`) apply it.

use serde::Serialize;

/// A group's shares, as admins set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GroupShares {
    /// Slots the group is guaranteed: while it runs fewer, its candidates
    /// go before any other group's that is past its own minimum.
    pub min_share: i64,
    /// The recovery lane's share of the group's effective concurrency
    /// while fresh work of the group waits, percent (1–100).
    pub recovery_share_pct: i64,
    /// How long the group must stay healthy before the ramp steps up, and
    /// the least time between two moves of the ramp.
    pub ramp_every_ms: i64,
}

pub const DEFAULT_RECOVERY_SHARE_PCT: i64 = 30;
pub const DEFAULT_RAMP_EVERY_MS: i64 = 30_000;

impl Default for GroupShares {
    fn default() -> Self {
        Self {
            min_share: 0,
            recovery_share_pct: DEFAULT_RECOVERY_SHARE_PCT,
            ramp_every_ms: DEFAULT_RAMP_EVERY_MS,
        }
    }
}

impl GroupShares {
    /// The first value out of range, named as the flag and the file spell
    /// it.
    pub fn problem(&self, max_concurrency: i64) -> Option<String> {
        if self.min_share < 0 {
            return Some(format!(
                "min-share must be zero or more slots, not {}",
                self.min_share
            ));
        }
        if self.min_share > max_concurrency {
            return Some(format!(
                "min-share {} is above the group's max concurrency {max_concurrency}",
                self.min_share
            ));
        }
        if !(1..=100).contains(&self.recovery_share_pct) {
            return Some(format!(
                "recovery-share must be 1% to 100%, not {}%",
                self.recovery_share_pct
            ));
        }
        super::bounds::RAMP_EVERY.check(self.ramp_every_ms).err()
    }
}

/// The ramp's steps: the recovery lane's ceiling, percent of the group's
/// effective concurrency.
pub const RAMP_STEPS_PCT: [i64; 4] = [10, 25, 50, 100];

/// The recovery lane's ceiling in slots: `ramp_pct` of the effective
/// concurrency, and no more than the share while fresh work waits — at
/// least one slot, so recovery always moves.
pub fn recovery_cap(effective: i64, share_pct: i64, ramp_pct: i64, fresh_waiting: bool) -> i64 {
    let pct = if fresh_waiting {
        ramp_pct.min(share_pct)
    } else {
        ramp_pct
    };
    ((effective.max(0) * pct + 99) / 100).max(1)
}

/// A failure rate above this steps the ramp back.
pub const RAMP_FAILURE_RATE: f64 = 0.2;
/// A mean service time above this many times the baseline steps it back.
pub const RAMP_LATENCY_FACTOR: f64 = 1.5;

/// What the governor saw of a group, for its ramp.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RampInputs {
    /// Recovery work waiting or running in the group.
    pub recovery_work: bool,
    /// Attempts that ended in the observation window, and how many of them
    /// did not succeed.
    pub samples: i64,
    pub failures: i64,
    /// Their mean service time, and the group's baseline (configured, or
    /// none), ms.
    pub service_time_ms: Option<f64>,
    pub baseline_ms: Option<i64>,
    /// Since the ramp last moved.
    pub since_moved_ms: i64,
}

/// A move of the ramp and why, for the log.
#[derive(Debug, Clone, PartialEq)]
pub struct RampMove {
    pub to_pct: i64,
    pub why: String,
}

/// The ramp's next step. With no recovery work the ramp rests at its first
/// step, ready for the next backlog. With work, at most one move per
/// `every_ms`: one step back when the group is unhealthy — its failure
/// rate above [`RAMP_FAILURE_RATE`] or its service time above
/// [`RAMP_LATENCY_FACTOR`] × baseline (each judged once there are
/// [`super::group::MIN_SAMPLES`]) — else one step up.
pub fn ramp_next(current_pct: i64, inputs: &RampInputs, every_ms: i64) -> Option<RampMove> {
    let step = RAMP_STEPS_PCT
        .iter()
        .position(|p| *p >= current_pct)
        .unwrap_or(RAMP_STEPS_PCT.len() - 1);
    if !inputs.recovery_work {
        return (step != 0).then(|| RampMove {
            to_pct: RAMP_STEPS_PCT[0],
            why: "no recovery work: the ramp rests at its first step".into(),
        });
    }
    if inputs.since_moved_ms < every_ms {
        return None;
    }
    match unhealthy(inputs) {
        Some(why) if step > 0 => Some(RampMove {
            to_pct: RAMP_STEPS_PCT[step - 1],
            why,
        }),
        Some(_) => None,
        None if step + 1 < RAMP_STEPS_PCT.len() => Some(RampMove {
            to_pct: RAMP_STEPS_PCT[step + 1],
            why: format!(
                "healthy for {} s: {} of {} attempts failed",
                inputs.since_moved_ms / 1000,
                inputs.failures,
                inputs.samples
            ),
        }),
        None => None,
    }
}

/// Why the group is unhealthy, if it is.
fn unhealthy(inputs: &RampInputs) -> Option<String> {
    if inputs.samples < super::group::MIN_SAMPLES {
        return None;
    }
    let rate = inputs.failures as f64 / inputs.samples as f64;
    if rate > RAMP_FAILURE_RATE {
        return Some(format!(
            "failure rate {:.0}% ({} of {}) above {:.0}%",
            rate * 100.0,
            inputs.failures,
            inputs.samples,
            RAMP_FAILURE_RATE * 100.0
        ));
    }
    match (inputs.service_time_ms, inputs.baseline_ms) {
        (Some(seen), Some(baseline)) if seen > baseline as f64 * RAMP_LATENCY_FACTOR => {
            Some(format!(
                "service time {:.1} s above {RAMP_LATENCY_FACTOR} × the {:.1} s baseline",
                seen / 1000.0,
                baseline as f64 / 1000.0
            ))
        }
        _ => None,
    }
}

/// A high-water mark with its low-water mark: claims stop when a level
/// reaches `high` and resume only once it is back at or below `low`, so a
/// level hovering at the mark does not flap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watermark {
    pub high: f64,
    pub low: f64,
}

impl Watermark {
    /// Whether claims are held at `level`, given whether they were.
    pub fn holds(&self, was_held: bool, level: f64) -> bool {
        if was_held {
            level > self.low
        } else {
            level >= self.high
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watermark_holds_from_high_until_back_at_low() {
        let mark = Watermark {
            high: 0.9,
            low: 0.7,
        };
        let levels = [0.5, 0.89, 0.9, 0.8, 0.71, 0.7, 0.8, 0.95];
        let mut held = false;
        let seen: Vec<bool> = levels
            .iter()
            .map(|level| {
                held = mark.holds(held, *level);
                held
            })
            .collect();
        assert_eq!(
            seen,
            vec![false, false, true, true, true, false, false, true]
        );
    }

    #[test]
    fn the_recovery_cap_is_the_share_while_fresh_work_waits_and_the_ramp_always() {
        // 40 slots, 30% share: 12 while fresh work waits, the ramp's 100% else.
        assert_eq!(recovery_cap(40, 30, 100, true), 12);
        assert_eq!(recovery_cap(40, 30, 100, false), 40);
        // The ramp binds below the share: 10% of 40 = 4 either way.
        assert_eq!(recovery_cap(40, 30, 10, true), 4);
        assert_eq!(recovery_cap(40, 30, 10, false), 4);
        // Rounded up, and never below one slot.
        assert_eq!(recovery_cap(5, 30, 25, true), 2);
        assert_eq!(recovery_cap(1, 1, 10, true), 1);
    }

    fn healthy(samples: i64) -> RampInputs {
        RampInputs {
            recovery_work: true,
            samples,
            failures: 0,
            service_time_ms: Some(2_000.0),
            baseline_ms: Some(2_000),
            since_moved_ms: 30_000,
        }
    }

    #[test]
    fn the_ramp_steps_up_while_healthy_and_back_when_failures_or_latency_rise() {
        let every = 30_000;
        let up: Vec<i64> = [10, 25, 50]
            .iter()
            .map(|p| ramp_next(*p, &healthy(10), every).unwrap().to_pct)
            .collect();
        assert_eq!(up, vec![25, 50, 100]);
        assert_eq!(ramp_next(100, &healthy(10), every), None);
        // Too soon after the last move: no move either way.
        let soon = RampInputs {
            since_moved_ms: 29_999,
            ..healthy(10)
        };
        assert_eq!(ramp_next(25, &soon, every), None);
        // 3 of 10 failed (30% > 20%): one step back.
        let failing = RampInputs {
            failures: 3,
            ..healthy(10)
        };
        let back = ramp_next(50, &failing, every).unwrap();
        assert_eq!(back.to_pct, 25);
        assert!(back.why.contains("failure rate 30%"), "{}", back.why);
        // At the first step it stays there.
        assert_eq!(ramp_next(10, &failing, every), None);
        // 2 of 10 is not above the threshold.
        let edge = RampInputs {
            failures: 2,
            ..healthy(10)
        };
        assert_eq!(ramp_next(25, &edge, every).unwrap().to_pct, 50);
        // Service time 3.1 s against a 2 s baseline (> 1.5×): back.
        let slow = RampInputs {
            service_time_ms: Some(3_100.0),
            ..healthy(10)
        };
        assert_eq!(ramp_next(100, &slow, every).unwrap().to_pct, 50);
        // Too few samples to judge: the ramp keeps climbing.
        let few = RampInputs {
            failures: 4,
            ..healthy(4)
        };
        assert_eq!(ramp_next(10, &few, every).unwrap().to_pct, 25);
    }

    #[test]
    fn with_no_recovery_work_the_ramp_rests_at_its_first_step() {
        let idle = RampInputs::default();
        assert_eq!(ramp_next(100, &idle, 30_000).unwrap().to_pct, 10);
        assert_eq!(ramp_next(10, &idle, 30_000), None);
    }

    #[test]
    fn shares_out_of_range_are_named() {
        let ok = GroupShares::default();
        assert_eq!(ok.problem(10), None);
        let cases = [
            (
                GroupShares {
                    min_share: -1,
                    ..ok
                },
                "min-share",
            ),
            (
                GroupShares {
                    min_share: 11,
                    ..ok
                },
                "min-share 11",
            ),
            (
                GroupShares {
                    recovery_share_pct: 0,
                    ..ok
                },
                "recovery-share",
            ),
            (
                GroupShares {
                    recovery_share_pct: 101,
                    ..ok
                },
                "recovery-share",
            ),
            (
                GroupShares {
                    ramp_every_ms: 0,
                    ..ok
                },
                "ramp-every",
            ),
        ];
        for (shares, field) in cases {
            let problem = shares.problem(10).expect("out of range");
            assert!(problem.starts_with(field), "{problem}");
        }
    }
}
