//! Resource groups: the limits an attempt runs under, the capabilities its
//! components may be granted, and how many of its attempts may run at once
//! ([`effective_concurrency`]).

use serde::Serialize;

/// A resource group: the limits its attempts run under.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ResourceGroup {
    pub name: String,
    pub fuel_per_attempt: i64,
    pub memory_bytes: i64,
    pub deadline_ms: i64,
    /// The configured ceiling on attempts running at once (one input of
    /// [`effective_concurrency`], never exceeded).
    pub max_concurrency: i64,
    /// JSON array of what an admin granted ([`super::grants`]).
    pub grants: String,
    /// Size caps on what its guests hand the host.
    pub caps: super::caps::OutputCaps,
    /// The other inputs of [`effective_concurrency`], each optional.
    pub capacity: CapacityInputs,
    /// Fair shares between the group's tenants: a tenant's oldest waiting
    /// trigger gains up to one slot's worth of priority over this long
    /// (`store/runner/claim.rs`, `fair_score`). Default [`DEFAULT_AGING_MS`].
    pub aging_ms: i64,
    /// Its minimum share among groups and its recovery lane's share.
    pub shares: super::shares::GroupShares,
}

/// A tenant's share and quota: its weight in each group's fair shares
/// (1 if never set) and the attempts it may run at once across groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TenantQuota {
    pub tenant: String,
    pub weight: i64,
    pub max_in_flight: Option<i64>,
    /// Manual/API triggers the tenant may create per minute; one over it
    /// waits (its due time moves to when the minute admits it).
    pub triggers_per_minute: Option<i64>,
    /// Guest fuel the tenant may burn per hour, across its attempts; over
    /// it, its triggers wait until the hour's usage falls below.
    pub fuel_per_hour: Option<i64>,
}

impl TenantQuota {
    /// A tenant with only a weight.
    pub fn weighted(tenant: &str, weight: i64) -> Self {
        Self {
            tenant: tenant.to_string(),
            weight,
            max_in_flight: None,
            triggers_per_minute: None,
            fuel_per_hour: None,
        }
    }

    /// The first value out of its documented range ([`super::bounds`]),
    /// named as the flag and the file spell it.
    pub fn problem(&self) -> Option<String> {
        use super::bounds::{
            Bound, FUEL_PER_HOUR, TENANT_MAX_IN_FLIGHT, TRIGGERS_PER_MINUTE, WEIGHT,
        };
        Bound::first_problem([
            (&WEIGHT, Some(self.weight)),
            (&TENANT_MAX_IN_FLIGHT, self.max_in_flight),
            (&TRIGGERS_PER_MINUTE, self.triggers_per_minute),
            (&FUEL_PER_HOUR, self.fuel_per_hour),
        ])
    }
}

/// A minute: a tenant kept waiting that long gains one slot on equals.
pub const DEFAULT_AGING_MS: i64 = 60_000;

impl ResourceGroup {
    pub fn grant_list(&self) -> Vec<String> {
        serde_json::from_str(&self.grants).unwrap_or_default()
    }

    /// Its grants, parsed (a stored grant that no longer parses grants
    /// nothing).
    pub fn granted(&self) -> super::grants::Grants {
        super::grants::Grants::lenient(&self.grant_list())
    }
}

/// What an admin tells Paddock about a group's downstream and budgets,
/// besides its configured maximum. Every field is optional: an input not
/// given does not limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct CapacityInputs {
    /// The downstream connector's stable rate, calls per second.
    pub connector_rate_per_s: Option<f64>,
    /// The expected (baseline) service time of one attempt, ms; observed
    /// service times replace it once there are enough of them, but a slower
    /// downstream never widens the limit (see [`effective_concurrency`]).
    pub service_time_ms: Option<i64>,
    /// Database connections reserved for the group; each attempt holds one.
    pub db_connections: Option<i64>,
    /// Memory the group's attempts may use together, bytes.
    pub memory_budget_bytes: Option<i64>,
    /// One attempt's working set, bytes; an observed peak above it replaces
    /// it.
    pub working_set_bytes: Option<i64>,
}

impl CapacityInputs {
    /// The first input that is not a positive, finite number within its
    /// documented limit ([`super::bounds`]), named as the flag and the
    /// file spell it.
    pub fn problem(&self) -> Option<String> {
        use super::bounds::{
            Bound, CONNECTOR_RATE_MAX, DB_CONNECTIONS, MEMORY_BUDGET, SERVICE_TIME, WORKING_SET,
        };
        if let Some(rate) = self.connector_rate_per_s
            && !(rate.is_finite() && rate > 0.0)
        {
            return Some(format!(
                "connector-rate must be a positive number of calls per second, not {rate}"
            ));
        }
        if let Some(rate) = self.connector_rate_per_s
            && rate > CONNECTOR_RATE_MAX
        {
            return Some(format!(
                "connector-rate must be at most {CONNECTOR_RATE_MAX} calls per second, not {rate}"
            ));
        }
        Bound::first_problem([
            (&SERVICE_TIME, self.service_time_ms),
            (&DB_CONNECTIONS, self.db_connections),
            (&MEMORY_BUDGET, self.memory_budget_bytes),
            (&WORKING_SET, self.working_set_bytes),
        ])
    }
}

