//! The store's operations, split by who uses them. Reads are shared
//! ([`ReadStore`]: every role can read); each kind of write belongs to the
//! one plane that makes it:
//!
//! | trait | used by | writes |
//! |---|---|---|
//! | [`ReadStore`] | everyone: CLI, reports, tests | none |
//! | [`RunnerStore`] | the execution plane (`lease`) | claims, heartbeats, checkpoints, attempt ends — all fenced by the trigger's token |
//! | [`SchedulerStore`] | trigger control (`schedule::scanner`) | shard leases, scheduled triggers, skipped fires, watermarks — all fenced by the shard's generation |
//! | [`EffectStore`] | the side-effect plane (`effects`) | effect intents and outcomes (fenced by token), exception tickets |
//! | [`ControlStore`] | people: registry, CLI | registrations, groups, tenants, connectors, approvals, cancels, ticket resolutions, audit entries |
//!
//! [`crate::store::Store`] implements every role for both databases. The
//! traits are object-safe (`async_trait`), so a plane holds
//! `Arc<dyn RunnerStore>` (say) and sees only its own writes, and a test
//! can wrap one role to inject a fault (a stall, a crash between two
//! statements) without touching production code.
//!
//! Every write a lease fences returns [`super::StoreError::LeaseLost`] or
//! [`super::StoreError::ShardLost`] when the lease is no longer current: the
//! statement that writes is the statement that checks (see
//! `store::fence`).

use super::StoreResult;
use super::model::*;
use super::overlap::Admission;
use crate::model::audit::AuditEntry;
use crate::model::{
    ApplyOutcome, AttemptEnd, Claim, LeaseRef, PlanSpec, ReleaseReason, ResourceGroup, ShardLease,
    TriggerState,
};
use async_trait::async_trait;

