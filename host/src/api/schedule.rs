//! The trigger-control endpoints: `paddock schedule preview|diff|backfill|
//! shards|skipped`. A plan is read through the caller's scope (another
//! tenant's job is 404, as if absent); a preview or diff computes and
//! stores nothing; a backfill is a run of the caller's job, audited as
//! `job.backfill` with `token:NAME`.

use super::extract::{ApiJson, ApiPath, ApiQuery, check_limit};
use super::wire::{
    BACKFILL_MAX, BackfillRequest, BackfillResponse, PreviewResponse, ScheduleDiffResponse,
    Skipped, SkippedResponse,
};
use super::{ApiError, ApiState, Caller};
use crate::schedule::preview::{self, PreviewError};
use crate::store::{ReadStore, ShardRecord};
use axum::Json;
use axum::extract::{Extension, State};
use chrono::{DateTime, Utc};
use serde::Deserialize;

type Answer<T> = Result<Json<T>, ApiError>;

impl From<PreviewError> for ApiError {
    fn from(error: PreviewError) -> Self {
        match error {
            PreviewError::Bad(message) => ApiError::bad_request(message),
            PreviewError::NotFound(message) => ApiError::not_found(message),
            PreviewError::Store(e) => e.into(),
        }
    }
}

/// `?plan=JOB[@vN]` or `?cron=EXPR&tz=ZONE`, with `from` and `to` (RFC 3339).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewParams {
    pub plan: Option<String>,
    pub cron: Option<String>,
    pub tz: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// `GET /v1/schedule/preview`: the fire times in `[from, to)` (at most
/// 10,000; more is 400: narrow the window).
pub async fn preview(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<PreviewParams>,
) -> Answer<PreviewResponse> {
    preview::check_window(q.from, q.to)?;
    let tz = q.tz.as_deref().unwrap_or("UTC");
    let (schedule, zone) = match (&q.plan, &q.cron) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request("give either plan or cron, not both"));
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "give plan (JOB or JOB@vN) or cron (EXPR)",
            ));
        }
        (None, Some(expr)) => preview::bare(expr, tz)?,
        (Some(plan), None) => {
            let (s, z, _) = preview::of_plan(&api.store, &caller.scope()?, plan).await?;
            (s, z)
        }
    };
    let times = preview::times(&schedule, q.from, q.to, BACKFILL_MAX)?;
    Ok(Json(PreviewResponse {
        zone: zone.name().to_string(),
        times,
    }))
}

/// `?a=&b=&tz=&from=&to=`: each side `JOB`, `JOB@vN` or `cron:EXPR`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    pub a: String,
    pub b: String,
    pub tz: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// `GET /v1/schedule/diff`: the times only in A, only in B, how many in both.
pub async fn diff(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<DiffParams>,
) -> Answer<ScheduleDiffResponse> {
    preview::check_window(q.from, q.to)?;
    let tz = q.tz.as_deref().unwrap_or("UTC");
    let scope = caller.scope()?;
    let (sa, zone) = preview::side(&api.store, &scope, &q.a, tz).await?;
    let (sb, _) = preview::side(&api.store, &scope, &q.b, tz).await?;
    let a = preview::times(&sa, q.from, q.to, BACKFILL_MAX)?;
    let b = preview::times(&sb, q.from, q.to, BACKFILL_MAX)?;
    let d = preview::compare(&a, &b);
    Ok(Json(ScheduleDiffResponse {
        zone: zone.name().to_string(),
        only_a: d.only_a,
        only_b: d.only_b,
        both: d.both,
    }))
}

/// `POST /v1/jobs/{job}/backfill`: one recovery-lane trigger per fire time
/// of the job's latest plan in `[from, to)`; a time already triggered is
/// left as it is.
pub async fn backfill(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(job): ApiPath<String>,
    ApiJson(request): ApiJson<BackfillRequest>,
) -> Answer<BackfillResponse> {
    let max = crate::model::bounds::backfill_max(request.max).map_err(ApiError::bad_request)?;
    preview::check_window(request.from, request.to)?;
    let (schedule, _, (record, version)) =
        preview::of_plan(&api.store, &caller.scope()?, &job).await?;
    let times: Vec<i64> = preview::times(&schedule, request.from, request.to, max)?
        .iter()
        .map(|t| t.timestamp_millis())
        .collect();
    let done = api
        .store
        .triggers_backfill(&record, version, &times, &caller.actor())
        .await?;
    Ok(Json(BackfillResponse {
        job,
        version,
        created: done.created,
        existing: done.existing,
    }))
}

/// `GET /v1/schedule/shards`: the scanner's shard table (no tenant's data).
pub async fn shards(State(api): State<ApiState>) -> Answer<Vec<ShardRecord>> {
    Ok(Json(api.store.shards_list().await?))
}

/// `?job=&limit=`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkippedParams {
    pub job: Option<String>,
    pub limit: Option<i64>,
}

/// `GET /v1/schedule/skipped`: fire times the misfire policy skipped, of
/// the caller's tenant's jobs for a team token.
pub async fn skipped(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<SkippedParams>,
) -> Answer<SkippedResponse> {
    let limit = check_limit(q.limit)?;
    let scope = caller.scope()?;
    let counts = api.store.skipped_counts_for(&scope).await?;
    let skipped = api
        .store
        .skipped_list_for(&scope, q.job.as_deref(), limit)
        .await?
        .into_iter()
        .map(|(tenant, job, version, at, reason)| Skipped {
            tenant,
            job,
            version,
            at,
            reason,
        })
        .collect();
    Ok(Json(SkippedResponse { counts, skipped }))
}
