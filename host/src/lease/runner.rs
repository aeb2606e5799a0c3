//! The runner: claims batches of due triggers, runs each attempt as a task
//! on the guest runtime ([`super::guest_runtime`]; the guest itself runs on
//! a wasmtime fiber that yields at host calls and epoch ticks), heartbeats
//! it from a task on the heartbeat runtime ([`super::heartbeat`]), and
//! commits the result under its fencing token. On shutdown it drains
//! ([`super::drain`]): no new claims, attempts in flight get
//! `drain_timeout` to finish, then are asked to pause at their next safe
//! point (and interrupted after `drain_grace`), and are released from their
//! last checkpoint without spending retry budget.

use super::drain::{self, DrainReport};
use super::group_commit::CommitQueue;
use super::heartbeat::Heartbeats;
use super::transitions;
use crate::effects::{Caller, EffectGateway, ParkSlot};
use crate::registry::manifest::PlanSpec;
use crate::sandbox::wit::context::Invocation;
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::sandbox::wit::types::Control;
use crate::sandbox::{
    AttemptServices, GuestLimits, HostFuture, RunResult, Sandbox, StopReason, StopSignal,
};
use crate::store::{Claim, LeaseRef, ResourceGroup, Store, StoreError, StoreResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

/// Runner settings. Every default is listed in [`RunnerConfig::default`].
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Written into `lease_owner` and `attempts.runner_id`.
    pub runner_id: String,
    /// Lease length, measured on the database clock. Default 30 s.
    pub lease: Duration,
    /// Renewal period. Default lease / 4.
    pub heartbeat_every: Duration,
    /// Consecutive failed renewals before the runner closes the commit gate
    /// itself. Default 3.
    pub max_missed_heartbeats: u32,
    /// Triggers claimed per statement. Default 32.
    pub claim_batch: i64,
    /// The share of each batch reserved for retries (`retry_wait`), so a
    /// retry backlog and fresh triggers cannot starve each other; unused
    /// slots go to the other lane. Default 0.5.
    pub retry_share: f64,
    /// Attempts running at once in this process. Default 8.
    pub max_concurrency: usize,
    /// How often to look for due work when nothing wakes the runner.
    /// Default 250 ms.
    pub poll_interval: Duration,
    /// On shutdown, how long attempts in flight may run on before they are
    /// asked to checkpoint and pause at their next host call. Default 30 s.
    pub drain_timeout: Duration,
    /// After the pause request, how long a guest has to reach a safe point
    /// before it is interrupted (it then resumes from its last checkpoint).
    /// Default 10 s.
    pub drain_grace: Duration,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        let lease = Duration::from_secs(30);
        Self {
            runner_id: format!("runner-{}-{}", hostname(), std::process::id()),
            lease,
            heartbeat_every: lease / 4,
            max_missed_heartbeats: 3,
            claim_batch: 32,
            retry_share: 0.5,
            max_concurrency: 8,
            poll_interval: Duration::from_millis(250),
            drain_timeout: Duration::from_secs(30),
            drain_grace: Duration::from_secs(10),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "local".into())
}

/// What became of one attempt, from the runner's point of view.
#[derive(Debug, Clone)]
pub struct AttemptSummary {
    pub trigger_id: i64,
    pub attempt_id: i64,
    pub fencing_token: i64,
    pub job_id: String,
    /// The trigger's new state, `released` (drained: back to pending from
    /// its last checkpoint), or `lease_lost` if the commit was refused.
    pub outcome: String,
    pub error_class: Option<String>,
    pub committed: bool,
}

/// What a runner needs of a plan version.
struct Plan {
    component_digest: String,
    spec: PlanSpec,
}

/// A runner bound to one store and one sandbox.
pub struct Runner {
    plans: std::sync::Mutex<std::collections::HashMap<(String, i64), Arc<Plan>>>,
    groups: std::sync::Mutex<HashMap<String, (std::time::Instant, ResourceGroup)>>,
    store: Store,
    sandbox: Arc<Sandbox>,
    config: RunnerConfig,
    effects: Arc<EffectGateway>,
    wake: Notify,
    slots: Arc<Semaphore>,
    heartbeats: Heartbeats,
    /// Attempt ends wait here to be committed together.
    commits: CommitQueue,
    /// The stop signal of every attempt in flight, by attempt id, so a
    /// drain can ask them all to pause.
    in_flight: std::sync::Mutex<HashMap<i64, Arc<StopSignal>>>,
}

