//! Who is calling: the bearer token, looked up by its hash
//! ([`crate::store::Store::token_authenticate`]), and whether its role may
//! do the route's action — checked in a layer before the handler reads the
//! body, so a refused request stores nothing and parses nothing.

use super::{ApiError, ApiState};
use crate::model::identity::{Action, Principal, TenantScope, authorize};
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// An authenticated caller whose role allows the route's action.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub action: Action,
}

impl Caller {
    /// How the audit log names the caller: `token:NAME`.
    pub fn actor(&self) -> String {
        self.principal.actor()
    }

    /// The tenants this request's queries are scoped to.
    pub fn scope(&self) -> Result<TenantScope, ApiError> {
        Ok(authorize(&self.principal, self.action, None)?)
    }

    /// The scope for acting on `tenant`'s rows: 403 when a team token
    /// names another tenant.
    pub fn scope_on(&self, tenant: &str) -> Result<TenantScope, ApiError> {
        Ok(authorize(&self.principal, self.action, Some(tenant))?)
    }

    /// A team token's tenant.
    pub fn tenant(&self) -> Option<&str> {
        self.principal.tenant.as_deref()
    }
}

/// The state of one route's guard: the action its role must allow.
#[derive(Clone)]
pub(super) struct Guard {
    pub state: ApiState,
    pub action: Action,
}

/// Authenticate, check the role, and hand the [`Caller`] to the handler.
pub(super) async fn guard(
    State(guard): State<Guard>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match caller(&guard, request.headers()).await {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

async fn caller(guard: &Guard, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(ApiError::unauthenticated(
            "missing token: send `Authorization: Bearer pdk_...` (create one with `paddock token create`)",
        ));
    };
    let text = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::unauthenticated("the Authorization header must be `Bearer pdk_...`")
        })?;
    let principal = guard
        .state
        .store
        .token_authenticate(text.trim())
        .await?
        .map_err(|e| ApiError::unauthenticated(e.to_string()))?;
    // The role alone here; each handler scopes by tenant.
    authorize(&principal, guard.action, None)?;
    Ok(Caller {
        principal,
        action: guard.action,
    })
}
