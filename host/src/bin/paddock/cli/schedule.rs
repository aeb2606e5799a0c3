//! `paddock schedule preview|diff|shards`: shadow computation of trigger
//! sets (nothing is written) and the scanner's shard table.

use anyhow::bail;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use clap::Subcommand;
use paddock::model::identity::TenantScope;
use paddock::schedule::Schedule;
use paddock::schedule::preview::{self, PreviewError, SetDiff};
use paddock::store::prelude::*;
use paddock::store::{ShardRecord, SkippedFire, Store};

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
        /// Refuse a window with more fire times than this (at most
        /// 10,000 per backfill; a tenant may have 20,000 waiting).
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

fn failed(e: PreviewError) -> anyhow::Error {
    anyhow::Error::msg(e.to_string())
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
    let max = paddock::model::bounds::backfill_max(max).map_err(|e| anyhow::anyhow!("--{e}"))?;
    if from >= to {
        bail!("--from must be before --to");
    }
    let (schedule, _, (record, version)) = preview::of_plan(store, &TenantScope::Every, job)
        .await
        .map_err(failed)?;
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
    let done = store
        .triggers_backfill(&record, version, &times, actor)
        .await?;
    print_backfilled(job, version, from, to, done.created, done.existing);
    Ok(())
}

/// What a backfill did, from the database or `--server`.
pub fn print_backfilled(
    job: &str,
    version: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    created: i64,
    existing: i64,
) {
    println!(
        "backfill of {0}@v{1} in [{2}, {3}): {4} trigger(s) created in the \
         recovery lane, {5} time(s) already triggered",
        job, version, from, to, created, existing
    );
}

/// `preview`'s lines (the count on stderr).
pub fn print_preview(
    times: impl IntoIterator<Item = DateTime<Utc>>,
    zone: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) {
    let mut n = 0;
    for t in times {
        println!("{}", preview::line(t, zone));
        n += 1;
    }
    eprintln!("{0} trigger(s) in [{1}, {2})", n, from, to);
}

/// `diff`'s report: the times only in A, only in B, in A's zone.
pub fn print_diff(a: &str, b: &str, d: &SetDiff, zone: Tz) {
    println!("only in A ({1}): {}", d.only_a.len(), a);
    for t in &d.only_a {
        println!("  {}", preview::line(*t, zone));
    }
    println!("only in B ({1}): {}", d.only_b.len(), b);
    for t in &d.only_b {
        println!("  {}", preview::line(*t, zone));
    }
    println!("in both: {}", d.both);
}

/// `skipped`'s report.
pub fn print_skipped(counts: &[(String, i64)], skipped: &[SkippedFire]) {
    for (reason, n) in counts {
        println!("{0}: {1} in all", reason, n);
    }
    for (tenant, job, version, at, reason) in skipped {
        println!(
            "{1}/{2}@v{3}  {}  {4}",
            paddock::model::time::rfc3339(paddock::model::time::from_millis(*at)),
            tenant,
            job,
            version,
            reason
        );
    }
}

/// `paddock schedule shards`: the scanner's shard table, from the
/// database or `GET /v1/schedule/shards`.
pub fn print_shards(shards: Vec<ShardRecord>) {
    println!(
        "{:>5} {:<24} {:>4} {:<22} {:>8} {:>8}",
        "shard", "owner", "gen", "watermark", "created", "existed"
    );
    for s in shards {
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
}

pub async fn run(cmd: ScheduleCmd, database_url: &str, actor: &str) -> anyhow::Result<()> {
    let every = &TenantScope::Every;
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
                (None, Some(expr)) => preview::bare(&expr, &tz).map_err(failed)?,
                (Some(plan), None) => {
                    let store = Store::open(database_url).await?;
                    let (s, z, _) = preview::of_plan(&store, every, &plan)
                        .await
                        .map_err(failed)?;
                    (s, z)
                }
            };
            print_preview(schedule.occurrences(from, to), zone, from, to);
        }
        ScheduleCmd::Diff { a, b, tz, from, to } => {
            let (sa, za) = side(database_url, &a, &tz).await?;
            let (sb, _) = side(database_url, &b, &tz).await?;
            let set_a: Vec<_> = sa.occurrences(from, to).collect();
            let set_b: Vec<_> = sb.occurrences(from, to).collect();
            print_diff(&a, &b, &preview::compare(&set_a, &set_b), za);
        }
        ScheduleCmd::Skipped { job, limit } => {
            let store = Store::open(database_url).await?;
            let skipped = store
                .skipped_list_for(&TenantScope::Every, job.as_deref(), limit)
                .await?;
            print_skipped(&store.skipped_counts().await?, &skipped);
        }
        ScheduleCmd::Shards => print_shards(Store::open(database_url).await?.shards_list().await?),
    }
    Ok(())
}

/// A side of `diff`: a `cron:` side needs no database.
async fn side(database_url: &str, text: &str, tz: &str) -> anyhow::Result<(Schedule, Tz)> {
    match text.strip_prefix("cron:") {
        Some(expr) => preview::bare(expr, tz).map_err(failed),
        None => {
            let store = Store::open(database_url).await?;
            preview::side(&store, &TenantScope::Every, text, tz)
                .await
                .map_err(failed)
        }
    }
}
