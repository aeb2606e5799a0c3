//! The admin endpoints: tokens, groups and their grants, tenants' weights
//! and quotas, connectors. Only an admin token's role allows these actions
//! (`ManageTokens`, `ManageGroups`, `ManageConnectors`); the route table
//! says which.

use super::extract::{ApiJson, ApiPath};
use super::wire::{
    GrantRequest, GroupSetResponse, GroupsRequest, SecretRequest, TenantRequest, TokenRequest,
    TokenResponse,
};
use super::{ApiError, ApiState, Caller};
use crate::model::group::TenantQuota;
use crate::model::secret::ConnectorSecret;
use crate::model::units;
use crate::registry::groups_file::{GroupSpec, group_of};
use crate::store::{ConnectorRecord, ControlStore, NewToken};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;

type Answer<T> = Result<Json<T>, ApiError>;

/// `POST /v1/tokens`: the text is in this answer and nowhere else.
pub async fn token_create(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<TokenRequest>,
) -> Result<(StatusCode, Json<TokenResponse>), ApiError> {
    let valid_for_ms =
        units::parse_millis("expires", &request.expires).map_err(ApiError::bad_request)?;
    let new = NewToken {
        name: request.name,
        role: request.role,
        tenant: request.tenant,
        valid_for_ms,
    };
    let issued = api.store.token_create(&new, &caller.actor()).await?;
    Ok((
        StatusCode::CREATED,
        Json(TokenResponse {
            name: issued.name,
            token: issued.text,
            fingerprint: issued.fingerprint,
            expires_at: issued.expires_at,
        }),
    ))
}

/// `DELETE /v1/tokens/{name}`.
pub async fn token_revoke(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
) -> Answer<serde_json::Value> {
    let revoked = api.store.token_revoke(&name, &caller.actor()).await?;
    Ok(Json(
        serde_json::json!({ "name": name, "revoked": revoked }),
    ))
}

/// `POST /v1/groups`: every group (and tenant) a groups file declares.
pub async fn groups_apply(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<GroupsRequest>,
) -> Answer<serde_json::Value> {
    let (groups, tenants) = api
        .registry
        .groups_apply(&request.groups, &caller.actor())
        .await?;
    let groups: Vec<_> = groups
        .into_iter()
        .map(|(name, capacity)| {
            serde_json::json!({
                "group": name,
                "effective_concurrency": capacity.effective,
                "bound_by": capacity.binding,
            })
        })
        .collect();
    Ok(Json(
        serde_json::json!({ "groups": groups, "tenants": tenants }),
    ))
}

/// `POST /v1/groups/{name}/grants`: add and remove grants.
pub async fn group_grant(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<GrantRequest>,
) -> Answer<serde_json::Value> {
    let grants = api
        .registry
        .group_grant(&name, &request.add, &request.remove, &caller.actor())
        .await?;
    Ok(Json(serde_json::json!({ "group": name, "grants": grants })))
}

/// `POST /v1/groups/{name}/tenants`'s body: tenants to admit to the group
/// and tenants to stop admitting (`*`: every tenant).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupTenantsRequest {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub disallow: Vec<String>,
}

/// `POST /v1/groups/{name}/tenants`: admit and stop admitting tenants.
pub async fn group_tenants(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<GroupTenantsRequest>,
) -> Answer<serde_json::Value> {
    let tenants = api
        .registry
        .group_tenants(&name, &request.allow, &request.disallow, &caller.actor())
        .await?;
    Ok(Json(
        serde_json::json!({ "group": name, "tenants": tenants }),
    ))
}

/// `PUT /v1/tenants/{tenant}`: weight and quotas.
pub async fn tenant_put(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(tenant): ApiPath<String>,
    ApiJson(request): ApiJson<TenantRequest>,
) -> Answer<TenantQuota> {
    let quota = TenantQuota {
        tenant,
        weight: request.weight,
        max_in_flight: request.max_in_flight,
        triggers_per_minute: request.triggers_per_minute,
        fuel_per_hour: request.fuel_per_hour,
    };
    api.registry.tenant_put(&quota, &caller.actor()).await?;
    Ok(Json(quota))
}

/// `PUT /v1/connectors/{name}/secret`: set or rotate its credential.
pub async fn secret_set(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<SecretRequest>,
) -> Answer<serde_json::Value> {
    let secret = match &request.header {
        Some(header) => ConnectorSecret::header(header, request.value.trim()),
        None => ConnectorSecret::bearer(&request.value),
    }
    .map_err(ApiError::bad_request)?;
    let fingerprint = api
        .store
        .connector_secret_set(&name, Some(&secret), &caller.actor())
        .await?
        .unwrap_or_default();
    Ok(Json(
        serde_json::json!({ "connector": name, "secret": format!("{secret} ({fingerprint})") }),
    ))
}

/// `DELETE /v1/connectors/{name}/secret`.
pub async fn secret_clear(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
) -> Answer<serde_json::Value> {
    api.store
        .connector_secret_set(&name, None, &caller.actor())
        .await?;
    Ok(Json(
        serde_json::json!({ "connector": name, "secret": null }),
    ))
}

/// `PUT /v1/connectors/{name}`: the whole connector (`paddock connector
/// set`); the body's name must be the path's.
pub async fn connector_put(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiJson(connector): ApiJson<ConnectorRecord>,
) -> Answer<ConnectorRecord> {
    if connector.name != name {
        return Err(ApiError::bad_request(format!(
            "the body names connector '{}', the path '{name}'",
            connector.name
        )));
    }
    crate::model::origin::check_base_url(&connector.base_url)
        .map_err(|e| ApiError::bad_request(format!("base_url: {e}")))?;
    api.store.connector_put(&connector, &caller.actor()).await?;
    Ok(Json(connector))
}

/// `PUT /v1/groups/{name}`: create or change one group from the fields of
/// `paddock group set` (its flags as JSON; a field left out takes the
/// flag's default); the body's name must be the path's.
pub async fn group_set(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<GroupSpec>,
) -> Answer<GroupSetResponse> {
    if spec.name != name {
        return Err(ApiError::bad_request(format!(
            "the body names group '{}', the path '{name}'",
            spec.name
        )));
    }
    let tenants = spec.tenants.clone();
    if let Some(tenants) = &tenants {
        crate::registry::groups_file::admitted(tenants)
            .map_err(|problem| ApiError::bad_request(format!("group '{name}': {problem}")))?;
    }
    let group = group_of(spec)
        .map_err(|problem| ApiError::bad_request(format!("group '{name}': {problem}")))?;
    let capacity = api.registry.group_put(group, &caller.actor()).await?;
    if let Some(tenants) = &tenants {
        api.store
            .group_tenants_replace(&name, tenants, &caller.actor())
            .await?;
    }
    Ok(Json(GroupSetResponse {
        group: name,
        effective_concurrency: capacity.effective,
        bound_by: capacity.binding.to_string(),
    }))
}
