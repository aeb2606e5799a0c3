//! `paddock schedule preview|diff|shards`: shadow computation of trigger
//! sets (nothing is written) and the scanner's shard table.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use clap::Subcommand;
use paddock::model::PlanSpec;
use paddock::schedule::{Schedule, ScheduleSpec, TriggerSpec};
use paddock::store::Store;
use paddock::store::prelude::*;
use std::collections::BTreeSet;

#[derive(Subcommand)]
pub enum ScheduleCmd {
    /// Print the trigger set a job's plan (or a bare cron schedule) would
    /// produce in [FROM, TO), one per line: UTC instant and local time.
    Preview {
        /// JOB (latest version) or JOB@vN. Omit with --cron.
        plan: Option<String>,
        /// A bare cron expression (6 or 7 fields; a 5-field crontab line gets second 0).
        #[arg(long)]
        cron: Option<String>,
        /// Time zone for --cron.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// Window start, RFC 3339.
        #[arg(long)]
        from: DateTime<Utc>,
        /// Window end (exclusive), RFC 3339.
        #[arg(long)]
        to: DateTime<Utc>,
    },
    /// Compare two trigger sets in [FROM, TO): each side is JOB, JOB@vN or
    /// `cron:EXPR` (with --tz); prints the times only in A and only in B.
    Diff {
        a: String,
        b: String,
        /// Time zone for `cron:` sides.
        #[arg(long, default_value = "UTC")]
        tz: String,
        #[arg(long)]
        from: DateTime<Utc>,
        #[arg(long)]
        to: DateTime<Utc>,
    },
    /// Run JOB (its latest plan) for each of its fire times in [FROM, TO):
    /// one trigger per time, in its group's recovery lane; a time already
    /// triggered is left as it is (the plan key is unique).
    Backfill {
        job: String,
        #[arg(long)]
        from: DateTime<Utc>,
        #[arg(long)]
        to: DateTime<Utc>,
        /// Refuse a window with more fire times than this.
        #[arg(long, default_value_t = 10_000)]
        max: usize,
    },
    /// Show the scanner's shards: owner, generation, watermark, counts.
    Shards,
    /// Show fire times decided not to run (misfire skips), newest first.
    Skipped {
        /// Only this job.
        job: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
}

/// A 5-field crontab line gets a leading `0` seconds field.
fn with_seconds(expr: &str) -> String {
    if expr.split_whitespace().count() == 5 {
        format!("0 {expr}")
    } else {
        expr.to_string()
    }
}

fn bare(expr: &str, tz: &str) -> anyhow::Result<(Schedule, Tz)> {
    let zone: Tz = tz
        .parse()
        .map_err(|_| anyhow::anyhow!("unknown time zone '{tz}'"))?;
    Ok((Schedule::cron(&with_seconds(expr), zone)?, zone))
}

async fn of_plan(store: &Store, plan: &str) -> anyhow::Result<(Schedule, Tz)> {
    let (job, version) = match plan.split_once("@v") {
        Some((job, v)) => (
            job,
            v.parse::<i64>()
                .with_context(|| format!("bad version in '{plan}'"))?,
        ),
        None => {
            let job = store
                .job_get(plan)
                .await?
                .with_context(|| format!("no job '{plan}'"))?;
            (plan, job.latest_version)
        }
    };
    let record = store.plan_get(job, version).await?;
    let spec: PlanSpec = serde_json::from_str(&record.spec)?;
    let schedule = ScheduleSpec::of_plan(&spec).map_err(anyhow::Error::msg)?;
    let zone = match &schedule.trigger {
        TriggerSpec::Cron { timezone, .. } => *timezone,
        _ => Tz::UTC,
    };
    Ok((schedule.compile()?, zone))
}

async fn side(store: &Store, text: &str, tz: &str) -> anyhow::Result<(Schedule, Tz)> {
    match text.strip_prefix("cron:") {
        Some(expr) => bare(expr, tz),
        None => of_plan(store, text).await,
    }
}

fn line(t: DateTime<Utc>, zone: Tz) -> String {
    format!(
        "{}  {}",
        paddock::schedule::fmt_instant(t),
        t.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z")
    )
}

/// `paddock schedule backfill`: JOB's fire times in [FROM, TO), each one
/// trigger in the recovery lane (at most `max`).
async fn backfill(
    store: &Store,
    job: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: usize,
    actor: &str,
) -> anyhow::Result<()> {
    if from >= to {
        bail!("--from must be before --to");
    }
    let version = store
        .job_get(job)
        .await?
        .with_context(|| format!("no job '{job}'"))?
        .latest_version;
    let (schedule, _) = of_plan(store, job).await?;
    let times: Vec<i64> = schedule
        .occurrences(from, to)
        .take(max + 1)
        .map(|t| t.timestamp_millis())
        .collect();
    if times.len() > max {
        bail!(
            "[{from}, {to}) holds more than {max} fire times of '{job}': narrow the \
             window or raise --max"
        );
    }
    let done = store.triggers_backfill(job, version, &times, actor).await?;
    println!(
        "backfill of {job}@v{version} in [{from}, {to}): {} trigger(s) created in the \
         recovery lane, {} time(s) already triggered",
        done.created, done.existing
    );
    Ok(())
}

/// `paddock schedule shards`: the scanner's shard table.
async fn shards(store: &Store) -> anyhow::Result<()> {
    println!(
        "{:>5} {:<24} {:>4} {:<22} {:>8} {:>8}",
        "shard", "owner", "gen", "watermark", "created", "existed"
    );
    for s in store.shards_list().await? {
        println!(
            "{:>5} {:<24} {:>4} {:<22} {:>8} {:>8}",
            s.shard,
            s.owner.unwrap_or_default(),
            s.generation,
            s.watermark
                .map(|w| paddock::model::time::rfc3339(paddock::model::time::from_millis(w)))
                .unwrap_or_default(),
            s.triggers_created,
            s.triggers_existing
        );
    }
    Ok(())
}

pub async fn run(cmd: ScheduleCmd, database_url: &str, actor: &str) -> anyhow::Result<()> {
    match cmd {
        ScheduleCmd::Backfill { job, from, to, max } => {
            let store = Store::open(database_url).await?;
            let done = backfill(&store, &job, from, to, max, actor).await;
            super::audit::anchor_after(&store).await;
            done?
        }
        ScheduleCmd::Preview {
            plan,
            cron,
            tz,
            from,
            to,
        } => {
            let (schedule, zone) = match (plan, cron) {
                (Some(_), Some(_)) => bail!("give either a job or --cron, not both"),
                (None, None) => bail!("give a job (JOB or JOB@vN) or --cron EXPR"),
                (None, Some(expr)) => bare(&expr, &tz)?,
                (Some(plan), None) => of_plan(&Store::open(database_url).await?, &plan).await?,
            };
            let mut n = 0;
            for t in schedule.occurrences(from, to) {
                println!("{}", line(t, zone));
                n += 1;
            }
            eprintln!("{n} trigger(s) in [{from}, {to})");
        }
        ScheduleCmd::Diff { a, b, tz, from, to } => {
            let needs_store = !a.starts_with("cron:") || !b.starts_with("cron:");
            let store = if needs_store {
                Some(Store::open(database_url).await?)
            } else {
                None
            };
            let resolve = |text: String| {
                let store = store.clone();
                let tz = tz.clone();
                async move {
                    match store {
                        Some(s) => side(&s, &text, &tz).await,
                        None => bare(text.trim_start_matches("cron:"), &tz),
                    }
                }
            };
            let (sa, za) = resolve(a.clone()).await?;
            let (sb, _) = resolve(b.clone()).await?;
            let set_a: BTreeSet<_> = sa.occurrences(from, to).collect();
            let set_b: BTreeSet<_> = sb.occurrences(from, to).collect();
            let only_a: Vec<_> = set_a.difference(&set_b).collect();
            let only_b: Vec<_> = set_b.difference(&set_a).collect();
            println!("only in A ({a}): {}", only_a.len());
            for t in &only_a {
                println!("  {}", line(**t, za));
            }
            println!("only in B ({b}): {}", only_b.len());
            for t in &only_b {
                println!("  {}", line(**t, za));
            }
            println!("in both: {}", set_a.intersection(&set_b).count());
        }
        ScheduleCmd::Skipped { job, limit } => {
            let store = Store::open(database_url).await?;
            for (reason, n) in store.skipped_counts().await? {
                println!("{reason}: {n} in all");
            }
            for (job, version, at, reason) in store.skipped_list(job.as_deref(), limit).await? {
                println!(
                    "{job}@v{version}  {}  {reason}",
                    paddock::model::time::rfc3339(paddock::model::time::from_millis(at))
                );
            }
        }
        ScheduleCmd::Shards => shards(&Store::open(database_url).await?).await?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crontab_line_gets_a_seconds_field() {
        assert_eq!(with_seconds("30 2 * * *"), "0 30 2 * * *");
        assert_eq!(with_seconds("0 30 2 * * *"), "0 30 2 * * *");
    }
}
