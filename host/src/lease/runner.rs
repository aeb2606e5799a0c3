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
use super::governor::FuelMeter;
use super::group_commit::CommitQueue;
use super::heartbeat::Heartbeats;
use super::high_water::HighWater;
use crate::effects::{EffectGateway, ParkSlot};
use crate::model::retry::{Budget, RetryPolicy, budget_attempt_no};
use crate::model::shares::Watermark;
use crate::model::{
    AttemptEnd, Claim, EndDecision, EndInputs, FencingToken, LeaseRef, PlanSpec, ReleaseReason,
    RunOutcome, RunReport, RunResult, StopReason, TriggerOrigin, decide_end,
};
use crate::sandbox::wit::context::Invocation;
use crate::sandbox::{AttemptServices, GuestLimits, Sandbox, StopSignal};
use crate::schedule::ScheduleSpec;
use crate::store::{Admission, ClaimRequest, RunnerStore, Store, StoreError, StoreResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

mod groups;
mod liveness;
mod prepare;

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
    /// Attempts in flight at once in this process (running or waiting on
    /// their commit). Default 8. More than the sandbox's instance pool is
    /// fine: a guest waits for a free instance slot before it starts
    /// ([`crate::sandbox::Sandbox::run`]) rather than fail.
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
    /// The database pool's saturation (connections in use / its maximum)
    /// at which this process stops claiming, and the level at which it
    /// resumes. Default 0.9 / 0.7.
    pub pool_water: Watermark,
    /// Guest linear memory in use in this process, bytes, at which it
    /// stops claiming; it resumes at 80% of it. Default none.
    pub memory_high_water: Option<u64>,
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
            pool_water: Watermark {
                high: 0.9,
                low: 0.7,
            },
            memory_high_water: None,
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
    pub fencing_token: FencingToken,
    pub job_id: String,
    /// What became of it, with the state the database wrote where its
    /// end moved the trigger.
    pub outcome: RunOutcome,
    pub error_class: Option<String>,
}

impl AttemptSummary {
    /// An attempt of `claim` that has not ended yet.
    fn of(claim: &Claim) -> Self {
        Self {
            trigger_id: claim.trigger_id,
            attempt_id: claim.attempt_id,
            fencing_token: claim.fencing_token,
            job_id: claim.job_id.clone(),
            outcome: RunOutcome::NotEnded,
            error_class: None,
        }
    }
}

/// What a runner needs of a plan version.
struct Plan {
    component_digest: String,
    spec: PlanSpec,
}

