//! `paddock report`: what an incident did, what a correct result cost, and
//! whether the books balance — the arithmetic only. The store reads the
//! facts (`store/reports.rs`); the definitions are here, exactly as
//! counted, and in `docs/architecture.md` ("Reports").
//!
//! **Incident** over a window `[since, until)` (database clock):
//!
//! - **affected**: a trigger with, in the window, a takeover (an attempt
//!   whose lease lapsed was ended `expired` by the claim of another), a
//!   fenced write refused (`stale_writes`), an effect whose outcome was
//!   unknown, a params conflict, or an exception ticket opened. An attempt
//!   that simply ran is not an incident: a window of clean successes has
//!   nothing affected.
//! - each affected trigger falls in exactly one class, the first that
//!   applies ([`classify`]): **params conflict** (a `key_conflict` ticket
//!   about it opened in the window) → **unknown outcome** (one of its
//!   effects' answers was lost: still `unknown` or an `intent` left by an
//!   attempt that is gone, or settled later by a query by key, the
//!   recovery scanner or a ticket, or found not committed by the next
//!   attempt's query and re-sent — resolved *succeeded*, *failed* (failed
//!   or found not committed: the trigger retries) or *still unknown*; so a
//!   takeover of an attempt with an effect in flight is an unknown) →
//!   **stale writes refused** (a fenced write of an older token refused in
//!   the window; the trigger went on under the new one) → **completed**
//!   (succeeded, by the token that holds it: after a takeover, the new one)
//!   → **failed** → **in flight** (pending, running, waiting to retry).
//! - **sent to people**: affected triggers with a ticket opened in the
//!   window (any kind).
//! - **auto-closed**: completed + stale writes refused + unknowns resolved
//!   succeeded or failed, without a person; the **auto-closure rate** is
//!   that over affected.
//!
//! **Cost per correct result** over a window, per job / version / group /
//! tenant: the window's spend — attempts started in it (fuel → CPU seconds
//! at `fuel_per_cpu_second`, wall, memory-seconds = peak memory × wall,
//! retries = attempts after a trigger's first), effects created in it
//! (downstream calls = sends, compensations), tickets resolved in it
//! (manual touches), bytes stored by them (results of triggers finished in
//! it, attempt logs, effect responses) — each at its admin-set unit price,
//! divided by the **correct results** finished in it: triggers that
//! reached `succeeded` with no compensation recorded against any of their
//! effects.
//!
//! **Conservation**: pairs of counts that must be equal ([`Check`]); a
//! nonzero difference is listed.

use super::TriggerState;
use serde::Serialize;

// ---------------------------------------------------------------- incident

/// What the store found about one affected trigger in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TriggerFacts {
    pub trigger_id: i64,
    /// Its state now.
    pub state: TriggerState,
    /// Fenced writes refused in the window.
    pub stale_refusals: i64,
    /// Its effects whose outcome was unknown, by what they became.
    pub unknown_succeeded: i64,
    pub unknown_failed: i64,
    pub unknown_open: i64,
    /// `key_conflict` tickets about it opened in the window.
    pub params_conflicts: i64,
    /// Tickets of any kind about it opened in the window.
    pub tickets: i64,
}

/// How an unknown outcome resolved (the worst of a trigger's unknowns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Succeeded,
    /// Failed, or found not committed: the trigger retries.
    Failed,
    StillUnknown,
}

/// The one class of an affected trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IncidentClass {
    ParamsConflict,
    Unknown(Resolution),
    StaleRefused,
    Completed,
    Failed,
    InFlight,
}

/// The first class that applies, in the order the module names.
pub fn classify(f: &TriggerFacts) -> IncidentClass {
    if f.params_conflicts > 0 {
        IncidentClass::ParamsConflict
    } else if f.unknown_open > 0 {
        IncidentClass::Unknown(Resolution::StillUnknown)
    } else if f.unknown_failed > 0 {
        IncidentClass::Unknown(Resolution::Failed)
    } else if f.unknown_succeeded > 0 {
        IncidentClass::Unknown(Resolution::Succeeded)
    } else if f.stale_refusals > 0 {
        IncidentClass::StaleRefused
    } else if f.state == TriggerState::Succeeded {
        IncidentClass::Completed
    } else if f.state.is_terminal() {
        IncidentClass::Failed
    } else {
        IncidentClass::InFlight
    }
}

/// Unknown outcomes by resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct UnknownSplit {
    pub total: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub still_unknown: i64,
}

/// An incident's counts, each affected trigger counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Incident {
    pub affected: i64,
    pub completed: i64,
    pub stale_refused: i64,
    pub unknown: UnknownSplit,
    pub params_conflicts: i64,
    /// Failed, cancelled or skipped, with none of the above.
    pub failed: i64,
    /// Not finished yet, with none of the above.
    pub in_flight: i64,
    /// Affected triggers with a ticket opened in the window.
    pub to_people: i64,
}

