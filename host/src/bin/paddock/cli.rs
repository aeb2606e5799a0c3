//! The `paddock` command line: registration (components, jobs, groups),
//! triggers, a node (`serve`), the audit log, and the embedded demo. It
//! parses flags and calls the library's public API; printing lives in
//! [`print`].

mod audit;
mod demo;
mod exceptions;
mod gates;
mod groups;
mod local;
mod print;
mod remote;
mod report;
mod review;
mod schedule;
mod secrets;
mod status;
mod tokens;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::identity::TenantScope;
use paddock::model::secret::redacted_url;
use paddock::model::units;
use paddock::node::{self, NodeConfig};
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{NewTrigger, Store};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "paddock",
    version,
    about = "Run sandboxed WebAssembly jobs under leases and fencing tokens"
)]
pub struct Cli {
    /// Database URL (SQLite: sqlite://PATH).
    #[arg(
        long,
        global = true,
        env = "PADDOCK_DATABASE_URL",
        default_value = "sqlite://paddock.db"
    )]
    database_url: String,
    /// A note recorded beside who is acting (`local:USER (note: TEXT)`):
    /// the command line on the database acts as the operating-system
    /// account it runs as, whatever this says; API callers are
    /// `token:NAME`. A second person's approval cannot come from here
    /// (see `exceptions approve`).
    #[arg(long, global = true, env = "PADDOCK_ACTOR")]
    actor: Option<String>,
    /// Log lines on stderr: `text`, or `json` (one object per line, the
    /// fields at the top level; levels from PADDOCK_LOG).
    #[arg(
        long,
        global = true,
        env = "PADDOCK_LOG_FORMAT",
        default_value = "text",
        value_enum
    )]
    log_format: LogFormat,
    /// Drive a remote `paddock serve --api` at this URL (e.g.
    /// http://127.0.0.1:8080) instead of the database; needs --token.
    #[arg(long, global = true, env = "PADDOCK_SERVER")]
    server: Option<String>,
    /// The API token for --server (`paddock token create`).
    #[arg(long, global = true, env = "PADDOCK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Cli {
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }
}

// Parsed once per process: `group set`'s many flags cost nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Push and inspect components.
    #[command(subcommand)]
    Component(ComponentCmd),
    /// Apply and list jobs.
    #[command(subcommand)]
    Job(JobCmd),
    /// Set and list resource groups.
    #[command(subcommand)]
    Group(groups::GroupCmd),
    /// Set and list tenants' weights in their groups' fair shares.
    #[command(subcommand)]
    Tenant(groups::TenantCmd),
    /// Create, list and show triggers.
    #[command(subcommand)]
    Trigger(TriggerCmd),
    /// Preview and compare trigger sets; show the scanner's shards.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCmd),
    /// Run the scheduler and the runner until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// The on-call view, per resource group: running / limit, backlog,
    /// oldest due age, arrival and success rates over a window, the drain
    /// ETA (or "not recovering"), open tickets.
    Status(status::StatusArgs),
    /// Reports: an incident window, cost per correct result,
    /// conservation checks.
    #[command(subcommand)]
    Report(report::ReportCmd),
    /// Set and list the unit prices of `report cost` (admin, audited).
    #[command(subcommand)]
    Price(report::PriceCmd),
    /// Read and verify the audit log.
    #[command(subcommand)]
    Audit(audit::AuditCmd),
    /// Create, list and revoke API tokens (roles: team, operator, admin,
    /// reviewer).
    #[command(subcommand)]
    Token(tokens::TokenCmd),
    /// Pause a scope: nothing new starts in it; running triggers checkpoint
    /// and pause at their next safe point (audited).
    Pause(gates::ScopeArgs),
    /// Reopen a scope's gate: its paused triggers continue from their
    /// checkpoints (audited). The global gate takes two people: the first
    /// resume is a proposal, a different person's token reopens it.
    Resume(gates::ScopeArgs),
    /// Cancel everything live in a scope; a finished trigger is never
    /// rewritten (audited).
    Cancel(gates::ScopeArgs),
    /// List the closed gates.
    Gates(gates::GatesArgs),
    /// Run the embedded demo on a fresh SQLite database and print the results.
    Demo(demo::DemoArgs),
    /// Set and list connectors (the downstreams effects go to).
    #[command(subcommand)]
    Connector(exceptions::ConnectorCmd),
    /// List effect records; resolve unknown ones by key.
    #[command(subcommand)]
    Effects(exceptions::EffectsCmd),
    /// List, show and resolve exception tickets.
    #[command(subcommand)]
    Exceptions(exceptions::ExceptionsCmd),
}

