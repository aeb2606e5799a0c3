//! What a reviewer reads beyond the lists: `paddock component diff A B`
//! (each a digest or a unique prefix the caller may see) and `paddock
//! audit export --since` (JSON lines, one entry each, for a SIEM).

use super::extract::{ApiPath, ApiQuery};
use super::wire::ComponentDiffResponse;
use super::{ApiError, ApiState, Caller};
use crate::model::CapabilityManifest;
use crate::model::audit::export_line;
use crate::model::identity::TenantScope;
use crate::model::review::diff as manifest_diff;
use crate::model::units;
use crate::store::{ReadStore, Store};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

/// The header `GET /v1/audit/export` answers whether the whole chain
/// verified in: `intact`, or `broken: WHERE`.
pub const CHAIN_HEADER: &str = "paddock-audit-chain";

/// `GET /v1/components/{digest}/diff/{other}`: what `other` adds or drops
/// in capabilities relative to `digest`.
pub async fn component_diff(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath((a, b)): ApiPath<(String, String)>,
) -> Result<Json<ComponentDiffResponse>, ApiError> {
    let scope = caller.scope()?;
    let (a, old) = manifest_of(&api.store, &scope, &a).await?;
    let (b, new) = manifest_of(&api.store, &scope, &b).await?;
    Ok(Json(ComponentDiffResponse {
        diff: manifest_diff(&old, &new),
        a,
        b,
    }))
}

/// A component the scope may see, by digest or a unique prefix of one (8+
/// hex digits).
async fn manifest_of(
    store: &Store,
    scope: &TenantScope,
    digest: &str,
) -> Result<(String, CapabilityManifest), ApiError> {
    let digest = digest.trim_start_matches("sha256:");
    if digest.len() < 8 || digest.len() > 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(format!(
            "'{digest}': give at least 8 hex digits of a component digest"
        )));
    }
    let found = store.components_by_prefix_for(scope, digest, 2).await?;
    let component = match found.as_slice() {
        [one] => one,
        [] => return Err(ApiError::not_found(format!("no component sha256:{digest}"))),
        _ => {
            return Err(ApiError::bad_request(format!(
                "sha256:{digest} matches more than one component; give more digits"
            )));
        }
    };
    let manifest = serde_json::from_str(&component.manifest).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!(
                "stored manifest of sha256:{} unreadable: {e}",
                component.digest
            ),
        )
    })?;
    Ok((component.digest.clone(), manifest))
}

/// `?since=` an RFC 3339 instant or a duration before now (`24h`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportParams {
    pub since: String,
}

/// `GET /v1/audit/export?since=`: the entries written since, oldest first,
/// as JSON lines (`application/x-ndjson`; the fields of `paddock audit
/// export`), then whether the whole chain verified, in the
/// [`CHAIN_HEADER`] header.
pub async fn audit_export(
    State(api): State<ApiState>,
    ApiQuery(q): ApiQuery<ExportParams>,
) -> Result<Response, ApiError> {
    let since = match chrono::DateTime::parse_from_rfc3339(&q.since) {
        Ok(at) => at.timestamp_millis(),
        Err(_) => {
            let ago = units::parse_millis("since", &q.since).map_err(|_| {
                ApiError::bad_request(format!(
                    "since: '{}' is neither an RFC 3339 instant nor a duration (e.g. \
                     2026-12-04T00:00:00Z or 24h)",
                    q.since
                ))
            })?;
            api.store.now_ms().await? - ago
        }
    };
    let mut body = String::new();
    for entry in api.store.audit_since(since).await? {
        body.push_str(&export_line(&entry));
        body.push('\n');
    }
    let chain = match api.store.audit_verify().await?.result {
        Ok(_) => "intact".to_string(),
        Err(broken) => format!("broken: {broken}"),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    // A break's text is ASCII (seq numbers, hashes, field names).
    if let Ok(value) = HeaderValue::from_str(&chain) {
        headers.insert(CHAIN_HEADER, value);
    }
    Ok(response)
}