impl Runner {
    pub fn new(store: Store, sandbox: Arc<Sandbox>, config: RunnerConfig) -> Arc<Self> {
        let effects = EffectGateway::new(store.clone());
        Self::with_effects(store, sandbox, config, effects)
    }

    /// A runner whose guests' effects go through `effects` (share one
    /// gateway per process so breakers and permits are per process).
    pub fn with_effects(
        store: Store,
        sandbox: Arc<Sandbox>,
        config: RunnerConfig,
        effects: Arc<EffectGateway>,
    ) -> Arc<Self> {
        let heartbeats = Heartbeats::on(store.clone());
        Self::with_parts(store, sandbox, config, effects, heartbeats)
    }

    /// A runner whose heartbeats renew through `heartbeats` (for example a
    /// store of their own: [`Heartbeats::dedicated`]).
    pub fn with_parts(
        store: Store,
        sandbox: Arc<Sandbox>,
        config: RunnerConfig,
        effects: Arc<EffectGateway>,
        heartbeats: Heartbeats,
    ) -> Arc<Self> {
        let commits = CommitQueue::new(store.clone(), 128);
        Arc::new(Self {
            plans: Default::default(),
            groups: Default::default(),
            slots: Arc::new(Semaphore::new(config.max_concurrency)),
            store,
            sandbox,
            config,
            effects,
            wake: Notify::new(),
            commits,
            heartbeats,
            in_flight: Default::default(),
        })
    }

    pub fn effects(&self) -> &Arc<EffectGateway> {
        &self.effects
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Wake the loop now instead of at the next poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Run until `shutdown` resolves: claim while there are free slots,
    /// sleep until woken or the poll interval passes. On shutdown, stop
    /// claiming and drain (see [`Runner::run_and_drain`]).
    pub async fn run(self: &Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        self.run_and_drain(shutdown).await;
    }

    /// [`Runner::run`], returning what the drain left unfinished. On
    /// shutdown: no new claims; attempts in flight get `drain_timeout` to
    /// finish; then each is asked to checkpoint and pause at its next host
    /// call (`pause-requested`; no new effects start), and after
    /// `drain_grace` a guest still running is interrupted. A paused or
    /// interrupted attempt is released: its trigger is `pending` again, due
    /// now, for any runner to resume from the last checkpoint with token + 1,
    /// and the attempt (`released`) does not count against the retry budget.
    pub async fn run_and_drain(
        self: &Arc<Self>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> DrainReport {
        tokio::pin!(shutdown);
        let mut running = JoinSet::new();
        loop {
            match self.claim_and_spawn(&mut running).await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "claim failed; will retry"),
            }
            while running.try_join_next().is_some() {}
            tokio::select! {
                _ = &mut shutdown => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
            }
        }
        tracing::info!(in_flight = running.len(), "runner stopping: no new claims");
        let started = std::time::Instant::now();
        let mut ended = Vec::new();
        let pause_at = tokio::time::sleep(self.config.drain_timeout);
        tokio::pin!(pause_at);
        let interrupt_at = tokio::time::sleep(self.config.drain_timeout + self.config.drain_grace);
        tokio::pin!(interrupt_at);
        let (mut paused, mut interrupted) = (false, false);
        loop {
            tokio::select! {
                joined = running.join_next() => match joined {
                    Some(Ok(summary)) => ended.push(summary),
                    Some(Err(e)) => tracing::error!(error = %e, "attempt task failed"),
                    None => break,
                },
                _ = &mut pause_at, if !paused => {
                    paused = true;
                    let n = self.stop_all(StopReason::Pause);
                    tracing::info!(attempts = n, "drain timeout: asking attempts to checkpoint and pause");
                }
                _ = &mut interrupt_at, if !interrupted => {
                    interrupted = true;
                    let n = self.stop_all(StopReason::Shutdown);
                    tracing::warn!(attempts = n, "drain grace over: interrupting attempts at their last checkpoint");
                }
            }
        }
        drain::report(&self.store, ended, started.elapsed(), paused, interrupted).await
    }

