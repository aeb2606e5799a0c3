//! The documented limits on every number a person sends — through the
//! command line, the API, a groups file or a job manifest — one constant
//! per setting and one check ([`Bound::check`]) that every door uses. A
//! value outside its limit is refused with one line naming the field and
//! the limit; nothing is stored.
//!
//! Why limits at all: a value that is valid by type can still break the
//! host. A weight of `i64::MAX` overflowed the fair-share arithmetic of a
//! claim; `max_attempts = 1000000000` keeps a failing trigger retrying
//! for ever; a price of `1e308` turns every cost into infinity; one
//! backfill of 120,000 fire times floods the recovery lane. Each limit is
//! far above any sensible use and small enough that the arithmetic on it
//! (sums over tenants and hours, products of rates and times, bytes
//! against budgets) cannot overflow 63 bits or lose meaning in an `f64`.
//!
//! | setting | limit | why |
//! |---|---|---|
//! | tenant `weight` | 1 – 1,000 | a thousand-fold share; stride scores stay exact |
//! | tenant `max_in_flight` | 1 – 100,000 | more than any pool runs at once |
//! | tenant `triggers_per_minute` | 1 – 1,000,000 | |
//! | tenant `fuel_per_hour` | 1 – 10^17 | a thousand attempts of the largest fuel, and sums of an hour fit 63 bits |
//! | group `fuel` (per attempt) | 1 – 10^14 | about a day of CPU at 10^9 fuel a second |
//! | group `deadline` | 1 ms – 7 days | |
//! | group `concurrency`, `db_connections` | 1 – 10,000 | |
//! | group `connector_rate` | above 0 – 1,000,000 /s | |
//! | group `service_time`, `aging`, `ramp_every` | 1 ms – 1 day | |
//! | group `memory_budget`, `working_set` | 1 B – 1 PiB | |
//! | retry `max_attempts` | 1 – 100 | |
//! | retry `backoff` | 0 – 1 day; `backoff_max` up to 7 days | |
//! | retry `max_age`, `max_elapsed` | up to 366 days | |
//! | schedule `max_catchup` | 0 – 10,000 | one catch-up is at most a backfill |
//! | schedule `max_in_flight` | 1 – 10,000 | |
//! | connector `timeout` | 1 ms – 1 hour | |
//! | connector `permits` | 1 – 10,000 | |
//! | connector `rate` | 0 (unlimited), or 0.001 – 1,000,000 /s | |
//! | connector `breaker_failure_rate` | above 0 – 1 | a fraction |
//! | connector `breaker_min_calls` | 1 – 1,000,000 | |
//! | connector `breaker_window`, `breaker_open` | 1 ms – 1 day | |
//! | unit prices | 0 – 10^12 | a total over a year still prints as a number |
//! | `fuel_per_cpu_second` | above 0 – 10^15 | |
//! | backfill, one request | [`BACKFILL_PER_REQUEST`] fire times | |
//! | backfill, per tenant | [`BACKFILL_PENDING_PER_TENANT`] waiting backfill triggers | |
//! | `effects recover --limit` | 1 – 10,000 | |
//! | `serve --concurrency`, `--claim-batch` | 1 – 10,000 | a semaphore of more permits than tokio allows panics |
//! | `serve --lease` | 1 ms – 1 day | |
//! | `serve --max-missed-heartbeats` | 1 – 100 | |
//!
//! Group memory is bounded by the host's ceiling (`sandbox`), output caps
//! by [`super::caps::MAX_CAP`], token lifetimes by 366 days, and min-share
//! and recovery-share by the group itself ([`super::shares`]).

/// An inclusive range of whole numbers a setting may take, and the unit
/// its message shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// As the flag and the file spell it (`max-in-flight`).
    pub field: &'static str,
    pub min: i64,
    pub max: i64,
    pub unit: Unit,
}

/// How a bound's numbers read in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Millis,
    Bytes,
}

const SECOND: i64 = 1_000;
const HOUR: i64 = 3_600 * SECOND;
const DAY: i64 = 24 * HOUR;

const fn count(field: &'static str, min: i64, max: i64) -> Bound {
    Bound {
        field,
        min,
        max,
        unit: Unit::Count,
    }
}

const fn millis(field: &'static str, min: i64, max: i64) -> Bound {
    Bound {
        field,
        min,
        max,
        unit: Unit::Millis,
    }
}

const fn bytes(field: &'static str, max: i64) -> Bound {
    Bound {
        field,
        min: 1,
        max,
        unit: Unit::Bytes,
    }
}

// Tenants.
pub const WEIGHT: Bound = count("weight", 1, 1_000);
pub const TENANT_MAX_IN_FLIGHT: Bound = count("max-in-flight", 1, 100_000);
pub const TRIGGERS_PER_MINUTE: Bound = count("triggers-per-minute", 1, 1_000_000);
pub const FUEL_PER_HOUR: Bound = count("fuel-per-hour", 1, 100_000_000_000_000_000);

