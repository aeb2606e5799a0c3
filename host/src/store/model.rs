//! Rows and the parameter structs of store operations. The domain types
//! they carry (states, tokens, leases) are [`crate::model`]'s.

#[cfg(doc)]
use crate::model::AttemptOutcome;
use crate::model::EffectState;
use crate::model::TriggerOrigin;
use crate::model::TriggerState;
use crate::model::output::{self, Encoding};
use serde::Serialize;

/// A stored component, without its bytes.
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct ComponentRecord {
    pub digest: String,
    pub size_bytes: i64,
    pub manifest: String,
    pub pushed_by: String,
    pub pushed_at: i64,
}

/// A job and its newest version.
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct JobRecord {
    pub job_id: String,
    pub tenant: String,
    pub latest_version: i64,
    pub created_at: i64,
}

impl JobRecord {
    /// `tenant/job`: the one name of this job that no other tenant's job
    /// shares ([`crate::model::plan::JobName`]).
    pub fn qualified(&self) -> String {
        crate::model::plan::JobName::qualified(&self.tenant, &self.job_id)
    }
}

/// A fire time the misfire or overlap policy decided not to run:
/// (tenant, job, plan version, instant in ms, reason).
pub type SkippedFire = (String, String, i64, i64, String);

/// One immutable plan version.
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct PlanVersionRecord {
    pub job_id: String,
    pub version: i64,
    pub digest: String,
    pub spec: String,
    pub component_digest: String,
    pub resource_group: String,
    pub created_by: String,
    pub created_at: i64,
}

/// A trigger row. In JSON its `result` is the run's output as
/// [`crate::model::output`] carries it (the JSON value, UTF-8 text or
/// base64) with `result_encoding` saying which ([`TriggerWire`]).
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
#[serde(into = "TriggerWire", try_from = "TriggerWire")]
pub struct TriggerRecord {
    pub id: i64,
    pub plan_key: String,
    pub job_id: String,
    pub plan_version: i64,
    pub tenant: String,
    pub resource_group: String,
    #[sqlx(try_from = "String")]
    pub origin: TriggerOrigin,
    pub scheduled_at: i64,
    pub partition_key: Option<String>,
    pub params: String,
    #[sqlx(try_from = "String")]
    pub state: TriggerState,
    pub priority: i64,
    pub next_run_at: i64,
    /// The token as stored (the domain's [`crate::model::FencingToken`]).
    pub fencing_token: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub attempts: i64,
    pub result: Option<Vec<u8>>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

/// An attempt row.
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct AttemptRecord {
    pub id: i64,
    pub trigger_id: i64,
    pub attempt_no: i64,
    pub runner_id: String,
    pub fencing_token: i64,
    pub started_at: i64,
    pub lease_until: i64,
    pub heartbeat_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// An [`AttemptOutcome`]'s name; NULL while the attempt runs.
    pub outcome: Option<String>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub fuel_used: Option<i64>,
    pub peak_memory_bytes: Option<i64>,
    pub wall_ms: Option<i64>,
    pub log: Option<String>,
}

/// A new trigger.
#[derive(Debug, Clone)]
pub struct NewTrigger {
    /// The job as a person names it: `JOB` or `TENANT/JOB`
    /// ([`crate::model::plan::JobName`]); a bare id must be one tenant's.
    pub job_id: String,
    /// None: the job's latest version.
    pub plan_version: Option<u32>,
    pub origin: TriggerOrigin,
    /// None: the database's now.
    pub scheduled_at: Option<i64>,
    pub partition_key: Option<String>,
    /// A manual run's request key, when the client gave one: the same key
    /// is the same run for as long as its trigger is kept
    /// (`store/requests.rs`). None for every other trigger.
    pub request_key: Option<String>,
    /// JSON object merged over the plan's params at run time.
    pub params: serde_json::Value,
    /// Who asked for a manual run (the audit entry's actor); see
    /// [`NewTrigger::by`].
    pub requested_by: Option<String>,
}

impl NewTrigger {
    /// A manual run of the job's latest version, now. Manual runs carry
    /// their own identity: the plan key's partition is `manual-<key>`, where
    /// `request_key` lets a client retry a request without creating a second
    /// run; without one, every call is a new run.
    pub fn manual(job_id: &str, params: serde_json::Value, request_key: Option<&str>) -> Self {
        let key =
            request_key.map_or_else(|| format!("{:016x}", rand::random::<u64>()), str::to_string);
        Self {
            job_id: job_id.to_string(),
            plan_version: None,
            origin: TriggerOrigin::Manual,
            scheduled_at: None,
            partition_key: Some(format!("manual-{key}")),
            request_key: request_key.map(str::to_string),
            params,
            requested_by: None,
        }
    }

