//! The control and report endpoints: gates (pause / resume / cancel at
//! five scopes, the closed gates), ticket approvals under the two-person
//! rule, `paddock report` and the unit prices. Each calls the same store
//! operation the command line does, audited as `token:NAME`.
//!
//! Which role may close a gate depends on its scope, so each scope has a
//! route of its own: `/v1/jobs/{job}/…` (`ControlJob`: a team on its own
//! jobs), `/v1/gates/{kind}/{name}/…` for a type, tenant or group
//! (`ControlScope`: operators), `/v1/gates/global/…` (`ControlGlobal`:
//! admins).

use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::{ApiError, ApiState, Caller};
use crate::model::gates::{CancelReport, GateScope, PauseReport, ResumeReport};
use crate::model::report::{self, Check, Cost, Incident, Prices};
use crate::model::units;
use crate::store::{CostBy, ExceptionRecord, GateRecord, ReadStore, ReportQuery, Retried};
use axum::Json;
use axum::extract::{Extension, State};
use serde::Deserialize;
use std::collections::BTreeMap;

type Answer<T> = Result<Json<T>, ApiError>;

/// The body of every gate change and approval: why.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonRequest {
    pub reason: String,
}

/// A gate change, whatever its scope.
pub enum GateVerb {
    Pause,
    Resume,
    Cancel,
}

/// Close, reopen or cancel `scope` for `caller`.
async fn gate(
    api: &ApiState,
    caller: &Caller,
    scope: GateScope,
    verb: GateVerb,
    reason: &str,
) -> Result<Json<serde_json::Value>, ApiError> {
    let actor = caller.actor();
    let report = match verb {
        GateVerb::Pause => to_json(api.store.gate_pause(&scope, &actor, reason).await?),
        GateVerb::Resume => to_json(api.store.gate_resume(&scope, &actor, reason).await?),
        GateVerb::Cancel => to_json(api.store.gate_cancel(&scope, &actor, reason).await?),
    };
    Ok(Json(report))
}

fn to_json(report: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(report).expect("a gate report serializes")
}

/// One job's gate: the job must be the caller's (another tenant's is 404).
async fn job_gate(
    api: ApiState,
    caller: Caller,
    job: String,
    verb: GateVerb,
    reason: String,
) -> Result<Json<serde_json::Value>, ApiError> {
    // A job gate names the job by its qualified name, `tenant/job`.
    let job = api.store.job_get_for(&caller.scope()?, &job).await?;
    gate(
        &api,
        &caller,
        GateScope::Job(job.qualified()),
        verb,
        &reason,
    )
    .await
}

/// A type's, tenant's or group's gate (`/v1/gates/{kind}/{name}/…`).
async fn scope_gate(
    api: ApiState,
    caller: Caller,
    (kind, name): (String, String),
    verb: GateVerb,
    reason: String,
) -> Result<Json<serde_json::Value>, ApiError> {
    let scope = match kind.as_str() {
        "job" => {
            return Err(ApiError::bad_request(format!(
                "a job's gate is /v1/jobs/{name}/pause|resume|cancel"
            )));
        }
        "global" => {
            return Err(ApiError::bad_request(
                "the global gate is /v1/gates/global/pause|resume|cancel".to_string(),
            ));
        }
        _ => GateScope::parse(&kind, &name).map_err(ApiError::bad_request)?,
    };
    gate(&api, &caller, scope, verb, &reason).await
}

macro_rules! gate_handlers {
    ($($name:ident: $inner:ident, $path:ty, $verb:ident;)*) => {$(
        pub async fn $name(
            State(api): State<ApiState>,
            Extension(caller): Extension<Caller>,
            ApiPath(path): ApiPath<$path>,
            ApiJson(request): ApiJson<ReasonRequest>,
        ) -> Result<Json<serde_json::Value>, ApiError> {
            $inner(api, caller, path, GateVerb::$verb, request.reason).await
        }
    )*};
}

gate_handlers! {
    job_pause: job_gate, String, Pause;
    job_resume: job_gate, String, Resume;
    job_cancel: job_gate, String, Cancel;
    scope_pause: scope_gate, (String, String), Pause;
    scope_resume: scope_gate, (String, String), Resume;
    scope_cancel: scope_gate, (String, String), Cancel;
}

