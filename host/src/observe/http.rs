//! The HTTP side: `/metrics`, `/healthz`, `/readyz` on one listener, served
//! by axum on a task a guard owns (mini-redis style: the caller binds the
//! listener, so tests bind `127.0.0.1:0` and read the address back).

use super::export::CONTENT_TYPE;
use super::{Observer, Readiness};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The metrics and health endpoints of one node, served until dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Serve `observer` on `listener` (already bound: its address is known
    /// before the first request, and a port taken is the caller's error).
    pub fn start(listener: TcpListener, observer: Arc<Observer>) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .with_state(observer);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %crate::model::text::Esc(&e), "metrics listener stopped");
            }
        });
        Ok(Self { addr, task })
    }

    /// The address it listens on (the port the OS chose for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn metrics(State(observer): State<Arc<Observer>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        observer.render().await,
    )
}

/// The process is alive and serving HTTP.
async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok\n")
}

/// 200 `ready`, or 503 with the reason.
async fn readyz(State(observer): State<Arc<Observer>>) -> impl IntoResponse {
    match observer.readiness().await {
        Readiness::Ready => (StatusCode::OK, "ready\n".to_string()),
        Readiness::NotReady(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}
