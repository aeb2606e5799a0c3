//! The write endpoints a team may use on its own tenant's work (push,
//! apply, run, cancel) and the operators' (approve, resolve). Each reads
//! the row it acts on through the caller's scope first — another tenant's
//! row is 404 and nothing is written — then calls the same store or
//! registry operation the command line does, audited as `token:NAME`.

use super::extract::{ApiBytes, ApiJson, ApiPath};
use super::wire::{
    ApplyRequest, ApplyResponse, ApproveRequest, CancelRequest, Done, PushResponse, ResolveRequest,
    RunRequest, RunResponse,
};
use super::{ApiError, ApiState, Caller};
use crate::registry::manifest::JobManifest;
use crate::store::{ControlStore, ExceptionRecord, NewTrigger};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;

type Answer<T> = Result<Json<T>, ApiError>;

/// `POST /v1/components`: the body is the component's bytes. A team
/// token's push makes the component its tenant's too.
pub async fn component_push(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiBytes(bytes): ApiBytes,
) -> Result<(StatusCode, Json<PushResponse>), ApiError> {
    let pushed = api.registry.component_push(&bytes, &caller.actor()).await?;
    if let Some(tenant) = caller.tenant() {
        api.store
            .component_owner_add(&pushed.digest, tenant, &caller.actor())
            .await?;
    }
    let status = if pushed.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(PushResponse {
            digest: pushed.digest,
            created: pushed.created,
            manifest: pushed.manifest,
        }),
    ))
}

/// `POST /v1/jobs`: a manifest whose tenant is the caller's (for a team
/// token) and whose component is a digest the caller may see.
pub async fn job_apply(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<ApplyRequest>,
) -> Answer<ApplyResponse> {
    let manifest =
        JobManifest::parse(&request.manifest).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let scope = caller.scope_on(&manifest.tenant)?;
    let Some(digest) = manifest.component.strip_prefix("sha256:") else {
        return Err(ApiError::bad_request(format!(
            "component '{}': over the API a manifest names its component by digest \
             (sha256:...); push the file first (POST /v1/components)",
            manifest.component
        )));
    };
    api.store.component_get_for(&scope, digest).await?;
    let (job, outcome) = api
        .registry
        .job_apply(
            &request.manifest,
            std::path::Path::new("."),
            &caller.actor(),
        )
        .await?;
    Ok(Json(ApplyResponse { job, outcome }))
}

/// `POST /v1/triggers`: a manual run of one of the caller's jobs.
pub async fn trigger_run(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<RunRequest>,
) -> Result<(StatusCode, Json<RunResponse>), ApiError> {
    let job = api
        .store
        .job_get_for(&caller.scope()?, &request.job)
        .await?;
    let new = NewTrigger::manual(
        &job.qualified(),
        serde_json::Value::Object(request.params),
        request.request_key.as_deref(),
    )
    .by(&caller.actor());
    let (trigger, created) = api.store.trigger_create(&new).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let trigger = super::views::redacted(trigger);
    Ok((status, Json(RunResponse { trigger, created })))
}

/// `POST /v1/triggers/{id}/cancel`.
pub async fn trigger_cancel(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<CancelRequest>,
) -> Answer<Done> {
    api.store.trigger_get_for(&caller.scope()?, id).await?;
    if !api
        .store
        .trigger_request_cancel(id, &caller.actor(), &request.reason)
        .await?
    {
        return Err(ApiError::conflict(format!(
            "trigger {id} is not pending, waiting or running"
        )));
    }
    Ok(Json(Done {
        id: id.to_string(),
        done: "cancel requested".into(),
    }))
}

/// `POST /v1/triggers/{id}/approve`: a catch-up parked by the misfire
/// policy becomes pending.
pub async fn trigger_approve(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ApproveRequest>,
) -> Answer<Done> {
    api.store.trigger_get_for(&caller.scope()?, id).await?;
    api.store
        .trigger_approve(id, &caller.actor(), &request.reason)
        .await?;
    Ok(Json(Done {
        id: id.to_string(),
        done: "approved: pending".into(),
    }))
}

/// `POST /v1/tickets/{id}/resolve`.
pub async fn ticket_resolve(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(request): ApiJson<ResolveRequest>,
) -> Answer<ExceptionRecord> {
    api.store.exception_get_for(&caller.scope()?, id).await?;
    Ok(Json(
        api.store
            .exception_resolve(id, &request.action, &caller.actor(), &request.reason)
            .await?,
    ))
}