/// What every role may read.
#[async_trait]
pub trait ReadStore: Send + Sync {
    /// The database's clock, in ms.
    async fn now_ms(&self) -> StoreResult<i64>;
    async fn trigger_get(&self, id: i64) -> StoreResult<TriggerRecord>;
    /// A trigger by its plan key, which is unique within its tenant.
    async fn trigger_by_key(&self, tenant: &str, plan_key: &str) -> StoreResult<TriggerRecord>;
    /// The newest triggers first.
    async fn triggers_list(&self, limit: i64) -> StoreResult<Vec<TriggerRecord>>;
    async fn attempts_for(&self, trigger_id: i64) -> StoreResult<Vec<AttemptRecord>>;
    /// Triggers by state; the states sum to the total.
    async fn trigger_counts(&self) -> StoreResult<TriggerCounts>;
    /// The last checkpoint saved for a trigger, by any attempt.
    async fn checkpoint_load(&self, trigger_id: i64) -> StoreResult<Option<(i64, Vec<u8>)>>;
    async fn counter(&self, name: &str) -> StoreResult<i64>;
    async fn counters(&self) -> StoreResult<Vec<(String, i64)>>;
    async fn group_get(&self, name: &str) -> StoreResult<Option<ResourceGroup>>;
    async fn groups_list(&self) -> StoreResult<Vec<ResourceGroup>>;
    /// The tenants a group admits, `*` for every tenant
    /// ([`crate::model::admission`]).
    async fn group_tenants(&self, group: &str) -> StoreResult<Vec<String>>;
    /// What claims enforce for a group now, and how many of its triggers
    /// run; `None` if there is no such group.
    async fn group_load(&self, name: &str) -> StoreResult<Option<super::GroupLoad>>;
    /// What the group's attempts that ended in the last `window_ms` (among
    /// the newest [`super::WINDOW_ATTEMPTS`]) measured: how many, their
    /// mean wall time, their largest peak memory.
    async fn group_observed(
        &self,
        name: &str,
        window_ms: i64,
    ) -> StoreResult<crate::model::group::Observed>;
    async fn component_get(&self, digest: &str) -> StoreResult<Option<ComponentRecord>>;
    async fn component_bytes(&self, digest: &str) -> StoreResult<Vec<u8>>;
    async fn components_list(&self) -> StoreResult<Vec<ComponentRecord>>;
    /// The job `job_id` of `tenant` (job ids are names inside a tenant).
    async fn job_get(&self, tenant: &str, job_id: &str) -> StoreResult<Option<JobRecord>>;
    /// Every tenant's job with this id (at most one per tenant).
    async fn jobs_named(&self, job_id: &str) -> StoreResult<Vec<JobRecord>>;
    async fn jobs_list(&self) -> StoreResult<Vec<JobRecord>>;
    async fn plan_get(
        &self,
        tenant: &str,
        job_id: &str,
        version: i64,
    ) -> StoreResult<PlanVersionRecord>;
    async fn plan_versions(
        &self,
        tenant: &str,
        job_id: &str,
    ) -> StoreResult<Vec<PlanVersionRecord>>;
    async fn connector_get(&self, name: &str) -> StoreResult<Option<ConnectorRecord>>;
    async fn connectors_list(&self) -> StoreResult<Vec<ConnectorRecord>>;
    /// The effect recorded under `key` in `tenant`'s namespace (keys are
    /// names of their tenant: another tenant's equal key is another effect).
    async fn effect_get(&self, tenant: &str, key: &str) -> StoreResult<Option<EffectRecord>>;
    async fn effects_for_trigger(&self, trigger_id: i64) -> StoreResult<Vec<EffectRecord>>;
    async fn effects_list(&self, limit: i64) -> StoreResult<Vec<EffectRecord>>;
    async fn exception_get(&self, id: i64) -> StoreResult<ExceptionRecord>;
    async fn exceptions_list(&self, state: Option<&str>) -> StoreResult<Vec<ExceptionRecord>>;
    async fn shard_count(&self) -> StoreResult<u32>;
    async fn shards_list(&self) -> StoreResult<Vec<ShardRecord>>;
    /// Skipped fire times, newest first, optionally of one job (a tenant
    /// and a job id): (tenant, job, version, instant, reason).
    async fn skipped_list(
        &self,
        job: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SkippedFire>>;
    /// Skipped fire times by reason.
    async fn skipped_counts(&self) -> StoreResult<Vec<(String, i64)>>;
    async fn audit_list(&self) -> StoreResult<Vec<AuditEntry>>;
}

/// Bookkeeping counters (stale-token rejections, idempotent hits, ...),
/// written by whichever plane observes the event.
#[async_trait]
pub trait Counters: Send + Sync {
    /// Add `by` to a counter.
    async fn counter_add(&self, name: &str, by: i64) -> StoreResult<()>;
}

/// A claim's parameters (see [`RunnerStore::claim`]).
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    /// Written into `lease_owner` and `attempts.runner_id`.
    pub owner: &'a str,
    /// Lease length, on the database clock.
    pub lease_ms: i64,
    /// Triggers claimed at most.
    pub limit: i64,
    /// Up to this many of them go to due retries first (see
    /// [`RunnerStore::claim`]).
    pub retry_slots: i64,
    /// Overrides the database clock (tests only).
    pub now: Option<i64>,
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal {
    /// The lease now lasts until this instant (database clock, ms).
    pub lease_until: i64,
    /// A person asked the trigger to stop.
    pub cancel_requested: bool,
    /// A closed gate covers the trigger: pause at the next safe point.
    pub pause_requested: bool,
}

/// The execution plane: every write here is made under a trigger lease and
/// fenced by its token in the same statement.
#[async_trait]
pub trait RunnerStore: ReadStore + Counters {
    /// Claim up to `limit` due triggers in one transaction: rows that are
    /// `pending` or `retry_wait` with `next_run_at <= now`, or `running`
    /// with a lapsed lease (taken over). Up to `retry_slots` go to due
    /// retries first, the rest to fresh work, and slots either lane leaves
    /// empty go to the other — so a backlog of retries can neither starve
    /// fresh triggers nor be starved by them. Each claimed trigger gets
    /// `fencing_token + 1`, a lease until `now + lease_ms` and a new
    /// attempt row; an attempt a previous holder left open is closed as
    /// `expired`. No resource group gets more new claims than its room —
    /// its effective concurrency less its running triggers, counted after
    /// every earlier claim of any process committed; taking over a lapsed
    /// lease needs no room.
    async fn claim(&self, request: &ClaimRequest<'_>) -> StoreResult<Vec<Claim>>;
    /// Renew a lease, only while owner, token and state still match.
    async fn lease_renew(
        &self,
        lease: &LeaseRef,
        lease_ms: i64,
        progress_seq: i64,
    ) -> StoreResult<Renewal>;
    /// Save a checkpoint under the lease. Returns the new sequence number.
    async fn checkpoint_save(&self, lease: &LeaseRef, data: &[u8]) -> StoreResult<i64>;
    /// How many group commits ([`RunnerStore::attempt_finish_batch`]) this
    /// store serves well at once: more than one only where commits can
    /// overlap in the database (PostgreSQL); SQLite has one writer.
    fn concurrent_commits(&self) -> usize {
        1
    }
    /// The database pool's connections in use and its maximum: the level
    /// of the runner's pool high-water mark.
    fn pool_load(&self) -> (u32, u32) {
        (0, 1)
    }
    /// Commit several attempts' ends in one transaction (group commit).
    /// Every transition is fenced by its own token; a stale one is left out
    /// — its attempt abandoned — and comes back as
    /// [`StoreError::LeaseLost`] while the rest commit. The outer error is
    /// the database's (nothing committed). Each end that committed answers
    /// the state the database wrote (`paused` or `manual` where a gate or
    /// a ticket holds the trigger, not always the state asked for).
    async fn attempt_finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<TriggerState>>>;
    /// Put the trigger back to `pending`, due in `delay_ms`, without a
    /// result — `paused` where a gate asked it to pause; the attempt is
    /// closed as `released` with `reason` — in one transaction, fenced by
    /// the token. Answers the state the database wrote.
    async fn attempt_release(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        reason: ReleaseReason,
        why: &str,
        delay_ms: i64,
    ) -> StoreResult<TriggerState>;
    /// Close an attempt whose result must not count, leaving the trigger to
    /// its lease (another runner takes it over with token + 1). Writes only
    /// the attempt row, and only if it is still open under `lease`'s token:
    /// `false` when it was already closed (a takeover closed it as
    /// `expired`) — the attempt's own bookkeeping, not a stale write.
    async fn attempt_abandon(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<bool>;
    /// How many attempts of a trigger before `attempt_id` were released
    /// (they did not spend the retry budget).
    async fn released_before(&self, trigger_id: i64, attempt_id: i64) -> StoreResult<i64>;
    /// The overlap rule, for every attempt of a scheduled trigger before
    /// its guest runs (a new fire, a retry, a resume, a takeover alike):
    /// admit the run if it already was (a takeover of a run in flight) or
    /// if fewer than `max_in_flight` runs of its job are in flight —
    /// counting every admitted run still `running`, its holder alive or
    /// not — decided under a lock per job ([`super::overlap`]).
    async fn overlap_admit(&self, lease: &LeaseRef, max_in_flight: u32) -> StoreResult<Admission>;
    /// Ask a running trigger to stop at its next safe point (overlap
    /// `replace`). False if it is not running.
    async fn request_stop(&self, trigger_id: i64) -> StoreResult<bool>;
    /// Bind `owner`'s liveness to a database session of its own
    /// ([`super::liveness`]); `None` where the database has none to watch
    /// (SQLite) or another live session already holds the owner name.
    async fn liveness_hold(&self, owner: &str) -> StoreResult<Option<super::Liveness>>;
    /// End the leases of owners whose session is gone, but `me`'s; the
    /// triggers set free for a takeover ([`super::liveness`]).
    async fn expire_dead_holders(&self, me: &str) -> StoreResult<Vec<i64>>;

    /// [`RunnerStore::claim`] with half the batch (rounded up) offered to
    /// retries first.
    async fn trigger_claim_batch(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<Claim>> {
        self.claim(&ClaimRequest {
            owner,
            lease_ms,
            limit,
            retry_slots: (limit + 1) / 2,
            now,
        })
        .await
    }

    /// Commit one attempt's end (see [`RunnerStore::attempt_finish_batch`]).
    async fn attempt_finish(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
    ) -> StoreResult<TriggerState> {
        let ends = [(lease.clone(), end.clone())];
        self.attempt_finish_batch(&ends)
            .await?
            .pop()
            .expect("one result per attempt")
    }
}

/// One scan's writes, committed together under the shard lease.
#[derive(Debug, Clone, Default)]
pub struct ScanCommit {
    pub triggers: Vec<ScheduledTrigger>,
    /// Late fire times the misfire policy skipped: (tenant, job, version,
    /// instant).
    pub skipped: Vec<(String, String, i64, i64)>,
    /// The new watermark (never moved backwards).
    pub watermark: i64,
}

/// What a scan commit wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanWritten {
    pub created: i64,
    /// Computed triggers that already existed (absorbed by the plan key).
    pub existing: i64,
}

/// Trigger control: every write here is made under a shard lease and
/// fenced by the shard's generation and owner in the same statement.
#[async_trait]
pub trait SchedulerStore: ReadStore + Counters {
    /// Take or renew the lease on a shard. The generation increases when
    /// ownership changes or the previous lease had lapsed. `None`: another
    /// owner holds a live lease.
    async fn shard_lease(
        &self,
        shard: u32,
        owner: &str,
        ttl_ms: i64,
        now: Option<i64>,
    ) -> StoreResult<Option<ShardLease>>;
    /// Give a shard up (drain): the next owner takes it without waiting.
    async fn shard_release(&self, lease: &ShardLease) -> StoreResult<()>;
    /// A cheap fingerprint of a shard's schedules, to reload them only when
    /// something changed: (count, newest update, sum of versions).
    async fn schedules_fingerprint(&self, shard: u32) -> StoreResult<(i64, i64, i64)>;
    /// The schedules of every job in a shard.
    async fn schedules_in_shard(&self, shard: u32) -> StoreResult<Vec<JobScheduleRecord>>;
    /// Scheduled triggers that already exist for the jobs of a shard in
    /// `[from, to)`.
    async fn shard_existing(
        &self,
        shard: u32,
        from: i64,
        to: i64,
    ) -> StoreResult<std::collections::HashSet<(String, String, i64)>>;
    /// Fire times of a job in `[from, to)` already decided under any plan
    /// version (a trigger exists or the time was recorded as skipped).
    async fn decided_times(
        &self,
        tenant: &str,
        job_id: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<i64>>;
    /// Insert a scan's triggers and skipped fire times and advance the
    /// watermark, in one transaction, each statement fenced by the shard
    /// lease: a scheduler that lost its shard writes nothing and gets
    /// [`StoreError::ShardLost`].
    async fn scan_commit(&self, lease: &ShardLease, scan: &ScanCommit) -> StoreResult<ScanWritten>;
}

/// The side-effect plane: intents and outcomes fenced by the attempt's
/// token, recovery of unknown outcomes, exception tickets.
#[async_trait]
pub trait EffectStore: ReadStore + Counters {
    /// A connector's credential, for the HTTP client only (never shown).
    async fn connector_secret(
        &self,
        connector: &str,
    ) -> StoreResult<Option<crate::model::secret::ConnectorSecret>>;
    /// Write a new effect's intent under the lease (`sends = 1`: the send
    /// follows). `Conflict` when the key was recorded meanwhile.
    async fn effect_intent(&self, lease: &LeaseRef, new: &NewEffect) -> StoreResult<EffectRecord>;
    /// Re-write the intent of an unresolved effect (intent, unknown or
    /// retryable) before sending it again under this lease: the record takes
    /// the lease's token and `sends + 1`.
    async fn effect_reintent(
        &self,
        lease: &LeaseRef,
        key: &str,
        params_digest: &str,
        request_id: &str,
    ) -> StoreResult<EffectRecord>;
    /// Record what a send ended as, under the lease that sent it.
    async fn effect_settle(
        &self,
        lease: &LeaseRef,
        key: &str,
        outcome: &EffectOutcome,
    ) -> StoreResult<EffectRecord>;
    /// Unresolved effects whose trigger is not held by a live lease.
    async fn effects_unresolved(&self, limit: i64) -> StoreResult<Vec<EffectRecord>>;
    /// The recovery scanner's write: compare-and-set on the token the
    /// record holds, only while no live lease could be writing it. Returns
    /// whether it applied.
    async fn effect_recover(
        &self,
        tenant: &str,
        key: &str,
        expected_token: i64,
        outcome: &EffectOutcome,
    ) -> StoreResult<bool>;
    /// Open an exception ticket (or return the open one for the same kind
    /// and subject: `false`).
    async fn exception_open(&self, new: &NewException) -> StoreResult<(ExceptionRecord, bool)>;
}

/// People's writes: registrations, limits, approvals and cancels, ticket
/// resolutions. Each commits with its audit entry in one transaction.
#[async_trait]
pub trait ControlStore: ReadStore + Counters {
    /// Append one audit entry on its own (a decision that stores nothing
    /// else, such as a refused registration).
    async fn audit_record(
        &self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: serde_json::Value,
    ) -> StoreResult<()>;
    /// Create or replace a group's limits, audited, with the effective
    /// concurrency claims enforce from now on.
    async fn group_put(
        &self,
        group: &ResourceGroup,
        capacity: &crate::model::group::Capacity,
        actor: &str,
    ) -> StoreResult<()>;
    /// Admit (`allow`) or stop admitting `tenant` (a name, or `*`) in
    /// `group`, audited as `group.allow` / `group.disallow`. False when it
    /// was already so.
    async fn group_tenant_set(
        &self,
        group: &str,
        tenant: &str,
        allow: bool,
        actor: &str,
    ) -> StoreResult<bool>;
    /// Replace the tenants a group admits (a groups file's `tenants`),
    /// audited as `group.tenants` when it changed.
    async fn group_tenants_replace(
        &self,
        group: &str,
        tenants: &[String],
        actor: &str,
    ) -> StoreResult<()>;
    /// Store a checked component. Returns whether it was new (false: an
    /// idempotent hit).
    async fn component_put(
        &self,
        digest: &str,
        bytes: &[u8],
        manifest_json: &str,
        actor: &str,
    ) -> StoreResult<bool>;
    /// Apply a plan for `job_id`: an idempotent hit, a new version, or a
    /// refusal (audited) — decided and written in one transaction.
    /// `schedule` is the canonical JSON of the job's time-based schedule
    /// (`None`: manual only), kept in step in `job_schedules`.
    async fn plan_apply(
        &self,
        job_id: &str,
        spec: &PlanSpec,
        schedule: Option<&str>,
        requested_version: Option<u32>,
        actor: &str,
    ) -> StoreResult<ApplyOutcome>;
    /// Create a trigger, or return the existing one with the same plan key
    /// (`false`). A new manual one is audited as `trigger.run` with
    /// [`NewTrigger::requested_by`].
    async fn trigger_create(&self, new: &NewTrigger) -> StoreResult<(TriggerRecord, bool)>;
    /// Approve a parked (`manual`) trigger: it becomes pending, audited.
    async fn trigger_approve(&self, id: i64, actor: &str, reason: &str) -> StoreResult<()>;
    /// Cancel a trigger: one that has not started is cancelled at once; a
    /// running one is asked to stop at its next safe point. False when it
    /// is already finished. Audited as `trigger.cancel` with the actor.
    async fn trigger_request_cancel(&self, id: i64, actor: &str, reason: &str)
    -> StoreResult<bool>;
    /// Set a tenant's weight in fair shares and its quota, audited.
    async fn tenant_put(
        &self,
        tenant: &crate::model::group::TenantQuota,
        actor: &str,
    ) -> StoreResult<()>;
    /// Create or change a connector, audited.
    async fn connector_put(&self, connector: &ConnectorRecord, actor: &str) -> StoreResult<()>;
    /// Set, rotate (`Some`) or clear (`None`) a connector's credential,
    /// sealed at rest, audited with its keyed fingerprint, never its value.
    /// Returns the fingerprint set.
    async fn connector_secret_set(
        &self,
        connector: &str,
        secret: Option<&crate::model::secret::ConnectorSecret>,
        actor: &str,
    ) -> StoreResult<Option<String>>;
    /// Every stored credential, as its header and fingerprint.
    async fn connector_secrets(&self) -> StoreResult<Vec<super::SecretView>>;
    /// Resolve an open ticket with one of its allowed actions, audited.
    async fn exception_resolve(
        &self,
        id: i64,
        action: &str,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord>;
}

/// Implements [`ReadStore`] and [`Counters`] for a wrapper type by
/// forwarding every call to `self.$field` (a [`super::Store`]). For tests
/// that wrap one role to inject a fault (a stall, a crash between two
/// statements) and need the shared reads unchanged.
#[macro_export]
macro_rules! forward_reads {
    ($ty:ty => $field:ident) => {
        #[$crate::store::async_trait]
        impl $crate::store::ReadStore for $ty {
            async fn now_ms(&self) -> $crate::store::StoreResult<i64> {
                $crate::store::ReadStore::now_ms(&self.$field).await
            }
            async fn trigger_get(
                &self,
                id: i64,
            ) -> $crate::store::StoreResult<$crate::store::TriggerRecord> {
                $crate::store::ReadStore::trigger_get(&self.$field, id).await
            }
            async fn trigger_by_key(
                &self,
                tenant: &str,
                plan_key: &str,
            ) -> $crate::store::StoreResult<$crate::store::TriggerRecord> {
                $crate::store::ReadStore::trigger_by_key(&self.$field, tenant, plan_key).await
            }
            async fn triggers_list(
                &self,
                limit: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::TriggerRecord>> {
                $crate::store::ReadStore::triggers_list(&self.$field, limit).await
            }
            async fn attempts_for(
                &self,
                trigger_id: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::AttemptRecord>> {
                $crate::store::ReadStore::attempts_for(&self.$field, trigger_id).await
            }
            async fn trigger_counts(
                &self,
            ) -> $crate::store::StoreResult<$crate::store::TriggerCounts> {
                $crate::store::ReadStore::trigger_counts(&self.$field).await
            }
            async fn checkpoint_load(
                &self,
                trigger_id: i64,
            ) -> $crate::store::StoreResult<Option<(i64, Vec<u8>)>> {
                $crate::store::ReadStore::checkpoint_load(&self.$field, trigger_id).await
            }
            async fn counter(&self, name: &str) -> $crate::store::StoreResult<i64> {
                $crate::store::ReadStore::counter(&self.$field, name).await
            }
            async fn counters(&self) -> $crate::store::StoreResult<Vec<(String, i64)>> {
                $crate::store::ReadStore::counters(&self.$field).await
            }
            async fn group_tenants(&self, group: &str) -> $crate::store::StoreResult<Vec<String>> {
                $crate::store::ReadStore::group_tenants(&self.$field, group).await
            }
            async fn group_get(
                &self,
                name: &str,
            ) -> $crate::store::StoreResult<Option<$crate::model::ResourceGroup>> {
                $crate::store::ReadStore::group_get(&self.$field, name).await
            }
            async fn groups_list(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::model::ResourceGroup>> {
                $crate::store::ReadStore::groups_list(&self.$field).await
            }
            async fn group_load(
                &self,
                name: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::GroupLoad>> {
                $crate::store::ReadStore::group_load(&self.$field, name).await
            }
            async fn group_observed(
                &self,
                name: &str,
                window_ms: i64,
            ) -> $crate::store::StoreResult<$crate::model::group::Observed> {
                $crate::store::ReadStore::group_observed(&self.$field, name, window_ms).await
            }
            async fn component_get(
                &self,
                digest: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::ComponentRecord>> {
                $crate::store::ReadStore::component_get(&self.$field, digest).await
            }
            async fn component_bytes(&self, digest: &str) -> $crate::store::StoreResult<Vec<u8>> {
                $crate::store::ReadStore::component_bytes(&self.$field, digest).await
            }
            async fn components_list(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ComponentRecord>> {
                $crate::store::ReadStore::components_list(&self.$field).await
            }
            async fn job_get(
                &self,
                tenant: &str,
                job_id: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::JobRecord>> {
                $crate::store::ReadStore::job_get(&self.$field, tenant, job_id).await
            }
            async fn jobs_named(
                &self,
                job_id: &str,
            ) -> $crate::store::StoreResult<Vec<$crate::store::JobRecord>> {
                $crate::store::ReadStore::jobs_named(&self.$field, job_id).await
            }
            async fn jobs_list(&self) -> $crate::store::StoreResult<Vec<$crate::store::JobRecord>> {
                $crate::store::ReadStore::jobs_list(&self.$field).await
            }
            async fn plan_get(
                &self,
                tenant: &str,
                job_id: &str,
                version: i64,
            ) -> $crate::store::StoreResult<$crate::store::PlanVersionRecord> {
                $crate::store::ReadStore::plan_get(&self.$field, tenant, job_id, version).await
            }
            async fn plan_versions(
                &self,
                tenant: &str,
                job_id: &str,
            ) -> $crate::store::StoreResult<Vec<$crate::store::PlanVersionRecord>> {
                $crate::store::ReadStore::plan_versions(&self.$field, tenant, job_id).await
            }
            async fn connector_get(
                &self,
                name: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::ConnectorRecord>> {
                $crate::store::ReadStore::connector_get(&self.$field, name).await
            }
            async fn connectors_list(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ConnectorRecord>> {
                $crate::store::ReadStore::connectors_list(&self.$field).await
            }
            async fn effect_get(
                &self,
                tenant: &str,
                key: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::EffectRecord>> {
                $crate::store::ReadStore::effect_get(&self.$field, tenant, key).await
            }
            async fn effects_for_trigger(
                &self,
                trigger_id: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::EffectRecord>> {
                $crate::store::ReadStore::effects_for_trigger(&self.$field, trigger_id).await
            }
            async fn effects_list(
                &self,
                limit: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::EffectRecord>> {
                $crate::store::ReadStore::effects_list(&self.$field, limit).await
            }
            async fn exception_get(
                &self,
                id: i64,
            ) -> $crate::store::StoreResult<$crate::store::ExceptionRecord> {
                $crate::store::ReadStore::exception_get(&self.$field, id).await
            }
            async fn exceptions_list(
                &self,
                state: Option<&str>,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ExceptionRecord>> {
                $crate::store::ReadStore::exceptions_list(&self.$field, state).await
            }
            async fn shard_count(&self) -> $crate::store::StoreResult<u32> {
                $crate::store::ReadStore::shard_count(&self.$field).await
            }
            async fn shards_list(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ShardRecord>> {
                $crate::store::ReadStore::shards_list(&self.$field).await
            }
            async fn skipped_list(
                &self,
                job: Option<(&str, &str)>,
                limit: i64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::SkippedFire>> {
                $crate::store::ReadStore::skipped_list(&self.$field, job, limit).await
            }
            async fn skipped_counts(&self) -> $crate::store::StoreResult<Vec<(String, i64)>> {
                $crate::store::ReadStore::skipped_counts(&self.$field).await
            }
            async fn audit_list(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::model::audit::AuditEntry>> {
                $crate::store::ReadStore::audit_list(&self.$field).await
            }
        }

        #[$crate::store::async_trait]
        impl $crate::store::Counters for $ty {
            async fn counter_add(&self, name: &str, by: i64) -> $crate::store::StoreResult<()> {
                $crate::store::Counters::counter_add(&self.$field, name, by).await
            }
        }
    };
}