/// A runner bound to one store and one sandbox.
pub struct Runner {
    plans: std::sync::Mutex<std::collections::HashMap<(String, String, i64), Arc<Plan>>>,
    groups: std::sync::Mutex<HashMap<String, groups::Cached>>,
    /// One turn per component to fetch and compile it ([`Runner::prepared`]).
    compiling: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    store: Arc<dyn RunnerStore>,
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
    fuel: Arc<FuelMeter>,
    /// Whether the pool's or memory's high-water mark holds its claims.
    high_water: HighWater,
    /// Its liveness lock and sweep ([`liveness`]).
    liveness: tokio::sync::Mutex<liveness::Keeper>,
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
        let store: Arc<dyn RunnerStore> = Arc::new(store);
        let heartbeats = Heartbeats::on(store.clone());
        Self::with_parts(store, sandbox, config, effects, heartbeats)
    }

    /// A runner whose heartbeats renew through `heartbeats` (for example a
    /// store of their own: [`Heartbeats::dedicated`]).
    pub fn with_parts(
        store: Arc<dyn RunnerStore>,
        sandbox: Arc<Sandbox>,
        config: RunnerConfig,
        effects: Arc<EffectGateway>,
        heartbeats: Heartbeats,
    ) -> Arc<Self> {
        let commits = CommitQueue::new(store.clone(), 128, store.concurrent_commits());
        Arc::new(Self {
            plans: Default::default(),
            groups: Default::default(),
            compiling: Default::default(),
            slots: Arc::new(Semaphore::new(config.max_concurrency)),
            store,
            sandbox,
            config,
            effects,
            wake: Notify::new(),
            commits,
            heartbeats,
            in_flight: Default::default(),
            fuel: Default::default(),
            high_water: HighWater::default(),
            liveness: Default::default(),
        })
    }

    pub fn effects(&self) -> &Arc<EffectGateway> {
        &self.effects
    }

    /// The fuel its guests burnt, per tenant, since the governor last
    /// reported it (tenants' fuel per hour).
    pub fn fuel(&self) -> &Arc<FuelMeter> {
        &self.fuel
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// What this runner measures (claims, delays, renewals, lost leases).
    pub fn metrics(&self) -> &super::metrics::LeaseMetrics {
        self.heartbeats.metrics()
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
                Err(e) => {
                    tracing::warn!(error = %crate::model::text::Esc(&e), "claim failed; will retry")
                }
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
                    Some(Err(e)) => tracing::error!(error = %crate::model::text::Esc(&e), "attempt task failed"),
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
        drain::report(
            self.store.as_ref(),
            ended,
            started.elapsed(),
            paused,
            interrupted,
        )
        .await
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
        self.keep_alive().await;
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
        if self
            .high_water
            .holds(
                &self.config,
                self.store.as_ref(),
                self.sandbox.memory_in_use(),
            )
            .await
        {
            return Ok(0);
        }
        let retry_slots = (free as f64 * self.config.retry_share).ceil() as i64;
        let claims = self
            .store
            .claim(&ClaimRequest {
                owner: &self.config.runner_id,
                lease_ms: self.config.lease.as_millis() as i64,
                limit: free as i64,
                retry_slots,
                now: None,
            })
            .await?;
        self.metrics().claimed(&claims);
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
        let mut summary = AttemptSummary::of(&claim);
        super::log::claimed(&claim);
        match self.overlap_gate(&claim, &lease).await {
            Ok(None) => {}
            Ok(Some(outcome)) => {
                summary.outcome = outcome;
                super::log::ended(&claim, &summary);
                return summary;
            }
            Err(e) => {
                // Not knowing whether older runs are in flight, the guest
                // must not run: the lease lapses and the trigger is taken
                // over with token + 1, its overlap judged again then.
                tracing::warn!(trigger_id = claim.trigger_id, error = %crate::model::text::Esc(&e), "overlap check failed; not running, the lease will lapse");
                summary.outcome = RunOutcome::OverlapCheckFailed;
                return summary;
            }
        }
        let (report, policy, breaker_wait_ms) = self.run_guest(&claim, &lease, &stop).await;
        self.metrics().attempt_ended(&stop);
        self.fuel.add(&claim.tenant, report.fuel_used);
        let budget = self.budget(&claim, &report).await;
        let decision = decide_end(EndInputs {
            report: &report,
            policy: &policy,
            budget,
            stop: stop.reason(),
            breaker_wait_ms,
            backoff_unit: rand::random::<f64>(),
            park_unit: rand::random::<f64>(),
        });
        self.apply_end(decision, &lease, &mut summary).await;
        super::log::ended(&claim, &summary);
        summary
    }

    /// Run the guest with its heartbeat: the report, the retry policy it
    /// is judged by, and the wait an open circuit breaker asked for, if one
    /// refused an effect.
    async fn run_guest(
        &self,
        claim: &Claim,
        lease: &LeaseRef,
        stop: &Arc<StopSignal>,
    ) -> (RunReport, RetryPolicy, Option<u64>) {
        let progress = Arc::new(AtomicI64::new(0));
        let park = Arc::new(ParkSlot::default());
        let heartbeat =
            self.heartbeats
                .start(lease.clone(), &self.config, stop.clone(), progress.clone());
        let ran = self
            .run_attempt(claim, lease, stop.clone(), progress, park.clone())
            .await;
        heartbeat.end();
        match ran {
            Ok((report, policy)) => (report, policy, park.parked_for()),
            Err(host_error) => {
                tracing::error!(trigger_id = claim.trigger_id, error = %crate::model::text::Esc(&host_error), "attempt could not start");
                (
                    RunReport::host_error(host_error),
                    RetryPolicy::host_fallback(),
                    None,
                )
            }
        }
    }

    /// Where the trigger stands against its retry budget as this attempt
    /// ends. Released attempts (drained, parked, put back by an overlap
    /// wait) did not spend the budget: only a failure asks how many there
    /// were.
    async fn budget(&self, claim: &Claim, report: &RunReport) -> Budget {
        let released_before = if matches!(report.result, RunResult::Output(_)) {
            0
        } else {
            match self
                .store
                .released_before(claim.trigger_id, claim.attempt_id)
                .await
            {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(trigger_id = claim.trigger_id, error = %crate::model::text::Esc(&e), "could not count released attempts; judging the budget by attempt number");
                    0
                }
            }
        };
        let ended = claim.started_at + report.wall.as_millis() as i64;
        Budget {
            attempt_no: budget_attempt_no(claim.attempt_no, released_before),
            age_ms: (ended - claim.scheduled_at).max(0) as u64,
            elapsed_ms: (ended - claim.first_started_at).max(0) as u64,
        }
    }

    /// Write what [`decide_end`] decided, under the attempt's token.
    async fn apply_end(
        &self,
        decision: EndDecision,
        lease: &LeaseRef,
        summary: &mut AttemptSummary,
    ) {
        let trigger_id = lease.trigger_id;
        match decision {
            EndDecision::Abandon { end, why } => {
                summary.error_class = end.error_class.clone();
                tracing::warn!(trigger_id, token = %lease.fencing_token, "commit gate closed; result discarded");
                // The trigger is left to its lease, which lapses; a new
                // claim takes it over with token + 1.
                if let Err(e) = self.store.attempt_abandon(lease, &end, why).await {
                    tracing::warn!(trigger_id, error = %crate::model::text::Esc(&e), "could not record the abandoned attempt");
                }
                summary.outcome = RunOutcome::LeaseLost;
            }
            EndDecision::Release {
                end,
                reason,
                why,
                delay_ms,
            } => {
                summary.error_class = Some(reason.as_str().into());
                summary.outcome = match self
                    .store
                    .attempt_release(lease, &end, reason, &why, delay_ms as i64)
                    .await
                {
                    Ok(to) => RunOutcome::Released { reason, to },
                    Err(StoreError::LeaseLost { .. }) => RunOutcome::LeaseLost,
                    Err(e) => {
                        tracing::error!(trigger_id, error = %crate::model::text::Esc(&e), "release failed; the lease will expire and the trigger be taken over");
                        RunOutcome::ReleaseFailed
                    }
                };
            }
            EndDecision::Commit(end) => {
                summary.error_class = end.error_class.clone();
                // Group commit: attempts ending together share one
                // transaction.
                summary.outcome = match self.commits.finish(lease, &end).await {
                    Ok(written) => RunOutcome::Committed(written),
                    Err(StoreError::LeaseLost { .. }) => RunOutcome::LeaseLost,
                    Err(e) => {
                        tracing::error!(trigger_id, error = %crate::model::text::Esc(&e), "commit failed; lease will expire and the trigger be retried");
                        RunOutcome::CommitFailed
                    }
                };
            }
        }
    }

    /// Apply the job's overlap policy to a claimed scheduled trigger before
    /// it runs, through the one rule that admits runs
    /// ([`RunnerStore::overlap_admit`]): `None` to go ahead (admitted), or
    /// `Some(outcome)` when it must not run now — `skipped` (`forbid`), or
    /// `overlap_wait`: released to be claimed again (`allow`; `replace`,
    /// after asking the oldest run in flight to stop, so the new one starts
    /// once that has ended and never beside it). An error means the policy
    /// could not be judged: the caller must not run the guest.
    async fn overlap_gate(
        &self,
        claim: &Claim,
        lease: &LeaseRef,
    ) -> StoreResult<Option<RunOutcome>> {
        // Overlap is a property of the schedule: manual runs are a person's
        // explicit request and are not skipped or replaced.
        if claim.origin != TriggerOrigin::Schedule {
            return Ok(None);
        }
        let Ok(plan) = self.plan(claim).await else {
            return Ok(None);
        };
        let Ok(schedule) = ScheduleSpec::of_plan(&plan.spec) else {
            return Ok(None);
        };
        let max = schedule.overlap.max_in_flight;
        let in_flight = match self.store.overlap_admit(lease, max).await? {
            Admission::Admitted => return Ok(None),
            Admission::Full(in_flight) => in_flight,
        };
        use crate::schedule::OverlapDecision as D;
        let decision =
            crate::schedule::decide_overlap(schedule.overlap.policy, max, in_flight.len());
        match decision {
            D::Start => Ok(None),
            D::ReplaceOldest | D::Wait => {
                if let (D::ReplaceOldest, Some(oldest)) = (decision, in_flight.first()) {
                    self.store.request_stop(*oldest).await?;
                }
                let end = AttemptEnd::not_run();
                let why = format!(
                    "waiting: {} run(s) of this job in flight (max_in_flight {max})",
                    in_flight.len()
                );
                let to = self
                    .store
                    .attempt_release(
                        lease,
                        &end,
                        ReleaseReason::OverlapWait,
                        &why,
                        self.config.poll_interval.as_millis() as i64,
                    )
                    .await?;
                Ok(Some(RunOutcome::Released {
                    reason: ReleaseReason::OverlapWait,
                    to,
                }))
            }
            D::SkipNew => {
                let end = AttemptEnd::skipped(format!(
                    "skipped: {} run(s) of this job already in flight (max_in_flight {max}, overlap forbid)",
                    in_flight.len()
                ));
                let written = self.store.attempt_finish(lease, &end).await?;
                self.store.counter_add("overlap_skipped", 1).await?;
                Ok(Some(RunOutcome::Committed(written)))
            }
        }
    }

    /// The claim's plan version, read once per process: versions are
    /// immutable, so the cache never goes stale.
    async fn plan(&self, claim: &Claim) -> Result<Arc<Plan>, String> {
        let key = (
            claim.tenant.clone(),
            claim.job_id.clone(),
            claim.plan_version,
        );
        if let Some(plan) = self.plans.lock().expect("plan cache").get(&key) {
            return Ok(plan.clone());
        }
        let record = self
            .store
            .plan_get(&claim.tenant, &claim.job_id, claim.plan_version)
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
    ) -> Result<(RunReport, RetryPolicy), String> {
        let plan = self.plan(claim).await?;
        let spec = &plan.spec;
        let group = match self.admitted_group(claim).await? {
            Ok(group) => group,
            Err(refusal) => return Ok((groups::refused(refusal), spec.retry.clone())),
        };
        let prepared = self.prepared(&plan.component_digest).await?;
        let limits = GuestLimits::of_group(&group, &spec.capabilities);
        let invocation = Invocation {
            job_id: claim.job_id.clone(),
            tenant: claim.tenant.clone(),
            trigger_id: claim.trigger_id.to_string(),
            plan_key: claim.plan_key.clone(),
            plan_version: claim.plan_version as u32,
            scheduled_at: crate::model::time::rfc3339(crate::model::time::from_millis(
                claim.scheduled_at,
            )),
            attempt: claim.attempt_no as u32,
            params: merge_params(&spec.params, &claim.params),
        };
        let services: Arc<dyn AttemptServices> = Arc::new(super::services::RunnerServices {
            store: self.store.clone(),
            lease: lease.clone(),
            tenant: claim.tenant.clone(),
            stop: stop.clone(),
            progress,
            // What the manifest asks for and the group grants, now (a
            // revoked grant bites at the next attempt).
            connectors: spec
                .connectors
                .iter()
                .filter(|c| limits.grants.connectors.contains(c))
                .cloned()
                .collect(),
            effects: self.effects.clone(),
            retry: spec.retry.clone(),
            response_cap: limits.caps.effect_response as usize,
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
}