// Resource groups.
pub const FUEL: Bound = count("fuel", 1, 100_000_000_000_000);
pub const DEADLINE: Bound = millis("deadline", 1, 7 * DAY);
pub const CONCURRENCY: Bound = count("concurrency", 1, 10_000);
pub const SERVICE_TIME: Bound = millis("service-time", 1, DAY);
pub const DB_CONNECTIONS: Bound = count("db-connections", 1, 10_000);
pub const MEMORY_BUDGET: Bound = bytes("memory-budget", 1 << 50);
pub const WORKING_SET: Bound = bytes("working-set", 1 << 50);
pub const AGING: Bound = millis("aging", 1, DAY);
pub const RAMP_EVERY: Bound = millis("ramp-every", 1, DAY);
/// Calls per second a group's downstream takes (above 0).
pub const CONNECTOR_RATE_MAX: f64 = 1_000_000.0;

// Retries (job manifests' `[retry]`).
pub const MAX_ATTEMPTS: Bound = count("retry.max_attempts", 1, 100);
pub const BACKOFF: Bound = millis("retry.backoff", 0, DAY);
pub const BACKOFF_MAX: Bound = millis("retry.backoff_max", 0, 7 * DAY);
pub const MAX_AGE: Bound = millis("retry.max_age", 0, 366 * DAY);
pub const MAX_ELAPSED: Bound = millis("retry.max_elapsed", 0, 366 * DAY);

// Schedules (job manifests' `[schedule]`).
pub const MAX_CATCHUP: Bound = count("max_catchup", 0, 10_000);
pub const SCHEDULE_MAX_IN_FLIGHT: Bound = count("max_in_flight", 1, 10_000);

// Connectors.
pub const TIMEOUT: Bound = millis("timeout", 1, HOUR);
pub const PERMITS: Bound = count("permits", 1, 10_000);
pub const BREAKER_MIN_CALLS: Bound = count("breaker-min-calls", 1, 1_000_000);
pub const BREAKER_WINDOW: Bound = millis("breaker-window", 1, DAY);
pub const BREAKER_OPEN: Bound = millis("breaker-open", 1, DAY);
/// Calls per second a connector makes (0: unlimited).
pub const CONNECTOR_CALL_RATE_MAX: f64 = 1_000_000.0;
/// The slowest limited rate: one call in about 17 minutes. Slower is a
/// connector that never calls (its wait would not fit in a timer).
pub const CONNECTOR_CALL_RATE_MIN: f64 = 0.001;

// Prices.
/// The largest unit price (any currency).
pub const PRICE_MAX: f64 = 1e12;
/// The largest fuel → CPU-second conversion.
pub const FUEL_PER_CPU_SECOND_MAX: f64 = 1e15;

// `paddock serve`'s own flags.
pub const SERVE_CONCURRENCY: Bound = count("concurrency", 1, 10_000);
pub const CLAIM_BATCH: Bound = count("claim-batch", 1, 10_000);
pub const LEASE: Bound = millis("lease", 1, DAY);
/// Renewals in a row that may fail before a runner stops trusting its
/// lease (the commit gate closes): at least one, and never so many that a
/// lease could outlive them.
pub const MAX_MISSED_HEARTBEATS: Bound = count("max-missed-heartbeats", 1, 100);

// Requests.
/// The most fire times one backfill request covers (and one preview
/// shows): a bigger window is refused, not truncated.
pub const BACKFILL_PER_REQUEST: usize = 10_000;
/// The most backfill triggers a tenant may have waiting to run (pending or
/// waiting to retry) — what its backfills may add to the recovery lane
/// before some of them have run. Two full requests.
pub const BACKFILL_PENDING_PER_TENANT: i64 = 20_000;
/// The most effects one `effects recover` asks about.
pub const RECOVER_LIMIT: Bound = count("limit", 1, 10_000);

impl Bound {
    /// `value` if it is within the bound; else the refusal, naming the
    /// field and the limit (`weight must be at most 1000, not 5000`).
    pub fn check(&self, value: i64) -> Result<i64, String> {
        if value < self.min {
            return Err(if self.min == 1 {
                format!("{} must be positive, not {}", self.field, self.show(value))
            } else {
                format!(
                    "{} must be at least {}, not {}",
                    self.field,
                    self.show(self.min),
                    self.show(value)
                )
            });
        }
        if value > self.max {
            return Err(format!(
                "{} must be at most {}, not {}",
                self.field,
                self.show(self.max),
                self.show(value)
            ));
        }
        Ok(value)
    }

    /// [`Bound::check`] for an unsigned value (a manifest's `u32`, a
    /// duration's milliseconds).
    pub fn check_u64(&self, value: u64) -> Result<u64, String> {
        match i64::try_from(value) {
            Ok(v) => self.check(v).map(|v| v as u64),
            Err(_) => Err(format!(
                "{} must be at most {}, not {value}",
                self.field,
                self.show(self.max)
            )),
        }
    }

