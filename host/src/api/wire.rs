//! The API's request and response bodies, shared with the command line's
//! `--server` mode (which prints them with the same code as local
//! commands). Requests refuse unknown fields.

use crate::model::ApplyOutcome;
use crate::model::capability::CapabilityManifest;
use crate::model::identity::Role;
use crate::store::{JobRecord, PlanVersionRecord, TriggerRecord};
use serde::{Deserialize, Serialize};

/// One page of a list: `next` is the `after` of the next page (`None`: the
/// last page).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// `POST /v1/triggers`: a manual run of a job's latest version.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub job: String,
    /// Merged over the plan's params.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The same key is the same run (a retried request creates nothing).
    #[serde(default)]
    pub request_key: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResponse {
    pub trigger: TriggerRecord,
    /// False: the request key's run already existed.
    pub created: bool,
}

/// `POST /v1/triggers/{id}/cancel`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default)]
    pub reason: String,
}

/// `POST /v1/triggers/{id}/approve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    pub reason: String,
}

/// `POST /v1/jobs`: a job manifest's TOML text. Its `component` must be a
/// digest (`sha256:...`) of a component pushed first: the server reads no
/// files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    pub manifest: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApplyResponse {
    pub job: String,
    #[serde(flatten)]
    pub outcome: ApplyOutcome,
}

/// `POST /v1/components`' answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushResponse {
    pub digest: String,
    /// False: the same bytes were stored already.
    pub created: bool,
    pub manifest: CapabilityManifest,
}

/// `GET /v1/jobs/{job}`: the job and its plan versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobView {
    pub job: JobRecord,
    pub versions: Vec<PlanVersionRecord>,
}

/// `POST /v1/triggers/{id}/cancel`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Done {
    pub id: String,
    pub done: String,
}

/// `POST /v1/tickets/{id}/resolve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    pub action: String,
    pub reason: String,
}

/// `POST /v1/tokens`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub tenant: Option<String>,
    /// How long it is valid (`90d`, `12h`; at most 366d).
    #[serde(default = "default_expiry")]
    pub expires: String,
}

fn default_expiry() -> String {
    "90d".into()
}

/// A token just created: its text is shown here once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenResponse {
    pub name: String,
    pub token: String,
    pub fingerprint: String,
    pub expires_at: i64,
}

/// `POST /v1/groups/{name}/grants`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `POST /v1/groups`: a groups file's TOML text (`paddock group apply`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsRequest {
    pub groups: String,
}

/// `PUT /v1/tenants/{tenant}` (`paddock tenant set`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantRequest {
    pub weight: i64,
    #[serde(default)]
    pub max_in_flight: Option<i64>,
    #[serde(default)]
    pub triggers_per_minute: Option<i64>,
    #[serde(default)]
    pub fuel_per_hour: Option<i64>,
}

/// `PUT /v1/connectors/{name}/secret`: a bearer token, or any header's
/// value. Stored; never shown again (answers and the audit log carry its
/// fingerprint).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRequest {
    /// `None`: `Authorization: Bearer <value>`.
    #[serde(default)]
    pub header: Option<String>,
    pub value: String,
}

// By hand: the value must not reach a log through `{:?}`.
impl std::fmt::Debug for SecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRequest")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// `GET /v1/groups/{name}` and `paddock group show` (built for both by
/// [`super::views::group_view`]): the group, what its attempts measured,
/// what claims enforce now, its recovery ramp and high-water holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupView {
    pub group: crate::model::ResourceGroup,
    pub observed: crate::model::group::Observed,
    pub running: i64,
    pub effective_concurrency: i64,
    pub effective_binding: String,
    /// The instance pool of the process that answers (one input of the
    /// effective concurrency "as it would be" in that process).
    pub pool: i64,
    pub ramp: crate::store::RampNow,
    /// Why its claims are held now, if they are.
    pub held: Option<String>,
    /// How many times its claims were held so far.
    pub holds: i64,
    /// Claims held so far by processes for their database pool and guest
    /// memory (the `claims_held_pool` / `claims_held_memory` counters).
    pub held_pool: i64,
    pub held_memory: i64,
}

