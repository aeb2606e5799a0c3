//! What the execution plane measures in this process: claims and the
//! trigger delay they saw, attempts against triggers (retry amplification),
//! heartbeat renewal latency and lost leases, and how long a guest took to
//! stop once its lease was lost. The `observe` module exports them.
//!
//! Cost on the hot paths: a claim adds, per claimed trigger, a counter
//! increment or two and (first attempts only) one histogram observation; a
//! renewal one observation; nothing here awaits or touches the database.
//! Labels are bounded sets an admin defines (resource groups, job ids) —
//! never a trigger id.

use crate::model::Claim;
use crate::sandbox::StopSignal;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// A resource group.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabel {
    pub group: String,
}

/// Attempts and first attempts of one job in this process.
#[derive(Debug, Default)]
struct JobCounts {
    attempts: AtomicU64,
    triggers: AtomicU64,
}

/// Per job, readable as a whole at scrape time (a metric family cannot be
/// iterated, and retry amplification is their quotient): a read lock and
/// two atomic adds per claimed trigger, a write lock the first time a job
/// is seen.
#[derive(Debug, Default, Clone)]
pub struct JobTable(Arc<RwLock<HashMap<String, Arc<JobCounts>>>>);

impl JobTable {
    fn count(&self, job: &str, first: bool) {
        let found = self.0.read().expect("job table").get(job).cloned();
        let counts = match found {
            Some(counts) => counts,
            None => self
                .0
                .write()
                .expect("job table")
                .entry(job.to_string())
                .or_default()
                .clone(),
        };
        counts.attempts.fetch_add(1, Ordering::Relaxed);
        if first {
            counts.triggers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `(job, attempts started, triggers started)`, by job id.
    pub fn snapshot(&self) -> Vec<(String, u64, u64)> {
        let mut rows: Vec<_> = self
            .0
            .read()
            .expect("job table")
            .iter()
            .map(|(job, c)| {
                (
                    job.clone(),
                    c.attempts.load(Ordering::Relaxed),
                    c.triggers.load(Ordering::Relaxed),
                )
            })
            .collect();
        rows.sort();
        rows
    }
}

/// Why a heartbeat gave a lease up.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConflictLabel {
    /// `lost`: the renewal found another token or owner; `unconfirmed`:
    /// `max_missed_heartbeats` renewals in a row failed.
    pub reason: &'static str,
}

/// A histogram constructor (a `fn`, so families of histograms have a
/// nameable type).
pub type NewHistogram = fn() -> Histogram;

/// Bucket bounds in seconds for delays a scheduler cares about: 1 ms to
/// about 17 minutes.
fn delay_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
        1000.0,
    ])
}

/// Bucket bounds in seconds for database round trips and stops: 0.5 ms to
/// 10 s.
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
    ])
}

/// The execution plane's instruments in one process. Cheap to clone (every
/// field shares its values).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseMetrics {
    /// Scheduled → started, of each trigger's first attempt, by group.
    pub trigger_delay: Family<GroupLabel, Histogram, NewHistogram>,
    /// Triggers claimed, by group.
    pub claims: Family<GroupLabel, Counter>,
    /// Attempts started and triggers started for the first time, by job.
    pub jobs: JobTable,
    /// Latency of each heartbeat renewal (a fenced write).
    pub renewal: Histogram,
    /// Renewals that failed or timed out (the lease went unconfirmed for
    /// one heartbeat period; `max_missed_heartbeats` in a row give it up).
    pub missed_heartbeats: Counter,
    /// Leases a heartbeat gave up, by why.
    pub lease_conflicts: Family<ConflictLabel, Counter>,
    /// From the commit gate closing (lease lost) to the attempt's end.
    pub lost_lease_stop: Histogram,
}

impl Default for LeaseMetrics {
    fn default() -> Self {
        Self {
            trigger_delay: Family::new_with_constructor(delay_histogram),
            claims: Family::default(),
            jobs: JobTable::default(),
            renewal: latency_histogram(),
            missed_heartbeats: Counter::default(),
            lease_conflicts: Family::default(),
            lost_lease_stop: latency_histogram(),
        }
    }
}

impl LeaseMetrics {
    /// A claim's triggers: counted, and the first attempts' delay observed
    /// (the claim's start on the database clock − the scheduled time).
    pub fn claimed(&self, claims: &[Claim]) {
        for claim in claims {
            let group = GroupLabel {
                group: claim.resource_group.clone(),
            };
            self.claims.get_or_create(&group).inc();
            let first = claim.attempt_no == 1;
            // Keyed by the job's qualified name: two tenants' jobs of one
            // id are two jobs (exported as `tenant` and `job` labels).
            self.jobs.count(
                &crate::model::plan::JobName::qualified(&claim.tenant, &claim.job_id),
                first,
            );
            if first {
                let delay_ms = (claim.started_at - claim.scheduled_at).max(0);
                self.trigger_delay
                    .get_or_create(&group)
                    .observe(delay_ms as f64 / 1000.0);
            }
        }
    }

    /// One renewal's round trip.
    pub fn renewed(&self, took: Duration) {
        self.renewal.observe(took.as_secs_f64());
    }

    /// A renewal failed or timed out.
    pub fn heartbeat_missed(&self) {
        self.missed_heartbeats.inc();
    }

    /// A heartbeat gave its lease up (`lost` or `unconfirmed`).
    pub fn lease_given_up(&self, reason: &'static str) {
        self.lease_conflicts
            .get_or_create(&ConflictLabel { reason })
            .inc();
    }

    /// An attempt ended: if its lease had been lost, how long it took to
    /// stop since.
    pub fn attempt_ended(&self, stop: &StopSignal) {
        if let Some(since) = stop.lease_lost_for() {
            self.lost_lease_stop.observe(since.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_table_counts_attempts_and_first_attempts_per_job() {
        let jobs = JobTable::default();
        jobs.count("b", true);
        jobs.count("a", true);
        jobs.count("a", false);
        jobs.count("a", false);
        assert_eq!(
            jobs.snapshot(),
            vec![("a".to_string(), 3, 1), ("b".to_string(), 1, 1)]
        );
    }
}