impl Incident {
    pub fn of<'a>(facts: impl IntoIterator<Item = &'a TriggerFacts>) -> Self {
        let mut i = Incident::default();
        for f in facts {
            i.affected += 1;
            i.to_people += i64::from(f.tickets > 0);
            match classify(f) {
                IncidentClass::ParamsConflict => i.params_conflicts += 1,
                IncidentClass::Unknown(r) => {
                    i.unknown.total += 1;
                    match r {
                        Resolution::Succeeded => i.unknown.succeeded += 1,
                        Resolution::Failed => i.unknown.failed += 1,
                        Resolution::StillUnknown => i.unknown.still_unknown += 1,
                    }
                }
                IncidentClass::StaleRefused => i.stale_refused += 1,
                IncidentClass::Completed => i.completed += 1,
                IncidentClass::Failed => i.failed += 1,
                IncidentClass::InFlight => i.in_flight += 1,
            }
        }
        i
    }

    /// Closed without a person: completed, stale writes refused, unknowns
    /// resolved succeeded or failed.
    pub fn auto_closed(&self) -> i64 {
        self.completed + self.stale_refused + self.unknown.succeeded + self.unknown.failed
    }

    /// [`Incident::auto_closed`] over affected, in percent (`None` with
    /// nothing affected).
    pub fn auto_closure_pct(&self) -> Option<f64> {
        (self.affected > 0).then(|| 100.0 * self.auto_closed() as f64 / self.affected as f64)
    }
}

// -------------------------------------------------------------------- cost

/// Guest fuel per CPU second when no admin set `fuel_per_cpu_second`:
/// wasmtime charges about one unit per WebAssembly instruction, and a
/// core retires on the order of 10^9 of them a second.
pub const DEFAULT_FUEL_PER_CPU_SECOND: f64 = 1e9;

/// The unit prices' names, as `paddock price set --NAME` spells them with
/// dashes and `unit_prices.name` with underscores.
pub const PRICE_NAMES: [&str; 8] = [
    "fuel_per_cpu_second",
    "cpu_second",
    "gb_second",
    "storage_gb",
    "downstream_call",
    "retry",
    "compensation",
    "manual_touch",
];

/// An admin's unit prices (a unit not set costs 0) and the fuel → CPU
/// second conversion. GB are 10^9 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Prices {
    pub fuel_per_cpu_second: f64,
    pub cpu_second: f64,
    pub gb_second: f64,
    pub storage_gb: f64,
    pub downstream_call: f64,
    pub retry: f64,
    pub compensation: f64,
    pub manual_touch: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            fuel_per_cpu_second: DEFAULT_FUEL_PER_CPU_SECOND,
            cpu_second: 0.0,
            gb_second: 0.0,
            storage_gb: 0.0,
            downstream_call: 0.0,
            retry: 0.0,
            compensation: 0.0,
            manual_touch: 0.0,
        }
    }
}

impl Prices {
    /// Set one by name; an unknown name, a negative or non-finite value, a
    /// value over its limit ([`super::bounds::PRICE_MAX`],
    /// [`super::bounds::FUEL_PER_CPU_SECOND_MAX`]) or a zero fuel
    /// conversion is refused with the problem named.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!(
                "--{}: {value} is not a price (a finite number, 0 or more)",
                name.replace('_', "-")
            ));
        }
        let flag = format!("--{}", name.replace('_', "-"));
        let max = match name {
            "fuel_per_cpu_second" => super::bounds::FUEL_PER_CPU_SECOND_MAX,
            _ => super::bounds::PRICE_MAX,
        };
        super::bounds::check_real(&flag, value, false, max)?;
        let slot = match name {
            "fuel_per_cpu_second" if value == 0.0 => {
                return Err("--fuel-per-cpu-second: must be more than 0".into());
            }
            "fuel_per_cpu_second" => &mut self.fuel_per_cpu_second,
            "cpu_second" => &mut self.cpu_second,
            "gb_second" => &mut self.gb_second,
            "storage_gb" => &mut self.storage_gb,
            "downstream_call" => &mut self.downstream_call,
            "retry" => &mut self.retry,
            "compensation" => &mut self.compensation,
            "manual_touch" => &mut self.manual_touch,
            other => {
                return Err(format!(
                    "no unit price named '{other}' (known: {})",
                    PRICE_NAMES.join(", ")
                ));
            }
        };
        *slot = value;
        Ok(())
    }
}

