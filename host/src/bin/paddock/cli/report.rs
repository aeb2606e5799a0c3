//! `paddock report incident|cost|conservation` (text or `--format json`)
//! and `paddock price set|list`. The definitions are in
//! `paddock::model::report`; what each report reads in `paddock::store`
//! (`incident_facts`, `cost_usage`, `conservation`).

use super::Host;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use paddock::model::report::{self, Books, Check, Cost, Incident, PRICE_NAMES, Prices};
use paddock::model::secret::redacted_url;
use paddock::model::time::{from_millis, rfc3339};
use paddock::store::prelude::*;
use paddock::store::{CostBy, ReportQuery, Store};
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum ReportCmd {
    /// An incident window: affected triggers split into completed by the
    /// new token, stale writes refused, unknown outcomes (and how they
    /// resolved), params conflicts; sent to people; auto-closure rate.
    Incident {
        #[command(flatten)]
        window: Window,
        #[command(flatten)]
        filter: Filter,
    },
    /// Cost per correct result over a window, per job, version, group or
    /// tenant, at the unit prices of `paddock price set`.
    Cost {
        #[command(flatten)]
        window: Window,
        /// The window's length instead of --since (e.g. 1h), ending now.
        #[arg(long, conflicts_with = "since")]
        last: Option<String>,
        /// job, version, group or tenant.
        #[arg(long, default_value = "job")]
        by: String,
        #[command(flatten)]
        filter: Filter,
    },
    /// Conservation checks: every trigger in one state, attempts vs
    /// triggers, effects vs idempotency records, open leases vs running
    /// attempts. Exits 1 when a difference is found.
    Conservation {
        /// text or json.
        #[arg(long, default_value = "text")]
        format: String,
    },
}

#[derive(Args)]
pub struct Window {
    /// The window's start: an RFC 3339 instant (2026-12-04T12:00:00Z) or a
    /// duration before now (90m).
    #[arg(long)]
    since: Option<String>,
    /// The window's end (same forms; default: now, on the database clock).
    #[arg(long)]
    until: Option<String>,
}

#[derive(Args)]
pub struct Filter {
    /// Only this tenant's triggers.
    #[arg(long)]
    tenant: Option<String>,
    /// Only this resource group's triggers.
    #[arg(long)]
    group: Option<String>,
    /// text or json.
    #[arg(long, default_value = "text")]
    format: String,
}

impl Filter {
    pub fn format(&self) -> &str {
        &self.format
    }
}

#[derive(Subcommand)]
pub enum PriceCmd {
    /// Set unit prices (audited as `price.set`); units not given keep
    /// theirs. GB are 10^9 bytes.
    Set(PriceArgs),
    /// The unit prices in force.
    List,
}

#[derive(Args)]
pub struct PriceArgs {
    /// Guest fuel per CPU second (the conversion; default 1e9).
    #[arg(long)]
    fuel_per_cpu_second: Option<f64>,
    /// Per CPU second.
    #[arg(long)]
    cpu_second: Option<f64>,
    /// Per GB-second of peak memory × wall time.
    #[arg(long)]
    gb_second: Option<f64>,
    /// Per GB stored (results, logs, effect responses).
    #[arg(long)]
    storage_gb: Option<f64>,
    /// Per downstream call (an effect's send).
    #[arg(long)]
    downstream_call: Option<f64>,
    /// Per retry (an attempt after a trigger's first).
    #[arg(long)]
    retry: Option<f64>,
    /// Per compensating effect.
    #[arg(long)]
    compensation: Option<f64>,
    /// Per exception ticket resolved by a person.
    #[arg(long)]
    manual_touch: Option<f64>,
}