#[derive(Subcommand)]
enum ComponentCmd {
    /// Check a component file and store it (same bytes twice: an idempotent hit).
    Push { file: PathBuf },
    /// Print a component's capability manifest: every import and export.
    Inspect { digest: String },
    /// List stored components.
    List,
    /// What component B adds or drops in capabilities relative to A
    /// (digests, or unique prefixes of 8+ hex digits).
    Diff { a: String, b: String },
}

#[derive(Subcommand)]
enum JobCmd {
    /// Apply a TOML job manifest: same content → same version, changed → N+1.
    Apply { file: PathBuf },
    /// List jobs.
    List,
    /// Show a job's plan versions (JOB, or TENANT/JOB when several tenants
    /// have a job JOB).
    Show { job: String },
}

#[derive(Subcommand)]
enum TriggerCmd {
    /// Create a manual trigger for JOB (its latest plan version); TENANT/JOB
    /// names one tenant's job when several tenants have a job JOB.
    Run {
        job: String,
        /// A param for this trigger, k=v (v parsed as JSON if it can be).
        #[arg(long = "param", value_parser = parse_param)]
        params: Vec<(String, serde_json::Value)>,
        /// Run due triggers in this process until idle, then show this one.
        #[arg(long)]
        wait: bool,
        /// Makes a retried request idempotent: the same key is the same run.
        #[arg(long)]
        request_key: Option<String>,
    },
    /// List the newest triggers.
    List {
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Show one trigger with its attempts.
    Show { id: i64 },
    /// Approve a trigger parked by the misfire policy: it becomes pending.
    Approve {
        id: i64,
        /// Why (recorded in the audit log).
        #[arg(long)]
        reason: String,
    },
    /// Cancel a trigger that has not started, or ask a running one to stop:
    /// its attempt sees cancel-requested at its next host call (audited).
    Cancel {
        id: i64,
        /// Why (recorded in the audit log).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Retry now: a failed trigger gets a new run (same version and
    /// params; asking twice is one run), one waiting to retry becomes due
    /// now. Audited with --actor and --reason.
    Retry {
        id: i64,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Attempts running at once in this process.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Triggers claimed per claim statement at most. While attempts run,
    /// the runner claims once min(this, concurrency / 2) slots are free.
    #[arg(long, default_value_t = 32)]
    claim_batch: i64,
    /// Threads that run guests (default: every core but one, which stays
    /// free for claims, commits and the database driver).
    #[arg(long)]
    guest_threads: Option<usize>,
    /// Lease length (e.g. 30s).
    #[arg(long, default_value = "30s")]
    lease: String,
    /// Heartbeat period (default: lease / 4).
    #[arg(long)]
    heartbeat: Option<String>,
    /// Renewals in a row that may fail before the runner stops trusting a
    /// lease: its attempt commits nothing and gives the trigger up.
    #[arg(long, default_value_t = 3)]
    max_missed_heartbeats: u32,
    /// Poll interval when nothing wakes the runner.
    #[arg(long, default_value = "250ms")]
    poll: String,
    /// Runner id recorded on leases (default: runner-HOST-PID).
    #[arg(long)]
    runner_id: Option<String>,
    /// On SIGTERM / Ctrl-C: how long attempts in flight may run on before
    /// they are asked to checkpoint and pause at their next host call.
    #[arg(long, default_value = "30s")]
    drain_timeout: String,
    /// After the pause request: how long a guest has to reach a safe point
    /// before it is interrupted (it resumes from its last checkpoint).
    #[arg(long, default_value = "10s")]
    drain_grace: String,
    /// Guest memory in use in this process (e.g. 2GiB) at which it stops
    /// claiming until back under 80% of it (default: no mark).
    #[arg(long)]
    memory_high_water: Option<String>,
    /// Database pool saturation (connections in use / pool size) at which
    /// this process stops claiming, and at which it resumes.
    #[arg(long, default_value_t = 0.9)]
    pool_high_water: f64,
    #[arg(long, default_value_t = 0.7)]
    pool_low_water: f64,
    /// Database connections in this process's main pool at most (default:
    /// 16 on PostgreSQL, 8 on SQLite). On PostgreSQL every process's pools
    /// together must fit in the server's `max_connections`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    db_connections: Option<u32>,
    /// Serve `/metrics` (Prometheus text), `/healthz` and `/readyz` on this
    /// address (e.g. 0.0.0.0:9464; port 0 picks a free one, printed at
    /// start). Off unless given.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Serve the HTTP admin API (JSON; tokens from `paddock token create`)
    /// on this address (e.g. 127.0.0.1:8080; port 0 picks a free one,
    /// printed at start). Off unless given.
    #[arg(long, value_name = "ADDR")]
    api: Option<std::net::SocketAddr>,
}

fn parse_param(text: &str) -> Result<(String, serde_json::Value), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not k=v"))?;
    let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.into()));
    Ok((k.to_string(), value))
}