/// What one key (a job, version, group or tenant) used in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Usage {
    pub key: String,
    pub attempts: i64,
    pub fuel: i64,
    pub wall_ms: i64,
    /// Σ peak memory bytes × wall ms.
    pub memory_byte_ms: f64,
    pub storage_bytes: i64,
    pub downstream_calls: i64,
    pub retries: i64,
    pub compensations: i64,
    pub manual_touches: i64,
    /// Succeeded in the window with no compensation of their effects.
    pub correct: i64,
}

/// One priced component: quantity, unit price, cost.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Priced {
    pub name: String,
    pub quantity: f64,
    pub unit_price: f64,
    pub cost: f64,
    /// `cost / correct results` (`None` with no correct result).
    pub per_correct: Option<f64>,
}

/// A key's cost.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Cost {
    pub usage: Usage,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub components: Vec<Priced>,
    pub total: f64,
    pub per_correct: Option<f64>,
}

/// Price `usage`.
pub fn cost(usage: &Usage, prices: &Prices) -> Cost {
    let cpu_seconds = usage.fuel as f64 / prices.fuel_per_cpu_second;
    let gb_seconds = usage.memory_byte_ms / 1e9 / 1e3;
    let per = |cost: f64| (usage.correct > 0).then(|| cost / usage.correct as f64);
    let priced = |name: &str, quantity: f64, unit_price: f64| {
        let cost = quantity * unit_price;
        Priced {
            name: String::from(name),
            quantity,
            unit_price,
            cost,
            per_correct: per(cost),
        }
    };
    let components = vec![
        priced("cpu_seconds", cpu_seconds, prices.cpu_second),
        priced("gb_seconds", gb_seconds, prices.gb_second),
        priced(
            "storage_gb",
            usage.storage_bytes as f64 / 1e9,
            prices.storage_gb,
        ),
        priced(
            "downstream_calls",
            usage.downstream_calls as f64,
            prices.downstream_call,
        ),
        priced("retries", usage.retries as f64, prices.retry),
        priced(
            "compensations",
            usage.compensations as f64,
            prices.compensation,
        ),
        priced(
            "manual_touches",
            usage.manual_touches as f64,
            prices.manual_touch,
        ),
    ];
    let total = components.iter().map(|c| c.cost).sum();
    Cost {
        usage: usage.clone(),
        cpu_seconds,
        wall_seconds: usage.wall_ms as f64 / 1e3,
        components,
        total,
        per_correct: per(total),
    }
}

// ------------------------------------------------------------ conservation

/// Two counts that must be equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Check {
    pub name: String,
    /// What the left count counts, and the right.
    pub left: String,
    pub right: String,
    pub left_count: i64,
    pub right_count: i64,
}

impl Check {
    pub fn difference(&self) -> i64 {
        self.left_count - self.right_count
    }
}

/// The counter (`counters` table) of effect calls answered from a record
/// instead of sent again; the effects gateway counts into it.
pub const IDEMPOTENCY_HITS_COUNTER: &str = "effect_idempotency_hits";

/// The totals beside the checks: what the books hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Books {
    pub triggers: i64,
    /// `(state, count)`, by state name; the counts sum to `triggers`.
    pub by_state: Vec<(String, i64)>,
    /// Attempt rows.
    pub attempts: i64,
    /// Effect calls answered from a record instead of sent again.
    pub idempotency_hits: i64,
}

impl Books {
    /// How many triggers are in `state`.
    pub fn in_state(&self, state: &str) -> i64 {
        self.by_state
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n)
    }

    /// Attempts per trigger (retry amplification); `None` without triggers.
    pub fn amplification(&self) -> Option<f64> {
        (self.triggers > 0).then(|| self.attempts as f64 / self.triggers as f64)
    }
}