    /// The person (or client) asking, recorded in the `trigger.run` audit
    /// entry; without it the entry says `unattributed`.
    pub fn by(mut self, actor: &str) -> Self {
        self.requested_by = Some(actor.to_string());
        self
    }
}

/// Triggers by state, for the conservation check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TriggerCounts {
    pub total: i64,
    pub by_state: Vec<(String, i64)>,
}

/// A shard row.
#[derive(Debug, Clone, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct ShardRecord {
    pub shard: i64,
    pub owner: Option<String>,
    pub generation: i64,
    pub lease_until: Option<i64>,
    pub watermark: Option<i64>,
    pub last_scan_at: Option<i64>,
    pub triggers_created: i64,
    pub triggers_existing: i64,
}

/// The schedule of a job's latest plan version.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobScheduleRecord {
    pub job_id: String,
    pub plan_version: i64,
    pub shard: i64,
    pub spec: String,
    pub tenant: String,
    pub resource_group: String,
    pub priority: i64,
    pub active_from: i64,
}

/// A trigger the scanner creates.
#[derive(Debug, Clone)]
pub struct ScheduledTrigger {
    pub job_id: String,
    pub plan_version: i64,
    pub tenant: String,
    pub resource_group: String,
    pub priority: i64,
    pub scheduled_at: i64,
    /// `pending`, or `manual` when parked for approval.
    pub state: TriggerState,
    /// A catch-up fire (a missed time fired late): it runs in its group's
    /// recovery lane.
    pub recovery: bool,
}

/// A yes/no column, stored as 0/1 in both databases (an integer decodes the
/// same through either driver; a boolean would not).
#[derive(Debug, Clone, Copy, sqlx::Type)]
#[sqlx(transparent)]
pub struct Flag(pub i64);

impl From<Flag> for bool {
    fn from(flag: Flag) -> bool {
        flag.0 != 0
    }
}

/// An admin-configured connector (see `migrations/*/0003_effects.sql`).
/// As `PUT /v1/connectors/{name}`'s body it refuses unknown fields.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, sqlx::FromRow)]
#[serde(deny_unknown_fields)]
pub struct ConnectorRecord {
    pub name: String,
    /// `http`.
    pub kind: String,
    pub base_url: String,
    pub timeout_ms: i64,
    pub permits: i64,
    /// Calls per second; 0 means unlimited.
    pub rate_per_sec: f64,
    /// The downstream rejects fencing tokens lower than the highest it has
    /// seen (per resource for the reference ledger: one trigger per resource).
    #[sqlx(try_from = "Flag")]
    pub compares_tokens: bool,
    /// The downstream answers `GET {base_url}/operations/{key}`.
    #[sqlx(try_from = "Flag")]
    pub queryable: bool,
    /// The downstream honours `Idempotency-Key` (a resend under the same key
    /// is applied at most once). When it does not, an effect whose send
    /// budget is spent becomes an exception ticket instead of a plain
    /// failure, because any of its sends may have half-happened.
    #[sqlx(try_from = "Flag")]
    pub idempotent: bool,
    pub breaker_failure_rate: f64,
    pub breaker_min_calls: i64,
    pub breaker_window_ms: i64,
    pub breaker_open_ms: i64,
}

