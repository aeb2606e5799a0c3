//! `paddock connector set|list`, `paddock effects list|recover` and
//! `paddock exceptions list|show|resolve`: the admin side of the
//! side-effect plane.

use super::{Host, duration_arg};
use anyhow::bail;
use clap::Subcommand;
use paddock::effects::RecoveryReport;
use paddock::effects::operator::{self, Compensated, Compensation};
use paddock::model::time::{from_millis, rfc3339};
use paddock::store::prelude::*;
use paddock::store::{ConnectorRecord, EffectRecord, ExceptionRecord, SecretView};

#[derive(Subcommand)]
pub enum ConnectorCmd {
    /// Create or change a connector (audited).
    Set {
        name: String,
        /// Connector kind; only `http`.
        #[arg(long, default_value = "http")]
        kind: String,
        /// Base URL: effects POST to {base}/{action}, queries GET
        /// {base}/operations/{key}.
        #[arg(long)]
        base_url: String,
        /// Per-call timeout; a timeout is an unknown outcome, never a failure.
        #[arg(long, default_value = "10s")]
        timeout: String,
        /// Calls in flight at once per host process.
        #[arg(long, default_value_t = 16)]
        permits: i64,
        /// Calls per second (0: unlimited).
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// The downstream rejects lower fencing tokens. The reference ledger
        /// compares them per resource: use one trigger per resource.
        #[arg(long)]
        compares_tokens: bool,
        /// The downstream answers GET {base}/operations/{key} (200 / 404).
        #[arg(long)]
        queryable: bool,
        /// The downstream does NOT honour Idempotency-Key: an effect whose
        /// send budget is spent then becomes an exception ticket.
        #[arg(long)]
        not_idempotent: bool,
        /// Failure rate (transient + unknown) that opens the breaker.
        #[arg(long, default_value_t = 0.5)]
        breaker_failure_rate: f64,
        /// Calls in the window before the rate is judged.
        #[arg(long, default_value_t = 10)]
        breaker_min_calls: i64,
        #[arg(long, default_value = "10s")]
        breaker_window: String,
        /// How long the breaker stays open before one probe.
        #[arg(long, default_value = "5s")]
        breaker_open: String,
    },
    /// List connectors (and whether each carries a credential).
    List,
    /// A connector's credential: set, rotate, clear, list (never printed).
    #[command(subcommand)]
    Secret(super::secrets::SecretCmd),
}

#[derive(Subcommand)]
pub enum EffectsCmd {
    /// The newest effect records.
    List {
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Resolve effects left intent/unknown by attempts without a live lease,
    /// by querying the downstream by key (never resends).
    Recover {
        #[arg(long, default_value_t = 1000)]
        limit: i64,
    },
    /// Record an operator's compensation of a succeeded effect: a new
    /// trigger of JOB performs it through the original's connector, with its
    /// own key, lease, fencing and budget; the original is never rewritten.
    /// Needs --reason; audited.
    Compensate {
        /// The idempotency key of the effect to compensate.
        original: String,
        /// The job that performs it (its component calls effects.invoke with
        /// `compensates`, like the `effector` guest; it must be granted the
        /// original's connector).
        #[arg(long)]
        job: String,
        /// The compensation's own idempotency key.
        #[arg(long)]
        key: String,
        /// The downstream action, e.g. RES-1/refund.
        #[arg(long)]
        action: String,
        /// The request body (text).
        #[arg(long, default_value = "")]
        payload: String,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand)]
pub enum ExceptionsCmd {
    /// List tickets (open ones unless --all).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Show one ticket with its evidence and allowed actions.
    Show { id: i64 },
    /// Resolve a ticket with one of its allowed actions; needs --reason.
    /// Writes new facts and an audit entry. A high-risk action (resend,
    /// mark_succeeded) is proposed instead and runs when a different
    /// person approves it (two-person rule).
    Resolve {
        id: i64,
        /// mark_succeeded | mark_failed | resend | dismiss (as allowed).
        #[arg(long)]
        action: String,
        #[arg(long)]
        reason: String,
    },
    /// Approve the action another person proposed on a ticket; it runs
    /// now. Needs --reason; audited. Through a token of a person other
    /// than the proposer (`paddock --server URL --token T exceptions
    /// approve N`); on the local command line only where
    /// PADDOCK_LOCAL_APPROVALS=allow (a single-operator install).
    Approve {
        id: i64,
        #[arg(long)]
        reason: String,
    },
    /// Withdraw the action proposed on a ticket; the ticket stays open.
    /// Needs --reason; audited.
    Reject {
        id: i64,
        #[arg(long)]
        reason: String,
    },
}

pub async fn connector(host: &Host, cmd: ConnectorCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        set @ ConnectorCmd::Set { .. } => {
            let record = set_record(set)?;
            host.store.connector_put(&record, actor).await?;
            println!("connector {} set", record.name);
        }
        ConnectorCmd::Secret(cmd) => super::secrets::secret(host, cmd, actor).await?,
        ConnectorCmd::List => print_connectors(
            &host.store.connectors_list().await?,
            &host.store.connector_secrets().await?,
        ),
    }
    Ok(())
}