    /// Ask every attempt in flight to stop for `reason`; how many.
    fn stop_all(&self, reason: StopReason) -> usize {
        let in_flight = self.in_flight.lock().expect("in-flight attempts");
        for stop in in_flight.values() {
            stop.request(reason);
        }
        in_flight.len()
    }

    /// Claim and run until nothing is due and nothing is running. Used by
    /// `trigger run --wait`, the demo and tests.
    pub async fn run_until_idle(self: &Arc<Self>) -> StoreResult<Vec<AttemptSummary>> {
        let mut running = JoinSet::new();
        let mut done = Vec::new();
        loop {
            let claimed = self.claim_and_spawn(&mut running).await?;
            if claimed == 0 {
                match running.join_next().await {
                    Some(joined) => done.push(joined.expect("attempt task panicked")),
                    None => return Ok(done),
                }
            }
            while let Some(joined) = running.try_join_next() {
                done.push(joined.expect("attempt task panicked"));
            }
        }
    }

    /// Claim as many triggers as there are free slots (up to a batch) and
    /// start each attempt. Returns how many were claimed.
    async fn claim_and_spawn(
        self: &Arc<Self>,
        running: &mut JoinSet<AttemptSummary>,
    ) -> StoreResult<usize> {
        let free = self
            .slots
            .available_permits()
            .min(self.config.claim_batch as usize);
        // Claim in batches: while attempts are running, wait until half the
        // slots (or a whole claim batch) are free rather than paying one
        // claim transaction per finished attempt. An idle runner claims
        // whatever is free at once.
        let worth_a_claim = (self.config.claim_batch as usize)
            .min(self.config.max_concurrency / 2)
            .max(1);
        if free == 0 || (free < worth_a_claim && !running.is_empty()) {
            return Ok(0);
        }
        let retry_slots = (free as f64 * self.config.retry_share).ceil() as i64;
        let claims = self
            .store
            .trigger_claim_batch_shared(
                &self.config.runner_id,
                self.config.lease.as_millis() as i64,
                free as i64,
                retry_slots,
                None,
            )
            .await?;
        let n = claims.len();
        for claim in claims {
            let permit = self
                .slots
                .clone()
                .acquire_owned()
                .await
                .expect("runner semaphore never closes");
            let runner = self.clone();
            // Registered before the task starts, so a drain reaches it.
            let stop = Arc::new(StopSignal::default());
            self.in_flight
                .lock()
                .expect("in-flight attempts")
                .insert(claim.attempt_id, stop.clone());
            running.spawn_on(
                async move {
                    let summary = runner.execute_with(claim, stop).await;
                    drop(permit);
                    summary
                },
                &super::guest_runtime::handle(),
            );
        }
        Ok(n)
    }

    /// Run one claimed attempt to its end and commit it under its token.
    pub async fn execute(self: &Arc<Self>, claim: Claim) -> AttemptSummary {
        self.execute_with(claim, Arc::new(StopSignal::default()))
            .await
    }

