//! A node: one process's share of the work — the scanner (scheduler), the
//! runner with its heartbeats on a pool of their own, the effect gateway and
//! its unknown-outcome recovery, and cross-process wake-ups — composed in one
//! place, so `paddock serve`, tests and embedders start the same thing.
//!
//! ```text
//! let node = node::start(NodeConfig::new(url).id("a")).await?;   // loops running
//! ...
//! let report = node.shutdown().await?;                          // drained
//! ```
//!
//! or in one call, mini-redis style: `node::run(config, shutdown).await?`.
//!
//! Invariants:
//! - every node on one database is equal: any of them may scan any shard and
//!   claim any trigger; what one leaves unfinished at shutdown is released
//!   to `pending` for another to resume (see [`crate::lease::drain`]);
//! - a shutdown stops both loops together: the scanner gives its shards back
//!   and the runner drains; the report lists the triggers left unfinished;
//! - with `metrics` set, `/metrics`, `/healthz` and `/readyz` are served
//!   from before [`start`] returns until the node is gone; `/readyz`
//!   answers 503 from the moment the drain begins;
//! - with `api` set, the HTTP admin API ([`crate::api`]) is served on its
//!   own listener from before [`start`] returns until the node is gone;
//! - a [`Node`] dropped without [`Node::shutdown`] still stops its loops (they
//!   drain in the background on the runtime they were started on).

use crate::api::{ApiServer, ApiState};
use crate::effects::{EffectGateway, RecoveryGuard};
use crate::lease::governor::{Gauges, GovernorGuard, spawn_governor};
use crate::lease::{DrainReport, Heartbeats, Runner, RunnerConfig, guest_runtime};
use crate::observe::{Draining, MetricsServer, Observer};
use crate::registry::Registry;
use crate::sandbox::{Sandbox, SandboxConfig, SandboxError};
use crate::schedule::scanner::{Scanner, ScannerConfig};
use crate::store::{ReadStore, Store, StoreError, WakeListener};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Node settings. Every default is listed in [`NodeConfig::new`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The database every loop works on (`sqlite://PATH` or
    /// `postgres://...`). No default.
    pub database_url: String,
    /// The runner. Default [`RunnerConfig::default`] (runner id
    /// `runner-HOST-PID`).
    pub runner: RunnerConfig,
    /// The scanner. Default [`ScannerConfig::default`] with the owner
    /// `{runner id}-scheduler`; [`NodeConfig::id`] sets both names.
    pub scanner: ScannerConfig,
    /// The sandbox. Default [`SandboxConfig::default`] (no code cache).
    pub sandbox: SandboxConfig,
    /// Worker threads of the process's guest runtime. Default `None`: every
    /// core but one ([`guest_runtime::default_threads`]). The runtime is
    /// process-wide, so a second node in one process must ask for the same
    /// number (or `None`).
    pub guest_threads: Option<usize>,
    /// Connections in the heartbeats' own pool, on their own runtime, so
    /// neither busy guests nor a busy main pool delay renewals. Default 2.
    pub heartbeat_connections: u32,
    /// Connections in the main pool at most. Default `None`: the store's
    /// default (16 on PostgreSQL, 8 on SQLite). Processes sharing one
    /// PostgreSQL server must fit in its `max_connections` together.
    pub db_connections: Option<u32>,
    /// How often effects whose outcome is unknown are resolved by key.
    /// Default 30 s.
    pub recovery_every: Duration,
    /// Effects looked at per recovery scan. Default 1000.
    pub recovery_limit: i64,
    /// How often the groups' effective concurrency is recomputed from
    /// what their attempts measured ([`crate::lease::governor`]). Default 5 s.
    pub govern_every: Duration,
    /// Where to serve `/metrics`, `/healthz` and `/readyz`
    /// ([`crate::observe`]); port 0 lets the OS choose (read it back with
    /// [`Node::metrics_addr`]). Default `None`: no listener.
    pub metrics: Option<SocketAddr>,
    /// Where to serve the HTTP admin API ([`crate::api`]); port 0 lets the
    /// OS choose ([`Node::api_addr`]). Default `None`: no API.
    pub api: Option<SocketAddr>,
}

impl NodeConfig {
    /// A node on `database_url` with every other setting at its default:
    ///
    /// | setting | default |
    /// |---|---|
    /// | `runner` | [`RunnerConfig::default`]: id `runner-HOST-PID`, lease 30 s, heartbeat lease / 4, 8 attempts at once, claims of 32, poll 250 ms, drain timeout 30 s, grace 10 s |
    /// | `scanner` | [`ScannerConfig::default`], owner `runner-HOST-PID-scheduler`: shard lease 10 s, tick 1 s, lookahead 2 s |
    /// | `sandbox` | [`SandboxConfig::default`]: 128 instances, 1 GiB ceiling, no code cache |
    /// | `guest_threads` | `None`: every core but one |
    /// | `heartbeat_connections` | 2 |
    /// | `db_connections` | `None`: the store's default |
    /// | `govern_every` | 5 s |
    /// | `recovery_every` | 30 s |
    /// | `recovery_limit` | 1000 |
    /// | `metrics` | `None`: no metrics or health listener |
    /// | `api` | `None`: no admin API |
    pub fn new(database_url: impl Into<String>) -> Self {
        let runner = RunnerConfig::default();
        let scanner = ScannerConfig {
            owner: scheduler_name(&runner.runner_id),
            ..ScannerConfig::default()
        };
        Self {
            database_url: database_url.into(),
            runner,
            scanner,
            sandbox: SandboxConfig::default(),
            guest_threads: None,
            heartbeat_connections: 2,
            db_connections: None,
            recovery_every: Duration::from_secs(30),
            recovery_limit: 1000,
            govern_every: Duration::from_secs(5),
            metrics: None,
            api: None,
        }
    }

    /// Name the node: its runner is `id` (on leases and attempts) and its
    /// scanner `{id}-scheduler` (on shards). Nodes in one process need
    /// names of their own: the defaults carry the process id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.runner.runner_id = id.into();
        self.scanner.owner = scheduler_name(&self.runner.runner_id);
        self
    }
}

