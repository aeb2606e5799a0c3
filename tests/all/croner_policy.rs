//! Why the schedule module has its own evaluator instead of croner 3: croner's
//! DST handling differs from Paddock's policy for wildcard/step expressions.
//! These tests pin the divergence (they would start failing if a croner
//! release adopted our policy, which is the moment to reconsider) and show
//! that both agree where croner treats a job as "fixed time".

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use paddock::schedule::Schedule;

fn croner_fires(expr: &str, tz: Tz, from: &str, to: &str) -> Vec<DateTime<Utc>> {
    let cron: Cron = CronParser::builder()
        .seconds(Seconds::Required)
        .build()
        .parse(expr)
        .unwrap();
    let from: DateTime<Utc> = from.parse().unwrap();
    let to: DateTime<Utc> = to.parse().unwrap();
    cron.iter_from(
        tz.from_utc_datetime(&from.naive_utc()),
        croner::Direction::Forward,
    )
    .map(|t| t.with_timezone(&Utc))
    .take_while(|t| *t < to)
    .collect()
}

fn ours(expr: &str, tz: Tz, from: &str, to: &str) -> Vec<DateTime<Utc>> {
    Schedule::cron(expr, tz)
        .unwrap()
        .occurrences(from.parse().unwrap(), to.parse().unwrap())
        .collect()
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[test]
fn croner_repeats_an_hourly_job_in_the_repeated_hour_and_we_do_not() {
    let ny: Tz = "America/New_York".parse().unwrap();
    let (from, to) = ("2026-11-01T04:30:00Z", "2026-11-01T07:30:00Z");
    assert_eq!(
        croner_fires("0 0 * * * *", ny, from, to),
        [
            t("2026-11-01T05:00:00Z"),
            t("2026-11-01T06:00:00Z"),
            t("2026-11-01T07:00:00Z")
        ]
    );
    assert_eq!(
        ours("0 0 * * * *", ny, from, to),
        [t("2026-11-01T05:00:00Z"), t("2026-11-01T07:00:00Z")]
    );
}

#[test]
fn croner_drops_stepped_times_inside_a_half_hour_gap_and_we_fire_once_after_it() {
    // Lord Howe 2026-10-04 02:00 +10:30 → 02:30 +11 (15:30Z): `0 0/20 2 * * *`
    // wants 02:00, 02:20 (both missing) and 02:40.
    let lh: Tz = "Australia/Lord_Howe".parse().unwrap();
    let (from, to) = ("2026-10-03T15:00:00Z", "2026-10-03T16:00:00Z");
    assert_eq!(
        croner_fires("0 0/20 2 * * *", lh, from, to),
        [t("2026-10-03T15:40:00Z")]
    );
    assert_eq!(
        ours("0 0/20 2 * * *", lh, from, to),
        [t("2026-10-03T15:30:00Z"), t("2026-10-03T15:40:00Z")]
    );
}

#[test]
fn croner_and_we_agree_on_fixed_time_jobs_across_transitions() {
    let ny: Tz = "America/New_York".parse().unwrap();
    for (expr, from, to) in [
        (
            "0 30 2 * * *",
            "2027-03-13T00:00:00Z",
            "2027-03-16T00:00:00Z",
        ),
        (
            "0 30 1 * * *",
            "2026-10-31T00:00:00Z",
            "2026-11-03T00:00:00Z",
        ),
    ] {
        assert_eq!(
            croner_fires(expr, ny, from, to),
            ours(expr, ny, from, to),
            "{expr}"
        );
    }
}
