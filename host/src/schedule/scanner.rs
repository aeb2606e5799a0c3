//! The scanner: the I/O half of trigger control (the only file in this
//! folder that touches the database).
//!
//! Each tick, for every logical shard it can lease, it computes the window
//! `[watermark − overlap, now + lookahead)` on the **database** clock, turns
//! every job's fire times in that window into triggers (`ON CONFLICT DO
//! NOTHING` on the plan key, counting new vs already existing), applies the
//! misfire policy to late times that are not yet decided, and advances the
//! watermark only under the shard generation it leased.
//!
//! Invariants (tested in `tests/all/scheduler.rs`):
//! - a crash never loses a fire time: the watermark moves only after the
//!   triggers before it are committed, and the next owner re-scans from
//!   `watermark − overlap`;
//! - a crash never doubles a trigger: the plan key is unique;
//! - a late fire time is decided once (fire, park or skip) — a re-scan
//!   never turns an already-created trigger into a "missed" one;
//! - a scanner whose shard moved on writes nothing: its triggers, skipped
//!   fires and watermark commit together, each statement fenced by the
//!   shard's generation and owner (`store::fence`), so a scheduler that
//!   stalled past its lease cannot run a fire time its successor skipped.

use super::{MisfireAction, Schedule, ScheduleSpec, Window, classify_misfires, scan_window};
use crate::model::time::{from_millis, to_millis};
use crate::model::{ShardGeneration, ShardLease, TriggerState};
use crate::store::{
    JobScheduleRecord, ScanCommit, ScheduledTrigger, SchedulerStore, Store, StoreError, StoreResult,
};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Scanner settings. Every default is listed in [`ScannerConfig::default`].
#[derive(Debug, Clone)]
pub struct ScannerConfig {
    /// Recorded as the shard owner.
    pub owner: String,
    /// Shard lease length. Default 10 s.
    pub shard_lease: Duration,
    /// How far behind the watermark each scan starts again. Default 10 s.
    pub overlap: Duration,
    /// How far ahead of now triggers are created. Default 2 s.
    pub lookahead: Duration,
    /// Where a shard's very first scan starts, before now. Default 10 s.
    pub initial_lookback: Duration,
    /// The longest window one scan covers; a shard further behind catches
    /// up over several ticks. Default 1 h.
    pub max_window: Duration,
    /// Time between ticks. Default 1 s.
    pub tick: Duration,
}

