//! The runner: claims batches of due triggers, runs each attempt in the
//! sandbox on a blocking thread, heartbeats it from an async task, and
//! commits the result under its fencing token.

use super::transitions;
use crate::effects::{Caller, EffectGateway};
use crate::registry::manifest::PlanSpec;
use crate::sandbox::wit::context::Invocation;
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::sandbox::wit::types::Control;
use crate::sandbox::{AttemptServices, GuestLimits, RunResult, Sandbox, StopReason, StopSignal};
use crate::store::{Claim, LeaseRef, Store, StoreError, StoreResult};
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
    /// The trigger's new state, or `lease_lost` if the commit was refused.
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
    store: Store,
    sandbox: Arc<Sandbox>,
    config: RunnerConfig,
    effects: Arc<EffectGateway>,
    wake: Notify,
    slots: Arc<Semaphore>,
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
        Arc::new(Self {
            plans: Default::default(),
            slots: Arc::new(Semaphore::new(config.max_concurrency)),
            store,
            sandbox,
            config,
            effects,
            wake: Notify::new(),
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
    /// claiming and wait for attempts in flight.
    pub async fn run(self: &Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
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
        while running.join_next().await.is_some() {}
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
        if free == 0 {
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
            running.spawn(async move {
                let summary = runner.execute(claim).await;
                drop(permit);
                summary
            });
        }
        Ok(n)
    }

    /// Run one claimed attempt to its end and commit it under its token.
    pub async fn execute(self: &Arc<Self>, claim: Claim) -> AttemptSummary {
        let lease = claim.lease(&self.config.runner_id);
        let mut summary = AttemptSummary {
            trigger_id: claim.trigger_id,
            attempt_id: claim.attempt_id,
            fencing_token: claim.fencing_token,
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
        let stop = Arc::new(StopSignal::default());
        let progress = Arc::new(AtomicI64::new(0));
        let heartbeat = tokio::spawn(heartbeat_loop(
            self.store.clone(),
            lease.clone(),
            self.config.clone(),
            stop.clone(),
            progress.clone(),
        ));
        let report = self
            .run_attempt(&claim, &lease, stop.clone(), progress)
            .await;
        heartbeat.abort();
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
        let budget = transitions::Budget {
            attempt_no: claim.attempt_no as u32,
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
        if stop.interrupting().is_some() {
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
        match self.store.attempt_finish(&lease, &end).await {
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
    ) -> Result<
        (
            crate::sandbox::RunReport,
            crate::registry::manifest::RetryPolicy,
        ),
        String,
    > {
        let plan = self.plan(claim).await?;
        let spec = &plan.spec;
        let group = self
            .store
            .group_get(&claim.resource_group)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("resource group '{}' is gone", claim.resource_group))?;
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
            runtime: tokio::runtime::Handle::current(),
            effects: self.effects.clone(),
            retry: spec.retry.clone(),
        });
        let sandbox = self.sandbox.clone();
        let report = tokio::task::spawn_blocking(move || {
            sandbox.run(&prepared, invocation, &limits, services, stop)
        })
        .await
        .map_err(|e| format!("attempt thread failed: {e}"))?;
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

/// Renew the lease every `heartbeat_every`; close the gate when the lease
/// is lost or renewals keep failing.
async fn heartbeat_loop(
    store: Store,
    lease: LeaseRef,
    config: RunnerConfig,
    stop: Arc<StopSignal>,
    progress: Arc<AtomicI64>,
) {
    let mut missed = 0;
    let mut ticker = tokio::time::interval(config.heartbeat_every);
    ticker.tick().await; // the first tick is immediate; the claim just set the lease
    loop {
        ticker.tick().await;
        let renew = tokio::time::timeout(
            config.heartbeat_every,
            store.lease_renew(
                &lease,
                config.lease.as_millis() as i64,
                progress.load(Ordering::Relaxed),
            ),
        )
        .await;
        match renew {
            Ok(Ok((_, cancel_requested))) => {
                missed = 0;
                if cancel_requested {
                    stop.request(StopReason::Cancel);
                }
            }
            Ok(Err(StoreError::LeaseLost {
                expected, found, ..
            })) => {
                tracing::warn!(
                    trigger_id = lease.trigger_id,
                    expected,
                    ?found,
                    "lease lost; interrupting guest"
                );
                stop.request(StopReason::LeaseLost);
                return;
            }
            Ok(Err(e)) => {
                missed += 1;
                tracing::warn!(trigger_id = lease.trigger_id, missed, error = %e, "heartbeat failed");
            }
            Err(_) => {
                missed += 1;
                tracing::warn!(trigger_id = lease.trigger_id, missed, "heartbeat timed out");
            }
        }
        if missed >= config.max_missed_heartbeats {
            tracing::warn!(
                trigger_id = lease.trigger_id,
                missed,
                "cannot confirm lease; closing commit gate"
            );
            stop.request(StopReason::LeaseLost);
            return;
        }
    }
}

/// The host services of one attempt, backed by fenced store writes.
struct RunnerServices {
    store: Store,
    lease: LeaseRef,
    stop: Arc<StopSignal>,
    progress: Arc<AtomicI64>,
    connectors: Vec<String>,
    runtime: tokio::runtime::Handle,
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
            park: None,
        }
    }
}

impl AttemptServices for RunnerServices {
    fn control(&self) -> Control {
        self.stop.control()
    }

    fn load_checkpoint(&self) -> Option<Vec<u8>> {
        match self
            .runtime
            .block_on(self.store.checkpoint_load(self.lease.trigger_id))
        {
            Ok(found) => found.map(|(_, data)| data),
            Err(e) => {
                tracing::warn!(trigger_id = self.lease.trigger_id, error = %e, "checkpoint load failed");
                None
            }
        }
    }

    fn save_checkpoint(&self, state: Vec<u8>) -> Control {
        if self.stop.interrupting().is_some() {
            return Control::LeaseLost;
        }
        match self
            .runtime
            .block_on(self.store.checkpoint_save(&self.lease, &state))
        {
            Ok(seq) => {
                self.progress.store(seq, Ordering::Relaxed);
                self.stop.control()
            }
            Err(StoreError::LeaseLost { .. }) => {
                self.stop.request(StopReason::LeaseLost);
                Control::LeaseLost
            }
            Err(e) => {
                // Not knowing whether the write counted, the guest must not
                // rely on it; stopping is the safe answer.
                tracing::warn!(trigger_id = self.lease.trigger_id, error = %e, "checkpoint save failed");
                self.stop.request(StopReason::LeaseLost);
                Control::LeaseLost
            }
        }
    }

    fn invoke_effect(&self, request: Request) -> Result<Outcome, EffectError> {
        if self.stop.interrupting().is_some() {
            return Err(EffectError::LeaseLost);
        }
        // A downstream 409 or a stale intent/outcome write closes the gate
        // (the gateway calls `stop.request(LeaseLost)`) and is counted.
        self.runtime
            .block_on(self.effects.invoke(&self.caller(), request))
    }

    fn query_effect(&self, connector: &str, key: &str) -> Result<Option<Outcome>, EffectError> {
        if self.stop.interrupting().is_some() {
            return Err(EffectError::LeaseLost);
        }
        self.runtime
            .block_on(self.effects.query(&self.caller(), connector, key))
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