/// `connector set`'s flags as the connector, checked.
pub fn set_record(cmd: ConnectorCmd) -> anyhow::Result<ConnectorRecord> {
    let ConnectorCmd::Set {
        name,
        kind,
        base_url,
        timeout,
        permits,
        rate,
        compares_tokens,
        queryable,
        not_idempotent,
        breaker_failure_rate,
        breaker_min_calls,
        breaker_window,
        breaker_open,
    } = cmd
    else {
        bail!("not `connector set`");
    };
    if kind != "http" {
        bail!("connector kind '{kind}' is not supported (use http)");
    }
    paddock::model::origin::check_base_url(&base_url)
        .map_err(|e| anyhow::anyhow!("--base-url: {e}"))?;
    let record = ConnectorRecord {
        name,
        kind,
        base_url,
        timeout_ms: millis_of(&timeout)?,
        permits,
        rate_per_sec: rate,
        compares_tokens,
        queryable,
        idempotent: !not_idempotent,
        breaker_failure_rate,
        breaker_min_calls,
        breaker_window_ms: millis_of(&breaker_window)?,
        breaker_open_ms: millis_of(&breaker_open)?,
    };
    Ok(record)
}

/// A duration flag in milliseconds; one too long for 63 bits reads as the
/// largest, which the connector's limits then refuse by name.
fn millis_of(text: &str) -> anyhow::Result<i64> {
    Ok(i64::try_from(duration_arg(text)?.as_millis()).unwrap_or(i64::MAX))
}

/// `connector list`, from the database or `GET /v1/connectors` (and the
/// secrets' fingerprints).
pub fn print_connectors(connectors: &[ConnectorRecord], secrets: &[SecretView]) {
    println!(
        "{:<16} {:<5} {:<36} {:>8} {:>7} {:>6} {:>6} {:>9} {:>10}  {:<30} breaker",
        "connector",
        "kind",
        "base_url",
        "timeout",
        "permits",
        "rate",
        "tokens",
        "queryable",
        "idempotent",
        "secret"
    );
    for c in connectors {
        let secret = secrets
            .iter()
            .find(|s| s.connector == c.name)
            .map_or("-".to_string(), |s| {
                format!("{} {}", s.header, s.fingerprint)
            });
        println!(
            "{:<16} {:<5} {:<36} {:>6}ms {:>7} {:>6} {:>6} {:>9} {:>10}  {:<30} {}% of >={} in {}ms, open {}ms",
            c.name,
            c.kind,
            c.base_url,
            c.timeout_ms,
            c.permits,
            c.rate_per_sec,
            c.compares_tokens,
            c.queryable,
            c.idempotent,
            secret,
            (c.breaker_failure_rate * 100.0) as i64,
            c.breaker_min_calls,
            c.breaker_window_ms,
            c.breaker_open_ms
        );
    }
}

/// `effects list`.
pub fn effects_table(effects: &[paddock::store::EffectRecord]) {
    println!(
        "{:>5} {:<36} {:<12} {:<24} {:>7} {:<10} {:>5} {:>6}  resolved_by",
        "id", "key", "connector", "action", "trigger", "state", "sends", "token"
    );
    for e in effects {
        println!(
            "{:>5} {:<36} {:<12} {:<24} {:>7} {:<10} {:>5} {:>6}  {}",
            e.id,
            e.idempotency_key,
            e.connector,
            e.action,
            e.trigger_id,
            e.state,
            e.sends,
            e.fencing_token,
            e.resolved_by.clone().unwrap_or_default()
        );
    }
}

/// `exceptions list`.
pub fn tickets_table(tickets: &[paddock::store::ExceptionRecord]) {
    println!(
        "{:>5} {:<18} {:<9} {:<40} {:>7} {:<24}  allowed",
        "id", "kind", "state", "subject", "trigger", "created"
    );
    for t in tickets {
        println!(
            "{:>5} {:<18} {:<9} {:<40} {:>7} {:<24}  {}",
            t.id,
            t.kind,
            t.state,
            t.subject,
            t.trigger_id.map(|i| i.to_string()).unwrap_or_default(),
            rfc3339(from_millis(t.created_at)),
            match &t.proposed_action {
                Some(action) if t.state == "open" => format!(
                    "awaiting approval: {action} (proposed by {})",
                    t.proposed_by.as_deref().unwrap_or("?")
                ),
                _ => t.allowed().join(","),
            }
        );
    }
}

pub async fn effects(host: &Host, cmd: EffectsCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        EffectsCmd::List { limit } => effects_table(&host.store.effects_list(limit).await?),
        EffectsCmd::Recover { limit } => {
            paddock::model::bounds::RECOVER_LIMIT
                .check(limit)
                .map_err(|e| anyhow::anyhow!("--{e}"))?;
            print_recovered(&operator::recover(&host.store, actor, limit).await?)
        }
        EffectsCmd::Compensate {
            original,
            job,
            key,
            action,
            payload,
            reason,
        } => {
            if reason.trim().is_empty() {
                bail!("an operator's compensation needs --reason");
            }
            let c = Compensation {
                original,
                job,
                key,
                action,
                payload,
                reason,
            };
            let done = operator::compensate(&host.store, actor, &c)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            print_compensated(&c, &done);
        }
    }
    Ok(())
}