/// A size flag (`64MiB`), checked ([`units::parse_bytes`]).
fn parse_bytes(field: &str, text: &str) -> anyhow::Result<i64> {
    units::parse_bytes(&format!("--{field}"), text).map_err(anyhow::Error::msg)
}

fn duration_arg(text: &str) -> anyhow::Result<Duration> {
    paddock::model::time::parse_duration(text).map_err(anyhow::Error::msg)
}

/// A duration flag (`2s`) in milliseconds, checked ([`units::parse_millis`]).
fn millis_arg(field: &str, text: &str) -> anyhow::Result<i64> {
    units::parse_millis(&format!("--{field}"), text).map_err(anyhow::Error::msg)
}

/// The pieces every command needs.
pub struct Host {
    pub store: Store,
    pub sandbox: Arc<Sandbox>,
    pub registry: Registry,
}

impl Host {
    pub async fn open(database_url: &str) -> anyhow::Result<Self> {
        let store = Store::open(database_url)
            .await
            .with_context(|| format!("opening {}", redacted_url(database_url)))?;
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: cache_dir(),
            ..SandboxConfig::default()
        })?;
        let registry = Registry::new(store.clone(), sandbox.clone());
        Ok(Self {
            store,
            sandbox,
            registry,
        })
    }
}

/// Compiled code is cached by content under the user's cache folder.
fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("paddock").join("wasmtime"))
}

