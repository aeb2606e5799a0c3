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

/// `GET /v1/groups/{name}`: the group, what its attempts measured, and
/// what claims enforce now.
#[derive(Debug, Clone, Serialize)]
pub struct GroupView {
    pub group: crate::model::ResourceGroup,
    pub observed: crate::model::group::Observed,
    pub running: i64,
    pub effective_concurrency: i64,
    pub effective_binding: String,
}

/// `GET /v1/audit/verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyResponse {
    pub ok: bool,
    pub entries: usize,
    pub keyed: bool,
    pub anchors: usize,
    /// Where the chain breaks, when it does.
    pub broken: Option<String>,
}