/// `GET /v1/audit/verify`, and what `paddock audit verify` prints from
/// (locally too: [`VerifyResponse::of`]). The file paths are the
/// server's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyResponse {
    pub ok: bool,
    pub entries: usize,
    pub keyed: bool,
    pub anchors: usize,
    /// Where the chain breaks, when it does.
    pub broken: Option<String>,
    /// The first bad entry, when it breaks.
    #[serde(default)]
    pub first_bad: Option<i64>,
    /// The first entry carrying a MAC.
    #[serde(default)]
    pub keyed_from: Option<i64>,
    #[serde(default)]
    pub anchors_matched: usize,
    /// The head anchored now.
    #[serde(default)]
    pub head: Option<i64>,
    #[serde(default)]
    pub key_file: Option<String>,
    #[serde(default)]
    pub anchor_file: Option<String>,
}

impl VerifyResponse {
    pub fn of(verdict: &crate::store::AuditVerdict) -> Self {
        let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let mut answer = VerifyResponse {
            ok: verdict.result.is_ok(),
            entries: 0,
            keyed: verdict.keyed,
            anchors: verdict.anchors,
            broken: None,
            first_bad: None,
            keyed_from: None,
            anchors_matched: 0,
            head: None,
            key_file: path(&verdict.config.key_file),
            anchor_file: path(&verdict.config.anchor_file),
        };
        match &verdict.result {
            Ok(v) => {
                answer.entries = v.entries;
                answer.keyed_from = v.keyed_from;
                answer.anchors_matched = v.anchors_matched;
                answer.head = v.head.as_ref().map(|h| h.seq);
            }
            Err(b) => {
                answer.broken = Some(b.to_string());
                answer.first_bad = Some(b.seq());
            }
        }
        answer
    }
}

/// `PUT /v1/groups/{name}`'s answer: what claims enforce now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupSetResponse {
    pub group: String,
    pub effective_concurrency: i64,
    /// Which input binds the effective concurrency.
    pub bound_by: String,
}

/// `GET /v1/components/{digest}/diff/{other}`: what `other` adds or drops
/// relative to `digest` (each a digest or a unique prefix of 8+ hex).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComponentDiffResponse {
    pub a: String,
    pub b: String,
    pub diff: crate::model::review::ManifestDiff,
}

/// `GET /v1/schedule/preview`: the fire times, and the zone local times
/// are shown in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreviewResponse {
    pub zone: String,
    pub times: Vec<chrono::DateTime<chrono::Utc>>,
}

/// `GET /v1/schedule/diff`: the two sets compared; `zone` is side A's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleDiffResponse {
    pub zone: String,
    pub only_a: Vec<chrono::DateTime<chrono::Utc>>,
    pub only_b: Vec<chrono::DateTime<chrono::Utc>>,
    pub both: usize,
}

/// `POST /v1/jobs/{job}/backfill`: `[from, to)`, at most `max` fire times
/// (default and limit 10,000, [`crate::model::bounds::BACKFILL_PER_REQUEST`];
/// a tenant may have at most
/// [`crate::model::bounds::BACKFILL_PENDING_PER_TENANT`] backfill triggers
/// waiting to run).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    pub from: chrono::DateTime<chrono::Utc>,
    pub to: chrono::DateTime<chrono::Utc>,
    #[serde(default = "default_backfill_max")]
    pub max: usize,
}

/// The most fire times one backfill (and one preview) covers.
pub const BACKFILL_MAX: usize = crate::model::bounds::BACKFILL_PER_REQUEST;

fn default_backfill_max() -> usize {
    BACKFILL_MAX
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackfillResponse {
    pub job: String,
    pub version: i64,
    pub created: i64,
    pub existing: i64,
}

/// One skipped fire time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub tenant: String,
    pub job: String,
    pub version: i64,
    pub at: i64,
    pub reason: String,
}

/// `GET /v1/schedule/skipped`: counts by reason, and the newest times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkippedResponse {
    pub counts: Vec<(String, i64)>,
    pub skipped: Vec<Skipped>,
}

/// `POST /v1/effects/recover`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverRequest {
    #[serde(default = "default_recover_limit")]
    pub limit: i64,
}

fn default_recover_limit() -> i64 {
    1000
}

/// `POST /v1/effects/{key}/compensate` (the path's key is the original).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompensateRequest {
    pub job: String,
    pub key: String,
    pub action: String,
    #[serde(default)]
    pub payload: String,
    pub reason: String,
}
