//! Trigger sets on request — `paddock schedule preview|diff|backfill` and
//! their endpoints (`/v1/schedule/preview`, `/v1/schedule/diff`,
//! `/v1/jobs/{job}/backfill`): the fire times a stored plan or a bare cron
//! expression gives in a window, and two sets compared. Nothing is written
//! here. The set functions are pure; [`of_plan`] and [`side`] read one
//! plan version (**I/O**), through the caller's tenant scope.

use super::{Schedule, ScheduleSpec, TriggerSpec};
use crate::model::PlanSpec;
use crate::model::identity::TenantScope;
use crate::store::{JobRecord, ReadStore, Store, StoreError};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::collections::BTreeSet;

/// Why a trigger set cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// A bad expression, zone, plan name or window (the caller's to fix).
    #[error("{0}")]
    Bad(String),
    /// No such job (or another tenant's), or no such version.
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for PreviewError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => PreviewError::NotFound(format!("no {what}")),
            other => PreviewError::Store(other),
        }
    }
}

/// A 5-field crontab line gets a leading `0` seconds field.
pub fn with_seconds(expr: &str) -> String {
    if expr.split_whitespace().count() == 5 {
        format!("0 {expr}")
    } else {
        expr.to_string()
    }
}

/// A bare cron expression in zone `tz`.
pub fn bare(expr: &str, tz: &str) -> Result<(Schedule, Tz), PreviewError> {
    let zone: Tz = tz
        .parse()
        .map_err(|_| PreviewError::Bad(format!("unknown time zone '{tz}'")))?;
    let schedule =
        Schedule::cron(&with_seconds(expr), zone).map_err(|e| PreviewError::Bad(e.to_string()))?;
    Ok((schedule, zone))
}

/// `JOB` (its latest version) or `JOB@vN`: the job and the version asked.
pub fn plan_name(plan: &str) -> Result<(&str, Option<i64>), PreviewError> {
    match plan.split_once("@v") {
        Some((job, v)) => v
            .parse::<i64>()
            .map(|v| (job, Some(v)))
            .map_err(|_| PreviewError::Bad(format!("bad version in '{plan}'"))),
        None => Ok((plan, None)),
    }
}

/// The schedule of a stored plan (`JOB`, `TENANT/JOB`, either with `@vN`)
/// the scope may see, and the zone its times are shown in; with the job
/// and the version it is.
pub async fn of_plan(
    store: &Store,
    scope: &TenantScope,
    plan: &str,
) -> Result<(Schedule, Tz, (JobRecord, i64)), PreviewError> {
    let (job, version) = plan_name(plan)?;
    let record = store.job_get_for(scope, job).await.map_err(|e| match e {
        StoreError::Conflict(why) | StoreError::OutOfBounds(why) => PreviewError::Bad(why),
        _ => PreviewError::NotFound(format!("no job '{}'", crate::model::text::Esc(job))),
    })?;
    let version = version.unwrap_or(record.latest_version);
    let stored = store
        .plan_get(&record.tenant, &record.job_id, version)
        .await?;
    let spec: PlanSpec = serde_json::from_str(&stored.spec)
        .map_err(|e| PreviewError::Bad(format!("stored plan of '{plan}' unreadable: {e}")))?;
    let schedule = ScheduleSpec::of_plan(&spec).map_err(PreviewError::Bad)?;
    let zone = match &schedule.trigger {
        TriggerSpec::Cron { timezone, .. } => *timezone,
        _ => Tz::UTC,
    };
    let compiled = schedule
        .compile()
        .map_err(|e| PreviewError::Bad(e.to_string()))?;
    Ok((compiled, zone, (record, version)))
}

/// One side of a diff: `cron:EXPR` (in `tz`), `JOB` or `JOB@vN`.
pub async fn side(
    store: &Store,
    scope: &TenantScope,
    text: &str,
    tz: &str,
) -> Result<(Schedule, Tz), PreviewError> {
    match text.strip_prefix("cron:") {
        Some(expr) => bare(expr, tz),
        None => of_plan(store, scope, text).await.map(|(s, z, _)| (s, z)),
    }
}

/// `[from, to)`, checked: from before to.
pub fn check_window(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), PreviewError> {
    if from >= to {
        return Err(PreviewError::Bad(format!(
            "the window is empty: from {from} is not before to {to}"
        )));
    }
    Ok(())
}

/// The fire times in `[from, to)`, at most `max` (more is refused: narrow
/// the window).
pub fn times(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: usize,
) -> Result<Vec<DateTime<Utc>>, PreviewError> {
    let times: Vec<_> = schedule.occurrences(from, to).take(max + 1).collect();
    if times.len() > max {
        return Err(PreviewError::Bad(format!(
            "[{from}, {to}) holds more than {max} fire times: narrow the window"
        )));
    }
    Ok(times)
}

/// Two trigger sets compared: the times only in A, only in B, and how many
/// both have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SetDiff {
    pub only_a: Vec<DateTime<Utc>>,
    pub only_b: Vec<DateTime<Utc>>,
    pub both: usize,
}

pub fn compare(a: &[DateTime<Utc>], b: &[DateTime<Utc>]) -> SetDiff {
    let a: BTreeSet<_> = a.iter().copied().collect();
    let b: BTreeSet<_> = b.iter().copied().collect();
    SetDiff {
        only_a: a.difference(&b).copied().collect(),
        only_b: b.difference(&a).copied().collect(),
        both: a.intersection(&b).count(),
    }
}

/// A fire time as `preview` prints it: the UTC instant and the local time.
pub fn line(t: DateTime<Utc>, zone: Tz) -> String {
    format!(
        "{}  {}",
        super::fmt_instant(t),
        t.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crontab_line_gets_a_seconds_field() {
        assert_eq!(with_seconds("30 2 * * *"), "0 30 2 * * *");
        assert_eq!(with_seconds("0 30 2 * * *"), "0 30 2 * * *");
    }

    #[test]
    fn a_window_with_too_many_times_is_refused_and_sets_compare() {
        let (every_hour, _) = bare("0 * * * *", "UTC").unwrap();
        let (every_two, _) = bare("0 */2 * * *", "UTC").unwrap();
        let from = "2026-01-01T00:00:00Z".parse().unwrap();
        let to = "2026-01-02T00:00:00Z".parse().unwrap();
        assert!(times(&every_hour, from, to, 23).is_err());
        let a = times(&every_hour, from, to, 24).unwrap();
        let b = times(&every_two, from, to, 24).unwrap();
        let d = compare(&a, &b);
        assert_eq!((d.only_a.len(), d.only_b.len(), d.both), (12, 0, 12));
        assert!(matches!(plan_name("job@vx"), Err(PreviewError::Bad(_))));
        assert_eq!(plan_name("job@v3").unwrap(), ("job", Some(3)));
    }
}