impl ConnectorRecord {
    /// The first setting outside its documented limit
    /// ([`crate::model::bounds`]), named as `paddock connector set`'s flag
    /// spells it; checked before anything is stored, so the database's own
    /// CHECK constraints never see a value out of range.
    pub fn problem(&self) -> Option<String> {
        use crate::model::bounds::{
            BREAKER_MIN_CALLS, BREAKER_OPEN, BREAKER_WINDOW, Bound, CONNECTOR_CALL_RATE_MAX,
            CONNECTOR_CALL_RATE_MIN, PERMITS, TIMEOUT, check_real,
        };
        if self.kind != "http" {
            return Some(format!(
                "connector kind '{}' is not supported (use http)",
                self.kind
            ));
        }
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return Some("base-url must start with http:// or https://".into());
        }
        Bound::first_problem([
            (&TIMEOUT, Some(self.timeout_ms)),
            (&PERMITS, Some(self.permits)),
            (&BREAKER_MIN_CALLS, Some(self.breaker_min_calls)),
            (&BREAKER_WINDOW, Some(self.breaker_window_ms)),
            (&BREAKER_OPEN, Some(self.breaker_open_ms)),
        ])
        .or_else(|| check_real("rate", self.rate_per_sec, false, CONNECTOR_CALL_RATE_MAX).err())
        .or_else(|| {
            (self.rate_per_sec > 0.0 && self.rate_per_sec < CONNECTOR_CALL_RATE_MIN).then(|| {
                format!(
                    "rate must be 0 (unlimited) or at least {CONNECTOR_CALL_RATE_MIN} calls per \
                     second, not {}",
                    self.rate_per_sec
                )
            })
        })
        .or_else(|| check_real("breaker-failure-rate", self.breaker_failure_rate, true, 1.0).err())
    }
}

/// One effect row.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct EffectRecord {
    pub id: i64,
    /// The tenant of the trigger that wrote it: the key is a name in this
    /// tenant's namespace, unique per (tenant, key).
    pub tenant: String,
    pub idempotency_key: String,
    /// What the host sends as `Idempotency-Key` and asks the downstream
    /// by: the key qualified by its tenant (`tenant/key`, the effect
    /// plane's rule), or the bare key for effects recorded before keys were
    /// qualified.
    pub downstream_key: String,
    pub trigger_id: i64,
    pub attempt_id: Option<i64>,
    pub connector: String,
    pub action: String,
    pub params_digest: String,
    pub request_id: String,
    pub fencing_token: i64,
    #[sqlx(try_from = "String")]
    pub state: EffectState,
    pub response: Option<Vec<u8>>,
    pub error: Option<String>,
    pub compensates: Option<String>,
    pub sends: i64,
    pub last_status: Option<i64>,
    pub resolved_by: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A new effect intent, written under a lease.
#[derive(Debug, Clone)]
pub struct NewEffect {
    /// The tenant of the attempt's trigger; the intent's statement writes
    /// nothing unless the fenced trigger row belongs to it.
    pub tenant: String,
    pub idempotency_key: String,
    pub downstream_key: String,
    pub connector: String,
    pub action: String,
    pub params_digest: String,
    pub request_id: String,
    pub compensates: Option<String>,
}

/// What a send ended as, written under the lease that sent it.
#[derive(Debug, Clone)]
pub struct EffectOutcome {
    /// What the write records: `succeeded`, `failed`, `unknown` or
    /// `retryable` ([`crate::model::EffectTransition::Settle`]).
    pub state: EffectState,
    pub response: Option<Vec<u8>>,
    pub error: Option<String>,
    pub last_status: Option<i64>,
    pub resolved_by: &'static str,
}

