//! Human-readable output for the CLI.

use paddock::api::views::{self, TriggerRow, TriggerView};
use paddock::lease::DrainReport;
use paddock::model::ApplyOutcome;
use paddock::model::CapabilityManifest;
use paddock::model::ResourceGroup;
use paddock::model::group::{Observed, TenantQuota, effective_concurrency};
use paddock::model::shares::recovery_cap;
use paddock::model::time::{from_millis, rfc3339};
use paddock::store::prelude::*;
use paddock::store::{
    ComponentRecord, GroupLoad, JobRecord, PlanVersionRecord, Store, TriggerRecord,
};

pub fn manifest(m: &CapabilityManifest) {
    println!("imports ({}):", m.imports.len());
    for i in &m.imports {
        println!("  {:<40} {:<10} {}", i.name, i.kind, i.functions.join(", "));
    }
    println!("exports ({}):", m.exports.len());
    for e in &m.exports {
        println!("  {:<40} {:<10} {}", e.name, e.kind, e.functions.join(", "));
    }
}

pub fn groups(groups: &[ResourceGroup]) {
    println!(
        "{:<16} {:>14} {:>12} {:>10} {:>6}  grants",
        "group", "fuel", "memory", "deadline", "conc"
    );
    for g in groups {
        println!(
            "{:<16} {:>14} {:>12} {:>9}ms {:>6}  {}",
            g.name,
            g.fuel_per_attempt,
            human_bytes(g.memory_bytes),
            g.deadline_ms,
            g.max_concurrency,
            g.grants
        );
    }
}

