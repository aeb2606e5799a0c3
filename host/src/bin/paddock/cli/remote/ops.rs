//! `--server` for the operations commands: status, the audit log,
//! reports, trigger sets, effects and tickets — each on its endpoint,
//! printed by the local command's functions from the same types.

use super::Client;
use super::admin::segment;
use crate::cli::audit::{AuditCmd, audit_lines, export_broken, print_verdict};
use crate::cli::exceptions::{
    EffectsCmd, ExceptionsCmd, effects_table, print_compensated, print_recovered, print_rejected,
    print_resolution, print_ticket, tickets_table,
};
use crate::cli::report::{
    ReportCmd, format_ok, print_cost_report, print_incident_report, remote_query, show_conservation,
};
use crate::cli::review::{format_ok as review_format_ok, print_capabilities, print_diff};
use crate::cli::schedule::{
    ScheduleCmd, print_backfilled, print_diff as print_set_diff, print_preview, print_shards,
    print_skipped,
};
use crate::cli::status::{self, StatusArgs};
use anyhow::{anyhow, bail};
use chrono_tz::Tz;
use paddock::api::review::CHAIN_HEADER;
use paddock::api::wire::{
    BackfillResponse, ComponentDiffResponse, PreviewResponse, ScheduleDiffResponse,
    SkippedResponse, VerifyResponse,
};
use paddock::effects::RecoveryReport;
use paddock::effects::operator::{Compensated, Compensation};
use paddock::model::audit::AuditEntry;
use paddock::model::report::{Books, Check, Cost, Incident, Prices};
use paddock::registry::report::ComponentReport;
use paddock::schedule::preview::SetDiff;
use paddock::store::{EffectRecord, ExceptionRecord, ReportQuery, ShardRecord, StatusReport};
use serde::Deserialize;
use std::process::ExitCode;

/// `paddock status`.
pub async fn status(client: &Client, args: StatusArgs) -> anyhow::Result<()> {
    let query = status::remote_query(&args)?;
    let report: StatusReport = client.send(client.get("/v1/status").query(&query)).await?;
    status::print(&report, args.format())
}

