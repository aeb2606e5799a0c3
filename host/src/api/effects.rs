//! The side-effect endpoints beyond the lists: one effect by key (through
//! the caller's scope), a recovery scan now, and an operator's
//! compensation — the same code as `paddock effects recover|compensate`
//! ([`crate::effects::operator`]), audited as `token:NAME`.

use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::wire::{CompensateRequest, RecoverRequest};
use super::{ApiError, ApiState, Caller};
use crate::effects::RecoveryReport;
use crate::effects::operator::{self, Compensated, Compensation, OperatorError};
use crate::store::EffectRecord;
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;

type Answer<T> = Result<Json<T>, ApiError>;

impl From<OperatorError> for ApiError {
    fn from(error: OperatorError) -> Self {
        match error {
            OperatorError::Invalid(message) => ApiError::conflict(message),
            OperatorError::Store(e) => e.into(),
        }
    }
}

/// `GET /v1/effects/{key}`'s query: the tenant whose key it is. A team
/// token's own tenant is implied; other callers name one when the key is
/// recorded in several tenants.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectQuery {
    pub tenant: Option<String>,
}

/// `GET /v1/effects/{key}`: one effect, if its tenant is the caller's.
pub async fn effect(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(key): ApiPath<String>,
    ApiQuery(q): ApiQuery<EffectQuery>,
) -> Answer<EffectRecord> {
    let scope = caller.scope()?;
    Ok(Json(
        api.store
            .effect_get_for(&scope, q.tenant.as_deref(), &key)
            .await?,
    ))
}

/// `POST /v1/effects/recover`: resolve effects left intent or unknown by
/// attempts without a live lease, by asking the downstream by key (never
/// resends); at most `limit` (1-10,000).
pub async fn recover(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<RecoverRequest>,
) -> Answer<RecoveryReport> {
    let bound = crate::model::bounds::RECOVER_LIMIT;
    if !(bound.min..=bound.max).contains(&request.limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be {} to {}, not {}",
            bound.min, bound.max, request.limit
        )));
    }
    Ok(Json(
        operator::recover(&api.store, &caller.actor(), request.limit).await?,
    ))
}

/// `POST /v1/effects/{key}/compensate`: record an operator's compensation
/// of the succeeded effect `key` as a new trigger of `job` (409 when the
/// effect cannot be compensated: not succeeded, or itself a compensation).
pub async fn compensate(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(original): ApiPath<String>,
    ApiJson(request): ApiJson<CompensateRequest>,
) -> Result<(StatusCode, Json<Compensated>), ApiError> {
    if request.reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "an operator's compensation needs a reason",
        ));
    }
    let scope = caller.scope()?;
    // The compensating job's tenant is the namespace of both keys.
    let job = api.store.job_get_for(&scope, &request.job).await?;
    api.store
        .effect_get_for(&scope, Some(&job.tenant), &original)
        .await?;
    let compensation = Compensation {
        original,
        job: job.qualified(),
        key: request.key,
        action: request.action,
        payload: request.payload,
        reason: request.reason,
    };
    let done = operator::compensate(&api.store, &caller.actor(), &compensation).await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(done)))
}