/// What `effects recover` settled.
pub fn print_recovered(report: &RecoveryReport) {
    println!(
        "scanned {}: {} succeeded, {} failed, {} not found (retryable), {} ticketed, {} undecided",
        report.scanned,
        report.succeeded,
        report.failed,
        report.not_found,
        report.tickets,
        report.undecided
    );
}

/// The trigger that performs `effects compensate`.
pub fn print_compensated(c: &Compensation, done: &Compensated) {
    println!(
        "compensation of '{}' recorded as trigger {} (key '{}'); \
         a runner (`paddock serve`) performs it",
        c.original, done.trigger, c.key
    );
}

pub async fn exceptions(host: &Host, cmd: ExceptionsCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        ExceptionsCmd::List { all } => {
            let tickets = host
                .store
                .exceptions_list(if all { None } else { Some("open") })
                .await?;
            tickets_table(&tickets);
        }
        ExceptionsCmd::Show { id } => {
            let t = host.store.exception_get(id).await?;
            let effect = match (&t.tenant, &t.effect_key) {
                (Some(tenant), Some(key)) => host.store.effect_get(tenant, key).await?,
                _ => None,
            };
            print_ticket(&t, effect)?;
        }
        ExceptionsCmd::Resolve { id, action, reason } => {
            let t = host
                .store
                .exception_resolve(id, &action, actor, &reason)
                .await?;
            print_resolution(&t);
        }
        ExceptionsCmd::Approve { id, reason } => {
            let local = super::local::approvals()?;
            print_resolution(
                &host
                    .store
                    .exception_approve_with(id, actor, &reason, local)
                    .await?,
            );
        }
        ExceptionsCmd::Reject { id, reason } => {
            print_rejected(&host.store.exception_reject(id, actor, &reason).await?);
        }
    }
    Ok(())
}

/// `exceptions show`: a ticket with its evidence, and its effect as it is
/// now, from the database or `--server`.
pub fn print_ticket(t: &ExceptionRecord, effect: Option<EffectRecord>) -> anyhow::Result<()> {
    println!("exception {} ({}) — {}", t.id, t.kind, t.state);
    println!("subject:  {}", t.subject);
    if let Some(key) = &t.effect_key {
        println!("effect:   {0}", key);
        if let Some(e) = effect {
            println!(
                "          now {} (sends {}, token {}, resolved by {})",
                e.state,
                e.sends,
                e.fencing_token,
                e.resolved_by.unwrap_or_else(|| "-".into())
            );
        }
    }
    println!("created:  {}", rfc3339(from_millis(t.created_at)));
    println!("allowed:  {}", t.allowed().join(", "));
    if let (Some(action), "open") = (&t.proposed_action, t.state.as_str()) {
        println!(
            "proposed: {} by {} at {} — {} (awaiting a second person's approval)",
            action,
            t.proposed_by.as_deref().unwrap_or("?"),
            t.proposed_at
                .map(|at| rfc3339(from_millis(at)))
                .unwrap_or_default(),
            t.proposed_reason.as_deref().unwrap_or("")
        );
    }
    if t.state == "resolved" {
        println!(
            "resolved: {} by {} at {} — {}",
            t.resolution.as_deref().unwrap_or("?"),
            t.resolved_by.as_deref().unwrap_or("?"),
            t.resolved_at
                .map(|at| rfc3339(from_millis(at)))
                .unwrap_or_default(),
            t.reason.as_deref().unwrap_or("")
        );
        println!(
            "digests:  before {} after {}",
            t.before_digest.as_deref().unwrap_or("-"),
            t.after_digest.as_deref().unwrap_or("-")
        );
    }
    let evidence: serde_json::Value = serde_json::from_str(&t.evidence)?;
    println!("evidence:");
    super::print::json(&evidence)?;
    Ok(())
}

pub fn print_rejected(t: &ExceptionRecord) {
    println!(
        "exception {}: proposal withdrawn; the ticket stays open",
        t.id
    );
}

/// One line on what a resolve or an approval did: resolved, or proposed
/// and awaiting a second person.
pub fn print_resolution(t: &ExceptionRecord) {
    match (&t.proposed_action, t.state.as_str()) {
        (Some(action), "open") => println!(
            "exception {}: '{}' proposed by {}; high-risk, so it runs when a different person \
             approves it with their own token: paddock --server URL --token T exceptions \
             approve {} --reason \"...\"",
            t.id,
            action,
            t.proposed_by.as_deref().unwrap_or("?"),
            t.id
        ),
        _ => println!(
            "exception {} resolved: {} by {} (effect digest {} -> {})",
            t.id,
            t.resolution.as_deref().unwrap_or("?"),
            t.resolved_by.as_deref().unwrap_or("?"),
            t.before_digest.as_deref().unwrap_or("-"),
            t.after_digest.as_deref().unwrap_or("-")
        ),
    }
}
