//! The API's errors: a status and `{"error": {"code", "message"}}`, the
//! code stable (clients branch on it), the message naming the problem.
//!
//! | code | status | when |
//! |---|---|---|
//! | `bad_request` | 400 | malformed JSON, a wrong type, an unknown field, a bad parameter, a value past its documented limit, a refused manifest or component |
//! | `unauthenticated` | 401 | no token, or a malformed, unknown, revoked or expired one |
//! | `forbidden` | 403 | the token's role may not do this, or it names another tenant |
//! | `not_found` | 404 | no such row (or another tenant's) |
//! | `no_route` | 404 | no such endpoint |
//! | `method_not_allowed` | 405 | the endpoint does not take this method |
//! | `conflict` | 409 | the state does not allow it (a finished trigger's cancel, a name taken) |
//! | `payload_too_large` | 413 | over the body limit |
//! | `unsupported_media_type` | 415 | a JSON body without `Content-Type: application/json` |
//! | `internal` | 500 | the database failed |
//!
//! A 500 says only "internal error" and a request id, in the body
//! (`request_id`) and the `x-request-id` header: the detail (a driver's
//! text may name tables, columns and values) goes to the log under the same
//! id, where an operator can find it and a client cannot read it.

use crate::model::identity::Denied;
use crate::registry::RegistryError;
use crate::store::StoreError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// The JSON body of this error.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if !self.status.is_server_error() {
            return (self.status, Json(self.body())).into_response();
        }
        let request_id = request_id();
        tracing::error!(
            request_id,
            code = self.code,
            message = %crate::model::text::Esc(&self.message),
            "API request failed"
        );
        let mut response =
            (self.status, Json(internal_body(self.code, &request_id))).into_response();
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(REQUEST_ID, value);
        }
        response
    }
}

/// The header that carries a failed request's id.
pub const REQUEST_ID: &str = "x-request-id";

/// 16 hex digits, random: unique enough to find one failure in a log.
fn request_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// What a client sees of a server error.
fn internal_body(code: &str, request_id: &str) -> serde_json::Value {
    serde_json::json!({ "error": {
        "code": code,
        "message": format!("internal error (request id {request_id}); the server's log has the detail"),
        "request_id": request_id,
    } })
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(_) => Self::not_found(error.to_string()),
            StoreError::OutOfBounds(_) => Self::bad_request(error.to_string()),
            StoreError::Conflict(_)
            | StoreError::LeaseLost { .. }
            | StoreError::ShardLost { .. } => Self::conflict(error.to_string()),
            other => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                other.to_string(),
            ),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(error: RegistryError) -> Self {
        match error {
            RegistryError::Store(e) => e.into(),
            RegistryError::UnknownGroup(_) | RegistryError::UnknownComponent(_) => {
                Self::not_found(error.to_string())
            }
            RegistryError::NotAdmitted { .. } => {
                Self::new(StatusCode::FORBIDDEN, "forbidden", error.to_string())
            }
            other => Self::bad_request(other.to_string()),
        }
    }
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", denied.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_error_answers_a_request_id_and_keeps_its_detail_for_the_log() {
        let error = ApiError::from(StoreError::Database(sqlx::Error::Protocol(
            "relation \"secret_table\" does not exist".into(),
        )));
        assert_eq!(error.status, StatusCode::INTERNAL_SERVER_ERROR);
        let response = error.into_response();
        let id = response.headers()[REQUEST_ID].to_str().unwrap().to_string();
        assert_eq!(id.len(), 16);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(!text.contains("secret_table"), "{text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert_eq!(body["error"]["request_id"], id.as_str());
        assert!(
            body["error"]["message"].as_str().unwrap().contains(&id),
            "{body}"
        );
    }

    #[test]
    fn a_client_error_keeps_its_message() {
        let body = ApiError::not_found("no trigger 7").body();
        assert_eq!(body["error"]["message"], "no trigger 7");
    }
}