/// How far back the observations of a group reach: attempts that ended in
/// the last minute.
pub const OBSERVATION_WINDOW_MS: i64 = 60_000;

/// What the host measured of a group's recent attempts (a moving window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Observed {
    /// Attempts in the window.
    pub samples: i64,
    /// Their mean service (wall) time, ms.
    pub service_time_ms: Option<f64>,
    /// The largest peak memory any of them reported, bytes.
    pub peak_memory_bytes: Option<i64>,
    /// How many of them did not succeed (the recovery ramp's health).
    pub failures: i64,
}

/// Attempts a window needs before its observations replace configured
/// values: fewer is noise.
pub const MIN_SAMPLES: i64 = 5;

/// One input of [`effective_concurrency`] and the limit it implies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limit {
    /// Which input: `configured max`, `connector rate × service time`,
    /// `reserved db connections`, `memory budget / working set`,
    /// `instance pool`.
    pub input: &'static str,
    /// How it was computed, for people (`50/s × 2.0 s = 100`).
    pub detail: String,
    pub limit: i64,
}

/// A group's effective concurrency: the minimum of its limits, and which
/// one binds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    pub limits: Vec<Limit>,
    pub effective: i64,
    pub binding: &'static str,
}

pub const CONFIGURED_MAX: &str = "configured max";
pub const CONNECTOR: &str = "connector rate × service time";
pub const DB_CONNECTIONS: &str = "reserved db connections";
pub const MEMORY: &str = "memory budget / working set";
pub const INSTANCE_POOL: &str = "instance pool";

/// The effective concurrency of a group: the minimum of
///
/// - its configured maximum;
/// - the connector's stable rate × the service time (Little's law: the
///   in-flight count that keeps the connector at its stable rate). The
///   service time is the observed mean once [`MIN_SAMPLES`] attempts
///   ended in the window, but never more than the configured baseline: a
///   downstream that slows down is congested, and widening concurrency as
///   latency rises (2 s → 8 s would turn 100 into 400) is how a struggling
///   connector is pushed over. Throughput follows instead: 40 in flight at
///   8 s complete 5 per second;
/// - the reserved database connections (each attempt holds one);
/// - the memory budget / the working set (the configured value, or the
///   observed peak if larger or nothing is configured; the per-attempt
///   memory cap if neither is known);
/// - the instance pool (`pool`, the sandbox's slots in this process), if
///   given.
///
/// Each limit is at least 1 (a group with no room at all is paused, not
/// limited to zero) and the binding one is named; ties go to the first in
/// this order.
pub fn effective_concurrency(
    group: &ResourceGroup,
    observed: &Observed,
    pool: Option<i64>,
) -> Capacity {
    let inputs = &group.capacity;
    let mut limits = vec![Limit {
        input: CONFIGURED_MAX,
        detail: format!("{}", group.max_concurrency),
        limit: group.max_concurrency,
    }];
    let observed_service = observed
        .service_time_ms
        .filter(|_| observed.samples >= MIN_SAMPLES);
    if let Some(rate) = inputs.connector_rate_per_s {
        let service = match (observed_service, inputs.service_time_ms) {
            (Some(seen), Some(baseline)) => Some((
                seen,
                seen.min(baseline as f64),
                "observed, capped at baseline",
            )),
            (Some(seen), None) => Some((seen, seen, "observed")),
            (None, Some(baseline)) => Some((baseline as f64, baseline as f64, "baseline")),
            (None, None) => None,
        };
        if let Some((seen, used, source)) = service {
            let limit = (rate * used / 1000.0).floor() as i64;
            limits.push(Limit {
                input: CONNECTOR,
                detail: format!(
                    "{rate}/s × {:.1} s ({source}{}) = {limit}",
                    used / 1000.0,
                    if seen != used {
                        format!(", observed {:.1} s", seen / 1000.0)
                    } else {
                        String::new()
                    }
                ),
                limit,
            });
        }
    }
    if let Some(connections) = inputs.db_connections {
        limits.push(Limit {
            input: DB_CONNECTIONS,
            detail: format!("{connections}"),
            limit: connections,
        });
    }
    if let Some(budget) = inputs.memory_budget_bytes {
        let observed_peak = observed.peak_memory_bytes.filter(|p| *p > 0);
        // The admin's figure is a floor: an observed peak above it
        // tightens the limit, a small guest's peak does not widen it.
        let working_set = match (inputs.working_set_bytes, observed_peak) {
            (Some(set), Some(peak)) if peak > set => (peak, "observed peak"),
            (Some(set), _) => (set, "configured"),
            (None, Some(peak)) => (peak, "observed peak"),
            // Nothing known: every attempt may use its whole memory cap.
            (None, None) => (group.memory_bytes, "memory cap per attempt"),
        };
        let limit = budget / working_set.0.max(1);
        limits.push(Limit {
            input: MEMORY,
            detail: format!(
                "{} / {} ({}) = {limit}",
                mib(budget),
                mib(working_set.0),
                working_set.1
            ),
            limit,
        });
    }
    if let Some(pool) = pool {
        limits.push(Limit {
            input: INSTANCE_POOL,
            detail: format!("{pool} instances in this process"),
            limit: pool,
        });
    }
    for l in &mut limits {
        l.limit = l.limit.max(1);
    }
    let binding = limits
        .iter()
        .min_by_key(|l| l.limit)
        .expect("the configured max is always an input");
    Capacity {
        effective: binding.limit,
        binding: binding.input,
        limits,
    }
}

