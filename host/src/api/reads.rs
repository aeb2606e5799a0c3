//! The read endpoints. Tenant data (triggers, attempts and their logs,
//! jobs, components, effects, tickets) is read through the caller's scope
//! (`store::scoped`); the rest (groups, tenants' weights, connectors) is
//! shared configuration any token may read; the audit log and the
//! capability report need `ReadAudit`.

use super::extract::{ApiPath, ApiQuery, PageQuery, after_id, check_limit, page};
use super::views::{TriggerRow, TriggerView, group_view, trigger_rows, trigger_view};
use super::wire::{GroupView, JobView, Page, VerifyResponse};
use super::{ApiError, ApiState, Caller};
use crate::model::ResourceGroup;
use crate::model::audit::AuditEntry;
use crate::model::backlog;
use crate::model::group::TenantQuota;
use crate::model::units;
use crate::registry::report::{self, ComponentReport};
use crate::store::{
    ComponentRecord, ConnectorRecord, EffectRecord, ExceptionRecord, JobRecord, ReadStore,
    SecretView, StatusQuery, StatusReport, TokenView,
};
use axum::Json;
use axum::extract::{Extension, State};

type Answer<T> = Result<Json<T>, ApiError>;

pub async fn triggers(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Answer<Page<TriggerRow>> {
    let limit = q.limit()?;
    let found = api
        .store
        .triggers_page_for(&caller.scope()?, q.after_id()?, limit + 1)
        .await?;
    let found = page(found, limit, |t| t.id.to_string());
    Ok(Json(Page {
        items: trigger_rows(&api.store, found.items).await?,
        next: found.next,
    }))
}

pub async fn trigger(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Answer<TriggerView> {
    let t = api.store.trigger_get_for(&caller.scope()?, id).await?;
    Ok(Json(trigger_view(&api.store, t).await?))
}

pub async fn trigger_effects(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Answer<Vec<EffectRecord>> {
    let t = api.store.trigger_get_for(&caller.scope()?, id).await?;
    Ok(Json(api.store.effects_for_trigger(t.id).await?))
}

pub async fn jobs(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Answer<Page<JobRecord>> {
    let limit = q.limit()?;
    let found = api
        .store
        .jobs_page_for(&caller.scope()?, q.after.as_deref(), limit + 1)
        .await?;
    Ok(Json(page(found, limit, JobRecord::qualified)))
}

pub async fn job(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(job): ApiPath<String>,
) -> Answer<JobView> {
    let job = api.store.job_get_for(&caller.scope()?, &job).await?;
    let versions = api.store.plan_versions(&job.tenant, &job.job_id).await?;
    Ok(Json(JobView { job, versions }))
}

pub async fn components(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Answer<Page<ComponentRecord>> {
    let limit = q.limit()?;
    // The cursor is `PUSHED_AT.DIGEST`: the list is in push order.
    let after = match q.after.as_deref() {
        None => None,
        Some(a) => Some(
            a.split_once('.')
                .and_then(|(at, d)| Some((at.parse::<i64>().ok()?, d)))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "after must be the `next` of the previous page, not '{a}'"
                    ))
                })?,
        ),
    };
    let found = api
        .store
        .components_page_for(&caller.scope()?, after, limit + 1)
        .await?;
    Ok(Json(page(found, limit, |c| {
        format!("{}.{}", c.pushed_at, c.digest)
    })))
}

pub async fn component(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(digest): ApiPath<String>,
) -> Answer<ComponentRecord> {
    let digest = digest.trim_start_matches("sha256:");
    Ok(Json(
        api.store
            .component_get_for(&caller.scope()?, digest)
            .await?,
    ))
}

pub async fn effects(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Answer<Page<EffectRecord>> {
    let limit = q.limit()?;
    let found = api
        .store
        .effects_page_for(&caller.scope()?, q.after_id()?, limit + 1)
        .await?;
    Ok(Json(page(found, limit, |e| e.id.to_string())))
}

/// `?state=open|resolved&limit=&after=`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketQuery {
    pub state: Option<String>,
    pub limit: Option<i64>,
    pub after: Option<String>,
}

pub async fn tickets(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<TicketQuery>,
) -> Answer<Page<ExceptionRecord>> {
    let limit = check_limit(q.limit)?;
    if let Some(state) = q
        .state
        .as_deref()
        .filter(|s| !matches!(*s, "open" | "resolved"))
    {
        return Err(ApiError::bad_request(format!(
            "state must be open or resolved, not '{state}'"
        )));
    }
    let found = api
        .store
        .exceptions_page_for(
            &caller.scope()?,
            q.state.as_deref(),
            after_id(q.after.as_deref())?,
            limit + 1,
        )
        .await?;
    Ok(Json(page(found, limit, |t| t.id.to_string())))
}

pub async fn ticket(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Answer<ExceptionRecord> {
    Ok(Json(
        api.store.exception_get_for(&caller.scope()?, id).await?,
    ))
}

/// Every group; a team token sees only the groups that admit its tenant,
/// their env grants by name without their values.
pub async fn groups(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
) -> Answer<Vec<ResourceGroup>> {
    let mut visible = Vec::new();
    for group in api.store.groups_list().await? {
        if let Some(group) = for_caller(&api, &caller, group).await? {
            visible.push(group);
        }
    }
    Ok(Json(visible))
}

/// A group as `caller` may see it: a team token sees a group only if it
/// admits the token's tenant, and sees its grants without the values an
/// admin set in them ([`crate::model::admission::grant_name`]).
async fn for_caller(
    api: &ApiState,
    caller: &Caller,
    mut group: ResourceGroup,
) -> Result<Option<ResourceGroup>, ApiError> {
    let Some(tenant) = caller.tenant() else {
        return Ok(Some(group));
    };
    let admitted = api.store.group_tenants(&group.name).await?;
    if !crate::model::admission::admits(&admitted, tenant) {
        return Ok(None);
    }
    let names: Vec<String> = group
        .grant_list()
        .iter()
        .map(|g| crate::model::admission::grant_name(g))
        .collect();
    group.grants = serde_json::to_string(&names).expect("strings serialize");
    Ok(Some(group))
}

/// `paddock group show`'s facts: the group, what its attempts measured in
/// the last minute, what claims enforce and how many run, its recovery
/// ramp and holds.
pub async fn group(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
) -> Answer<GroupView> {
    let not_found = || ApiError::not_found(format!("group '{name}' not found"));
    let mut view = group_view(&api.store, &name, api.registry.instance_pool())
        .await?
        .ok_or_else(not_found)?;
    view.group = for_caller(&api, &caller, view.group)
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(view))
}

/// Tenants' weights and quotas; a team token sees its own tenant's only
/// (other tenants' names are theirs).
pub async fn tenants(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
) -> Answer<Vec<TenantQuota>> {
    let mut tenants = api.store.tenants_list().await?;
    if let Some(own) = caller.tenant() {
        tenants.retain(|t| t.tenant == own);
    }
    Ok(Json(tenants))
}

pub async fn connectors(State(api): State<ApiState>) -> Answer<Vec<ConnectorRecord>> {
    Ok(Json(api.store.connectors_list().await?))
}

/// Secrets by fingerprint only: no route returns a secret's value.
pub async fn secrets(State(api): State<ApiState>) -> Answer<Vec<SecretView>> {
    use crate::store::ControlStore;
    Ok(Json(api.store.connector_secrets().await?))
}

pub async fn tokens(State(api): State<ApiState>) -> Answer<Vec<TokenView>> {
    Ok(Json(api.store.tokens_list().await?))
}

/// The audit log in chain order; `after` is a sequence number.
pub async fn audit(
    State(api): State<ApiState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Answer<Page<AuditEntry>> {
    let limit = q.limit()?;
    let found = api
        .store
        .audit_page(q.after_id()?.unwrap_or(0), limit as usize + 1)
        .await?;
    Ok(Json(page(found, limit, |e| e.seq.to_string())))
}

pub async fn audit_verify(State(api): State<ApiState>) -> Answer<VerifyResponse> {
    Ok(Json(VerifyResponse::of(&api.store.audit_verify().await?)))
}

pub async fn capabilities(State(api): State<ApiState>) -> Answer<Vec<ComponentReport>> {
    Ok(Json(report::capabilities(&api.store).await?))
}

/// Each tenant's groups and what they grant it.
pub async fn capabilities_by_tenant(
    State(api): State<ApiState>,
) -> Answer<Vec<report::TenantGrants>> {
    Ok(Json(report::tenant_grants(&api.store).await?))
}

/// `?window=5m&group=G&tenant=T`, or `?since=RFC3339` instead of a window.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusParams {
    pub window: Option<String>,
    pub since: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
}

/// `paddock status` as JSON: per group running / limit, backlog, oldest
/// due, rates over the window, drain ETA, tickets. A team token's report
/// is its own tenant's (naming another is 403).
pub async fn status(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<StatusParams>,
) -> Answer<StatusReport> {
    let (window_ms, now) = status_window(&api, &q).await?;
    let tenant = match (&q.tenant, caller.tenant()) {
        (Some(t), _) => {
            caller.scope_on(t)?;
            Some(t.clone())
        }
        (None, own) => own.map(str::to_string),
    };
    let query = StatusQuery {
        window_ms,
        now,
        tenant,
        group: q.group,
    };
    Ok(Json(api.store.status_report(&query).await?))
}

/// The window as `paddock status` checks it: a length of 1s to 24h, or a
/// start in the past at most 24h ago (then `now` is fixed).
async fn status_window(api: &ApiState, q: &StatusParams) -> Result<(i64, Option<i64>), ApiError> {
    let Some(text) = &q.since else {
        let window = q.window.as_deref().unwrap_or("5m");
        let ms = units::parse_millis("window", window)
            .and_then(|ms| backlog::check_window("window", ms))
            .map_err(ApiError::bad_request)?;
        return Ok((ms, None));
    };
    if q.window.is_some() {
        return Err(ApiError::bad_request("give window or since, not both"));
    }
    let since = chrono::DateTime::parse_from_rfc3339(text).map_err(|_| {
        ApiError::bad_request(format!(
            "since: '{text}' is not an RFC 3339 instant (e.g. 2026-12-04T12:03:00Z)"
        ))
    })?;
    let now = api.store.now_ms().await?;
    let since = since.timestamp_millis();
    if since >= now {
        return Err(ApiError::bad_request(format!(
            "since: '{text}' is not in the past"
        )));
    }
    if now - since > backlog::MAX_WINDOW_MS {
        backlog::check_window("since", now - since).map_err(ApiError::bad_request)?;
    }
    Ok((now - since, Some(now)))
}

/// The OpenAPI document (no token needed).
pub async fn openapi() -> Json<serde_json::Value> {
    Json(super::openapi::document())
}
