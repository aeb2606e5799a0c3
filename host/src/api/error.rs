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

use crate::model::identity::Denied;
use crate::registry::RegistryError;
use crate::store::StoreError;
use axum::Json;
use axum::http::StatusCode;
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
        if self.status.is_server_error() {
            tracing::error!(message = %crate::model::text::Esc(&self.message), "API request failed");
        }
        (self.status, Json(self.body())).into_response()
    }
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
