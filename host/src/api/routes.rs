//! The one table of the API's routes. The router ([`router`]) and the
//! OpenAPI document ([`super::openapi`]) are both built from [`ROUTES`];
//! adding an endpoint — with the action a role must allow — is one row.

use super::auth::{Guard, guard};
use super::error::ApiError;
use super::{
    ApiState, COMPONENT_BODY_LIMIT, JSON_BODY_LIMIT, admin, control, effects, reads, review,
    schedule, writes,
};
use crate::model::identity::Action;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::middleware::from_fn_with_state;
use axum::routing::{MethodRouter, delete, get, post, put};

/// What a route's request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    /// A JSON object of the named `wire` type.
    Json(&'static str),
    /// Raw bytes (a component).
    Bytes,
}

/// One endpoint.
pub struct Route {
    /// `GET`, `POST`, `PUT`, `DELETE`.
    pub method: &'static str,
    /// axum's syntax: `/v1/triggers/{id}`.
    pub path: &'static str,
    /// What the caller's role must allow; `None`: no token needed.
    pub action: Option<Action>,
    pub summary: &'static str,
    /// Query parameters it takes.
    pub query: &'static [&'static str],
    pub body: Body,
    /// The handler, as a method router.
    pub handler: fn() -> MethodRouter<ApiState>,
}

const PAGE: &[&str] = &["limit", "after"];

macro_rules! route {
    ($method:literal $path:literal, $action:expr, $summary:literal, $query:expr, $body:expr, $handler:expr) => {
        Route {
            method: $method,
            path: $path,
            action: $action,
            summary: $summary,
            query: $query,
            body: $body,
            handler: || $handler,
        }
    };
}

use Action::*;
use Body::{Bytes, Json};