    async fn execute_with(self: &Arc<Self>, claim: Claim, stop: Arc<StopSignal>) -> AttemptSummary {
        let _registered = InFlight::register(self, claim.attempt_id, &stop);
        let lease = claim.lease(&self.config.runner_id);
        let mut summary = AttemptSummary {
            trigger_id: claim.trigger_id,
            attempt_id: claim.attempt_id,
            fencing_token: claim.fencing_token,
            job_id: claim.job_id.clone(),
            outcome: String::new(),
            error_class: None,
            committed: false,
        };
        match self.overlap_gate(&claim, &lease).await {
            Ok(None) => {}
            Ok(Some(outcome)) => {
                summary.outcome = outcome.into();
                summary.committed = true;
                return summary;
            }
            Err(e) => {
                tracing::warn!(trigger_id = claim.trigger_id, error = %e, "overlap check failed; running anyway");
            }
        }
        let progress = Arc::new(AtomicI64::new(0));
        let park = Arc::new(ParkSlot::default());
        let heartbeat =
            self.heartbeats
                .start(lease.clone(), &self.config, stop.clone(), progress.clone());
        let report = self
            .run_attempt(&claim, &lease, stop.clone(), progress, park.clone())
            .await;
        heartbeat.end();
        let (report, policy) = match report {
            Ok(ok) => ok,
            Err(host_error) => {
                tracing::error!(trigger_id = claim.trigger_id, error = %host_error, "attempt could not start");
                (
                    crate::sandbox::RunReport {
                        result: RunResult::Trapped {
                            kind: crate::sandbox::TrapKind::HostError,
                            message: host_error,
                        },
                        fuel_used: 0,
                        peak_memory_bytes: 0,
                        wall: Duration::ZERO,
                        log: String::new(),
                    },
                    crate::registry::manifest::RetryPolicy {
                        max_attempts: 3,
                        backoff_ms: 1000,
                        backoff_max_ms: 60_000,
                        jitter: true,
                        max_age_ms: None,
                        max_elapsed_ms: None,
                    },
                )
            }
        };
        let ended = claim.started_at + report.wall.as_millis() as i64;
        // Released attempts (drained, or put back by an overlap wait) did
        // not spend the retry budget: only a failure asks how much is left.
        let released_before = if matches!(report.result, RunResult::Output(_)) {
            0
        } else {
            match self.store.attempts_for(claim.trigger_id).await {
                Ok(attempts) => attempts
                    .iter()
                    .filter(|a| {
                        a.id != claim.attempt_id && a.outcome.as_deref() == Some("released")
                    })
                    .count() as i64,
                Err(e) => {
                    tracing::warn!(trigger_id = claim.trigger_id, error = %e, "could not count released attempts; judging the budget by attempt number");
                    0
                }
            }
        };
        let budget = transitions::Budget {
            attempt_no: budget_attempt_no(claim.attempt_no, released_before),
            age_ms: (ended - claim.scheduled_at).max(0) as u64,
            elapsed_ms: (ended - claim.first_started_at).max(0) as u64,
        };
        let mut end = transitions::attempt_end(&report, budget, &policy, rand::random::<f64>());
        if stop.reason() == Some(StopReason::Cancel) && end.trigger_state != "succeeded" {
            end.trigger_state = "cancelled";
            end.retry_after_ms = None;
            end.error_class = Some("cancelled".into());
        }
        summary.error_class = end.error_class.clone();
        if stop.gate_closed() {
            // The gate is closed: this attempt's result must not count.
            tracing::warn!(
                trigger_id = claim.trigger_id,
                token = claim.fencing_token,
                "commit gate closed; result discarded"
            );
            // Do not commit even if the token happens to be current (the
            // database may only have been unreachable): the gate decided.
            // The trigger is left to its lease, which lapses; a new claim
            // takes it over with token + 1.
            if let Err(e) = self
                .store
                .attempt_abandon(
                    &lease,
                    &end,
                    "commit gate closed: lease lost or unconfirmed",
                )
                .await
            {
                tracing::warn!(trigger_id = claim.trigger_id, error = %e, "could not record the abandoned attempt");
            }
            summary.outcome = "lease_lost".into();
            return summary;
        }
        if drain::parks(stop.reason(), &report.result) {
            // Drained: back to pending from the last checkpoint, due now,
            // for any runner (token + 1); no result, no retry budget spent.
            let why = match &report.result {
                RunResult::JobFailed { message, .. } | RunResult::Trapped { message, .. } => {
                    format!("drained at shutdown: {message}")
                }
                RunResult::Output(_) => "drained at shutdown".to_string(),
            };
            summary.error_class = Some("drained".into());
            match self
                .store
                .attempt_release(&lease, &end, "drained", &why, 0)
                .await
            {
                Ok(()) => summary.outcome = "released".into(),
                Err(StoreError::LeaseLost { .. }) => summary.outcome = "lease_lost".into(),
                Err(e) => {
                    tracing::error!(trigger_id = claim.trigger_id, error = %e, "release failed; the lease will expire and the trigger be taken over");
                    summary.outcome = "release_failed".into();
                }
            }
            return summary;
        }
        let parked_for = transitions::breaker_park(park.parked_for(), &report.result)
            .map(|ms| transitions::jittered(ms, rand::random::<f64>()))
            // Parking spends no attempt, but time still counts: a trigger
            // that would outlive its max_age / max_elapsed while parked is
            // judged as usual instead (attempt number 0 asks only the clock).
            .filter(|ms| {
                let clock_only = transitions::Budget {
                    attempt_no: 0,
                    ..budget
                };
                transitions::budget_spent(&policy, clock_only, *ms).is_none()
            });
        if let Some(wait_ms) = parked_for {
            // An open breaker refused this attempt's effect and the guest
            // gave up for now: park the trigger until the breaker lets a
            // probe through, without spending an attempt (released attempts
            // are not counted) — the downstream is down, not the job.
            summary.error_class = Some("circuit_open".into());
            let why = format!("parked {wait_ms} ms: a connector's circuit breaker is open");
            match self
                .store
                .attempt_release(&lease, &end, "circuit_open", &why, wait_ms as i64)
                .await
            {
                Ok(()) => summary.outcome = "parked".into(),
                Err(StoreError::LeaseLost { .. }) => summary.outcome = "lease_lost".into(),
                Err(e) => {
                    tracing::error!(trigger_id = claim.trigger_id, error = %e, "park failed; the lease will expire and the trigger be taken over");
                    summary.outcome = "release_failed".into();
                }
            }
            return summary;
        }
        // Group commit: attempts ending together share one transaction.
        match self.commits.finish(&lease, &end).await {
            Ok(()) => {
                summary.outcome = end.trigger_state.to_string();
                summary.committed = true;
            }
            Err(StoreError::LeaseLost { .. }) => summary.outcome = "lease_lost".into(),
            Err(e) => {
                tracing::error!(trigger_id = claim.trigger_id, error = %e, "commit failed; lease will expire and the trigger be retried");
                summary.outcome = "commit_failed".into();
            }
        }
        summary
    }