/// `paddock audit ...`
pub async fn audit(client: &Client, cmd: AuditCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCmd::Verify => {
            let verdict: VerifyResponse = client.send(client.get("/v1/audit/verify")).await?;
            return Ok(print_verdict(&verdict));
        }
        AuditCmd::List => {
            let entries: Vec<AuditEntry> = client.all("/v1/audit", usize::MAX).await?;
            audit_lines(&entries);
        }
        AuditCmd::Export { since } => {
            let (body, headers) = client
                .fetch(client.get("/v1/audit/export").query(&[("since", since)]))
                .await?;
            // JSON lines, escaped as `audit export` prints them locally.
            ::std::print!(
                "{}",
                paddock::model::text::json_safe(&String::from_utf8_lossy(&body))
            );
            let chain = headers
                .get(CHAIN_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("intact");
            if let Some(broken) = chain.strip_prefix("broken: ") {
                return Ok(export_broken(broken));
            }
        }
        AuditCmd::Capabilities { format, by } => {
            review_format_ok(&format)?;
            if crate::cli::review::by_tenant(&by)? {
                let reports: Vec<paddock::registry::report::TenantGrants> =
                    client.send(client.get("/v1/capabilities/tenants")).await?;
                crate::cli::review::print_tenant_grants(&reports, &format)?;
            } else {
                let reports: Vec<ComponentReport> =
                    client.send(client.get("/v1/capabilities")).await?;
                print_capabilities(&reports, &format)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An incident report's answer: the counts and the window.
#[derive(Deserialize)]
struct IncidentAnswer {
    #[serde(flatten)]
    incident: Incident,
    since: i64,
    until: i64,
    tenant: Option<String>,
    group: Option<String>,
}

/// A cost report's answer.
#[derive(Deserialize)]
struct CostAnswer {
    since: i64,
    until: i64,
    tenant: Option<String>,
    group: Option<String>,
    prices: Prices,
    lines: Vec<Cost>,
}

/// `paddock report ...`
pub async fn report(client: &Client, cmd: ReportCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        ReportCmd::Incident { window, filter } => {
            let query = remote_query(&window, None, &filter)?;
            let a: IncidentAnswer = client
                .send(client.get("/v1/reports/incident").query(&query))
                .await?;
            let q = ReportQuery {
                since: a.since,
                until: a.until,
                tenant: a.tenant,
                group: a.group,
            };
            print_incident_report(&q, &a.incident, filter.format())?;
        }
        ReportCmd::Cost {
            window,
            last,
            by,
            filter,
        } => {
            let mut query = remote_query(&window, last.as_deref(), &filter)?;
            query.push(("by", by));
            let a: CostAnswer = client
                .send(client.get("/v1/reports/cost").query(&query))
                .await?;
            let q = ReportQuery {
                since: a.since,
                until: a.until,
                tenant: a.tenant,
                group: a.group,
            };
            print_cost_report(&q, &a.prices, &a.lines, filter.format())?;
        }
        ReportCmd::Conservation { format } => {
            format_ok(&format)?;
            let answer: serde_json::Value =
                client.send(client.get("/v1/reports/conservation")).await?;
            let checks: Vec<Check> = serde_json::from_value(answer["checks"].clone())
                .map_err(|e| anyhow!("the server's conservation checks: {e}"))?;
            let books: Books = serde_json::from_value(answer["books"].clone())
                .map_err(|e| anyhow!("the server's conservation books: {e}"))?;
            return show_conservation(&books, &checks, &format);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn zone(name: &str) -> anyhow::Result<Tz> {
    name.parse()
        .map_err(|_| anyhow!("the server named an unknown time zone '{name}'"))
}

/// `paddock schedule ...`
pub async fn schedule(client: &Client, cmd: ScheduleCmd) -> anyhow::Result<()> {
    match cmd {
        ScheduleCmd::Preview {
            plan,
            cron,
            tz,
            from,
            to,
        } => {
            let mut query = vec![
                ("tz", tz),
                ("from", from.to_rfc3339()),
                ("to", to.to_rfc3339()),
            ];
            match (plan, cron) {
                (Some(_), Some(_)) => bail!("give either a job or --cron, not both"),
                (None, None) => bail!("give a job (JOB or JOB@vN) or --cron EXPR"),
                (Some(plan), None) => query.push(("plan", plan)),
                (None, Some(cron)) => query.push(("cron", cron)),
            }
            let p: PreviewResponse = client
                .send(client.get("/v1/schedule/preview").query(&query))
                .await?;
            print_preview(p.times, zone(&p.zone)?, from, to);
        }
        ScheduleCmd::Diff { a, b, tz, from, to } => {
            let query = [
                ("a", a.clone()),
                ("b", b.clone()),
                ("tz", tz),
                ("from", from.to_rfc3339()),
                ("to", to.to_rfc3339()),
            ];
            let d: ScheduleDiffResponse = client
                .send(client.get("/v1/schedule/diff").query(&query))
                .await?;
            let set = SetDiff {
                only_a: d.only_a,
                only_b: d.only_b,
                both: d.both,
            };
            print_set_diff(&a, &b, &set, zone(&d.zone)?);
        }
        ScheduleCmd::Backfill { job, from, to, max } => {
            if from >= to {
                bail!("--from must be before --to");
            }
            let path = format!("/v1/jobs/{}/backfill", segment(&job));
            let body = serde_json::json!({ "from": from, "to": to, "max": max });
            let done: BackfillResponse = client.send(client.post(&path).json(&body)).await?;
            print_backfilled(
                &done.job,
                done.version,
                from,
                to,
                done.created,
                done.existing,
            );
        }
        ScheduleCmd::Shards => {
            let shards: Vec<ShardRecord> = client.send(client.get("/v1/schedule/shards")).await?;
            print_shards(shards);
        }
        ScheduleCmd::Skipped { job, limit } => {
            let mut query = vec![("limit", limit.to_string())];
            if let Some(job) = job {
                query.push(("job", job));
            }
            let s: SkippedResponse = client
                .send(client.get("/v1/schedule/skipped").query(&query))
                .await?;
            let skipped: Vec<_> = s
                .skipped
                .into_iter()
                .map(|s| (s.tenant, s.job, s.version, s.at, s.reason))
                .collect();
            print_skipped(&s.counts, &skipped);
        }
    }
    Ok(())
}

/// `paddock component diff A B`.
pub async fn component_diff(client: &Client, a: &str, b: &str) -> anyhow::Result<()> {
    let path = format!(
        "/v1/components/{}/diff/{}",
        segment(a.trim_start_matches("sha256:")),
        segment(b.trim_start_matches("sha256:"))
    );
    let d: ComponentDiffResponse = client.send(client.get(&path)).await?;
    print_diff(&d.a, &d.b, &d.diff);
    Ok(())
}

/// `paddock effects ...`
pub async fn effects(client: &Client, cmd: EffectsCmd) -> anyhow::Result<()> {
    match cmd {
        EffectsCmd::List { limit } => {
            let effects: Vec<EffectRecord> =
                client.all("/v1/effects", limit.max(0) as usize).await?;
            effects_table(&effects);
        }
        EffectsCmd::Recover { limit } => {
            let report: RecoveryReport = client
                .send(
                    client
                        .post("/v1/effects/recover")
                        .json(&serde_json::json!({ "limit": limit })),
                )
                .await?;
            print_recovered(&report);
        }
        EffectsCmd::Compensate {
            original,
            job,
            key,
            action,
            payload,
            reason,
        } => {
            let path = format!("/v1/effects/{}/compensate", segment(&original));
            let body = serde_json::json!({
                "job": job, "key": key, "action": action, "payload": payload, "reason": reason,
            });
            let done: Compensated = client.send(client.post(&path).json(&body)).await?;
            let c = Compensation {
                original,
                job,
                key,
                action,
                payload,
                reason,
            };
            print_compensated(&c, &done);
        }
    }
    Ok(())
}

/// `paddock exceptions ...`: the caller is the token (no `--actor`).
pub async fn exceptions(client: &Client, cmd: ExceptionsCmd) -> anyhow::Result<()> {
    let reason = |reason: String| serde_json::json!({ "reason": reason });
    match cmd {
        ExceptionsCmd::List { all } => {
            let path = if all {
                "/v1/tickets"
            } else {
                "/v1/tickets?state=open"
            };
            let tickets: Vec<ExceptionRecord> = client.all(path, usize::MAX).await?;
            tickets_table(&tickets);
        }
        ExceptionsCmd::Show { id } => {
            let t: ExceptionRecord = client
                .send(client.get(&format!("/v1/tickets/{id}")))
                .await?;
            let effect = match (&t.tenant, &t.effect_key) {
                (Some(tenant), Some(key)) => client
                    .send::<EffectRecord>(client.get(&format!(
                        "/v1/effects/{}?tenant={}",
                        segment(key),
                        segment(tenant)
                    )))
                    .await
                    .ok(),
                _ => None,
            };
            print_ticket(&t, effect)?;
        }
        ExceptionsCmd::Resolve { id, action, reason } => {
            let t: ExceptionRecord = client
                .send(
                    client
                        .post(&format!("/v1/tickets/{id}/resolve"))
                        .json(&serde_json::json!({ "action": action, "reason": reason })),
                )
                .await?;
            print_resolution(&t);
        }
        ExceptionsCmd::Approve { id, reason: why } => {
            let t: ExceptionRecord = client
                .send(
                    client
                        .post(&format!("/v1/tickets/{id}/approve"))
                        .json(&reason(why)),
                )
                .await?;
            print_resolution(&t);
        }
        ExceptionsCmd::Reject { id, reason: why } => {
            let t: ExceptionRecord = client
                .send(
                    client
                        .post(&format!("/v1/tickets/{id}/reject"))
                        .json(&reason(why)),
                )
                .await?;
            print_rejected(&t);
        }
    }
    Ok(())
}