fn scheduler_name(runner_id: &str) -> String {
    format!("{runner_id}-scheduler")
}

/// Why a node could not start or did not stop cleanly. Each message is
/// whole: it includes its cause's text, and no variant returns a
/// `source()` (the rule is written where the CLI prints errors).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The store would not open (unreachable, unsupported URL, migration).
    #[error("opening {url}: {error}")]
    Open { url: String, error: StoreError },
    /// The heartbeats' own pool would not open.
    #[error("opening the heartbeat pool: {0}")]
    Heartbeats(StoreError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `guest_threads` differs from the runtime this process already runs.
    #[error("the guest runtime already runs with another thread count")]
    GuestThreads,
    /// The metrics listener could not be bound.
    #[error("listening for metrics on {addr}: {error}")]
    Metrics { addr: SocketAddr, error: String },
    /// The API listener could not be bound.
    #[error("listening for the API on {addr}: {error}")]
    Api { addr: SocketAddr, error: String },
    /// The runner's task panicked or was cancelled: no drain report.
    #[error("runner task failed: {0}")]
    RunnerTask(tokio::task::JoinError),
}

/// What a node did on its way out.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeReport {
    /// The runner's drain: the attempts that ended during it and the
    /// triggers left unfinished (released for another node to resume).
    pub drain: DrainReport,
}

/// A running node. Its loops run until [`Node::shutdown`] (or until it is
/// dropped, which stops them without waiting for the drain).
pub struct Node {
    config: NodeConfig,
    shards: u32,
    stop: StopOnDrop,
    scanning: JoinHandle<()>,
    running: JoinHandle<DrainReport>,
    _recovery: RecoveryGuard,
    _governor: GovernorGuard,
    _wakes: Option<WakeListener>,
    /// Set when the node starts draining: `/readyz` answers 503 from then.
    draining: Draining,
    /// Serves until the node is gone (through the drain).
    metrics: Option<MetricsServer>,
    /// Serves until the node is gone.
    api: Option<ApiServer>,
}

/// Sends the stop signal when dropped, so a node that is dropped, or whose
/// owner's future is cancelled, stops its loops.
struct StopOnDrop(watch::Sender<bool>);