    /// Apply the job's overlap policy to a claimed scheduled trigger before
    /// it runs.
    /// `Some(outcome)` when the trigger must not run now (skipped, or put
    /// back to wait); `None` to go ahead (after asking the oldest run to
    /// stop, for `replace`).
    async fn overlap_gate(
        &self,
        claim: &Claim,
        lease: &LeaseRef,
    ) -> StoreResult<Option<&'static str>> {
        // Overlap is a property of the schedule: manual runs are a person's
        // explicit request and are not skipped or replaced.
        if claim.origin != "schedule" {
            return Ok(None);
        }
        let Ok(plan) = self.plan(claim).await else {
            return Ok(None);
        };
        let Ok(schedule) = plan.spec.schedule_spec() else {
            return Ok(None);
        };
        let running = self
            .store
            .job_running_before(&claim.job_id, claim.trigger_id)
            .await?;
        let decision = crate::schedule::decide_overlap(
            schedule.overlap.policy,
            schedule.overlap.max_in_flight,
            running.len(),
        );
        use crate::schedule::OverlapDecision as D;
        match decision {
            D::Start => Ok(None),
            D::ReplaceOldest => {
                if let Some(oldest) = running.first() {
                    self.store.trigger_request_cancel(*oldest).await?;
                }
                Ok(None)
            }
            D::Wait => {
                self.store
                    .trigger_release(lease, self.config.poll_interval.as_millis() as i64)
                    .await?;
                Ok(Some("overlap_wait"))
            }
            D::SkipNew => {
                let end = crate::store::AttemptEnd {
                    trigger_state: "skipped",
                    retry_after_ms: None,
                    result: None,
                    error_class: Some("overlap_forbidden".into()),
                    error_message: Some(format!(
                        "skipped: {} run(s) of this job already in flight (max_in_flight {}, overlap forbid)",
                        running.len(),
                        schedule.overlap.max_in_flight
                    )),
                    attempt_outcome: "skipped",
                    fuel_used: 0,
                    peak_memory_bytes: 0,
                    wall_ms: 0,
                    log: String::new(),
                };
                self.store.attempt_finish(lease, &end).await?;
                self.store.counter_bump("overlap_skipped").await?;
                Ok(Some("skipped"))
            }
        }
    }

    /// A resource group's limits, read at most once a second per group: an
    /// admin's change applies to attempts that start after it, within 1 s.
    async fn group(&self, name: &str) -> Result<ResourceGroup, String> {
        const FRESH: Duration = Duration::from_secs(1);
        if let Some((read, group)) = self.groups.lock().expect("group cache").get(name)
            && read.elapsed() < FRESH
        {
            return Ok(group.clone());
        }
        let group = self
            .store
            .group_get(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("resource group '{name}' is gone"))?;
        self.groups
            .lock()
            .expect("group cache")
            .insert(name.to_string(), (std::time::Instant::now(), group.clone()));
        Ok(group)
    }

    /// The claim's plan version, read once per process: versions are
    /// immutable, so the cache never goes stale.
    async fn plan(&self, claim: &Claim) -> Result<Arc<Plan>, String> {
        let key = (claim.job_id.clone(), claim.plan_version);
        if let Some(plan) = self.plans.lock().expect("plan cache").get(&key) {
            return Ok(plan.clone());
        }
        let record = self
            .store
            .plan_get(&claim.job_id, claim.plan_version)
            .await
            .map_err(|e| e.to_string())?;
        let spec: PlanSpec = serde_json::from_str(&record.spec)
            .map_err(|e| format!("stored plan unreadable: {e}"))?;
        let plan = Arc::new(Plan {
            component_digest: record.component_digest,
            spec,
        });
        self.plans
            .lock()
            .expect("plan cache")
            .insert(key, plan.clone());
        Ok(plan)
    }

    async fn run_attempt(
        &self,
        claim: &Claim,
        lease: &LeaseRef,
        stop: Arc<StopSignal>,
        progress: Arc<AtomicI64>,
        park: Arc<ParkSlot>,
    ) -> Result<
        (
            crate::sandbox::RunReport,
            crate::registry::manifest::RetryPolicy,
        ),
        String,
    > {
        let plan = self.plan(claim).await?;
        let spec = &plan.spec;
        let group = self.group(&claim.resource_group).await?;
        let prepared = if self.sandbox.is_prepared(&plan.component_digest) {
            self.sandbox
                .prepare(&plan.component_digest, &[])
                .map_err(|e| e.to_string())?
        } else {
            let bytes = self
                .store
                .component_bytes(&plan.component_digest)
                .await
                .map_err(|e| e.to_string())?;
            let sandbox = self.sandbox.clone();
            let digest = plan.component_digest.clone();
            tokio::task::spawn_blocking(move || sandbox.prepare(&digest, &bytes))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?
        };
        let limits = GuestLimits {
            fuel: group.fuel_per_attempt as u64,
            memory_bytes: group.memory_bytes as u64,
            deadline: Duration::from_millis(group.deadline_ms as u64),
            ..GuestLimits::default()
        };
        let invocation = Invocation {
            job_id: claim.job_id.clone(),
            tenant: claim.tenant.clone(),
            trigger_id: claim.trigger_id.to_string(),
            plan_key: claim.plan_key.clone(),
            plan_version: claim.plan_version as u32,
            scheduled_at: crate::time::rfc3339(crate::time::from_millis(claim.scheduled_at)),
            attempt: claim.attempt_no as u32,
            params: merge_params(&spec.params, &claim.params),
        };
        let services: Arc<dyn AttemptServices> = Arc::new(RunnerServices {
            store: self.store.clone(),
            lease: lease.clone(),
            stop: stop.clone(),
            progress,
            connectors: spec.connectors.clone(),
            effects: self.effects.clone(),
            retry: spec.retry.clone(),
            park,
        });
        // The guest runs on a fiber on this task (no thread hand-off): it
        // yields at host calls that wait and at every epoch tick.
        let report = self
            .sandbox
            .run(&prepared, invocation, &limits, services, stop)
            .await;
        Ok((report, spec.retry.clone()))
    }
}

