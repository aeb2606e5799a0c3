//! HTTP surface: routes, handlers, error mapping and counters. The protocol
//! itself is documented in the crate root.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::faults::{FaultCountersView, FaultSpec, Faults, HoldSpec, RequestInfo};
use crate::protocol::{self, Action, ProtocolError};
use crate::server::ConnControl;
use crate::store::{Executed, OperationRequest, Store, StoreError};

/// Response header naming how the ledger classified the request:
/// `applied`, `rejected`, `replayed`, `key_conflict`, `stale_fencing_token`,
/// `invalid`, `injected_error` or `internal_error`.
pub const OUTCOME_HEADER: &str = "ledger-outcome";
/// Set to `true` on a replayed response.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

#[derive(Debug)]
pub(crate) struct AppState {
    pub store: Store,
    pub faults: Faults,
    pub stats: Stats,
    /// A credential every `/v1` request must carry (`PUT /admin/auth`):
    /// header name (lower case) and exact value. None: no check.
    pub auth: std::sync::Mutex<Option<(String, String)>>,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    requests_received: AtomicU64,
    applied: AtomicU64,
    business_rejections: AtomicU64,
    replayed: AtomicU64,
    key_conflicts: AtomicU64,
    stale_token_rejections: AtomicU64,
    invalid_requests: AtomicU64,
    internal_errors: AtomicU64,
    unauthorized: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Body of `GET /v1/stats`.
#[derive(Debug, Serialize)]
struct StatsView {
    requests_received: u64,
    applied: u64,
    business_rejections: u64,
    replayed: u64,
    key_conflicts: u64,
    stale_token_rejections: u64,
    invalid_requests: u64,
    internal_errors: u64,
    unauthorized: u64,
    injected_faults: FaultCountersView,
}

/// Errors of the non-effect endpoints and of effect-request validation.
#[derive(Debug, thiserror::Error)]
enum ApiError {
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    BadAdminRequest(String),
    #[error("not found")]
    NotFound(Value),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Protocol(e) => json_response(
                status(e.status()),
                "invalid",
                json!({"error": e.code(), "message": e.to_string()}).to_string(),
            ),
            ApiError::Store(e) => {
                // The source (which may quote SQL) goes to the log only.
                tracing::error!(error = ?e, "storage failure");
                json_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    json!({"error": "internal", "message": e.to_string()}).to_string(),
                )
            }
            ApiError::BadAdminRequest(message) => (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": "invalid_admin_request", "message": message})),
            )
                .into_response(),
            ApiError::NotFound(body) => (StatusCode::NOT_FOUND, Json(body)).into_response(),
        }
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn json_response(status: StatusCode, outcome: &'static str, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (
                header::HeaderName::from_static(OUTCOME_HEADER),
                HeaderValue::from_static(outcome),
            ),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/stats", get(stats))
        .route("/v1/operations/{key}", get(operation))
        .route("/v1/resources/{resource}", get(resource))
        .route("/v1/{resource}/{action}", post(effect))
        .route(
            "/admin/faults",
            post(add_fault).get(list_faults).delete(clear_faults),
        )
        .route("/admin/hold", post(add_hold))
        .route("/admin/auth", put(set_auth))
        .route("/admin/holds", get(list_holds))
        .route("/admin/release", post(release))
        .route("/admin/resources/{resource}", put(set_resource))
        .fallback(|| async { ApiError::NotFound(json!({"error": "not_found"})) })
        .with_state(state)
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
    headers
        .get(name)
        .map(|v| v.to_str().map_err(|_| ()))
        .transpose()
}

