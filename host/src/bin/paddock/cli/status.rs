//! `paddock status`: the on-call view, one line per resource group —
//! running / limit, backlog, oldest due age, arrival and success rates
//! over a window, the drain ETA or "not recovering", open tickets. The
//! terms are defined in `paddock::model::backlog`; what each count reads in
//! `paddock::store` (`status_report`).

use anyhow::{Context, bail};
use clap::Args;
use paddock::model::backlog::{self, Eta};
use paddock::model::secret::redacted_url;
use paddock::model::time::{from_millis, rfc3339};
use paddock::store::prelude::*;
use paddock::store::{GroupStatus, StatusQuery, StatusReport, Store};

#[derive(Args)]
pub struct StatusArgs {
    /// Rates over the last DURATION (1s to 24h), on the database clock.
    #[arg(long, default_value = "5m", conflicts_with = "since")]
    window: String,
    /// Rates since this instant instead (RFC 3339, e.g. when a fix went
    /// out: 2026-12-04T12:03:00Z); at most 24h ago.
    #[arg(long)]
    since: Option<String>,
    /// Only this tenant's triggers and the tickets about them.
    #[arg(long)]
    tenant: Option<String>,
    /// Only this resource group.
    #[arg(long)]
    group: Option<String>,
    /// text or json.
    #[arg(long, default_value = "text")]
    format: String,
}

impl StatusArgs {
    pub fn format(&self) -> &str {
        &self.format
    }
}

/// `paddock status ...`
pub async fn run(args: StatusArgs, database_url: &str) -> anyhow::Result<()> {
    if !matches!(args.format.as_str(), "text" | "json") {
        bail!("--format must be text or json, not '{}'", args.format);
    }
    let store = Store::open(database_url)
        .await
        .with_context(|| format!("opening {}", redacted_url(database_url)))?;
    let query = query(&store, &args).await?;
    print(&store.status_report(&query).await?, &args.format)
}

/// The report as `--format` says, the same from the database and from
/// `--server` (`GET /v1/status`).
pub fn print(report: &StatusReport, format: &str) -> anyhow::Result<()> {
    match format {
        "json" => super::print::json(&json(report))?,
        _ => print_text(report),
    }
    Ok(())
}

/// `--server`: the flags as `GET /v1/status`'s query (the server checks
/// them).
pub fn remote_query(args: &StatusArgs) -> anyhow::Result<Vec<(&'static str, String)>> {
    if !matches!(args.format.as_str(), "text" | "json") {
        bail!("--format must be text or json, not '{}'", args.format);
    }
    let mut query = Vec::new();
    match &args.since {
        Some(since) => query.push(("since", since.clone())),
        None => query.push(("window", args.window.clone())),
    }
    if let Some(tenant) = &args.tenant {
        query.push(("tenant", tenant.clone()));
    }
    if let Some(group) = &args.group {
        query.push(("group", group.clone()));
    }
    Ok(query)
}

/// The flags as a query, each checked: the window, the tenant and the
/// group must make sense before anything is counted.
async fn query(store: &Store, args: &StatusArgs) -> anyhow::Result<StatusQuery> {
    let (window_ms, now) = match &args.since {
        None => {
            let ms = paddock::model::units::parse_millis("--window", &args.window)
                .map_err(anyhow::Error::msg)?;
            (ms, None)
        }
        Some(text) => {
            let since = chrono::DateTime::parse_from_rfc3339(text).map_err(|_| {
                anyhow::anyhow!(
                    "--since: '{text}' is not an RFC 3339 instant (e.g. 2026-12-04T12:03:00Z)"
                )
            })?;
            let now = store.now_ms().await?;
            let since = since.timestamp_millis();
            if since >= now {
                bail!(
                    "--since: '{text}' is not in the past (the database clock says {})",
                    rfc3339(from_millis(now))
                );
            }
            (now - since, Some(now))
        }
    };
    // A window given by its length is held to 1s–24h (shorter is noise);
    // one given by its start only to 24h: any instant in the past is a
    // fair question ("since the fix went out a moment ago").
    if args.since.is_none() || window_ms > backlog::MAX_WINDOW_MS {
        let field = if args.since.is_some() {
            "--since"
        } else {
            "--window"
        };
        backlog::check_window(field, window_ms).map_err(anyhow::Error::msg)?;
    }
    if let Some(group) = &args.group
        && store.group_get(group).await?.is_none()
    {
        bail!("--group: no resource group named '{group}' (see `paddock group list`)");
    }
    if let Some(tenant) = &args.tenant
        && !store.jobs_list().await?.iter().any(|j| &j.tenant == tenant)
    {
        bail!("--tenant: no job belongs to tenant '{tenant}' (see `paddock job list`)");
    }
    Ok(StatusQuery {
        window_ms,
        now,
        tenant: args.tenant.clone(),
        group: args.group.clone(),
    })
}

/// The report with each group's rates and ETA, for machines.
fn json(report: &StatusReport) -> serde_json::Value {
    let groups: Vec<_> = report
        .groups
        .iter()
        .map(|g| {
            let flow = g.flow(report.window_ms);
            let mut line = serde_json::to_value(g).expect("a status line serializes");
            line["arrival_per_s"] = flow.arrival_per_s().into();
            line["success_per_s"] = flow.success_per_s().into();
            line["net_per_s"] = flow.net_per_s().into();
            line["eta"] = serde_json::to_value(flow.eta()).expect("an ETA serializes");
            line
        })
        .collect();
    serde_json::json!({
        "at": rfc3339(from_millis(report.now)),
        "now_ms": report.now,
        "window_ms": report.window_ms,
        "since": rfc3339(from_millis(report.now - report.window_ms)),
        "tenant": report.tenant,
        "groups": groups,
        "unattributed_tickets": report.unattributed_tickets,
    })
}