/// `paddock group show`: each input of the effective concurrency, the
/// result and the binding input — as claims enforce it (stored), and as it
/// would be in a process with this host's instance pool.
pub fn group_show(group: &ResourceGroup, observed: &Observed, load: &GroupLoad, pool: i64) {
    println!("group {}", group.name);
    println!(
        "  per attempt: fuel {}, memory {}, deadline {} ms",
        group.fuel_per_attempt,
        human_bytes(group.memory_bytes),
        group.deadline_ms
    );
    let grants = group.grant_list();
    println!(
        "  grants: {}",
        if grants.is_empty() {
            "nothing (WASI linked deny-by-default; no connector)".to_string()
        } else {
            grants.join(", ")
        }
    );
    println!(
        "  size caps: {}",
        group
            .caps
            .named()
            .iter()
            .map(|(name, cap)| format!("{name} {}", human_bytes(*cap as i64)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let service = match (observed.samples, observed.service_time_ms) {
        (n, Some(ms)) => format!(
            "{n} attempt(s) in the last minute, mean {:.1} s",
            ms / 1000.0
        ),
        (n, None) => format!("{n} attempt(s) in the last minute"),
    };
    println!(
        "  observed: {1}{}",
        match observed.peak_memory_bytes {
            Some(peak) => format!(", peak memory {}", human_bytes(peak)),
            None => String::new(),
        },
        service
    );
    let capacity = effective_concurrency(group, observed, Some(pool));
    println!("  effective concurrency inputs:");
    for limit in &capacity.limits {
        let mark = if limit.input == capacity.binding {
            "  <- binds"
        } else {
            ""
        };
        println!(
            "    {:<32} {:>8}   {}{3}",
            limit.input, limit.limit, limit.detail, mark
        );
    }
    println!(
        "  effective concurrency: {} (bound by {})",
        capacity.effective, capacity.binding
    );
    println!(
        "  enforced by claims now: {} (bound by {}; the instance pool caps each process on its own)",
        load.effective_concurrency, load.effective_binding
    );
    println!("  running now: {}", load.running);
}

pub fn tenants(tenants: &[TenantQuota]) {
    println!(
        "{:<24} {:>6} {:>14} {:>16} {:>16}",
        "tenant", "weight", "max in flight", "triggers/min", "fuel/hour"
    );
    let or_dash = |n: Option<i64>| n.map_or_else(|| "-".into(), |n| n.to_string());
    for t in tenants {
        println!(
            "{:<24} {:>6} {:>14} {:>16} {:>16}",
            t.tenant,
            t.weight,
            or_dash(t.max_in_flight),
            or_dash(t.triggers_per_minute),
            or_dash(t.fuel_per_hour)
        );
    }
}

/// `paddock group show`, continued: the group's shares, its recovery lane
/// and ramp, and its high-water hold.
pub fn group_shares(
    group: &ResourceGroup,
    load: &GroupLoad,
    ramp: &paddock::store::RampNow,
    held: Option<&str>,
    holds: i64,
) {
    let shares = &group.shares;
    let effective = load.effective_concurrency;
    println!(
        "  shares: minimum {} slot(s) before other groups' extra; maximum {2} (the \
         effective concurrency, never above the configured max {})",
        shares.min_share, group.max_concurrency, effective
    );
    println!(
        "  recovery lane (catch-up, backfill, retries): ramp at {}% ({} slots), at most {}% \
         ({} slots) while fresh work waits; ramp steps every {} s{}",
        ramp.pct,
        recovery_cap(effective, 100, ramp.pct, false),
        shares.recovery_share_pct,
        recovery_cap(effective, shares.recovery_share_pct, ramp.pct, true),
        shares.ramp_every_ms / 1000,
        if ramp.inputs.recovery_work {
            format!(
                "; recovery work waiting; last minute {} of {} attempts failed",
                ramp.inputs.failures, ramp.inputs.samples
            )
        } else {
            "; no recovery work".into()
        }
    );
    match held {
        Some(why) => println!("  claims: HELD ({0}); held {1} time(s) so far", why, holds),
        None => println!("  claims: open; held {0} time(s) so far", holds),
    }
}

pub fn human_bytes(b: i64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// Machine output: `value` as pretty JSON, its unsafe characters written
/// as JSON escapes ([`paddock::model::text::json_safe`]) — the one place
/// this binary prints past the escaping macros (`main.rs`), because JSON
/// keeps its own line breaks.
pub fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    ::std::println!("{}", paddock::model::text::json_safe(&text));
    Ok(())
}

/// A result as text: UTF-8 if it is, else its length.
pub fn output_text(result: &Option<Vec<u8>>, max: usize) -> String {
    match result {
        None => String::new(),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(s) if s.len() > max => format!("{}…", &s[..s.floor_char_boundary(max)]),
            Ok(s) => s.to_string(),
            Err(_) => format!("<{} bytes>", bytes.len()),
        },
    }
}

/// At most `max` bytes of `text`, cut on a character, with how much was
/// left out: the caps bound what is stored, this bounds what a terminal
/// gets.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let cut = text.floor_char_boundary(max);
    format!("{}… [{} more bytes]", &text[..cut], text.len() - cut)
}

/// What `trigger show` prints of an error message and of a log.
const SHOWN_ERROR: usize = 4 << 10;
const SHOWN_LOG: usize = 64 << 10;

/// One line per trigger with its last attempt's figures.
pub async fn trigger_table(triggers: &[TriggerRecord], store: &Store) -> anyhow::Result<()> {
    trigger_rows(&views::trigger_rows(store, triggers.to_vec()).await?);
    Ok(())
}

/// [`trigger_table`] of rows read already (locally or from `--server`).
pub fn trigger_rows(rows: &[TriggerRow]) {
    println!(
        "{:>4} {:<10} {:<11} {:>3} {:<18} {:>12} {:>10} {:>8}  result / error",
        "id", "job", "state", "att", "error class", "fuel", "peak mem", "wall"
    );
    for row in rows {
        let t = &row.trigger;
        let last = row.last_attempt.as_ref();
        let detail = match (&t.result, &t.error_message) {
            (Some(_), _) => output_text(&t.result, 60),
            (None, Some(m)) => m.chars().take(60).collect(),
            _ => row.waiting.clone().unwrap_or_default(),
        };
        println!(
            "{:>4} {:<10} {:<11} {:>3} {:<18} {:>12} {:>10} {:>6}ms  {}",
            t.id,
            t.job_id,
            t.state,
            t.attempts,
            t.error_class.clone().unwrap_or_default(),
            last.and_then(|a| a.fuel_used)
                .map(|f| f.to_string())
                .unwrap_or_default(),
            last.and_then(|a| a.peak_memory_bytes)
                .map(human_bytes)
                .unwrap_or_default(),
            last.and_then(|a| a.wall_ms).unwrap_or_default(),
            detail
        );
    }
}

/// A trigger with every attempt.
pub async fn trigger_detail(store: &Store, id: i64) -> anyhow::Result<()> {
    let view = views::trigger_view(store, store.trigger_get(id).await?).await?;
    trigger_view(&view);
    Ok(())
}

/// [`trigger_detail`] of a view read already (locally or from `--server`).
pub fn trigger_view(view: &TriggerView) {
    let t = &view.trigger;
    println!("trigger {}  {}", t.id, t.plan_key);
    println!(
        "  job           {} v{} (tenant {}, group {})",
        t.job_id, t.plan_version, t.tenant, t.resource_group
    );
    println!("  origin        {}", t.origin);
    println!("  scheduled at  {}", rfc3339(from_millis(t.scheduled_at)));
    println!("  state         {}", t.state);
    if let Some(reason) = &view.waiting {
        println!("  waiting       {0}", reason);
    }
    println!("  fencing token {}", t.fencing_token);
    if let Some(c) = &t.error_class {
        println!("  error class   {0}", c);
    }
    if let Some(m) = &t.error_message {
        println!("  error         {}", bounded(m, SHOWN_ERROR));
    }
    if t.result.is_some() {
        println!("  output        {}", output_text(&t.result, 2000));
    }
    for a in &view.attempts {
        println!(
            "  attempt {} token {} by {}: {} {}",
            a.attempt_no,
            a.fencing_token,
            a.runner_id,
            a.outcome.clone().unwrap_or_else(|| "running".into()),
            a.error_class.clone().unwrap_or_default()
        );
        println!(
            "    fuel used {}  peak memory {}  wall {} ms",
            a.fuel_used.unwrap_or_default(),
            human_bytes(a.peak_memory_bytes.unwrap_or_default()),
            a.wall_ms.unwrap_or_default()
        );
        if let Some(m) = &a.error_message {
            println!("    error: {}", bounded(m, SHOWN_ERROR));
        }
        if let Some(log) = a.log.as_deref().filter(|l| !l.is_empty()) {
            for line in bounded(log, SHOWN_LOG).lines() {
                println!("    | {0}", line);
            }
        }
    }
}

/// `component push`'s answer.
pub fn pushed(created: bool, digest: &str, manifest: &CapabilityManifest) {
    println!(
        "{} sha256:{1}",
        if created {
            "stored"
        } else {
            "unchanged (already stored)"
        },
        digest
    );
    self::manifest(manifest);
}

/// `component list`.
pub fn components(components: &[ComponentRecord]) {
    for c in components {
        println!(
            "sha256:{}  {:>9} bytes  {}",
            c.digest, c.size_bytes, c.pushed_by
        );
    }
}

/// `job apply`'s answer.
pub fn applied(job: &str, outcome: &ApplyOutcome) {
    match outcome {
        ApplyOutcome::Created { version, digest } => {
            println!(
                "job {0}: created version {1} (plan digest {2})",
                job, version, digest
            )
        }
        ApplyOutcome::Unchanged { version, digest } => println!(
            "job {0}: unchanged, version {1} already has this content (plan digest {2})",
            job, version, digest
        ),
    }
}

/// `job list`.
pub fn jobs(jobs: &[JobRecord]) {
    for j in jobs {
        println!(
            "{:<32} tenant={:<16} latest=v{}",
            j.job_id, j.tenant, j.latest_version
        );
    }
}

/// `job show`.
pub fn job_versions(versions: &[PlanVersionRecord]) {
    for v in versions {
        println!(
            "v{}  digest {}  component sha256:{}  group {}",
            v.version, v.digest, v.component_digest, v.resource_group
        );
        println!("    {}", v.spec);
    }
}

/// `trigger run`'s first line.
pub fn run_created(trigger: &TriggerRecord, created: bool) {
    println!(
        "trigger {} {} ({})",
        trigger.id,
        if created {
            "created"
        } else {
            "already existed"
        },
        trigger.plan_key
    );
}

/// `serve`'s drain summary and its unfinished list, one trigger a line.
pub fn drain_report(drained: &DrainReport) {
    println!(
        "drained in {:.1}s: {} attempt(s) ended, {} released from their checkpoint{}{}; {} unfinished",
        drained.took.as_secs_f64(),
        drained.ended.len(),
        drained.released(),
        if drained.paused {
            ", pause requested"
        } else {
            ""
        },
        if drained.interrupted {
            ", guests interrupted"
        } else {
            ""
        },
        drained.unfinished.len()
    );
    for u in &drained.unfinished {
        println!("{0}", u);
    }
}