fn parse_request(
    resource: String,
    action: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<OperationRequest, ProtocolError> {
    protocol::validate_resource(&resource)?;
    let action = Action::parse(action)?;
    let key = protocol::validate_idempotency_key(
        header_str(headers, "idempotency-key").map_err(|_| ProtocolError::InvalidIdempotencyKey)?,
    )?;
    let fencing_token = protocol::parse_fencing_token(
        header_str(headers, "fencing-token").map_err(|_| ProtocolError::InvalidFencingToken)?,
    )?;
    let request_id = protocol::validate_request_id(
        header_str(headers, "x-request-id").map_err(|_| ProtocolError::InvalidRequestId)?,
    )?;
    let body = protocol::parse_body(body)?;
    let digest = protocol::params_digest(&resource, action, &body.canonical);
    Ok(OperationRequest {
        idempotency_key: key,
        resource,
        action,
        body,
        digest,
        fencing_token,
        request_id,
    })
}

/// `POST /v1/{resource}/{action}`
async fn effect(
    State(st): State<Arc<AppState>>,
    Extension(conn): Extension<ConnControl>,
    Path((resource, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    bump(&st.stats.requests_received);
    if let Some(refused) = unauthorized(&st, &headers) {
        return refused;
    }
    let req = match parse_request(resource, &action, &headers, &body) {
        Ok(r) => r,
        Err(e) => {
            bump(&st.stats.invalid_requests);
            return ApiError::from(e).into_response();
        }
    };
    let info = RequestInfo {
        resource: &req.resource,
        action: req.action.as_str(),
        idempotency_key: &req.idempotency_key,
        fencing_token: req.fencing_token,
    };

    let pre = st.faults.before_apply(&info);
    if let Some(d) = pre.latency {
        tokio::time::sleep(d).await;
    }
    if let Some(code) = pre.error_status {
        let mut resp = json_response(
            status(code),
            "injected_error",
            json!({"error": "injected_fault", "status": code}).to_string(),
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return resp;
    }
    if let Some(ticket) = st.faults.hold_for(&info) {
        tracing::info!(key = %req.idempotency_key, token = ?req.fencing_token, "request held");
        ticket.wait().await;
    }

    let executed = match st.store.execute(&req).await {
        Ok(e) => e,
        Err(e) => {
            bump(&st.stats.internal_errors);
            return ApiError::from(e).into_response();
        }
    };
    let recorded = matches!(executed, Executed::Recorded { .. });
    let response = match executed {
        Executed::Recorded {
            applied,
            status: code,
            body,
        } => {
            if applied {
                bump(&st.stats.applied);
                json_response(status(code), "applied", body)
            } else {
                bump(&st.stats.business_rejections);
                json_response(status(code), "rejected", body)
            }
        }
        Executed::Replayed { status: code, body } => {
            bump(&st.stats.replayed);
            let mut r = json_response(status(code), "replayed", body);
            r.headers_mut().insert(
                header::HeaderName::from_static(REPLAYED_HEADER),
                HeaderValue::from_static("true"),
            );
            r
        }
        Executed::KeyConflict { recorded_digest } => {
            bump(&st.stats.key_conflicts);
            json_response(
                status(protocol::STATUS_UNPROCESSABLE),
                "key_conflict",
                protocol::key_conflict_body(&req.idempotency_key, &recorded_digest, &req.digest)
                    .to_string(),
            )
        }
        Executed::Stale { presented, current } => {
            bump(&st.stats.stale_token_rejections);
            tracing::info!(resource = %req.resource, presented, current, "stale fencing token refused");
            json_response(
                status(protocol::STATUS_STALE),
                "stale_fencing_token",
                protocol::stale_body(&req.resource, presented, current).to_string(),
            )
        }
    };

    let post = st.faults.after_store(&info, recorded);
    if post.drop_connection {
        tracing::info!(key = %req.idempotency_key, "committed; dropping the connection without a response");
        conn.drop_connection();
        // The connection task drops this future together with the connection.
        std::future::pending::<()>().await;
    }
    if let Some(d) = post.delay {
        tokio::time::sleep(d).await;
    }
    response
}

/// `GET /v1/operations/{key}`
async fn operation(
    State(st): State<Arc<AppState>>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(refused) = unauthorized(&st, &headers) {
        return Ok(refused);
    }
    match st.store.operation(&key).await? {
        Some(op) => Ok(Json(op).into_response()),
        None => Err(ApiError::NotFound(
            json!({"error": "not_found", "idempotency_key": key}),
        )),
    }
}

/// 401 unless the request carries the credential `PUT /admin/auth` set.
fn unauthorized(st: &AppState, headers: &HeaderMap) -> Option<Response> {
    let required = st.auth.lock().unwrap().clone()?;
    let (name, value) = required;
    if headers.get(name.as_str()).map(|v| v.as_bytes()) == Some(value.as_bytes()) {
        return None;
    }
    bump(&st.stats.unauthorized);
    Some(json_response(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        json!({"error": "unauthorized", "header": name}).to_string(),
    ))
}

/// `PUT /admin/auth` `{"header": "authorization", "value": "Bearer …"}`:
/// require that credential on every `/v1` request; `{}` drops the check.
async fn set_auth(State(st): State<Arc<AppState>>, body: Bytes) -> Result<Response, ApiError> {
    #[derive(Deserialize)]
    struct Auth {
        header: Option<String>,
        value: Option<String>,
    }
    let auth: Auth = parse_admin(&body)?;
    let required = match (auth.header, auth.value) {
        (Some(h), Some(v)) => Some((h.to_ascii_lowercase(), v)),
        _ => None,
    };
    let on = required.is_some();
    *st.auth.lock().unwrap() = required;
    Ok(Json(json!({ "required": on })).into_response())
}

/// `GET /v1/resources/{resource}`
async fn resource(
    State(st): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    match st.store.resource(&name).await? {
        Some(r) => Ok(Json(r).into_response()),
        None => Err(ApiError::NotFound(
            json!({"error": "not_found", "resource": name}),
        )),
    }
}

/// `GET /v1/stats`
async fn stats(State(st): State<Arc<AppState>>) -> Json<StatsView> {
    let s = &st.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Json(StatsView {
        requests_received: get(&s.requests_received),
        applied: get(&s.applied),
        business_rejections: get(&s.business_rejections),
        replayed: get(&s.replayed),
        key_conflicts: get(&s.key_conflicts),
        stale_token_rejections: get(&s.stale_token_rejections),
        invalid_requests: get(&s.invalid_requests),
        internal_errors: get(&s.internal_errors),
        unauthorized: get(&s.unauthorized),
        injected_faults: st.faults.counters(),
    })
}

fn parse_admin<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::BadAdminRequest(e.to_string()))
}

/// `POST /admin/faults`
async fn add_fault(State(st): State<Arc<AppState>>, body: Bytes) -> Result<Response, ApiError> {
    let spec: FaultSpec = parse_admin(&body)?;
    let rule = st
        .faults
        .add(spec)
        .map_err(|e| ApiError::BadAdminRequest(e.to_string()))?;
    tracing::info!(?rule, "fault rule added");
    Ok((StatusCode::CREATED, Json(rule)).into_response())
}

/// `GET /admin/faults`
async fn list_faults(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"faults": st.faults.rules(), "holds": st.faults.holds()}))
}