/// One header, one line per group, one line saying what the words mean.
fn print_text(report: &StatusReport) {
    println!(
        "paddock status at {}; rates over the last {} (since {}){}",
        rfc3339(from_millis(report.now)),
        human(report.window_ms),
        rfc3339(from_millis(report.now - report.window_ms)),
        report
            .tenant
            .as_ref()
            .map(|t| format!(", tenant {t} only"))
            .unwrap_or_default()
    );
    println!(
        "{:<16} {:>13} {:>11} {:>10} {:>10} {:>10}  {:<32} {:>7} {:>7} {:>7}  {}",
        "GROUP",
        "RUNNING/LIMIT",
        "BACKLOG",
        "OLDEST DUE",
        "ARRIVING",
        "SUCCEEDING",
        "DRAIN ETA",
        "TICKETS",
        "PAUSED",
        "MANUAL",
        "TAKEOVERS"
    );
    for g in &report.groups {
        println!("{}", line(g, report.window_ms));
    }
    if report.unattributed_tickets > 0 {
        println!(
            "open tickets tied to no trigger: {}",
            report.unattributed_tickets
        );
    }
    println!(
        "backlog: due, waiting for a claim (recovery lane in brackets); oldest due: the longest-waiting; \
         arriving: became due; succeeding: reached succeeded; ETA = backlog / (succeeding − arriving); \
         paused: held by a closed gate (`paddock gates`), not backlog; \
         manual: waiting for a person (an approval, or a ticket's answer: `paddock exceptions list`), not backlog; \
         takeovers: triggers taken over from a holder that was gone, with how long they stood still (from its lease's end, or its session's)"
    );
}

/// A group's line of the text report.
fn line(g: &GroupStatus, window_ms: i64) -> String {
    let flow = g.flow(window_ms);
    let eta = match flow.eta() {
        Eta::NoBacklog => "-".to_string(),
        Eta::Drains { seconds } => format!(
            "{} (net +{})",
            human((seconds * 1e3) as i64),
            rate(flow.net_per_s())
        ),
        Eta::NotRecovering => format!("not recovering (net {})", rate(flow.net_per_s())),
    };
    let backlog = if g.backlog_recovery > 0 {
        format!(
            "{} [{}]",
            thousands(g.backlog),
            thousands(g.backlog_recovery)
        )
    } else {
        thousands(g.backlog)
    };
    let running = format!("{}/{}", g.running, g.limit);
    let takeovers = match (g.takeovers.p50_ms, g.takeovers.p99_ms) {
        (Some(p50), Some(p99)) => format!(
            "{} (p50 {}, p99 {})",
            g.takeovers.count,
            human(p50),
            human(p99)
        ),
        _ => "-".to_string(),
    };
    format!(
        "{:<16} {:>13} {:>11} {:>10} {:>10} {:>10}  {:<32} {:>7} {:>7} {:>7}  {}",
        g.group,
        running,
        backlog,
        g.oldest_due_ms.map_or("-".to_string(), human),
        rate(flow.arrival_per_s()),
        rate(flow.success_per_s()),
        eta,
        g.open_tickets,
        g.paused,
        g.manual,
        takeovers
    )
}

/// Events per second, three significant digits (`600/s`, `66.7/s`,
/// `0.0167/s`).
fn rate(per_s: f64) -> String {
    if per_s == 0.0 {
        return "0/s".into();
    }
    let digits = (2 - per_s.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{per_s:.digits$}/s")
}

/// A duration for people: `45s`, `20m 0s`, `3h 5m`, `2d 4h`.
fn human(ms: i64) -> String {
    let s = ms / 1_000;
    match s {
        s if s < 60 && ms < 10_000 && ms % 1_000 != 0 => format!("{:.1}s", ms as f64 / 1e3),
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m {}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h {}m", s / 3_600, s % 3_600 / 60),
        s => format!("{}d {}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// `240000` → `240,000`.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_at_a_glance() {
        assert_eq!(thousands(240_000), "240,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(rate(600.0), "600/s");
        assert_eq!(rate(66.666), "66.7/s");
        assert_eq!(rate(30.0 / 3_600.0), "0.00833/s");
        assert_eq!(rate(-200.0), "-200/s");
        assert_eq!(human(1_200_000), "20m 0s");
        assert_eq!(human(45_000), "45s");
        assert_eq!(human(2_500), "2.5s");
        assert_eq!(human(3 * 3_600_000 + 5 * 60_000), "3h 5m");
    }

    #[test]
    fn the_scenario_prints_its_eta_and_net_rate() {
        let g = GroupStatus {
            group: "orders".into(),
            running: 40,
            limit: 40,
            limit_bound_by: "memory".into(),
            backlog: 240_000,
            backlog_recovery: 0,
            oldest_due_ms: Some(1_200_000),
            arrivals: 180_000,
            successes: 240_000,
            open_tickets: 2,
            paused: 3,
            manual: 1,
            takeovers: paddock::model::takeover::Takeovers::of(&[120, 480]),
        };
        let text = line(&g, 300_000);
        assert!(text.contains("40/40"), "{text}");
        assert!(text.contains("240,000"), "{text}");
        assert!(text.contains("600/s") && text.contains("800/s"), "{text}");
        assert!(text.contains("20m 0s (net +200/s)"), "{text}");
        assert!(text.contains("2 (p50 0.1s, p99 0.5s)"), "{text}");
        let stuck = line(
            &GroupStatus {
                successes: 120_000,
                ..g
            },
            300_000,
        );
        assert!(stuck.contains("not recovering (net -200/s)"), "{stuck}");
    }
}
