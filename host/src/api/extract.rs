//! Extractors whose refusals are the API's JSON errors (axum's own answer
//! in plain text), and the page parameters every list takes.

use super::error::ApiError;
use super::wire::Page;
use super::{COMPONENT_BODY_LIMIT, JSON_BODY_LIMIT};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// A JSON body (`Content-Type: application/json`, at most
/// [`JSON_BODY_LIMIT`], no unknown fields where the type says so).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_refused(rejection)),
        }
    }
}

fn json_refused(rejection: JsonRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(JSON_BODY_LIMIT, "a JSON body"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a JSON body needs `Content-Type: application/json`",
        ),
        _ => ApiError::bad_request(rejection.body_text()),
    }
}

fn too_large(limit: usize, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("{what} may be at most {} KiB", limit >> 10),
    )
}

/// A raw body (a component's bytes), at most [`COMPONENT_BODY_LIMIT`].
pub struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Bytes::from_request(request, state).await {
            Ok(bytes) if bytes.is_empty() => Err(ApiError::bad_request(
                "empty body: send the component's bytes (application/wasm)",
            )),
            Ok(bytes) => Ok(ApiBytes(bytes)),
            Err(rejection) => Err(bytes_refused(rejection)),
        }
    }
}

fn bytes_refused(rejection: BytesRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(COMPONENT_BODY_LIMIT, "a component"),
        _ => ApiError::bad_request(rejection.body_text()),
    }
}

/// Path parameters (`/v1/triggers/{id}`: an id that is not a number is 400).
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// Query parameters (unknown ones refused where the type says so).
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// Items on a page unless `limit` says otherwise.
pub const DEFAULT_PAGE: i64 = 50;
/// The most items on one page.
pub const MAX_PAGE: i64 = 500;

/// `?limit=&after=`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    pub limit: Option<i64>,
    pub after: Option<String>,
}

impl PageQuery {
    /// The page size, checked.
    pub fn limit(&self) -> Result<i64, ApiError> {
        check_limit(self.limit)
    }

    /// `after` as an id (lists keyed by id).
    pub fn after_id(&self) -> Result<Option<i64>, ApiError> {
        after_id(self.after.as_deref())
    }
}

pub fn check_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(format!(
            "limit must be 1 to {MAX_PAGE}, not {n}"
        ))),
    }
}

pub fn after_id(after: Option<&str>) -> Result<Option<i64>, ApiError> {
    after
        .map(|a| {
            a.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "after must be the `next` of the previous page (an id), not '{a}'"
                ))
            })
        })
        .transpose()
}

/// A page of `items` fetched with one extra row: `next` is the last shown
/// item's key when the extra row says there is more.
pub fn page<T>(mut items: Vec<T>, limit: i64, key: impl Fn(&T) -> String) -> Page<T> {
    let more = items.len() as i64 > limit;
    items.truncate(limit as usize);
    let next = if more { items.last().map(key) } else { None };
    Page { items, next }
}