macro_rules! global_handlers {
    ($($name:ident: $verb:ident;)*) => {$(
        pub async fn $name(
            State(api): State<ApiState>,
            Extension(caller): Extension<Caller>,
            ApiJson(request): ApiJson<ReasonRequest>,
        ) -> Result<Json<serde_json::Value>, ApiError> {
            gate(&api, &caller, GateScope::Global, GateVerb::$verb, &request.reason).await
        }
    )*};
}

global_handlers! {
    global_pause: Pause;
    global_resume: Resume;
    global_cancel: Cancel;
}

/// Keep the report types named in this module's answers documented.
#[allow(dead_code)]
type GateReports = (PauseReport, ResumeReport, CancelReport);

/// `?history=true`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesParams {
    #[serde(default)]
    pub history: bool,
}

/// `GET /v1/gates`: the closed gates (with `history`, reopened ones too).
/// A team token sees the gates that can hold its work: global, group and
/// type gates, its own tenant's, and its own jobs'.
pub async fn gates(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<GatesParams>,
) -> Answer<Vec<GateRecord>> {
    let gates = api.store.gates_list(q.history).await?;
    let Some(own) = caller.tenant() else {
        return Ok(Json(gates));
    };
    let mut visible = Vec::new();
    for g in gates {
        let seen = match g.kind.as_str() {
            "tenant" => g.value == own,
            "job" => g
                .value
                .split_once('/')
                .is_some_and(|(tenant, _)| tenant == own),
            _ => true,
        };
        if seen {
            visible.push(g);
        }
    }
    Ok(Json(visible))
}

/// `POST /v1/triggers/{id}/retry`: a new run of one of the caller's
/// failed triggers, or its waiting retry due now.
pub async fn trigger_retry(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ReasonRequest>,
) -> Answer<Retried> {
    api.store.trigger_get_for(&caller.scope()?, id).await?;
    Ok(Json(
        api.store
            .trigger_retry(id, &caller.actor(), &request.reason)
            .await?,
    ))
}

/// `POST /v1/tickets/{id}/approve`: run the action another operator
/// proposed (refused for the proposer: the two-person rule).
pub async fn ticket_approve(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ReasonRequest>,
) -> Answer<ExceptionRecord> {
    api.store.exception_get_for(&caller.scope()?, id).await?;
    Ok(Json(
        api.store
            .exception_approve(id, &caller.actor(), &request.reason)
            .await?,
    ))
}

/// `POST /v1/tickets/{id}/reject`: withdraw a proposed action.
pub async fn ticket_reject(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ReasonRequest>,
) -> Answer<ExceptionRecord> {
    api.store.exception_get_for(&caller.scope()?, id).await?;
    Ok(Json(
        api.store
            .exception_reject(id, &caller.actor(), &request.reason)
            .await?,
    ))
}

/// `?since=&until=&last=&by=&group=&tenant=`: instants as RFC 3339 or a
/// duration before now (`90m`), as on the command line; without `since`
/// or `last`, the last hour.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    pub since: Option<String>,
    pub until: Option<String>,
    pub last: Option<String>,
    pub by: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
}

/// The window and filters, checked; a team token's report is its own
/// tenant's (naming another is 403).
async fn report_query(
    api: &ApiState,
    caller: &Caller,
    q: &ReportParams,
) -> Result<ReportQuery, ApiError> {
    let now = api.store.now_ms().await?;
    let instant = |field: &str, text: &str| -> Result<i64, ApiError> {
        if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
            return Ok(at.timestamp_millis());
        }
        units::parse_millis(field, text)
            .map(|ms| now - ms)
            .map_err(|_| {
                ApiError::bad_request(format!(
                    "{field}: '{text}' is neither an RFC 3339 instant nor a duration before now (90m)"
                ))
            })
    };
    let until = match &q.until {
        Some(text) => instant("until", text)?,
        None => now,
    };
    let since = match (&q.since, &q.last) {
        (Some(text), _) => instant("since", text)?,
        (None, Some(text)) => {
            until - units::parse_millis("last", text).map_err(ApiError::bad_request)?
        }
        // The default window: the last hour.
        (None, None) => until - 3_600_000,
    };
    if since >= until {
        return Err(ApiError::bad_request(
            "the window is empty: since is not before until".to_string(),
        ));
    }
    let tenant = match (&q.tenant, caller.tenant()) {
        (Some(t), _) => {
            caller.scope_on(t)?;
            Some(t.clone())
        }
        (None, own) => own.map(str::to_string),
    };
    Ok(ReportQuery {
        since,
        until,
        tenant,
        group: q.group.clone(),
    })
}