/// Every route. `tests/all/api.rs` walks each with every role and with a
/// foreign tenant's token.
pub static ROUTES: &[Route] = &[
    route!("GET" "/v1/openapi.json", None, "This document", &[], Body::None, get(reads::openapi)),
    // Triggers, with attempts and logs.
    route!("GET" "/v1/triggers", Some(Read), "Triggers, newest first, with each one's last attempt", PAGE, Body::None, get(reads::triggers)),
    route!("POST" "/v1/triggers", Some(RunJob), "Run a job now (a manual trigger)", &[], Json("RunRequest"), post(writes::trigger_run)),
    route!("GET" "/v1/triggers/{id}", Some(Read), "A trigger with every attempt and its log", &[], Body::None, get(reads::trigger)),
    route!("GET" "/v1/triggers/{id}/effects", Some(Read), "A trigger's effects", &[], Body::None, get(reads::trigger_effects)),
    route!("POST" "/v1/triggers/{id}/cancel", Some(ControlJob), "Cancel a trigger, or ask a running one to stop", &[], Json("CancelRequest"), post(writes::trigger_cancel)),
    route!("POST" "/v1/triggers/{id}/retry", Some(RunJob), "Retry now: a failed trigger gets a new run, a waiting retry is due now", &[], Json("ReasonRequest"), post(control::trigger_retry)),
    route!("POST" "/v1/triggers/{id}/approve", Some(ApproveCatchUp), "Approve a catch-up parked by the misfire policy", &[], Json("ApproveRequest"), post(writes::trigger_approve)),
    // Jobs and components.
    route!("GET" "/v1/jobs", Some(Read), "Jobs by id", PAGE, Body::None, get(reads::jobs)),
    route!("POST" "/v1/jobs", Some(ApplyJob), "Apply a job manifest (its component by digest)", &[], Json("ApplyRequest"), post(writes::job_apply)),
    route!("GET" "/v1/jobs/{job}", Some(Read), "A job and its plan versions", &[], Body::None, get(reads::job)),
    route!("GET" "/v1/components", Some(Read), "Components in push order", PAGE, Body::None, get(reads::components)),
    route!("POST" "/v1/components", Some(PushComponent), "Push a component (the body is its bytes)", &[], Bytes, post(writes::component_push)),
    route!("GET" "/v1/components/{digest}", Some(Read), "A component and its capability manifest", &[], Body::None, get(reads::component)),
    route!("GET" "/v1/components/{digest}/diff/{other}", Some(Read), "What `other` adds or drops in capabilities relative to `digest` (each a digest or a unique prefix of 8+ hex digits)", &[], Body::None, get(review::component_diff)),
    // Trigger sets: preview, compare, backfill; the scanner's shards.
    route!("GET" "/v1/schedule/preview", Some(Read), "The fire times of a plan (`plan=JOB[@vN]`) or a cron expression (`cron`, `tz`) in [from, to), at most 10,000", &["plan", "cron", "tz", "from", "to"], Body::None, get(schedule::preview)),
    route!("GET" "/v1/schedule/diff", Some(Read), "Two trigger sets compared in [from, to): each side JOB, JOB@vN or cron:EXPR", &["a", "b", "tz", "from", "to"], Body::None, get(schedule::diff)),
    route!("POST" "/v1/jobs/{job}/backfill", Some(RunJob), "One recovery-lane trigger per fire time of the job's latest plan in [from, to)", &[], Json("BackfillRequest"), post(schedule::backfill)),
    route!("GET" "/v1/schedule/shards", Some(Read), "The scanner's shards: owner, generation, watermark, counts", &[], Body::None, get(schedule::shards)),
    route!("GET" "/v1/schedule/skipped", Some(Read), "Fire times the misfire policy skipped, newest first, with counts by reason", &["job", "limit"], Body::None, get(schedule::skipped)),
    // Effects and exception tickets.
    route!("GET" "/v1/effects", Some(Read), "Effect records, newest first", PAGE, Body::None, get(reads::effects)),
    route!("GET" "/v1/effects/{key}", Some(Read), "An effect by its idempotency key in a tenant (a team token: its own; others name one when several tenants hold the key)", &["tenant"], Body::None, get(effects::effect)),
    route!("POST" "/v1/effects/recover", Some(ResolveTicket), "Resolve effects left intent or unknown by asking the downstream by key (never resends)", &[], Json("RecoverRequest"), post(effects::recover)),
    route!("POST" "/v1/effects/{key}/compensate", Some(ResolveTicket), "Record an operator's compensation of a succeeded effect: a new trigger of a job performs it", &[], Json("CompensateRequest"), post(effects::compensate)),
    route!("GET" "/v1/tickets", Some(Read), "Exception tickets, newest first", &["state", "limit", "after"], Body::None, get(reads::tickets)),
    route!("GET" "/v1/tickets/{id}", Some(Read), "An exception ticket", &[], Body::None, get(reads::ticket)),
    route!("POST" "/v1/tickets/{id}/resolve", Some(ResolveTicket), "Resolve a ticket with one of its allowed actions", &[], Json("ResolveRequest"), post(writes::ticket_resolve)),
    route!("POST" "/v1/tickets/{id}/approve", Some(ResolveTicket), "Approve the high-risk action another operator proposed (two-person rule)", &[], Json("ReasonRequest"), post(control::ticket_approve)),
    route!("POST" "/v1/tickets/{id}/reject", Some(ResolveTicket), "Withdraw the action proposed on a ticket", &[], Json("ReasonRequest"), post(control::ticket_reject)),
    // Gates: pause, resume and cancel at five scopes.
    route!("GET" "/v1/gates", Some(Read), "The closed gates (with history, reopened ones too)", &["history"], Body::None, get(control::gates)),
    route!("POST" "/v1/jobs/{job}/pause", Some(ControlJob), "Pause a job: nothing new starts, running triggers checkpoint and pause", &[], Json("ReasonRequest"), post(control::job_pause)),
    route!("POST" "/v1/jobs/{job}/resume", Some(ControlJob), "Resume a job: paused triggers continue from their checkpoints", &[], Json("ReasonRequest"), post(control::job_resume)),
    route!("POST" "/v1/jobs/{job}/cancel", Some(ControlJob), "Cancel every live trigger of a job (a finished one is never rewritten)", &[], Json("ReasonRequest"), post(control::job_cancel)),
    route!("POST" "/v1/gates/{kind}/{name}/pause", Some(ControlScope), "Pause a job type, tenant or group", &[], Json("ReasonRequest"), post(control::scope_pause)),
    route!("POST" "/v1/gates/{kind}/{name}/resume", Some(ControlScope), "Resume a job type, tenant or group", &[], Json("ReasonRequest"), post(control::scope_resume)),
    route!("POST" "/v1/gates/{kind}/{name}/cancel", Some(ControlScope), "Cancel every live trigger of a job type, tenant or group", &[], Json("ReasonRequest"), post(control::scope_cancel)),
    route!("POST" "/v1/gates/global/pause", Some(ControlGlobal), "Pause everything (lease cleanup, effect recovery and audit keep running)", &[], Json("ReasonRequest"), post(control::global_pause)),
    route!("POST" "/v1/gates/global/resume", Some(ControlGlobal), "Resume everything", &[], Json("ReasonRequest"), post(control::global_resume)),
    route!("POST" "/v1/gates/global/cancel", Some(ControlGlobal), "Cancel every live trigger", &[], Json("ReasonRequest"), post(control::global_cancel)),
    // Reports and unit prices.
    route!("GET" "/v1/reports/incident", Some(Read), "Incident report for a window (a team token: its tenant's)", &["since", "until", "group", "tenant"], Body::None, get(control::report_incident)),
    route!("GET" "/v1/reports/cost", Some(Read), "Cost per correct result for a window (a team token: its tenant's)", &["since", "until", "last", "by", "group", "tenant"], Body::None, get(control::report_cost)),
    route!("GET" "/v1/reports/conservation", Some(ReadAudit), "Conservation checks and their differences", &[], Body::None, get(control::report_conservation)),
    route!("GET" "/v1/prices", Some(Read), "Unit prices of the cost report", &[], Body::None, get(control::prices)),
    route!("PUT" "/v1/prices", Some(ManageGroups), "Set unit prices (audited)", &[], Json("PricesRequest"), put(control::prices_set)),
    route!("GET" "/v1/status", Some(Read), "Per group: running / limit, backlog, rates, drain ETA, tickets", &["window", "since", "group", "tenant"], Body::None, get(reads::status)),
    // Shared configuration.
    route!("GET" "/v1/groups", Some(Read), "Resource groups", &[], Body::None, get(reads::groups)),
    route!("GET" "/v1/groups/{name}", Some(Read), "A group: limits, what its attempts measured, what claims enforce", &[], Body::None, get(reads::group)),
    route!("POST" "/v1/groups", Some(ManageGroups), "Apply a groups file", &[], Json("GroupsRequest"), post(admin::groups_apply)),
    route!("PUT" "/v1/groups/{name}", Some(ManageGroups), "Create or change a group (the fields of `paddock group set`)", &[], Json("GroupSpec"), put(admin::group_set)),
    route!("POST" "/v1/groups/{name}/grants", Some(ManageGroups), "Add and remove a group's grants", &[], Json("GrantRequest"), post(admin::group_grant)),
    route!("POST" "/v1/groups/{name}/tenants", Some(ManageGroups), "Admit tenants to a group and stop admitting others (`*`: every tenant)", &[], Json("GroupTenantsRequest"), post(admin::group_tenants)),
    route!("GET" "/v1/tenants", Some(Read), "Tenants' weights and quotas", &[], Body::None, get(reads::tenants)),
    route!("PUT" "/v1/tenants/{tenant}", Some(ManageGroups), "Set a tenant's weight and quotas", &[], Json("TenantRequest"), put(admin::tenant_put)),
    route!("GET" "/v1/connectors", Some(Read), "Connectors", &[], Body::None, get(reads::connectors)),
    route!("PUT" "/v1/connectors/{name}", Some(ManageConnectors), "Create or change a connector", &[], Json("ConnectorRecord"), put(admin::connector_put)),
    route!("PUT" "/v1/connectors/{name}/secret", Some(ManageConnectors), "Set or rotate a connector's credential (shown by fingerprint only)", &[], Json("SecretRequest"), put(admin::secret_set)),
    route!("DELETE" "/v1/connectors/{name}/secret", Some(ManageConnectors), "Clear a connector's credential", &[], Body::None, delete(admin::secret_clear)),
    route!("GET" "/v1/connectors/secrets", Some(ManageConnectors), "Connector secrets by fingerprint (never a value)", &[], Body::None, get(reads::secrets)),
    // Tokens.
    route!("GET" "/v1/tokens", Some(ManageTokens), "API tokens (no text, no hash)", &[], Body::None, get(reads::tokens)),
    route!("POST" "/v1/tokens", Some(ManageTokens), "Create a token (its text is shown once)", &[], Json("TokenRequest"), post(admin::token_create)),
    route!("DELETE" "/v1/tokens/{name}", Some(ManageTokens), "Revoke a token", &[], Body::None, delete(admin::token_revoke)),
    // Review.
    route!("GET" "/v1/audit", Some(ReadAudit), "The audit log in chain order", PAGE, Body::None, get(reads::audit)),
    route!("GET" "/v1/audit/verify", Some(ReadAudit), "Verify the audit chain", &[], Body::None, get(reads::audit_verify)),
    route!("GET" "/v1/audit/export", Some(ReadAudit), "Entries since an instant or a duration ago, as JSON lines; the chain's state in the paddock-audit-chain header", &["since"], Body::None, get(review::audit_export)),
    route!("GET" "/v1/capabilities", Some(ReadAudit), "The capability report", &[], Body::None, get(reads::capabilities)),
    route!("GET" "/v1/capabilities/tenants", Some(ReadAudit), "Each tenant's groups and what they grant it", &[], Body::None, get(reads::capabilities_by_tenant)),
];

/// The router of [`ROUTES`]: each behind its guard (token, then role) and
/// its body limit; anything else is `no_route`.
pub fn router(state: ApiState) -> Router {
    let mut router = Router::new();
    for route in ROUTES {
        let limit = match route.body {
            Bytes => COMPONENT_BODY_LIMIT,
            _ => JSON_BODY_LIMIT,
        };
        let mut handler = (route.handler)().layer(DefaultBodyLimit::max(limit));
        if let Some(action) = route.action {
            let guard_state = Guard {
                state: state.clone(),
                action,
            };
            handler = handler.route_layer(from_fn_with_state(guard_state, guard));
        }
        router = router.route(route.path, handler);
    }
    router
        .method_not_allowed_fallback(wrong_method)
        .fallback(no_route)
        .with_state(state)
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not take {method}; GET /v1/openapi.json lists its methods",
            uri.path()
        ),
    )
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "no_route",
        format!(
            "no endpoint {method} {}; GET /v1/openapi.json lists them",
            uri.path()
        ),
    )
}