fn mib(bytes: i64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's logistics group: 50 calls/s × 2 s = 100 in flight,
    /// 60 reserved connections, 720 MiB / 18 MiB = 40.
    fn logistics() -> ResourceGroup {
        ResourceGroup {
            name: "logistics".into(),
            fuel_per_attempt: 1_000_000,
            memory_bytes: 64 << 20,
            deadline_ms: 60_000,
            max_concurrency: 500,
            grants: "[]".into(),
            caps: Default::default(),
            capacity: CapacityInputs {
                connector_rate_per_s: Some(50.0),
                service_time_ms: Some(2_000),
                db_connections: Some(60),
                memory_budget_bytes: Some(720 << 20),
                working_set_bytes: Some(18 << 20),
            },
            aging_ms: DEFAULT_AGING_MS,
            shares: Default::default(),
        }
    }

    fn limit(c: &Capacity, input: &str) -> i64 {
        c.limits.iter().find(|l| l.input == input).unwrap().limit
    }

    #[test]
    fn the_logistics_group_runs_40_bound_by_memory() {
        let c = effective_concurrency(&logistics(), &Observed::default(), None);
        assert_eq!(limit(&c, CONFIGURED_MAX), 500);
        assert_eq!(limit(&c, CONNECTOR), 100);
        assert_eq!(limit(&c, DB_CONNECTIONS), 60);
        assert_eq!(limit(&c, MEMORY), 40);
        assert_eq!((c.effective, c.binding), (40, MEMORY));
    }

    #[test]
    fn a_slower_downstream_never_widens_the_limit() {
        let slow = Observed {
            samples: 50,
            service_time_ms: Some(8_000.0),
            peak_memory_bytes: None,
            failures: 0,
        };
        let c = effective_concurrency(&logistics(), &slow, None);
        // Not 50 × 8 = 400: the baseline caps the service time used.
        assert_eq!(limit(&c, CONNECTOR), 100);
        assert_eq!(c.effective, 40);
        // 40 in flight at 8 s each complete 5 per second.
        assert_eq!(c.effective as f64 / 8.0, 5.0);
    }

    #[test]
    fn a_faster_downstream_narrows_the_connector_limit() {
        let fast = Observed {
            samples: 50,
            service_time_ms: Some(500.0),
            peak_memory_bytes: None,
            failures: 0,
        };
        let c = effective_concurrency(&logistics(), &fast, None);
        // 50/s × 0.5 s = 25: more in flight would exceed the stable rate.
        assert_eq!((c.effective, c.binding), (25, CONNECTOR));
    }

    #[test]
    fn too_few_samples_keep_the_configured_values() {
        let few = Observed {
            samples: MIN_SAMPLES - 1,
            service_time_ms: Some(100.0),
            peak_memory_bytes: Some(90 << 20),
            failures: 0,
        };
        let c = effective_concurrency(&logistics(), &few, None);
        assert_eq!(limit(&c, CONNECTOR), 100);
        // A reported peak counts at once: memory is not noise.
        assert_eq!(limit(&c, MEMORY), 8);
    }

    #[test]
    fn the_instance_pool_and_ties_are_named() {
        let c = effective_concurrency(&logistics(), &Observed::default(), Some(40));
        // Memory and the pool both say 40: the first in order binds.
        assert_eq!((c.effective, c.binding), (40, MEMORY));
        let c = effective_concurrency(&logistics(), &Observed::default(), Some(12));
        assert_eq!((c.effective, c.binding), (12, INSTANCE_POOL));
    }

    #[test]
    fn no_inputs_means_the_configured_max() {
        let mut g = logistics();
        g.capacity = CapacityInputs::default();
        let c = effective_concurrency(&g, &Observed::default(), None);
        assert_eq!((c.effective, c.binding), (500, CONFIGURED_MAX));
        assert_eq!(c.limits.len(), 1);
    }

    #[test]
    fn a_limit_is_never_below_one() {
        let mut g = logistics();
        g.capacity.memory_budget_bytes = Some(1 << 20);
        let c = effective_concurrency(&g, &Observed::default(), None);
        assert_eq!(c.effective, 1);
    }
}
