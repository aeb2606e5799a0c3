//! One scrape's registry: the process's instruments (shared, not copied)
//! and the database's snapshot as fresh gauges and counters, encoded in the
//! Prometheus text format. Every name, type and label is here; the list is
//! in `docs/architecture.md` ("Metrics and health").

use crate::effects::BreakerPhase;
use crate::lease::LeaseMetrics;
use crate::store::{MetricsSnapshot, STALE_TOKEN_KIND_PREFIX};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// The `Content-Type` of what [`render`] returns.
pub(super) const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Said first in the HELP of every figure read from the database.
const DB: &str = "Cluster-wide, read from the database at scrape time (every node reports the same value; aggregate with max):";
/// Said first in the HELP of every figure this process measures.
const PROC: &str = "This process (sum over nodes):";

type Labels = Vec<(&'static str, String)>;
type SecondsGauge = Gauge<f64, AtomicU64>;

/// The text of one scrape.
pub(super) fn render(here: &ProcessFigures<'_>, snapshot: Option<&MetricsSnapshot>) -> String {
    let mut registry = Registry::default();
    process(&mut registry, here);
    let up = Gauge::<i64>::default();
    up.set(snapshot.is_some() as i64);
    registry.register(
        "paddock_database_up",
        "Whether this scrape could read the database's figures (1) or not (0)",
        up,
    );
    if let Some(snapshot) = snapshot {
        triggers(&mut registry, snapshot);
        fencing(&mut registry, snapshot);
        effects(&mut registry, snapshot);
        capacity(&mut registry, snapshot);
    }
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry).expect("writing to a String cannot fail");
    text
}

fn help(source: &str, what: &str) -> String {
    format!("{source} {what}")
}

fn seconds(ms: i64) -> f64 {
    ms.max(0) as f64 / 1000.0
}

/// A gauge family filled from `rows`.
fn gauges(rows: impl IntoIterator<Item = (Labels, i64)>) -> Family<Labels, Gauge> {
    let family = Family::<Labels, Gauge>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    family
}

/// A gauge family of fractional values (seconds, ratios) filled from `rows`.
fn float_gauges(rows: impl IntoIterator<Item = (Labels, f64)>) -> Family<Labels, SecondsGauge> {
    let family = Family::<Labels, SecondsGauge>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    family
}

/// A counter at `value` (a total kept elsewhere: the database).
fn counter(value: i64) -> Counter {
    let c = Counter::default();
    c.inc_by(value.max(0) as u64);
    c
}

/// What this process measures, as one scrape reads it.
#[derive(Clone, Copy)]
pub(super) struct ProcessFigures<'a> {
    pub lease: &'a LeaseMetrics,
    pub breakers: &'a [(String, BreakerPhase)],
    /// The store's claims refused at their check ([`crate::Store::claims_refused`]).
    pub claims_refused: u64,
}

