//! The scanner: sharded scans with watermarks and overlap re-scans, misfire
//! and overlap policies, against a real SQLite store. Time is injected as
//! the database's `now` so hours pass in milliseconds.

use crate::ledger::{Ledger, put_gate};
use crate::procs::eventually;
use crate::{Db, TestHost};
use chrono::{DateTime, TimeDelta, Utc};
use paddock::model::time::to_millis;
use paddock::schedule::scanner::{Scanner, ScannerConfig};
use paddock::schedule::{ScheduleSpec, TriggerSpec};
use paddock::store::prelude::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn scanner(host: &TestHost, owner: &str, shard_lease: Duration) -> std::sync::Arc<Scanner> {
    Scanner::new(
        host.store.clone(),
        ScannerConfig {
            owner: owner.into(),
            shard_lease,
            overlap: Duration::from_secs(10),
            lookahead: Duration::ZERO,
            initial_lookback: Duration::from_secs(10),
            max_window: Duration::from_secs(3600),
            tick: Duration::from_secs(1),
        },
    )
}

/// Register `jobs` (id, cron) directly in one transaction: 24,000 audited
/// applies would test the registry, not the scanner.
async fn bulk_cron_jobs(host: &TestHost, jobs: &[(String, String)], active_from: i64) {
    let component = host
        .registry
        .component_push_file(&crate::guest("noop"), "test")
        .await
        .unwrap();
    let shards = host.store.shard_count().await.unwrap();
    let mut tx = host.store.pool().begin().await.unwrap();
    for (id, cron) in jobs {
        let schedule = ScheduleSpec {
            trigger: TriggerSpec::Cron {
                cron: cron.clone(),
                timezone: chrono_tz::UTC,
            },
            ..ScheduleSpec::default()
        };
        sqlx::query(host.store.sql("INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at) VALUES (?, 't', 1, 0, 0)"))
            .bind(id)
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query(host.store.sql(
            "INSERT INTO plan_versions (tenant, job_id, version, digest, spec, component_digest, resource_group, created_by, created_at) \
             VALUES ('t', ?, 1, 'd', '{}', ?, 'default', 'test', 0)",
        ))
        .bind(id)
        .bind(&component.digest)
        .execute(&mut *tx)
        .await
        .unwrap();
        sqlx::query(host.store.sql(
            "INSERT INTO job_schedules (job_id, plan_version, shard, spec, tenant, resource_group, priority, active_from, updated_at) \
             VALUES (?, 1, ?, ?, 't', 'default', 0, ?, 0)",
        ))
        .bind(id)
        .bind(paddock::schedule::shard_of(id, shards) as i64)
        .bind(schedule.canonical_json())
        .bind(active_from)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// (job, scheduled_at) of every scheduled trigger.
async fn scheduled_set(host: &TestHost) -> BTreeSet<(String, i64)> {
    sqlx::query_as::<_, (String, i64)>(
        host.store
            .sql("SELECT job_id, scheduled_at FROM triggers WHERE origin = 'schedule'"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap()
    .into_iter()
    .collect()
}

db_test!(
    a_restarted_scheduler_rescans_the_overlap_and_creates_exactly_the_missing_triggers,
    workers = 2
);
async fn a_restarted_scheduler_rescans_the_overlap_and_creates_exactly_the_missing_triggers(
    db: Db,
) {
    let host = TestHost::new(db).await;
    assert_eq!(host.store.shard_count().await.unwrap(), 16);
    // T is hh:mm:30. Every job fires once a minute at its own second S.
    // 3,450 jobs fire at S in 15..=24, 150 at S in 25..=29 and the other
    // 20,400 at the remaining 45 seconds.
    let t = at("2027-01-01T12:00:30Z");
    let mut jobs = Vec::with_capacity(24_000);
    for i in 0..3_450 {
        jobs.push((format!("old-{i}"), 15 + i % 10));
    }
    for i in 0..150 {
        jobs.push((format!("new-{i}"), 25 + i % 5));
    }
    let others: Vec<u32> = (30..60).chain(0..15).collect();
    for i in 0..20_400 {
        jobs.push((format!("other-{i}"), others[i % others.len()]));
    }
    let jobs: Vec<(String, String)> = jobs
        .into_iter()
        .map(|(id, s)| (id, format!("{s} * * * * *")))
        .collect();
    bulk_cron_jobs(&host, &jobs, to_millis(t - TimeDelta::hours(1))).await;

    // Before the crash: two ticks; the watermark reaches T-5s.
    let a = scanner(&host, "A", Duration::from_secs(4));
    a.tick(Some(to_millis(t - TimeDelta::seconds(15))))
        .await
        .unwrap();
    let before_crash = a
        .tick(Some(to_millis(t - TimeDelta::seconds(5))))
        .await
        .unwrap();
    assert_eq!(before_crash.shards, 16);
    for shard in host.store.shards_list().await.unwrap() {
        assert_eq!(shard.watermark, Some(to_millis(t - TimeDelta::seconds(5))));
    }

    // A dies. B starts at T, once A's shard leases have lapsed, and re-scans
    // from watermark - overlap = T-15s.
    let generations_of_a: Vec<i64> = host
        .store
        .shards_list()
        .await
        .unwrap()
        .iter()
        .map(|s| s.generation)
        .collect();
    let b = scanner(&host, "B", Duration::from_secs(4));
    let restart = b.tick(Some(to_millis(t))).await.unwrap();
    assert_eq!(restart.shards, 16);
    assert_eq!(restart.created + restart.existing, 3_600);
    assert_eq!(restart.created, 150);
    assert_eq!(restart.existing, 3_450);

    // Nothing missing, nothing doubled: the stored set equals the set
    // computed independently over everything scanned, [T-25s, T).
    let expected: BTreeSet<(String, i64)> = jobs
        .iter()
        .filter_map(|(id, cron)| {
            let s: i64 = cron.split(' ').next().unwrap().parse().unwrap();
            let fire = at("2027-01-01T12:00:00Z") + TimeDelta::seconds(s);
            (fire >= t - TimeDelta::seconds(25) && fire < t).then(|| (id.clone(), to_millis(fire)))
        })
        .collect();
    let stored = scheduled_set(&host).await;
    assert_eq!(stored.len(), expected.len());
    assert_eq!(stored, expected);
    let total: i64 = sqlx::query_scalar(host.store.sql("SELECT count(*) FROM triggers"))
        .fetch_one(host.store.pool())
        .await
        .unwrap();
    assert_eq!(total as usize, expected.len(), "no duplicate rows");

    // The old owner's generation is gone: it cannot move the watermark.
    let shards = host.store.shards_list().await.unwrap();
    for (shard, a_generation) in shards.iter().zip(generations_of_a) {
        assert_eq!(shard.owner.as_deref(), Some("B"));
        assert!(shard.generation > a_generation);
    }
    let stale = paddock::model::ShardLease {
        shard: 0,
        generation: paddock::model::ShardGeneration::new(shards[0].generation - 1),
        owner: "A".into(),
        watermark: None,
        now: to_millis(t),
    };
    let scan = paddock::store::ScanCommit {
        watermark: to_millis(t + TimeDelta::hours(1)),
        ..Default::default()
    };
    let refused = host.store.scan_commit(&stale, &scan).await.unwrap_err();
    assert!(
        matches!(refused, paddock::store::StoreError::ShardLost { .. }),
        "{refused}"
    );
    assert_eq!(
        host.store
            .counter("stale_shard_generation_rejections")
            .await
            .unwrap(),
        1
    );
}

db_test!(a_live_shard_lease_keeps_other_scanners_out);
async fn a_live_shard_lease_keeps_other_scanners_out(db: Db) {
    let host = TestHost::new(db).await;
    let now = host.store.now_ms().await.unwrap();
    let a = scanner(&host, "A", Duration::from_secs(30));
    let b = scanner(&host, "B", Duration::from_secs(30));
    assert_eq!(a.tick(Some(now)).await.unwrap().shards, 16);
    assert_eq!(b.tick(Some(now + 1_000)).await.unwrap().shards, 0);
    // Renewal by the owner keeps the generation.
    a.tick(Some(now + 2_000)).await.unwrap();
    assert!(
        host.store
            .shards_list()
            .await
            .unwrap()
            .iter()
            .all(|s| s.generation == 1)
    );
    // After a drain, B takes over at once.
    a.release_all().await.unwrap();
    assert_eq!(b.tick(Some(now + 3_000)).await.unwrap().shards, 16);
}

/// A job firing every minute at second 0 under `misfire`, scanned for the
/// first time 30 minutes after it became active (a scheduler outage).
async fn outage(
    db: Db,
    policy_toml: &str,
) -> (TestHost, paddock::schedule::scanner::ScanReport, i64) {
    let host = TestHost::new(db).await;
    host.job(
        "minutely",
        "noop",
        &format!(
            "[schedule]\nkind = \"cron\"\ncron = \"0 * * * * *\"\ntimezone = \"UTC\"\n{policy_toml}"
        ),
    )
    .await;
    let active_from: i64 =
        sqlx::query_scalar(host.store.sql("SELECT active_from FROM job_schedules"))
            .fetch_one(host.store.pool())
            .await
            .unwrap();
    // Start the window at the first whole minute after activation.
    let first = (active_from / 60_000 + 1) * 60_000;
    let now = first + 30 * 60_000 + 30_000; // 30.5 minutes later: 31 fire times, 1 on time
    let s = Scanner::new(
        host.store.clone(),
        ScannerConfig {
            owner: "S".into(),
            initial_lookback: Duration::from_secs(40 * 60),
            lookahead: Duration::ZERO,
            ..ScannerConfig::default()
        },
    );
    let report = s.tick(Some(now)).await.unwrap();
    // A second tick re-scans the overlap: nothing is decided twice.
    let again = s.tick(Some(now + 1_000)).await.unwrap();
    assert_eq!(
        (again.created, again.skipped, again.parked),
        (0, 0, 0),
        "{again:?}"
    );
    (host, report, now)
}

async fn states(host: &TestHost) -> Vec<(String, i64)> {
    sqlx::query_as(
        host.store
            .sql("SELECT state, count(*) FROM triggers GROUP BY state ORDER BY state"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap()
}

db_test!(misfire_skip_fires_only_what_is_on_time_and_records_every_skipped_time);
async fn misfire_skip_fires_only_what_is_on_time_and_records_every_skipped_time(db: Db) {
    let (host, report, _) = outage(db, "misfire = \"skip\"").await;
    assert_eq!((report.created, report.skipped, report.parked), (1, 30, 0));
    assert_eq!(states(&host).await, [("pending".to_string(), 1)]);
    assert_eq!(
        host.store.skipped_counts().await.unwrap(),
        [("misfire_skip".to_string(), 30)]
    );
}

db_test!(misfire_latest_fires_the_most_recent_missed_time_only);
async fn misfire_latest_fires_the_most_recent_missed_time_only(db: Db) {
    let (host, report, now) = outage(db, "misfire = \"latest\"").await;
    assert_eq!((report.created, report.skipped, report.parked), (2, 29, 0));
    let latest_missed: i64 =
        sqlx::query_scalar(host.store.sql("SELECT min(scheduled_at) FROM triggers"))
            .fetch_one(host.store.pool())
            .await
            .unwrap();
    assert_eq!(
        latest_missed,
        now - 90_000,
        "the last time older than the 60 s threshold"
    );
}

db_test!(misfire_all_catches_up_within_the_window_and_skips_older_times);
async fn misfire_all_catches_up_within_the_window_and_skips_older_times(db: Db) {
    let (host, report, _) = outage(db, "misfire = \"all\"\ncatchup_window = \"10m\"").await;
    // Now is 30 s past a minute: the 9 missed times within 10 minutes fire
    // with the one on time; the 21 older ones are skipped.
    assert_eq!((report.created, report.skipped, report.parked), (10, 21, 0));
    assert_eq!(states(&host).await, [("pending".to_string(), 10)]);
    // The 9 catch-up fires run in the recovery lane (a share of their
    // group's capacity, ramped); the one on time is fresh work.
    let lanes: Vec<(i64, i64)> = sqlx::query_as(host.store.sql(
        "SELECT CAST(recovery AS BIGINT), count(*) FROM triggers GROUP BY recovery ORDER BY recovery",
    ))
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(lanes, [(0, 1), (1, 9)]);
}

db_test!(a_catch_up_larger_than_max_catchup_waits_for_approval_instead_of_flooding);
async fn a_catch_up_larger_than_max_catchup_waits_for_approval_instead_of_flooding(db: Db) {
    let (host, report, _) = outage(
        db,
        "misfire = \"all\"\ncatchup_window = \"1h\"\nmax_catchup = 5",
    )
    .await;
    assert_eq!((report.created, report.skipped, report.parked), (31, 0, 30));
    assert_eq!(
        states(&host).await,
        [("manual".to_string(), 30), ("pending".to_string(), 1)]
    );
    // A person approves one; it becomes runnable, audited.
    let parked: i64 = sqlx::query_scalar(
        host.store
            .sql("SELECT id FROM triggers WHERE state = 'manual' LIMIT 1"),
    )
    .fetch_one(host.store.pool())
    .await
    .unwrap();
    host.store
        .trigger_approve(parked, "ops", "backfill approved")
        .await
        .unwrap();
    assert_eq!(
        host.store.trigger_get(parked).await.unwrap().state,
        "pending"
    );
    assert!(
        host.store
            .trigger_approve(parked, "ops", "again")
            .await
            .is_err()
    );
    assert_eq!(
        host.store
            .audit_list()
            .await
            .unwrap()
            .last()
            .unwrap()
            .action,
        "trigger.approve"
    );
}

db_test!(a_new_plan_version_never_doubles_or_rewrites_triggers_of_the_old_one);
async fn a_new_plan_version_never_doubles_or_rewrites_triggers_of_the_old_one(db: Db) {
    let host = TestHost::new(db).await;
    let every_second = "[schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"";
    host.job("tick", "noop", &format!("[params]\nv = 1\n{every_second}"))
        .await;
    let s = Scanner::new(
        host.store.clone(),
        ScannerConfig {
            owner: "S".into(),
            lookahead: Duration::from_secs(5),
            ..ScannerConfig::default()
        },
    );
    let now = host.store.now_ms().await.unwrap();
    let first = s.tick(Some(now)).await.unwrap();
    assert!(first.created >= 4, "{first:?}");
    let v1_before: Vec<(String, i64)> = sqlx::query_as(
        host.store
            .sql("SELECT plan_key, plan_version FROM triggers ORDER BY id"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    // v2 becomes active now, while v1's lookahead triggers are still ahead.
    assert_eq!(
        host.job("tick", "noop", &format!("[params]\nv = 2\n{every_second}"))
            .await,
        2
    );
    let later = host.store.now_ms().await.unwrap() + 10_000;
    s.tick(Some(later)).await.unwrap();
    // Every v1 trigger is untouched, and no instant has two triggers.
    let after: Vec<(String, i64)> = sqlx::query_as(
        host.store
            .sql("SELECT plan_key, plan_version FROM triggers ORDER BY id"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(&after[..v1_before.len()], &v1_before[..]);
    let doubled: i64 = sqlx::query_scalar(host.store.sql(
        "SELECT count(*) FROM (SELECT scheduled_at FROM triggers GROUP BY scheduled_at HAVING count(*) > 1) AS doubled",
    ))
    .fetch_one(host.store.pool())
    .await
    .unwrap();
    assert_eq!(doubled, 0);
    assert!(
        after.iter().any(|(_, v)| *v == 2),
        "v2 fires after it became active"
    );
}

db_test!(misfire_manual_parks_every_missed_time);
async fn misfire_manual_parks_every_missed_time(db: Db) {
    let (host, report, _) = outage(db, "misfire = \"manual\"").await;
    assert_eq!((report.created, report.skipped, report.parked), (31, 0, 30));
    assert_eq!(
        states(&host).await,
        [("manual".to_string(), 30), ("pending".to_string(), 1)]
    );
}

/// A scheduled job with an overlap policy, two of its fire times due at
/// once, and the ledger its gates go through. The first run's own params
/// (`first`) say how it lasts until the test decides: waiting at a gate the
/// test holds (`{"gate_at": 0}`), or burning CPU until it is told to stop
/// (`{"burn": true}`). The second run has one step and no gate.
async fn overlapping(
    db: Db,
    overlap_toml: &str,
    first: serde_json::Value,
) -> (TestHost, Vec<i64>, Ledger) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put_gate(&host.store, &ledger).await;
    host.group("slow", i64::MAX, 64 << 20, Duration::from_secs(60))
        .await;
    host.job(
        "slow",
        "gated",
        &format!(
            "resource_group = \"slow\"\nconnectors = [\"gate\"]\n[params]\nsteps = 1\n\
             [schedule]\nkind = \"cron\"\ncron = \"*/10 * * * * *\"\ntimezone = \"UTC\"\n{overlap_toml}"
        ),
    )
    .await;
    let now = host.store.now_ms().await.unwrap();
    let first_at = (now / 10_000 - 2) * 10_000;
    let make = |at: i64| paddock::store::ScheduledTrigger {
        job_id: "slow".into(),
        plan_version: 1,
        tenant: "t1".into(),
        resource_group: "slow".into(),
        priority: 0,
        scheduled_at: at,
        state: paddock::model::TriggerState::Pending,
        recovery: false,
    };
    let shard = paddock::model::shard_of("slow", host.store.shard_count().await.unwrap());
    let lease = host
        .store
        .shard_lease(shard, "test", 60_000, None)
        .await
        .unwrap()
        .expect("a free shard");
    let scan = paddock::store::ScanCommit {
        triggers: vec![make(first_at), make(first_at + 10_000)],
        skipped: vec![],
        watermark: 0,
    };
    host.store.scan_commit(&lease, &scan).await.unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(
        host.store
            .sql("SELECT id FROM triggers ORDER BY scheduled_at"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    sqlx::query(
        host.store
            .sql("UPDATE triggers SET params = ? WHERE id = ?"),
    )
    .bind(first.to_string())
    .bind(ids[0])
    .execute(host.store.pool())
    .await
    .unwrap();
    ledger.hold_gate(ids[0], 1).await;
    (host, ids, ledger)
}

/// A runner with two slots, running until the returned sender fires.
fn run_both(
    host: &TestHost,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let runner = paddock::lease::Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        paddock::lease::RunnerConfig {
            runner_id: "r".into(),
            lease: Duration::from_millis(400),
            heartbeat_every: Duration::from_millis(100),
            claim_batch: 1,
            max_concurrency: 2,
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        runner
            .run(async {
                let _ = stopped.await;
            })
            .await
    });
    (stop, task)
}

/// Wait until trigger `id` is in `state`.
async fn reaches(host: &TestHost, id: i64, state: &str) -> paddock::store::TriggerRecord {
    eventually(
        Duration::from_secs(60),
        &format!("trigger {id} to be {state}"),
        || async {
            let t = host.store.trigger_get(id).await.unwrap();
            (t.state == state).then_some(t)
        },
    )
    .await
}

db_test!(overlap_forbid_skips_the_new_run_and_counts_it, workers = 2);
async fn overlap_forbid_skips_the_new_run_and_counts_it(db: Db) {
    let (host, ids, ledger) = overlapping(
        db,
        "overlap = \"forbid\"\nmax_in_flight = 1",
        json!({"gate_at": 0}),
    )
    .await;
    let (stop, runner) = run_both(&host);
    // The first run is still running (at its gate) when the second comes.
    ledger.at_gate(ids[0], 1).await;
    let second = reaches(&host, ids[1], "skipped").await;
    ledger.open_gate(ids[0], 1).await;
    let first = reaches(&host, ids[0], "succeeded").await;
    let _ = stop.send(());
    runner.await.unwrap();
    assert_eq!(first.attempts, 1);
    assert_eq!(
        (second.state.as_str(), second.error_class.as_deref()),
        ("skipped", Some("overlap_forbidden"))
    );
    assert_eq!(host.store.counter("overlap_skipped").await.unwrap(), 1);
    ledger.stop().await;
}

db_test!(
    overlap_replace_cancels_the_running_one_through_the_cancel_path,
    workers = 2
);
async fn overlap_replace_cancels_the_running_one_through_the_cancel_path(db: Db) {
    // The first run burns until told to stop: only the cancel can end it.
    let (host, ids, ledger) = overlapping(
        db,
        "overlap = \"replace\"\nmax_in_flight = 1",
        json!({"burn": true}),
    )
    .await;
    let (stop, runner) = run_both(&host);
    let first = reaches(&host, ids[0], "cancelled").await;
    let second = reaches(&host, ids[1], "succeeded").await;
    let _ = stop.send(());
    runner.await.unwrap();
    assert_eq!(
        (first.state.as_str(), first.error_class.as_deref()),
        ("cancelled", Some("cancelled"))
    );
    assert_eq!(second.state, "succeeded");
    ledger.stop().await;
}

/// Attempts of trigger `id` that gave their slot back to wait.
async fn released(host: &TestHost, id: i64) -> i64 {
    sqlx::query_scalar(
        host.store
            .sql("SELECT count(*) FROM attempts WHERE trigger_id = ? AND outcome = 'released'"),
    )
    .bind(id)
    .fetch_one(host.store.pool())
    .await
    .unwrap()
}

db_test!(
    overlap_allow_waits_for_a_free_slot_and_runs_both,
    workers = 2
);
async fn overlap_allow_waits_for_a_free_slot_and_runs_both(db: Db) {
    let (host, ids, ledger) = overlapping(
        db,
        "overlap = \"allow\"\nmax_in_flight = 1",
        json!({"gate_at": 0}),
    )
    .await;
    let (stop, runner) = run_both(&host);
    ledger.at_gate(ids[0], 1).await;
    // While the first runs, the second waits for its slot at least once.
    eventually(
        Duration::from_secs(60),
        "the second run to wait",
        || async { (released(&host, ids[1]).await >= 1).then_some(()) },
    )
    .await;
    // One in flight at a time: the second has not run while the first is.
    assert_eq!(host.store.trigger_get(ids[1]).await.unwrap().result, None);
    ledger.open_gate(ids[0], 1).await;
    for id in &ids {
        reaches(&host, *id, "succeeded").await;
    }
    let _ = stop.send(());
    runner.await.unwrap();
    ledger.stop().await;
}

#[test]
fn schedule_preview_prints_utc_and_local_times_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never-created.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args([
            "--database-url",
            &format!("sqlite://{}", db.display()),
            "schedule",
            "preview",
            "--cron",
            "0 30 2 * * *",
            "--tz",
            "America/New_York",
            "--from",
            "2027-03-13T00:00:00Z",
            "--to",
            "2027-03-16T00:00:00Z",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "2027-03-13T07:30:00Z  2027-03-13 02:30:00 EST",
            "2027-03-14T07:00:00Z  2027-03-14 03:00:00 EDT",
            "2027-03-15T06:30:00Z  2027-03-15 02:30:00 EDT",
        ]
    );
    assert!(
        !db.exists(),
        "a preview of a bare schedule touches no database"
    );
}

#[test]
fn schedule_diff_compares_a_crontab_line_with_a_cron_schedule() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args([
            "schedule",
            "diff",
            "cron:0 0 * * * *",
            "cron:0 */2 * * *",
            "--tz",
            "UTC",
            "--from",
            "2027-01-01T00:00:00Z",
            "--to",
            "2027-01-01T06:00:00Z",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("only in A (cron:0 0 * * * *): 3"), "{text}");
    assert!(text.contains("only in B (cron:0 */2 * * *): 0"), "{text}");
    assert!(text.contains("in both: 3"), "{text}");
}