/// The plan's params with the trigger's own laid over them (top-level keys).
fn merge_params(plan: &serde_json::Value, trigger_json: &str) -> String {
    let mut merged = plan.clone();
    if let (Some(base), Ok(serde_json::Value::Object(over))) = (
        merged.as_object_mut(),
        serde_json::from_str::<serde_json::Value>(trigger_json),
    ) {
        for (k, v) in over {
            base.insert(k, v);
        }
    }
    merged.to_string()
}

/// The attempt number the retry budget judges: this attempt's number less
/// the attempts released before it (they ended without a verdict).
fn budget_attempt_no(attempt_no: i64, released_before: i64) -> u32 {
    (attempt_no - released_before).max(1) as u32
}

/// Keeps an attempt's stop signal in the runner's in-flight table while
/// the attempt runs.
struct InFlight<'a> {
    runner: &'a Runner,
    attempt_id: i64,
}

impl<'a> InFlight<'a> {
    fn register(runner: &'a Runner, attempt_id: i64, stop: &Arc<StopSignal>) -> Self {
        runner
            .in_flight
            .lock()
            .expect("in-flight attempts")
            .insert(attempt_id, stop.clone());
        Self { runner, attempt_id }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.runner
            .in_flight
            .lock()
            .expect("in-flight attempts")
            .remove(&self.attempt_id);
    }
}