/// `paddock report ...`: read only, no sandbox.
pub async fn run(cmd: ReportCmd, database_url: &str) -> anyhow::Result<ExitCode> {
    let store = Store::open(database_url)
        .await
        .with_context(|| format!("opening {}", redacted_url(database_url)))?;
    match cmd {
        ReportCmd::Incident { window, filter } => {
            format_ok(&filter.format)?;
            let q = query(&store, &window, None, &filter).await?;
            let incident = Incident::of(&store.incident_facts(&q).await?);
            print_incident_report(&q, &incident, &filter.format)?;
        }
        ReportCmd::Cost {
            window,
            last,
            by,
            filter,
        } => {
            format_ok(&filter.format)?;
            let by: CostBy = by.parse().map_err(anyhow::Error::msg)?;
            let q = query(&store, &window, last.as_deref(), &filter).await?;
            let prices = store.prices().await?;
            let costs: Vec<Cost> = store
                .cost_usage(&q, by)
                .await?
                .iter()
                .map(|u| report::cost(u, &prices))
                .collect();
            print_cost_report(&q, &prices, &costs, &filter.format)?;
        }
        ReportCmd::Conservation { format } => {
            format_ok(&format)?;
            let books = store.books().await?;
            let checks = store.conservation().await?;
            return show_conservation(&books, &checks, &format);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `paddock price ...`
pub async fn price(host: &Host, cmd: PriceCmd, actor: &str) -> anyhow::Result<()> {
    let prices = match cmd {
        PriceCmd::Set(a) => {
            let given = [
                a.fuel_per_cpu_second,
                a.cpu_second,
                a.gb_second,
                a.storage_gb,
                a.downstream_call,
                a.retry,
                a.compensation,
                a.manual_touch,
            ];
            let changes: Vec<(String, f64)> = PRICE_NAMES
                .iter()
                .zip(given)
                .filter_map(|(name, value)| value.map(|v| (name.to_string(), v)))
                .collect();
            host.store.price_set(&changes, actor).await?
        }
        PriceCmd::List => host.store.prices().await?,
    };
    print_prices(&prices)
}

/// The unit prices, from the database or `/v1/prices`.
pub fn print_prices(prices: &Prices) -> anyhow::Result<()> {
    let value = serde_json::to_value(prices)?;
    for name in PRICE_NAMES {
        println!("{:<20} {}", name.replace('_', "-"), value[name]);
    }
    Ok(())
}

/// `price set`'s flags by name (`PUT /v1/prices`' body).
pub fn price_changes(a: &PriceArgs) -> serde_json::Value {
    serde_json::json!({
        "fuel_per_cpu_second": a.fuel_per_cpu_second, "cpu_second": a.cpu_second,
        "gb_second": a.gb_second, "storage_gb": a.storage_gb,
        "downstream_call": a.downstream_call, "retry": a.retry,
        "compensation": a.compensation, "manual_touch": a.manual_touch,
    })
}

/// An incident report as `--format` says (from the database or
/// `GET /v1/reports/incident`).
pub fn print_incident_report(q: &ReportQuery, i: &Incident, format: &str) -> anyhow::Result<()> {
    match format {
        "json" => super::print::json(&incident_json(q, i))?,
        _ => print_incident(q, i),
    }
    Ok(())
}

/// A cost report as `--format` says (from the database or
/// `GET /v1/reports/cost`).
pub fn print_cost_report(
    q: &ReportQuery,
    prices: &Prices,
    costs: &[Cost],
    format: &str,
) -> anyhow::Result<()> {
    match format {
        "json" => super::print::json(&serde_json::json!({
            "since": rfc3339(from_millis(q.since)),
            "until": rfc3339(from_millis(q.until)),
            "tenant": q.tenant,
            "group": q.group,
            "prices": prices,
            "lines": costs,
        }))?,
        _ => print_costs(q, prices, costs),
    }
    Ok(())
}

/// A conservation report as read (from the database or a server): the
/// books, then the checks, in text or JSON; exit 1 when a check differs.
pub fn show_conservation(
    books: &Books,
    checks: &[Check],
    format: &str,
) -> anyhow::Result<ExitCode> {
    format_ok(format)?;
    let differences = report::differences(checks);
    match format {
        "json" => super::print::json(&serde_json::json!({
            "books": books,
            "checks": checks.iter().map(check_json).collect::<Vec<_>>(),
            "differences": differences.iter().map(|c| check_json(c)).collect::<Vec<_>>(),
        }))?,
        _ => print_conservation(books, checks),
    }
    Ok(if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--server`: the window and filters as the report endpoints' query
/// (the server resolves durations on its clock); `--since` is required
/// as locally (or `--last` for a cost report).
pub fn remote_query(
    window: &Window,
    last: Option<&str>,
    filter: &Filter,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    format_ok(&filter.format)?;
    if window.since.is_none() && last.is_none() {
        bail!("--since is required (or --last for a cost report)");
    }
    let mut query = Vec::new();
    let given = [
        ("since", window.since.as_deref()),
        ("until", window.until.as_deref()),
        ("last", last),
        ("tenant", filter.tenant.as_deref()),
        ("group", filter.group.as_deref()),
    ];
    for (name, value) in given {
        if let Some(value) = value {
            query.push((name, value.to_string()));
        }
    }
    Ok(query)
}

pub fn format_ok(format: &str) -> anyhow::Result<()> {
    if !matches!(format, "text" | "json") {
        bail!("--format must be text or json, not '{format}'");
    }
    Ok(())
}

/// An instant flag: RFC 3339, or a duration before `now`.
fn instant(field: &str, text: &str, now: i64) -> anyhow::Result<i64> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.timestamp_millis());
    }
    match paddock::model::units::parse_millis(field, text) {
        Ok(ms) => Ok(now - ms),
        Err(_) => bail!(
            "{field}: '{text}' is neither an RFC 3339 instant (2026-12-04T12:00:00Z) \
             nor a duration before now (90m)"
        ),
    }
}

/// The window and filters, checked.
async fn query(
    store: &Store,
    window: &Window,
    last: Option<&str>,
    filter: &Filter,
) -> anyhow::Result<ReportQuery> {
    let now = store.now_ms().await?;
    let until = match &window.until {
        Some(text) => instant("--until", text, now)?,
        None => now,
    };
    let since = match (&window.since, last) {
        (Some(text), _) => instant("--since", text, now)?,
        (None, Some(text)) => {
            until
                - paddock::model::units::parse_millis("--last", text).map_err(anyhow::Error::msg)?
        }
        (None, None) => bail!("--since is required (or --last for a cost report)"),
    };
    if since >= until {
        bail!(
            "the window is empty: --since {} is not before --until {}",
            rfc3339(from_millis(since)),
            rfc3339(from_millis(until))
        );
    }
    if let Some(group) = &filter.group
        && store.group_get(group).await?.is_none()
    {
        bail!("--group: no resource group named '{group}' (see `paddock group list`)");
    }
    if let Some(tenant) = &filter.tenant
        && !store.jobs_list().await?.iter().any(|j| &j.tenant == tenant)
    {
        bail!("--tenant: no job belongs to tenant '{tenant}' (see `paddock job list`)");
    }
    Ok(ReportQuery {
        since,
        until,
        tenant: filter.tenant.clone(),
        group: filter.group.clone(),
    })
}

fn window_text(q: &ReportQuery) -> String {
    let mut text = format!(
        "{} .. {}",
        rfc3339(from_millis(q.since)),
        rfc3339(from_millis(q.until))
    );
    if let Some(t) = &q.tenant {
        text.push_str(&format!(", tenant {t}"));
    }
    if let Some(g) = &q.group {
        text.push_str(&format!(", group {g}"));
    }
    text
}

fn pct(incident: &Incident) -> Option<f64> {
    incident
        .auto_closure_pct()
        .map(|p| (p * 100.0).round() / 100.0)
}

fn incident_json(q: &ReportQuery, i: &Incident) -> serde_json::Value {
    let mut v = serde_json::to_value(i).expect("an incident serializes");
    v["since"] = rfc3339(from_millis(q.since)).into();
    v["until"] = rfc3339(from_millis(q.until)).into();
    v["tenant"] = q.tenant.clone().into();
    v["group"] = q.group.clone().into();
    v["auto_closed"] = i.auto_closed().into();
    v["auto_closure_pct"] = pct(i).into();
    v
}

fn print_incident(q: &ReportQuery, i: &Incident) {
    let u = &i.unknown;
    println!("paddock report incident {}", window_text(q));
    println!("affected triggers              {:>8}", i.affected);
    println!("  completed by the new token   {:>8}", i.completed);
    println!("  stale writes refused         {:>8}", i.stale_refused);
    println!(
        "  unknown outcomes             {:>8}  ({} succeeded, {} failed -> retried, {} still unknown)",
        u.total, u.succeeded, u.failed, u.still_unknown
    );
    println!("  params conflicts             {:>8}", i.params_conflicts);
    println!("  failed                       {:>8}", i.failed);
    println!("  in flight                    {:>8}", i.in_flight);
    println!("sent to people                 {:>8}", i.to_people);
    match pct(i) {
        Some(p) => println!(
            "auto-closure                   {5:>7.2}%  (({} + {} + {} + {}) / {})",
            i.completed, i.stale_refused, u.succeeded, u.failed, i.affected, p
        ),
        None => println!("auto-closure                          -  (nothing affected)"),
    }
}

fn print_costs(q: &ReportQuery, prices: &Prices, costs: &[Cost]) {
    println!("paddock report cost {}", window_text(q));
    println!(
        "{:<24} {:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>7} {:>7} {:>12} {:>12}",
        "KEY",
        "CORRECT",
        "ATTEMPTS",
        "CPU-S",
        "WALL-S",
        "GB-S",
        "STORED-B",
        "CALLS",
        "RETRIES",
        "TOTAL",
        "PER CORRECT"
    );
    for c in costs {
        let u = &c.usage;
        println!(
            "{:<24} {:>8} {:>8} {:>10.3} {:>10.3} {:>10.3} {:>12} {:>7} {:>7} {:>12.4} {:>12}",
            u.key,
            u.correct,
            u.attempts,
            c.cpu_seconds,
            c.wall_seconds,
            c.components[1].quantity,
            u.storage_bytes,
            u.downstream_calls,
            u.retries,
            c.total,
            c.per_correct.map_or("-".into(), |p| format!("{p:.4}"))
        );
        if c.per_correct.is_some() {
            let parts: Vec<String> = c
                .components
                .iter()
                .filter(|p| p.cost != 0.0)
                .map(|p| format!("{} {:.4}", p.name, p.per_correct.unwrap_or(0.0)))
                .collect();
            println!(
                "  per correct result: {} = {:.4}",
                parts.join(" + "),
                c.per_correct.unwrap_or(0.0)
            );
        }
    }
    println!(
        "correct: succeeded, no compensation of its effects; fuel per CPU second: {}",
        prices.fuel_per_cpu_second
    );
}

fn check_json(c: &Check) -> serde_json::Value {
    let mut v = serde_json::to_value(c).expect("a check serializes");
    v["difference"] = c.difference().into();
    v
}

fn print_conservation(books: &Books, checks: &[Check]) {
    let states: Vec<String> = books
        .by_state
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    println!("triggers {}: {}", books.triggers, states.join(", "));
    println!(
        "attempts {} ({} per trigger), idempotency hits {}",
        books.attempts,
        books
            .amplification()
            .map_or("-".to_string(), |a| format!("{a:.2}")),
        books.idempotency_hits
    );
    for c in checks {
        println!(
            "{:<34} {:>10} {:<32} {:>10} {:<44} difference {}",
            c.name,
            c.left_count,
            c.left,
            c.right_count,
            c.right,
            c.difference()
        );
    }
    match report::differences(checks).len() {
        0 => println!("conservation: every check balances"),
        n => println!("conservation: {0} check(s) differ", n),
    }
}