impl StopOnDrop {
    fn stop(&self) {
        let _ = self.0.send(true);
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start a node: open its store, sandbox and heartbeat pool, start the
/// effect recovery task and the wake listener, and spawn the scanner and
/// runner loops on the current runtime. Returns once all of them are
/// started — the readiness signal: work due from then on is claimed within
/// one poll interval, sooner when a wake-up arrives (on PostgreSQL the
/// listener connects in the background; polling covers the gap).
pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
    if let Some(threads) = config.guest_threads
        && !guest_runtime::configure(threads)
    {
        return Err(NodeError::GuestThreads);
    }
    let store = Store::open_with(&config.database_url, config.db_connections)
        .await
        .map_err(|error| NodeError::Open {
            url: crate::model::secret::redacted_url(&config.database_url),
            error,
        })?;
    let sandbox = Sandbox::new(config.sandbox.clone())?;
    let shards = store.shard_count().await?;
    let heartbeats = Heartbeats::dedicated(&config.database_url, config.heartbeat_connections)
        .await
        .map_err(NodeError::Heartbeats)?;
    let effects = EffectGateway::new(store.clone());
    let api = match config.api {
        Some(addr) => Some(serve_api(addr, &store, &sandbox).await?),
        None => None,
    };
    let runner = Runner::with_parts(
        std::sync::Arc::new(store.clone()),
        sandbox,
        config.runner.clone(),
        effects,
        heartbeats,
    );
    let scanner = Scanner::new(store.clone(), config.scanner.clone());
    let draining = Draining::default();
    let metrics = match config.metrics {
        Some(addr) => Some(serve_metrics(addr, &store, &runner, &draining).await?),
        None => None,
    };
    // Effects whose outcome is unknown are resolved by key in the
    // background; the guard stops the task with the node.
    let recovery = runner
        .effects()
        .spawn_recovery(config.recovery_every, config.recovery_limit);
    // Other processes announce new work (PostgreSQL LISTEN/NOTIFY); polling
    // stays the fallback.
    let wakes = store.listen_wakes({
        let runner = runner.clone();
        Arc::new(move || runner.wake())
    });
    // One signal stops both loops: the scanner releases its shards, the
    // runner stops claiming and drains.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let scanning = {
        let waker = runner.clone();
        let rx = stop_rx.clone();
        tokio::spawn(async move { scanner.run(stopped(rx), move || waker.wake()).await })
    };
    let governor = spawn_governor(
        store.clone(),
        Gauges {
            runner_id: config.runner.runner_id.clone(),
            fuel: runner.fuel().clone(),
            effects: Some(runner.effects().clone()),
            hold_for: config.govern_every * 3,
        },
        config.govern_every,
    );
    let running = tokio::spawn(async move { runner.run_and_drain(stopped(stop_rx)).await });

    Ok(Node {
        config,
        shards,
        stop: StopOnDrop(stop_tx),
        scanning,
        running,
        _recovery: recovery,
        _governor: governor,
        _wakes: wakes,
        draining,
        metrics,
        api,
    })
}

/// Bind `addr` and serve the admin API on it.
async fn serve_api(
    addr: SocketAddr,
    store: &Store,
    sandbox: &Arc<Sandbox>,
) -> Result<ApiServer, NodeError> {
    let failed = |error: std::io::Error| NodeError::Api {
        addr,
        error: error.to_string(),
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(failed)?;
    let state = ApiState {
        store: store.clone(),
        registry: Registry::new(store.clone(), sandbox.clone()),
    };
    ApiServer::start(listener, state).map_err(failed)
}

/// Bind `addr` and serve the node's metrics and health on it.
async fn serve_metrics(
    addr: SocketAddr,
    store: &Store,
    runner: &Arc<Runner>,
    draining: &Draining,
) -> Result<MetricsServer, NodeError> {
    let failed = |error: std::io::Error| NodeError::Metrics {
        addr,
        error: error.to_string(),
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(failed)?;
    let observer = Observer::new(
        store.clone(),
        runner.metrics().clone(),
        Some(runner.effects().clone()),
        draining.clone(),
    );
    MetricsServer::start(listener, Arc::new(observer)).map_err(failed)
}

/// Start a node, run it until `shutdown` resolves, then drain it: the
/// one-call form of [`start`] and [`Node::run_until`].
pub async fn run(
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<NodeReport, NodeError> {
    start(config).await?.run_until(shutdown).await
}

impl Node {
    /// The settings it runs with.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// How many shards the database's schedule is split into (read at
    /// start).
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served, if they are:
    /// bound before [`start`] returns.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::addr)
    }

    /// Where the admin API is served, if it is: bound before [`start`]
    /// returns.
    pub fn api_addr(&self) -> Option<SocketAddr> {
        self.api.as_ref().map(ApiServer::addr)
    }

    /// Start draining without waiting: `/readyz` answers 503 from now on,
    /// the scanner gives its shards back and the runner stops claiming.
    /// [`Node::shutdown`] waits for the rest.
    pub fn begin_drain(&self) {
        self.draining.set();
        self.stop.stop();
    }

    /// Run until `shutdown` resolves, then [`Node::shutdown`].
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<NodeReport, NodeError> {
        shutdown.await;
        self.shutdown().await
    }

    /// Stop both loops and wait for them: the scanner releases its shards;
    /// the runner claims nothing more, gives attempts in flight
    /// `drain_timeout` to finish, then asks them to checkpoint and pause,
    /// interrupts what still runs after `drain_grace`, and releases every
    /// paused or interrupted attempt. The report lists what is unfinished.
    pub async fn shutdown(self) -> Result<NodeReport, NodeError> {
        self.begin_drain();
        let (_, drained) = tokio::join!(self.scanning, self.running);
        let drain = drained.map_err(NodeError::RunnerTask)?;
        Ok(NodeReport { drain })
    }
}
