//! The accept loop. The ledger drives hyper's HTTP/1 connections itself
//! (instead of `axum::serve`) for one reason: a handler must be able to end
//! its connection *without a response* after committing, which is how the
//! commit-then-drop fault is realised. Each connection gets a [`ConnControl`]
//! in its request extensions; `drop_connection()` makes the connection task
//! take the socket back from hyper, set `SO_LINGER` to zero and close it, so
//! the client sees a TCP reset while waiting for the response.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::http::{AppState, router};

/// How long shutdown waits for in-flight requests before cutting them off.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Per-connection handle, found in every request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct ConnControl {
    kill: Arc<Notify>,
}

impl ConnControl {
    /// Closes this request's connection with a reset; no response is sent.
    pub(crate) fn drop_connection(&self) {
        self.kill.notify_one();
    }
}

pub(crate) async fn run(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let router = router(state.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    tasks.spawn(serve_connection(stream, router.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    // E.g. EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    tracing::info!(connections = tasks.len(), "shutting down");
    stop_tx.send_replace(true);
    // Parked requests would otherwise hold the drain open forever.
    state.faults.clear();
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
        tracing::warn!("drain timed out; aborting remaining connections");
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    state.store.close().await;
}

async fn serve_connection(stream: TcpStream, router: Router, mut stop: watch::Receiver<bool>) {
    let kill = Arc::new(Notify::new());
    let svc = TowerToHyperService::new(router.layer(Extension(ConnControl { kill: kill.clone() })));
    let mut conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), svc);
    let mut draining = false;
    loop {
        let killed = tokio::select! {
            res = &mut conn => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = kill.notified() => true,
            _ = stop.wait_for(|s| *s), if !draining => false,
        };
        if killed {
            // Dropping the in-flight handler with the connection; the socket
            // is closed with RST so the client cannot mistake it for a clean
            // end of a keep-alive connection.
            let stream = conn.into_parts().io.into_inner();
            if let Err(e) = stream.set_zero_linger() {
                tracing::warn!(error = %e, "could not set SO_LINGER=0; closing with FIN");
            }
            drop(stream);
            return;
        }
        Pin::new(&mut conn).graceful_shutdown();
        draining = true;
    }
}
