//! The HTTP admin API: the command line's reads and writes as
//! JSON endpoints, for tokens with roles and tenants, served by axum on the
//! listener `paddock serve --api ADDR` binds (off unless asked).
//!
//! - [`routes`] is the one table of routes: method, path, the
//!   [`Action`](crate::model::identity::Action) a caller's role must allow,
//!   the body it takes, its handler. The router and the OpenAPI document
//!   ([`openapi`]) are both built from it, so neither has a path the other
//!   lacks; adding an endpoint is one row there.
//! - Every route but `GET /v1/openapi.json` needs `Authorization: Bearer
//!   pdk_...` (a token from `paddock token create`): a missing, unknown,
//!   revoked or expired token is 401, a role that may not do the route's
//!   action 403 (checked before the body is read). A team token's reads and
//!   writes are scoped to its tenant in each statement's `WHERE`
//!   (`store::scoped`): another tenant's trigger, job, component, effect
//!   or ticket is 404, as if it did not exist; a write naming another
//!   tenant (a manifest's `tenant`) is 403.
//! - Errors are `{"error": {"code": ..., "message": ...}}` with a stable
//!   code ([`error`]); bad input is 4xx and stores nothing. JSON bodies
//!   refuse unknown fields and are at most [`JSON_BODY_LIMIT`]; component
//!   uploads at most [`COMPONENT_BODY_LIMIT`].
//! - Lists are pages: `?limit=` (1-500, default 50) and `?after=` (the
//!   `next` of the previous page).
//! - Every write is audited with the caller as `token:NAME`.

mod admin;
mod auth;
mod control;
mod effects;
pub mod error;
mod extract;
pub mod openapi;
mod reads;
pub mod review;
pub mod routes;
mod schedule;
pub mod views;
pub mod wire;
mod writes;

pub use auth::Caller;
pub use error::ApiError;

use crate::registry::Registry;
use crate::store::Store;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The largest JSON request body: 64 KiB (a job manifest, a groups file and
/// a run's params fit many times over).
pub const JSON_BODY_LIMIT: usize = 64 << 10;

/// The largest component upload: 64 MiB (the Python and JavaScript guests
/// built by standard toolchains are 12-18 MB).
pub const COMPONENT_BODY_LIMIT: usize = 64 << 20;

/// What every handler works on.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    pub registry: Registry,
}

/// The API served on one listener until dropped.
pub struct ApiServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl ApiServer {
    /// Serve the API on `listener` (already bound: its address is known
    /// before the first request).
    pub fn start(listener: TcpListener, state: ApiState) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let app = routes::router(state);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %crate::model::text::Esc(&e), "API listener stopped");
            }
        });
        Ok(Self { addr, task })
    }

    /// The address it listens on (the port the OS chose for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
