//! `paddock pause|resume|cancel SCOPE --reason "..."` and `paddock gates`:
//! gates at five scopes (`--job J`, `--type T`, `--tenant T`, `--group G`,
//! `--global`), each change audited under `local:USER` (see
//! `paddock::model::gates`). Each command prints what it changed.

use super::Host;
use anyhow::bail;
use clap::Args;
use paddock::model::gates::{CancelReport, GateScope, PauseReport, ResumeReport};
use paddock::model::time::{from_millis, rfc3339};

/// Exactly one scope, and why.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).multiple(false)))]
pub struct ScopeArgs {
    /// One job: JOB, or TENANT/JOB when several tenants have a job JOB.
    #[arg(long, group = "scope")]
    job: Option<String>,
    /// Every job whose plan has this `type` label.
    #[arg(long = "type", group = "scope")]
    job_type: Option<String>,
    /// Every job of a tenant.
    #[arg(long, group = "scope")]
    tenant: Option<String>,
    /// Every job of a resource group.
    #[arg(long, group = "scope")]
    group: Option<String>,
    /// Everything (lease cleanup, effect recovery and the audit log keep
    /// running).
    #[arg(long, group = "scope")]
    global: bool,
    /// Why (recorded with the gate and in the audit log).
    #[arg(long)]
    pub reason: String,
}

impl ScopeArgs {
    pub fn scope(&self) -> anyhow::Result<GateScope> {
        let (kind, value) = match (&self.job, &self.job_type, &self.tenant, &self.group) {
            (Some(j), ..) => ("job", j.as_str()),
            (_, Some(t), ..) => ("type", t.as_str()),
            (_, _, Some(t), _) => ("tenant", t.as_str()),
            (.., Some(g)) => ("group", g.as_str()),
            _ if self.global => ("global", ""),
            _ => bail!("name a scope: --job, --type, --tenant, --group or --global"),
        };
        GateScope::parse(kind, value).map_err(|e| anyhow::anyhow!("--{kind}: {e}"))
    }
}

#[derive(Args)]
pub struct GatesArgs {
    /// Reopened gates too (the history), newest first.
    #[arg(long)]
    pub history: bool,
}

/// `paddock pause ...`
pub async fn pause(host: &Host, args: ScopeArgs, actor: &str) -> anyhow::Result<()> {
    let scope = args.scope()?;
    let r = host.store.gate_pause(&scope, actor, &args.reason).await?;
    print_paused(&scope, &r);
    Ok(())
}

/// What a pause changed (locally or through `--server`).
pub fn print_paused(scope: &GateScope, r: &PauseReport) {
    println!(
        "paused {2}: {} running asked to pause at their next safe point, {} queued paused",
        r.running_asked, r.queued_paused, scope
    );
}

/// `paddock resume ...` (the global gate's second resume: as
/// PADDOCK_LOCAL_APPROVALS says).
pub async fn resume(host: &Host, args: ScopeArgs, actor: &str) -> anyhow::Result<()> {
    let scope = args.scope()?;
    let local = super::local::approvals()?;
    let r = host
        .store
        .gate_resume_with(&scope, actor, &args.reason, local)
        .await?;
    print_resumed(&scope, &r);
    Ok(())
}

/// What a resume changed, or that it waits for a second person.
pub fn print_resumed(scope: &GateScope, r: &ResumeReport) {
    if let Some(by) = &r.proposed_by {
        println!(
            "resume of {0} proposed by {1}; nothing changed: it reopens when a different \
             person resumes it with their own token: paddock --server URL --token T resume \
             --global --reason \"...\"",
            scope, by
        );
        return;
    }
    println!(
        "resumed {5}: {} paused due again, {} late fires parked and {} skipped by their \
         misfire policy, {} running no longer asked to pause; {} still held by another gate",
        r.resumed, r.parked, r.skipped, r.running_unasked, r.still_held, scope
    );
}

/// `paddock cancel ...`
pub async fn cancel(host: &Host, args: ScopeArgs, actor: &str) -> anyhow::Result<()> {
    let scope = args.scope()?;
    let r = host.store.gate_cancel(&scope, actor, &args.reason).await?;
    print_cancelled(&scope, &r);
    Ok(())
}

/// What a cancel changed.
pub fn print_cancelled(scope: &GateScope, r: &CancelReport) {
    if r.cancelled == 0 && r.stop_requested == 0 {
        println!(
            "nothing to cancel in {1}: nothing was live ({} already finished; a cancel \
             never rewrites a finished trigger)",
            r.already_final, scope
        );
    } else {
        println!(
            "cancelled in {3}: {} not started or paused, now cancelled; {} running asked \
             to stop (each ends cancelled unless it succeeds first); {} already finished, left \
             as they are",
            r.cancelled, r.stop_requested, r.already_final, scope
        );
    }
}

/// `paddock gates`: the closed gates (with `--history`, reopened too).
pub async fn list(host: &Host, args: GatesArgs) -> anyhow::Result<()> {
    print_gates(&host.store.gates_list(args.history).await?);
    Ok(())
}

/// The gates, one line each.
pub fn print_gates(gates: &[paddock::store::GateRecord]) {
    if gates.is_empty() {
        println!("no closed gates");
    }
    let at = |ms: i64| rfc3339(from_millis(ms));
    for g in gates {
        print!(
            "{:<28} closed {} by {}: {}",
            g.scope().to_string(),
            at(g.closed_at),
            g.closed_by,
            g.reason
        );
        match (g.reopened_at, &g.reopened_by) {
            (Some(when), Some(by)) => println!(
                "; reopened {} by {}: {}",
                at(when),
                by,
                g.reopen_reason.as_deref().unwrap_or("")
            ),
            _ => match &g.resume_proposed_by {
                Some(by) => println!(
                    "; resume proposed by {0}: {1} (awaiting a second person)",
                    by,
                    g.resume_proposed_reason.as_deref().unwrap_or("")
                ),
                None => println!(),
            },
        }
    }
}