fn process(registry: &mut Registry, here: &ProcessFigures<'_>) {
    let ProcessFigures {
        lease,
        breakers,
        claims_refused,
    } = *here;
    registry.register_with_unit(
        "paddock_trigger_delay",
        help(PROC, "scheduled time to the start of each trigger's first attempt (database clock), by resource group"),
        Unit::Seconds,
        lease.trigger_delay.clone(),
    );
    registry.register(
        "paddock_claims",
        help(PROC, "triggers claimed, by resource group"),
        lease.claims.clone(),
    );
    let jobs = lease.jobs.snapshot();
    // The table is keyed by `tenant/job`; each is a label of its own.
    let job_labels = |qualified: &str| -> Labels {
        match qualified.split_once('/') {
            Some((tenant, job)) => vec![("tenant", tenant.to_string()), ("job", job.to_string())],
            None => vec![("job", qualified.to_string())],
        }
    };
    let by_job = |n: fn(&(String, u64, u64)) -> u64| {
        let family = Family::<Labels, Counter>::default();
        for row in &jobs {
            family.get_or_create(&job_labels(&row.0)).inc_by(n(row));
        }
        family
    };
    registry.register(
        "paddock_attempts_started",
        help(PROC, "attempts started (claims), by job"),
        by_job(|r| r.1),
    );
    registry.register(
        "paddock_triggers_started",
        help(PROC, "triggers started for the first time, by job"),
        by_job(|r| r.2),
    );
    registry.register(
        "paddock_retry_amplification",
        help(PROC, "attempts started per trigger started, by job (cluster-wide: sum(paddock_attempts_started_total) / sum(paddock_triggers_started_total))"),
        float_gauges(jobs.iter().filter(|r| r.2 > 0).map(|(job, attempts, triggers)| {
            (job_labels(job), *attempts as f64 / *triggers as f64)
        })),
    );
    registry.register_with_unit(
        "paddock_lease_renewal",
        help(PROC, "latency of each heartbeat's fenced lease renewal"),
        Unit::Seconds,
        lease.renewal.clone(),
    );
    registry.register(
        "paddock_missed_heartbeats",
        help(PROC, "heartbeat renewals that failed or timed out; max_missed_heartbeats in a row give the lease up"),
        lease.missed_heartbeats.clone(),
    );
    registry.register(
        "paddock_lease_conflicts",
        help(PROC, "leases a heartbeat gave up: reason=lost (another token or owner holds the trigger) or unconfirmed (max_missed_heartbeats renewals in a row failed)"),
        lease.lease_conflicts.clone(),
    );
    registry.register_with_unit(
        "paddock_lost_lease_stop",
        help(
            PROC,
            "from the commit gate closing on a lost lease to the attempt's end",
        ),
        Unit::Seconds,
        lease.lost_lease_stop.clone(),
    );
    registry.register(
        "paddock_claims_refused",
        help(PROC, "PostgreSQL claims whose batch, chosen without the claims' lock, was refused at its check (another process's claim took the room meanwhile, or a gate closed) and claimed again under the lock; always 0 on SQLite"),
        counter(claims_refused as i64),
    );
    registry.register(
        "paddock_breaker_state",
        help(
            PROC,
            "circuit breaker per connector loaded here: 0 closed, 1 half-open, 2 open",
        ),
        gauges(
            breakers
                .iter()
                .map(|(name, phase)| (vec![("connector", name.clone())], *phase as i64)),
        ),
    );
}

fn triggers(registry: &mut Registry, s: &MetricsSnapshot) {
    registry.register(
        "paddock_triggers",
        help(DB, "triggers not finished, by state (pending, retry_wait, running, manual: waiting for a person (an approval, or an open ticket's answer), paused: held by a closed gate), resource group and tenant"),
        gauges(s.triggers.iter().map(|t| {
            let labels = vec![
                ("state", t.state.clone()),
                ("group", t.group.clone()),
                ("tenant", t.tenant.clone()),
            ];
            (labels, t.count)
        })),
    );
    // The oldest due, unclaimed trigger per group: pending or retry_wait
    // with next_run_at <= now (0 when none is due).
    let mut oldest: Vec<(String, i64)> = Vec::new();
    for t in &s.triggers {
        let Some(next) = t.earliest_next_run.filter(|_| t.state != "running") else {
            continue;
        };
        let age = (s.now - next).max(0);
        match oldest.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, a)) => *a = (*a).max(age),
            None => oldest.push((t.group.clone(), age)),
        }
    }
    registry.register_with_unit(
        "paddock_oldest_due_age",
        help(DB, "age of the oldest due trigger not yet claimed (pending or retry_wait), by resource group; 0 when none is due"),
        Unit::Seconds,
        float_gauges(oldest.into_iter().map(|(g, age)| (vec![("group", g)], seconds(age)))),
    );
}

fn fencing(registry: &mut Registry, s: &MetricsSnapshot) {
    let stale = Family::<Labels, Counter>::default();
    let mut by_kind = 0;
    for (name, value) in &s.counters {
        if let Some(kind) = name.strip_prefix(STALE_TOKEN_KIND_PREFIX) {
            by_kind += value;
            stale
                .get_or_create(&vec![("side", "host".into()), ("kind", kind.into())])
                .inc_by((*value).max(0) as u64);
        }
    }
    // Rejections counted before writes were told apart by kind.
    let unlabelled = s.counter("stale_token_rejections") - by_kind;
    if unlabelled > 0 {
        stale
            .get_or_create(&vec![("side", "host".into()), ("kind", "unknown".into())])
            .inc_by(unlabelled as u64);
    }
    stale
        .get_or_create(&vec![
            ("side", "downstream".into()),
            ("kind", "effect".into()),
        ])
        .inc_by(s.counter("downstream_stale_token_rejections").max(0) as u64);
    registry.register(
        "paddock_stale_token_rejections",
        help(DB, "writes refused for a stale fencing token: side=host (the database; kind = heartbeat, checkpoint, result_commit, release, effect_intent, effect_outcome) or side=downstream (a connector that compares tokens)"),
        stale,
    );
    registry.register(
        "paddock_stale_shard_generation_rejections",
        help(
            DB,
            "scan commits refused because the shard moved to another scheduler",
        ),
        counter(s.counter("stale_shard_generation_rejections")),
    );
    let lag = s.shards.iter().filter_map(|(shard, watermark)| {
        watermark.map(|w| (vec![("shard", shard.to_string())], seconds(s.now - w)))
    });
    registry.register_with_unit(
        "paddock_scanner_lag",
        help(DB, "database clock minus the shard's watermark (every fire time before it is decided), by shard; a shard never scanned is absent"),
        Unit::Seconds,
        float_gauges(lag),
    );
}