/// Run one command.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Some(server) = &cli.server {
        return remote::run(server, cli.token.as_deref(), cli.command).await;
    }
    let cli = match cli.command {
        Command::Demo(args) => return demo::run(args).await,
        Command::Schedule(cmd) => {
            schedule::run(cmd, &cli.database_url, &local::actor(cli.actor.as_deref())).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Serve(args) => {
            serve(node_config(&cli.database_url, args)?).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Status(args) => {
            status::run(args, &cli.database_url).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Report(cmd) => return report::run(cmd, &cli.database_url).await,
        _ => cli,
    };
    let host = Host::open(&cli.database_url).await?;
    let actor = &local::actor(cli.actor.as_deref());
    // `audit verify` anchors what it verified itself.
    let anchor = !matches!(cli.command, Command::Audit(_));
    let code = run(&host, cli.command, actor).await;
    // Whatever the command appended to the audit chain is anchored now,
    // outside the database (after a failure too: refusals are audited).
    if anchor {
        audit::anchor_after(&host.store).await;
    }
    code
}

/// A command that needs the store, sandbox and registry.
async fn run(host: &Host, command: Command, actor: &str) -> anyhow::Result<ExitCode> {
    match command {
        Command::Component(cmd) => return component(host, cmd, actor).await,
        Command::Job(cmd) => return job(host, cmd, actor).await,
        Command::Group(cmd) => groups::group(host, cmd, actor).await?,
        Command::Tenant(cmd) => groups::tenant(host, cmd, actor).await?,
        Command::Trigger(cmd) => return trigger(host, cmd, actor).await,
        Command::Audit(cmd) => return audit::audit(host, cmd).await,
        Command::Token(cmd) => tokens::token(host, cmd, actor).await?,
        Command::Price(cmd) => report::price(host, cmd, actor).await?,
        Command::Connector(cmd) => exceptions::connector(host, cmd, actor).await?,
        Command::Effects(cmd) => exceptions::effects(host, cmd, actor).await?,
        Command::Exceptions(cmd) => exceptions::exceptions(host, cmd, actor).await?,
        Command::Pause(args) => gates::pause(host, args, actor).await?,
        Command::Resume(args) => gates::resume(host, args, actor).await?,
        Command::Cancel(args) => gates::cancel(host, args, actor).await?,
        Command::Gates(args) => gates::list(host, args).await?,
        Command::Demo(_)
        | Command::Schedule(_)
        | Command::Serve(_)
        | Command::Status(_)
        | Command::Report(_) => {
            unreachable!("handled above")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `paddock component ...`
async fn component(host: &Host, cmd: ComponentCmd, actor: &str) -> anyhow::Result<ExitCode> {
    match cmd {
        ComponentCmd::Push { file } => {
            let pushed = host.registry.component_push_file(&file, actor).await?;
            print::pushed(pushed.created, &pushed.digest, &pushed.manifest);
        }
        ComponentCmd::Inspect { digest } => {
            let digest = digest.trim_start_matches("sha256:");
            let record = host
                .store
                .component_get(digest)
                .await?
                .with_context(|| format!("no component sha256:{digest}"))?;
            println!(
                "component sha256:{}  ({} bytes, pushed by {})",
                record.digest, record.size_bytes, record.pushed_by
            );
            print::manifest(&serde_json::from_str(&record.manifest)?);
        }
        ComponentCmd::Diff { a, b } => review::diff(host, &a, &b).await?,
        ComponentCmd::List => print::components(&host.store.components_list().await?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `paddock job ...`
async fn job(host: &Host, cmd: JobCmd, actor: &str) -> anyhow::Result<ExitCode> {
    match cmd {
        JobCmd::Apply { file } => {
            let (job, outcome) = host.registry.job_apply_file(&file, actor).await?;
            print::applied(&job, &outcome);
        }
        JobCmd::List => print::jobs(&host.store.jobs_list().await?),
        JobCmd::Show { job } => {
            let job = host.store.job_get_for(&TenantScope::Every, &job).await?;
            let versions = host.store.plan_versions(&job.tenant, &job.job_id).await?;
            print::job_versions(&versions);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `paddock trigger ...`
async fn trigger(host: &Host, cmd: TriggerCmd, actor: &str) -> anyhow::Result<ExitCode> {
    match cmd {
        TriggerCmd::Run {
            job,
            params,
            wait,
            request_key,
        } => {
            let params: serde_json::Map<_, _> = params.into_iter().collect();
            let (trigger, created) = host
                .store
                .trigger_create(
                    &NewTrigger::manual(
                        &job,
                        serde_json::Value::Object(params),
                        request_key.as_deref(),
                    )
                    .by(actor),
                )
                .await?;
            print::run_created(&trigger, created);
            if wait {
                let runner = Runner::new(
                    host.store.clone(),
                    host.sandbox.clone(),
                    RunnerConfig::default(),
                );
                runner.run_until_idle().await?;
                print::trigger_detail(&host.store, trigger.id).await?;
            }
        }
        TriggerCmd::List { limit } => {
            print::trigger_table(&host.store.triggers_list(limit).await?, &host.store).await?
        }
        TriggerCmd::Show { id } => print::trigger_detail(&host.store, id).await?,
        TriggerCmd::Approve { id, reason } => {
            host.store.trigger_approve(id, actor, &reason).await?;
            println!("trigger {0} approved: pending", id);
        }
        TriggerCmd::Cancel { id, reason } => {
            if !host
                .store
                .trigger_request_cancel(id, actor, &reason)
                .await?
            {
                bail!("trigger {id} is not pending, waiting or running");
            }
            println!("trigger {0}: cancel requested", id);
        }
        TriggerCmd::Retry { id, reason } => {
            print_retried(id, &host.store.trigger_retry(id, actor, &reason).await?)
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `trigger retry` did, the same locally and through `--server`.
pub fn print_retried(id: i64, retried: &paddock::store::Retried) {
    match retried {
        paddock::store::Retried::NewRun { trigger, created } => println!(
            "trigger {1} failed: retried as trigger {2}{}",
            if *created { "" } else { " (asked before)" },
            id,
            trigger
        ),
        paddock::store::Retried::DueNow => println!("trigger {0}: retry due now", id),
    }
}

/// `serve`'s flags as a node's settings.
fn node_config(database_url: &str, args: ServeArgs) -> anyhow::Result<NodeConfig> {
    let mut config = NodeConfig::new(database_url);
    if let Some(id) = args.runner_id {
        config = config.id(id);
    }
    use paddock::model::bounds::{CLAIM_BATCH, LEASE, MAX_MISSED_HEARTBEATS, SERVE_CONCURRENCY};
    let flag = |e: String| anyhow::anyhow!("--{e}");
    let lease = duration_arg(&args.lease)?;
    LEASE
        .check(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
        .map_err(flag)?;
    SERVE_CONCURRENCY
        .check(i64::try_from(args.concurrency).unwrap_or(i64::MAX))
        .map_err(flag)?;
    CLAIM_BATCH.check(args.claim_batch).map_err(flag)?;
    MAX_MISSED_HEARTBEATS
        .check(i64::from(args.max_missed_heartbeats))
        .map_err(flag)?;
    config.runner = RunnerConfig {
        lease,
        heartbeat_every: match args.heartbeat {
            Some(h) => duration_arg(&h)?,
            None => lease / 4,
        },
        max_missed_heartbeats: args.max_missed_heartbeats,
        max_concurrency: args.concurrency,
        claim_batch: args.claim_batch,
        poll_interval: duration_arg(&args.poll)?,
        drain_timeout: duration_arg(&args.drain_timeout)?,
        drain_grace: duration_arg(&args.drain_grace)?,
        memory_high_water: args
            .memory_high_water
            .map(|m| parse_bytes("memory-high-water", &m).map(|b| b as u64))
            .transpose()?,
        pool_water: pool_water(args.pool_high_water, args.pool_low_water)?,
        ..config.runner
    };
    config.sandbox.cache_dir = cache_dir();
    config.guest_threads = args.guest_threads;
    config.metrics = args.metrics;
    config.db_connections = args.db_connections;
    config.api = args.api;
    Ok(config)
}

/// The pool's marks, checked: 0 < low <= high <= 1.
fn pool_water(high: f64, low: f64) -> anyhow::Result<paddock::model::shares::Watermark> {
    if !(high > 0.0 && high <= 1.0) {
        bail!("--pool-high-water must be above 0 and at most 1, not {high}");
    }
    if !(low > 0.0 && low <= high) {
        bail!("--pool-low-water must be above 0 and at most --pool-high-water ({high}), not {low}");
    }
    Ok(paddock::model::shares::Watermark { high, low })
}

/// How often `paddock serve` anchors the audit chain's head (and once more
/// when it stops).
const AUDIT_ANCHOR_EVERY: Duration = Duration::from_secs(60);

/// A node until SIGTERM or Ctrl-C, then its drain report. The unfinished
/// list goes to stdout (what a later process resumes); tests and benches
/// read these lines, so their text is fixed.
async fn serve(config: NodeConfig) -> anyhow::Result<()> {
    // Before the node starts: its runner claims and runs attempts at once,
    // and a SIGTERM that reached the process before the handler was in
    // place would kill it outright instead of draining them (the anchor's
    // store, opened below, can take a while on a busy machine).
    let shutdown = shutdown_signal();
    let drain_timeout = config.runner.drain_timeout;
    let url = config.database_url.clone();
    let node = node::start(config).await?;
    let anchors = audit::anchor_periodically(&url, AUDIT_ANCHOR_EVERY).await?;
    let config = node.config();
    eprintln!(
        "paddock serve: runner {} (lease {:?}, heartbeat {:?}), scheduler {} over {} shards",
        config.runner.runner_id,
        config.runner.lease,
        config.runner.heartbeat_every,
        config.scanner.owner,
        node.shards()
    );
    if let Some(addr) = node.metrics_addr() {
        // Tests read this line for the port the OS chose.
        eprintln!("paddock serve: metrics and health on http://{0}", addr);
    }
    if let Some(addr) = node.api_addr() {
        // Tests read this line for the port the OS chose.
        eprintln!(
            "paddock serve: admin API on http://{0}/v1 (GET /v1/openapi.json)",
            addr
        );
    }
    shutdown.await;
    // /readyz answers 503 before the line says so.
    node.begin_drain();
    eprintln!(
        "paddock serve: draining (no new claims; attempts in flight have {0:?} \
         to finish, then checkpoint and pause)",
        drain_timeout
    );
    let report = node.shutdown().await?;
    print::drain_report(&report.drain);
    anchors.finish().await;
    eprintln!("paddock serve: stopped");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is
/// called, not when the future is first polled, so a signal sent as soon as
/// `serve` says it runs is not lost.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_name_themselves_in_errors() {
        let err = parse_bytes("memory", "9999999999GiB")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--memory: '9999999999GiB' is too large (at most 8 EiB)"
        );
        let err = millis_arg("service-time", "0s").unwrap_err().to_string();
        assert_eq!(err, "--service-time: '0s' must be positive");
    }

    #[test]
    fn params_parse_json_values_and_fall_back_to_strings() {
        assert_eq!(
            parse_param("n=3").unwrap(),
            ("n".into(), serde_json::json!(3))
        );
        assert_eq!(
            parse_param("name=bob").unwrap(),
            ("name".into(), serde_json::json!("bob"))
        );
        assert!(parse_param("novalue").is_err());
    }
}