impl Default for ScannerConfig {
    fn default() -> Self {
        Self {
            owner: format!("scheduler-{}", std::process::id()),
            shard_lease: Duration::from_secs(10),
            overlap: Duration::from_secs(10),
            lookahead: Duration::from_secs(2),
            initial_lookback: Duration::from_secs(10),
            max_window: Duration::from_secs(3600),
            tick: Duration::from_secs(1),
        }
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Shards this scanner held and scanned.
    pub shards: u32,
    /// Triggers created by this tick.
    pub created: i64,
    /// Triggers this tick computed that already existed (absorbed by the
    /// plan key).
    pub existing: i64,
    /// Late fire times skipped by the misfire policy.
    pub skipped: i64,
    /// Late fire times parked for approval.
    pub parked: i64,
    /// Shards whose watermark could not advance because their generation
    /// moved on.
    pub stale: u32,
    /// The earliest fire time created by this tick, in ms.
    pub earliest_created: Option<i64>,
}

impl ScanReport {
    fn add(&mut self, other: &ScanReport) {
        self.shards += other.shards;
        self.created += other.created;
        self.existing += other.existing;
        self.skipped += other.skipped;
        self.parked += other.parked;
        self.stale += other.stale;
        self.earliest_created = match (self.earliest_created, other.earliest_created) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

type Compiled = Arc<(ScheduleSpec, Schedule)>;
/// (count, newest update, sum of versions) of a shard's schedules.
type Fingerprint = (i64, i64, i64);
/// (job, fire time in ms)
type FireKey = (String, String, i64);
/// A shard's schedules as last loaded.
type ShardJobs = (Fingerprint, Arc<Vec<JobScheduleRecord>>);

/// A scheduler loop over the store's shards.
pub struct Scanner {
    store: Arc<dyn SchedulerStore>,
    config: ScannerConfig,
    /// Compiled schedules by job, with the version and spec they came from.
    compiled: Mutex<HashMap<(String, String), (i64, String, Compiled)>>,
    /// Per shard: the schedules as last loaded, with their fingerprint.
    shard_jobs: Mutex<HashMap<u32, ShardJobs>>,
    /// Per shard: the generation of this scanner's last scan and the
    /// (job, fire time) pairs it knows are stored from the next overlap on.
    /// Under the same generation nobody else wrote the shard's watermark, so
    /// the overlap re-scan need not ask the database what exists.
    recent: Mutex<HashMap<u32, (ShardGeneration, HashSet<FireKey>)>>,
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

impl Scanner {
    pub fn new(store: Store, config: ScannerConfig) -> Arc<Self> {
        Self::with_store(Arc::new(store), config)
    }

    /// A scanner over any [`SchedulerStore`] (tests wrap one to stall a
    /// scan between its shard lease and its writes).
    pub fn with_store(store: Arc<dyn SchedulerStore>, config: ScannerConfig) -> Arc<Self> {
        Arc::new(Self {
            store,
            config,
            compiled: Mutex::new(HashMap::new()),
            shard_jobs: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
        })
    }

    pub fn config(&self) -> &ScannerConfig {
        &self.config
    }

    /// Scan every shard this scanner can lease. `now` overrides the
    /// database clock (tests only).
    pub async fn tick(&self, now: Option<i64>) -> StoreResult<ScanReport> {
        let mut report = ScanReport::default();
        for shard in 0..self.store.shard_count().await? {
            let lease = self
                .store
                .shard_lease(
                    shard,
                    &self.config.owner,
                    self.config.shard_lease.as_millis() as i64,
                    now,
                )
                .await?;
            if let Some(lease) = lease {
                report.add(&self.scan_shard(&lease).await?);
            }
        }
        Ok(report)
    }

    /// Give up every shard this scanner holds (on drain), so another
    /// process takes them over without waiting for the lease to lapse.
    pub async fn release_all(&self) -> StoreResult<()> {
        for shard in self.store.shards_list().await? {
            if shard.owner.as_deref() == Some(self.config.owner.as_str()) {
                let lease = ShardLease {
                    shard: shard.shard,
                    generation: ShardGeneration::new(shard.generation),
                    owner: self.config.owner.clone(),
                    watermark: shard.watermark,
                    now: 0,
                };
                self.store.shard_release(&lease).await?;
            }
        }
        Ok(())
    }

    /// The schedules of a shard, reloaded only when their fingerprint moved.
    async fn jobs_of(&self, shard: u32) -> StoreResult<Arc<Vec<JobScheduleRecord>>> {
        let fingerprint = self.store.schedules_fingerprint(shard).await?;
        if let Some((seen, jobs)) = self.shard_jobs.lock().expect("shard jobs").get(&shard)
            && *seen == fingerprint
        {
            return Ok(jobs.clone());
        }
        let jobs = Arc::new(self.store.schedules_in_shard(shard).await?);
        self.shard_jobs
            .lock()
            .expect("shard jobs")
            .insert(shard, (fingerprint, jobs.clone()));
        Ok(jobs)
    }

    fn compiled(&self, job: &JobScheduleRecord) -> Result<Compiled, String> {
        let mut cache = self.compiled.lock().expect("schedule cache");
        let key = (job.tenant.clone(), job.job_id.clone());
        if let Some((version, spec, compiled)) = cache.get(&key)
            && *version == job.plan_version
            && *spec == job.spec
        {
            return Ok(compiled.clone());
        }
        let spec: ScheduleSpec = serde_json::from_str(&job.spec)
            .map_err(|e| format!("stored schedule unreadable: {e}"))?;
        let schedule = spec.compile().map_err(|e| e.to_string())?;
        let compiled = Arc::new((spec, schedule));
        cache.insert(key, (job.plan_version, job.spec.clone(), compiled.clone()));
        Ok(compiled)
    }

    /// The window this lease's scan covers, on the database clock.
    fn window(&self, lease: &ShardLease) -> Window {
        let mut window = scan_window(
            lease.watermark.map(from_millis),
            delta(self.config.overlap),
            from_millis(lease.now),
            delta(self.config.lookahead),
            delta(self.config.initial_lookback),
        );
        let max_window = delta(self.config.max_window);
        if window.to - window.from > max_window {
            window.to = window.from + max_window;
        }
        window
    }

    async fn scan_shard(&self, lease: &ShardLease) -> StoreResult<ScanReport> {
        let window = self.window(lease);
        let mut report = ScanReport {
            shards: 1,
            ..ScanReport::default()
        };
        let mut scan = ScanCommit {
            watermark: to_millis(window.to),
            ..ScanCommit::default()
        };
        let shard = lease.shard as u32;
        for job in self.jobs_of(shard).await?.iter() {
            self.decide_job(job, window, lease.now, &mut scan, &mut report)
                .await?;
        }
        let (known, next_known) = self.drop_known(lease, window, &mut scan.triggers).await?;
        match self.store.scan_commit(lease, &scan).await {
            Ok(written) => {
                report.created = written.created;
                report.existing = written.existing + known;
                if written.created > 0 {
                    report.earliest_created = scan.triggers.iter().map(|t| t.scheduled_at).min();
                }
                self.recent
                    .lock()
                    .expect("recent")
                    .insert(shard, (lease.generation, next_known));
            }
            // Another scheduler holds the shard now: this scan wrote
            // nothing, and the shard's fire times are the new owner's to
            // decide.
            Err(StoreError::ShardLost { .. }) => {
                self.recent.lock().expect("recent").remove(&shard);
                tracing::warn!(
                    shard = lease.shard,
                    generation = %lease.generation,
                    "shard moved to another owner; this scan wrote nothing"
                );
                report.skipped = 0;
                report.parked = 0;
                report.stale = 1;
            }
            Err(e) => return Err(e),
        }
        Ok(report)
    }

    /// One job's fire times in the window: fired, parked or skipped by its
    /// misfire policy, added to `scan`.
    async fn decide_job(
        &self,
        job: &JobScheduleRecord,
        window: Window,
        now_ms: i64,
        scan: &mut ScanCommit,
        report: &mut ScanReport,
    ) -> StoreResult<()> {
        let compiled = match self.compiled(job) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(job = %crate::model::text::Esc(&job.job_id), error = %crate::model::text::Esc(&e), "schedule cannot be evaluated; job skipped");
                return Ok(());
            }
        };
        let (spec, schedule) = &*compiled;
        let now = from_millis(now_ms);
        let from = window.from.max(from_millis(job.active_from));
        if from >= window.to {
            return Ok(());
        }
        let mut times: Vec<DateTime<Utc>> = schedule.occurrences(from, window.to).collect();
        let Some(&first) = times.first() else {
            return Ok(());
        };
        // Late times already decided by an earlier scan stay decided.
        let missed_before = now - spec.misfire.threshold.as_delta();
        if first < missed_before {
            let decided: HashSet<i64> = self
                .store
                .decided_times(
                    &job.tenant,
                    &job.job_id,
                    to_millis(first),
                    to_millis(missed_before),
                )
                .await?
                .into_iter()
                .collect();
            times.retain(|t| *t >= missed_before || !decided.contains(&to_millis(*t)));
        }
        let outcome = classify_misfires(&times, now, &spec.misfire);
        report.skipped += outcome.skipped as i64;
        report.parked += outcome.parked as i64;
        for (at, action) in outcome.decisions {
            let at = to_millis(at);
            let state = match action {
                MisfireAction::Fire => TriggerState::Pending,
                MisfireAction::Park => TriggerState::Manual,
                MisfireAction::Skip => {
                    scan.skipped.push((
                        job.tenant.clone(),
                        job.job_id.clone(),
                        job.plan_version,
                        at,
                    ));
                    continue;
                }
            };
            scan.triggers.push(ScheduledTrigger {
                job_id: job.job_id.clone(),
                plan_version: job.plan_version,
                tenant: job.tenant.clone(),
                resource_group: job.resource_group.clone(),
                priority: job.priority,
                scheduled_at: at,
                state,
                recovery: at < to_millis(missed_before),
            });
        }
        Ok(())
    }

    /// Leave out the triggers already stored: the overlap was scanned
    /// before, so skip what exists rather than lean on ON CONFLICT for
    /// thousands of rows (it still absorbs any race with another scanner).
    /// Under an unchanged generation this scanner knows what it stored;
    /// after a takeover it asks. Returns how many were left out and the
    /// fire times to remember for the next scan's overlap.
    async fn drop_known(
        &self,
        lease: &ShardLease,
        window: Window,
        triggers: &mut Vec<ScheduledTrigger>,
    ) -> StoreResult<(i64, HashSet<FireKey>)> {
        let shard = lease.shard as u32;
        let remembered = {
            let recent = self.recent.lock().expect("recent");
            recent
                .get(&shard)
                .filter(|(generation, _)| *generation == lease.generation)
                .map(|(_, known)| known.clone())
        };
        let stored = match (remembered, lease.watermark) {
            (Some(known), _) => known,
            (None, Some(watermark)) if watermark > to_millis(window.from) => {
                self.store
                    .shard_existing(shard, to_millis(window.from), watermark)
                    .await?
            }
            (None, _) => HashSet::new(),
        };
        let mut known = 0;
        let mut next_known: HashSet<FireKey> = HashSet::new();
        let keep_from = to_millis(window.to - delta(self.config.overlap));
        triggers.retain(|t| {
            let key = (t.tenant.clone(), t.job_id.clone(), t.scheduled_at);
            let seen = stored.contains(&key);
            known += seen as i64;
            if t.scheduled_at >= keep_from {
                next_known.insert(key);
            }
            !seen
        });
        Ok((known, next_known))
    }

    /// Tick until `shutdown`, calling `wake` whenever a created trigger is
    /// due (now, or when its time comes within the lookahead). Releases its
    /// shards on the way out.
    pub async fn run(
        self: &Arc<Self>,
        shutdown: impl std::future::Future<Output = ()>,
        wake: impl Fn() + Send + Sync + Clone + 'static,
    ) {
        tokio::pin!(shutdown);
        loop {
            match self.tick(None).await {
                Ok(report) => {
                    if let Some(earliest) = report.earliest_created {
                        let wake = wake.clone();
                        let store = self.store.clone();
                        tokio::spawn(async move {
                            if let Ok(now) = store.now_ms().await {
                                let wait = (earliest - now).max(0) as u64;
                                tokio::time::sleep(Duration::from_millis(wait)).await;
                            }
                            wake();
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %crate::model::text::Esc(&e), "scan failed; will retry next tick")
                }
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(self.config.tick) => {}
            }
        }
        if let Err(e) = self.release_all().await {
            tracing::warn!(error = %crate::model::text::Esc(&e), "could not release shards; they will lapse");
        }
    }
}