/// `DELETE /admin/faults`
async fn clear_faults(State(st): State<Arc<AppState>>) -> Json<Value> {
    let (rules, holds) = st.faults.clear();
    Json(json!({"cleared_faults": rules, "released_holds": holds}))
}

/// `POST /admin/hold`
async fn add_hold(State(st): State<Arc<AppState>>, body: Bytes) -> Result<Response, ApiError> {
    let spec: HoldSpec = parse_admin(&body)?;
    Ok((StatusCode::CREATED, Json(st.faults.add_hold(spec))).into_response())
}

/// `GET /admin/holds`
async fn list_holds(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"holds": st.faults.holds()}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseSpec {
    hold_key: Option<String>,
}

/// `POST /admin/release` — `{"hold_key": "K"}`, or `{}` for every hold.
async fn release(State(st): State<Arc<AppState>>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let spec: ReleaseSpec = if body.is_empty() {
        ReleaseSpec { hold_key: None }
    } else {
        parse_admin(&body)?
    };
    let (holds, requests) = st.faults.release(spec.hold_key.as_deref());
    Ok(Json(
        json!({"released_holds": holds, "released_requests": requests}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BalanceSpec {
    balance: u64,
}

/// `PUT /admin/resources/{resource}` — `{"balance": n}`.
async fn set_resource(
    State(st): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    protocol::validate_resource(&name)?;
    let spec: BalanceSpec = parse_admin(&body)?;
    let balance = i64::try_from(spec.balance)
        .map_err(|_| ApiError::BadAdminRequest("balance too large".into()))?;
    st.store.set_balance(&name, balance).await?;
    match st.store.resource(&name).await? {
        Some(r) => Ok(Json(r).into_response()),
        None => Err(ApiError::NotFound(json!({"error": "not_found"}))),
    }
}