/// The checks with a nonzero difference.
pub fn differences(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|c| c.difference() != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(state: &str) -> TriggerFacts {
        TriggerFacts {
            trigger_id: 0,
            state: state.parse().unwrap(),
            stale_refusals: 0,
            unknown_succeeded: 0,
            unknown_failed: 0,
            unknown_open: 0,
            params_conflicts: 0,
            tickets: 0,
        }
    }

    /// The seed's incident: 86 affected = 50 completed by the new token +
    /// 18 stale writes refused + 12 unknown (8 succeeded, 3 failed → retried,
    /// 1 still unknown) + 6 params conflicts; 7 to people; auto-closure
    /// (50 + 18 + 8 + 3) / 86 = 91.86%.
    #[test]
    fn the_incident_scenario_closes_91_86_percent_automatically() {
        let mut all = Vec::new();
        all.extend((0..50).map(|_| facts("succeeded")));
        all.extend((0..18).map(|_| TriggerFacts {
            stale_refusals: 1,
            ..facts("succeeded")
        }));
        all.extend((0..8).map(|_| TriggerFacts {
            unknown_succeeded: 1,
            ..facts("succeeded")
        }));
        all.extend((0..3).map(|_| TriggerFacts {
            unknown_failed: 1,
            ..facts("retry_wait")
        }));
        all.push(TriggerFacts {
            unknown_open: 1,
            tickets: 1,
            ..facts("retry_wait")
        });
        all.extend((0..6).map(|_| TriggerFacts {
            params_conflicts: 1,
            tickets: 1,
            // A conflict's trigger may have had a stale write too: the
            // conflict is what it is counted as.
            stale_refusals: 1,
            ..facts("failed")
        }));
        let i = Incident::of(&all);
        assert_eq!(i.affected, 86);
        assert_eq!(i.completed, 50);
        assert_eq!(i.stale_refused, 18);
        assert_eq!(
            i.unknown,
            UnknownSplit {
                total: 12,
                succeeded: 8,
                failed: 3,
                still_unknown: 1
            }
        );
        assert_eq!(i.params_conflicts, 6);
        assert_eq!((i.failed, i.in_flight), (0, 0));
        assert_eq!(i.to_people, 7);
        assert_eq!(i.auto_closed(), 79);
        assert_eq!(format!("{:.2}", i.auto_closure_pct().unwrap()), "91.86");
    }

    #[test]
    fn each_trigger_is_in_one_class_the_first_that_applies() {
        let both = TriggerFacts {
            unknown_succeeded: 1,
            unknown_open: 1,
            stale_refusals: 2,
            ..facts("succeeded")
        };
        assert_eq!(
            classify(&both),
            IncidentClass::Unknown(Resolution::StillUnknown)
        );
        assert_eq!(classify(&facts("running")), IncidentClass::InFlight);
        assert_eq!(classify(&facts("failed")), IncidentClass::Failed);
        assert_eq!(Incident::of(&[]).auto_closure_pct(), None);
    }

    /// The seed's cost: 100 correct results, 8 duplicate attempts absorbed
    /// by idempotency (their effects replayed: 100 calls, not 108), and
    /// unit prices: 0.018 + 0.006 + 0.020 + 0.004 + 0.002 = 0.050 per
    /// correct result.
    #[test]
    fn the_cost_scenario_is_0_050_per_correct_result() {
        let usage = Usage {
            key: "orders".into(),
            attempts: 108,
            // 100 × 1.5e9 + 8 × 3.75e9 = 180 CPU seconds.
            fuel: 180_000_000_000,
            wall_ms: 100 * 5_000 + 8 * 12_500,
            // 1 GB × 600 s.
            memory_byte_ms: 1e9 * 600_000.0,
            // 100 results of 1,000 bytes.
            storage_bytes: 100_000,
            downstream_calls: 100,
            retries: 8,
            compensations: 0,
            manual_touches: 0,
            correct: 100,
        };
        let mut prices = Prices::default();
        for (name, value) in [
            ("cpu_second", 0.01),
            ("gb_second", 0.001),
            ("downstream_call", 0.02),
            ("retry", 0.05),
            ("storage_gb", 2_000.0),
            ("compensation", 1.0),
            ("manual_touch", 5.0),
        ] {
            prices.set(name, value).unwrap();
        }
        let c = cost(&usage, &prices);
        let per: Vec<String> = c
            .components
            .iter()
            .map(|p| format!("{}={:.3}", p.name, p.per_correct.unwrap()))
            .collect();
        assert_eq!(
            per,
            [
                "cpu_seconds=0.018",
                "gb_seconds=0.006",
                "storage_gb=0.002",
                "downstream_calls=0.020",
                "retries=0.004",
                "compensations=0.000",
                "manual_touches=0.000"
            ]
        );
        assert!((c.per_correct.unwrap() - 0.050).abs() < 1e-12, "{c:?}");
        assert!((c.cpu_seconds - 180.0).abs() < 1e-9);
        assert_eq!(
            cost(
                &Usage {
                    correct: 0,
                    ..usage
                },
                &prices
            )
            .per_correct,
            None
        );
    }

    #[test]
    fn prices_are_checked_and_named() {
        let mut p = Prices::default();
        assert!(p.set("retry", -1.0).unwrap_err().contains("--retry"));
        assert!(p.set("retry", f64::NAN).is_err());
        assert!(
            p.set("fuel_per_cpu_second", 0.0)
                .unwrap_err()
                .contains("more than 0")
        );
        assert!(p.set("cpu", 1.0).unwrap_err().contains("cpu_second"));
        assert_eq!(p, Prices::default(), "nothing set by a refusal");
    }

    #[test]
    fn only_nonzero_differences_are_listed() {
        let check = |name: &str, l, r| Check {
            name: name.into(),
            left: "l".into(),
            right: "r".into(),
            left_count: l,
            right_count: r,
        };
        let checks = [check("a", 3, 3), check("b", 4, 3)];
        let listed = differences(&checks);
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].name.as_str(), listed[0].difference()), ("b", 1));
    }
}