/// The host services of one attempt, backed by fenced store writes.
struct RunnerServices {
    /// Set by the effect gateway when an open breaker refused a call.
    park: Arc<ParkSlot>,
    store: Store,
    lease: LeaseRef,
    stop: Arc<StopSignal>,
    progress: Arc<AtomicI64>,
    connectors: Vec<String>,
    effects: Arc<EffectGateway>,
    retry: crate::registry::manifest::RetryPolicy,
}

impl RunnerServices {
    fn caller(&self) -> Caller<'_> {
        Caller {
            lease: &self.lease,
            granted: &self.connectors,
            retry: &self.retry,
            stop: Some(&self.stop),
            park: Some(&self.park),
        }
    }
}

impl AttemptServices for RunnerServices {
    fn control(&self) -> Control {
        self.stop.control()
    }

    fn load_checkpoint(&self) -> HostFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move {
            match self.store.checkpoint_load(self.lease.trigger_id).await {
                Ok(found) => found.map(|(_, data)| data),
                Err(e) => {
                    tracing::warn!(trigger_id = self.lease.trigger_id, error = %e, "checkpoint load failed");
                    None
                }
            }
        })
    }

    fn save_checkpoint(&self, state: Vec<u8>) -> HostFuture<'_, Control> {
        Box::pin(async move {
            // A draining guest may still save the safe point it reached.
            if self.stop.gate_closed() {
                return Control::LeaseLost;
            }
            match self.store.checkpoint_save(&self.lease, &state).await {
                Ok(seq) => {
                    self.progress.store(seq, Ordering::Relaxed);
                    self.stop.control()
                }
                Err(StoreError::LeaseLost { .. }) => {
                    self.stop.request(StopReason::LeaseLost);
                    Control::LeaseLost
                }
                Err(e) => {
                    // Not knowing whether the write counted, the guest must
                    // not rely on it; stopping is the safe answer.
                    tracing::warn!(trigger_id = self.lease.trigger_id, error = %e, "checkpoint save failed");
                    self.stop.request(StopReason::LeaseLost);
                    Control::LeaseLost
                }
            }
        })
    }

    fn invoke_effect(&self, request: Request) -> HostFuture<'_, Result<Outcome, EffectError>> {
        Box::pin(async move {
            match self.stop.reason() {
                Some(StopReason::LeaseLost) => return Err(EffectError::LeaseLost),
                // Draining: no new effect starts (one already sent settles,
                // or stays `intent`/`unknown` for the next attempt to query).
                Some(StopReason::Pause | StopReason::Shutdown) => {
                    return Err(EffectError::CircuitOpen(format!(
                        "not sent: the host is draining; '{}' can be retried after the trigger resumes",
                        request.idempotency_key
                    )));
                }
                _ => {}
            }
            // A downstream 409 or a stale intent/outcome write closes the
            // gate (the gateway calls `stop.request(LeaseLost)`) and is
            // counted.
            self.effects.invoke(&self.caller(), request).await
        })
    }

    fn query_effect<'a>(
        &'a self,
        connector: &'a str,
        key: &'a str,
    ) -> HostFuture<'a, Result<Option<Outcome>, EffectError>> {
        Box::pin(async move {
            if self.stop.interrupting().is_some() {
                return Err(EffectError::LeaseLost);
            }
            self.effects.query(&self.caller(), connector, key).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_params_override_plan_params_key_by_key() {
        let plan = serde_json::json!({"name": "plan", "steps": 3});
        let merged: serde_json::Value =
            serde_json::from_str(&merge_params(&plan, r#"{"name":"trigger"}"#)).unwrap();
        assert_eq!(merged, serde_json::json!({"name": "trigger", "steps": 3}));
    }

    #[test]
    fn released_attempts_do_not_spend_the_retry_budget() {
        assert_eq!(budget_attempt_no(1, 0), 1);
        assert_eq!(budget_attempt_no(3, 2), 1);
        assert_eq!(budget_attempt_no(4, 1), 3);
        assert_eq!(budget_attempt_no(2, 5), 1, "never below the first attempt");
    }
}