fn effects(registry: &mut Registry, s: &MetricsSnapshot) {
    let counters = [
        (
            "paddock_effect_idempotency_hits",
            "effect_idempotency_hits",
            "effects answered from their record or the downstream's instead of performed again",
        ),
        (
            "paddock_effect_unknown_outcomes",
            "effect_unknown",
            "effect outcomes that became unknown (timeouts, lost answers)",
        ),
        (
            "paddock_effect_key_conflicts",
            "effect_key_conflicts",
            "idempotency keys presented with other params than recorded",
        ),
        (
            "paddock_exceptions_opened",
            "exceptions_opened",
            "exception tickets opened",
        ),
    ];
    for (metric, name, what) in counters {
        registry.register(metric, help(DB, what), counter(s.counter(name)));
    }
    let unknown = Gauge::<i64>::default();
    unknown.set(s.unknown_effects);
    registry.register(
        "paddock_effects_unknown",
        help(DB, "effects whose outcome is unknown now"),
        unknown,
    );
    let age = SecondsGauge::default();
    age.set(s.oldest_unknown_at.map_or(0.0, |at| seconds(s.now - at)));
    registry.register_with_unit(
        "paddock_effects_unknown_oldest_age",
        help(
            DB,
            "age of the oldest effect whose outcome is unknown, from its first intent; 0 when none",
        ),
        Unit::Seconds,
        age,
    );
    registry.register(
        "paddock_compensations",
        help(DB, "compensating effects recorded"),
        counter(s.compensations),
    );
    registry.register(
        "paddock_exceptions_open",
        help(DB, "exception tickets open, by kind"),
        gauges(
            s.exceptions
                .iter()
                .map(|e| (vec![("kind", e.kind.clone())], e.open)),
        ),
    );
    let oldest = s.exceptions.iter().filter_map(|e| e.oldest_at).min();
    let age = SecondsGauge::default();
    age.set(oldest.map_or(0.0, |at| seconds(s.now - at)));
    registry.register_with_unit(
        "paddock_exceptions_open_oldest_age",
        help(DB, "age of the oldest open exception ticket; 0 when none"),
        Unit::Seconds,
        age,
    );
}

fn capacity(registry: &mut Registry, s: &MetricsSnapshot) {
    registry.register(
        "paddock_effective_concurrency",
        help(
            DB,
            "attempts a resource group may run at once, as the governor last set it",
        ),
        gauges(
            s.groups
                .iter()
                .map(|(g, n)| (vec![("group", g.clone())], *n)),
        ),
    );
    let takeovers = s.takeovers_by_group();
    registry.register(
        "paddock_takeovers",
        help(
            DB,
            "triggers taken over from a holder that was gone in the last hour, by resource group",
        ),
        gauges(
            takeovers
                .iter()
                .map(|(g, t)| (vec![("group", g.clone())], t.count)),
        ),
    );
    registry.register_with_unit(
        "paddock_takeover_latency",
        help(
            DB,
            "how long a trigger whose holder was gone stood still before its takeover started (from the holder's lease end, or its database session's end), last hour, by resource group and quantile (0.5, 0.99, 1)",
        ),
        Unit::Seconds,
        float_gauges(takeovers.iter().flat_map(|(g, t)| {
            [("0.5", t.p50_ms), ("0.99", t.p99_ms), ("1", t.max_ms)]
                .into_iter()
                .filter_map(move |(q, ms)| {
                    ms.map(|ms| (vec![("group", g.clone()), ("quantile", q.to_string())], seconds(ms)))
                })
        })),
    );
}