/// `GET /v1/reports/incident`: as `paddock report incident --format json`.
pub async fn report_incident(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ReportParams>,
) -> Answer<serde_json::Value> {
    if q.by.is_some() || q.last.is_some() {
        return Err(ApiError::bad_request(
            "an incident report takes since, until, group and tenant".to_string(),
        ));
    }
    let query = report_query(&api, &caller, &q).await?;
    let incident = Incident::of(&api.store.incident_facts(&query).await?);
    let mut v = serde_json::to_value(incident).expect("an incident serializes");
    v["since"] = query.since.into();
    v["until"] = query.until.into();
    v["tenant"] = query.tenant.into();
    v["group"] = query.group.into();
    v["auto_closed"] = incident.auto_closed().into();
    v["auto_closure_pct"] = incident
        .auto_closure_pct()
        .map(|p| (p * 100.0).round() / 100.0)
        .into();
    Ok(Json(v))
}

/// `GET /v1/reports/cost`: as `paddock report cost --format json`.
pub async fn report_cost(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ReportParams>,
) -> Answer<serde_json::Value> {
    let by: CostBy =
        q.by.as_deref()
            .unwrap_or("job")
            .parse()
            .map_err(ApiError::bad_request)?;
    let query = report_query(&api, &caller, &q).await?;
    let prices = api.store.prices().await?;
    let lines: Vec<Cost> = api
        .store
        .cost_usage(&query, by)
        .await?
        .iter()
        .map(|u| report::cost(u, &prices))
        .collect();
    Ok(Json(serde_json::json!({
        "since": query.since, "until": query.until,
        "tenant": query.tenant, "group": query.group,
        "prices": prices, "lines": lines,
    })))
}

/// `GET /v1/reports/conservation`: the books, every check and the
/// differences.
pub async fn report_conservation(State(api): State<ApiState>) -> Answer<serde_json::Value> {
    let books = api.store.books().await?;
    let checks: Vec<Check> = api.store.conservation().await?;
    let differences: Vec<&Check> = report::differences(&checks);
    Ok(Json(serde_json::json!({
        "books": books,
        "checks": checks,
        "differences": differences,
    })))
}

/// `GET /v1/prices`.
pub async fn prices(State(api): State<ApiState>) -> Answer<Prices> {
    Ok(Json(api.store.prices().await?))
}

/// `PUT /v1/prices`: the prices to change (`paddock price set`'s flags).
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PricesRequest {
    pub fuel_per_cpu_second: Option<f64>,
    pub cpu_second: Option<f64>,
    pub gb_second: Option<f64>,
    pub storage_gb: Option<f64>,
    pub downstream_call: Option<f64>,
    pub retry: Option<f64>,
    pub compensation: Option<f64>,
    pub manual_touch: Option<f64>,
}

/// `PUT /v1/prices`: every value checked before anything is stored;
/// audited as `price.set`.
pub async fn prices_set(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<PricesRequest>,
) -> Answer<Prices> {
    let named: BTreeMap<String, Option<f64>> =
        serde_json::from_value(serde_json::to_value(&request).expect("prices serialize"))
            .expect("a map of prices");
    let changes: Vec<(String, f64)> = named
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect();
    if changes.is_empty() {
        return Err(ApiError::bad_request(
            "name at least one price to set".to_string(),
        ));
    }
    Ok(Json(api.store.price_set(&changes, &caller.actor()).await?))
}