/// An exception ticket.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct ExceptionRecord {
    pub id: i64,
    /// unknown_outcome | key_conflict | budget_exhausted | evidence_conflict
    pub kind: String,
    /// The tenant of the trigger it is about (`None` only for tickets
    /// opened before tickets carried one and about no trigger).
    pub tenant: Option<String>,
    pub subject: String,
    pub trigger_id: Option<i64>,
    pub effect_key: Option<String>,
    /// Canonical JSON.
    pub evidence: String,
    /// JSON array of action names.
    pub allowed_actions: String,
    pub state: String,
    pub resolution: Option<String>,
    pub resolved_by: Option<String>,
    pub reason: Option<String>,
    pub before_digest: Option<String>,
    pub after_digest: Option<String>,
    pub created_at: i64,
    pub resolved_at: Option<i64>,
    /// A high-risk action one operator proposed, awaiting a second's
    /// approval (the two-person rule, `model::tickets`); cleared when
    /// rejected.
    pub proposed_action: Option<String>,
    pub proposed_by: Option<String>,
    pub proposed_reason: Option<String>,
    pub proposed_at: Option<i64>,
}

impl ExceptionRecord {
    pub fn allowed(&self) -> Vec<String> {
        serde_json::from_str(&self.allowed_actions).unwrap_or_default()
    }
}

/// A new exception ticket.
#[derive(Debug, Clone)]
pub struct NewException {
    pub kind: &'static str,
    pub subject: String,
    pub trigger_id: Option<i64>,
    pub effect_key: Option<String>,
    pub evidence: serde_json::Value,
    pub allowed_actions: Vec<&'static str>,
}

/// [`TriggerRecord`] as JSON: the same fields, the result encoded.
#[derive(Serialize, serde::Deserialize)]
pub struct TriggerWire {
    id: i64,
    plan_key: String,
    job_id: String,
    plan_version: i64,
    tenant: String,
    resource_group: String,
    origin: TriggerOrigin,
    scheduled_at: i64,
    partition_key: Option<String>,
    params: String,
    state: TriggerState,
    priority: i64,
    next_run_at: i64,
    fencing_token: i64,
    lease_owner: Option<String>,
    lease_until: Option<i64>,
    attempts: i64,
    #[serde(default)]
    result: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    result_encoding: Option<Encoding>,
    error_class: Option<String>,
    error_message: Option<String>,
    created_at: i64,
    updated_at: i64,
    finished_at: Option<i64>,
}

macro_rules! same_fields {
    ($from:ident => $to:ident { $($extra:tt)* }) => {
        $to {
            id: $from.id,
            plan_key: $from.plan_key,
            job_id: $from.job_id,
            plan_version: $from.plan_version,
            tenant: $from.tenant,
            resource_group: $from.resource_group,
            origin: $from.origin,
            scheduled_at: $from.scheduled_at,
            partition_key: $from.partition_key,
            params: $from.params,
            state: $from.state,
            priority: $from.priority,
            next_run_at: $from.next_run_at,
            fencing_token: $from.fencing_token,
            lease_owner: $from.lease_owner,
            lease_until: $from.lease_until,
            attempts: $from.attempts,
            error_class: $from.error_class,
            error_message: $from.error_message,
            created_at: $from.created_at,
            updated_at: $from.updated_at,
            finished_at: $from.finished_at,
            $($extra)*
        }
    };
}

impl From<TriggerRecord> for TriggerWire {
    fn from(t: TriggerRecord) -> Self {
        let (result, result_encoding) = match t.result.as_deref().map(output::encode) {
            Some((value, encoding)) => (Some(value), Some(encoding)),
            None => (None, None),
        };
        same_fields!(t => TriggerWire { result, result_encoding })
    }
}

impl TryFrom<TriggerWire> for TriggerRecord {
    type Error = String;

    fn try_from(t: TriggerWire) -> Result<Self, String> {
        let result = match (&t.result, t.result_encoding) {
            (None, _) => None,
            (Some(value), Some(encoding)) => Some(output::decode(value, encoding)?),
            (Some(_), None) => return Err("a result needs its result_encoding".into()),
        };
        Ok(same_fields!(t => TriggerRecord { result }))
    }
}