    /// The first of `values` out of its bound (a `None` is not set).
    pub fn first_problem<'a>(
        values: impl IntoIterator<Item = (&'a Bound, Option<i64>)>,
    ) -> Option<String> {
        values
            .into_iter()
            .find_map(|(bound, value)| value.and_then(|v| bound.check(v).err()))
    }

    fn show(&self, value: i64) -> String {
        match self.unit {
            Unit::Count => value.to_string(),
            Unit::Millis => millis_text(value),
            Unit::Bytes => bytes_text(value),
        }
    }
}

/// A number of milliseconds as people write durations (`7d`, `1h`,
/// `250ms`), exact.
fn millis_text(ms: i64) -> String {
    for (unit, size) in [("d", DAY), ("h", HOUR), ("m", 60 * SECOND), ("s", SECOND)] {
        if ms != 0 && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A number of bytes, in the largest binary unit that divides it.
fn bytes_text(b: i64) -> String {
    for (unit, shift) in [
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
    ] {
        if b != 0 && b % (1i64 << shift) == 0 {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b} bytes")
}

/// A rate or price: finite, within `(0 or more, max]`. `positive`: 0 is
/// refused too.
pub fn check_real(field: &str, value: f64, positive: bool, max: f64) -> Result<f64, String> {
    let floor_ok = if positive { value > 0.0 } else { value >= 0.0 };
    if !value.is_finite() || !floor_ok {
        let floor = if positive { "more than 0" } else { "0 or more" };
        return Err(format!(
            "{field} must be a finite number, {floor}, not {value}"
        ));
    }
    if value > max {
        return Err(format!("{field} must be at most {max}, not {value}"));
    }
    Ok(value)
}

/// A backfill's `max` (fire times one request may cover): at most
/// [`BACKFILL_PER_REQUEST`].
pub fn backfill_max(max: usize) -> Result<usize, String> {
    if max == 0 || max > BACKFILL_PER_REQUEST {
        return Err(format!(
            "max must be between 1 and {BACKFILL_PER_REQUEST} fire times per backfill, not \
             {max}: split the window"
        ));
    }
    Ok(max)
}

/// The refusal of a backfill that would leave `tenant` with `waiting`
/// backfill triggers not yet run, over [`BACKFILL_PENDING_PER_TENANT`].
pub fn backfill_pending(tenant: &str, waiting: i64) -> Result<(), String> {
    if waiting > BACKFILL_PENDING_PER_TENANT {
        return Err(format!(
            "tenant '{tenant}' would have {waiting} backfill triggers waiting to run, over the \
             limit of {BACKFILL_PENDING_PER_TENANT}: wait for some to run, or cancel some"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_takes_its_limits_and_refuses_one_past_naming_them() {
        assert_eq!(WEIGHT.check(1), Ok(1));
        assert_eq!(WEIGHT.check(1_000), Ok(1_000));
        assert_eq!(
            WEIGHT.check(1_001).unwrap_err(),
            "weight must be at most 1000, not 1001"
        );
        assert_eq!(
            WEIGHT.check(0).unwrap_err(),
            "weight must be positive, not 0"
        );
        assert_eq!(
            DEADLINE.check(7 * DAY + 1).unwrap_err(),
            "deadline must be at most 7d, not 604800001ms"
        );
        assert_eq!(
            MEMORY_BUDGET.check((1 << 50) + 1024).unwrap_err(),
            "memory-budget must be at most 1PiB, not 1099511627777KiB"
        );
        assert_eq!(
            MAX_CATCHUP.check(-1).unwrap_err(),
            "max_catchup must be at least 0, not -1"
        );
        assert!(
            MAX_ATTEMPTS
                .check_u64(u64::MAX)
                .unwrap_err()
                .contains("at most 100")
        );
    }

    #[test]
    fn reals_refuse_infinity_nan_negatives_and_past_the_max() {
        assert!(check_real("rate", 0.0, false, 10.0).is_ok());
        assert!(check_real("rate", 0.0, true, 10.0).is_err());
        assert!(check_real("rate", f64::NAN, false, 10.0).is_err());
        assert!(check_real("rate", f64::INFINITY, false, 10.0).is_err());
        assert_eq!(
            check_real("retry", 1e308, false, PRICE_MAX).unwrap_err(),
            format!("retry must be at most 1000000000000, not {}", 1e308)
        );
    }

    #[test]
    fn a_backfill_is_bounded_per_request_and_per_tenant() {
        assert_eq!(backfill_max(BACKFILL_PER_REQUEST), Ok(BACKFILL_PER_REQUEST));
        assert!(
            backfill_max(BACKFILL_PER_REQUEST + 1)
                .unwrap_err()
                .contains("10000")
        );
        assert!(backfill_pending("acme", BACKFILL_PENDING_PER_TENANT).is_ok());
        assert!(
            backfill_pending("acme", BACKFILL_PENDING_PER_TENANT + 1)
                .unwrap_err()
                .contains("limit of 20000")
        );
    }
}
