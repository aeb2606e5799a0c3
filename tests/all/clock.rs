//! Every instant Paddock writes is the database's, proved two ways on
//! PostgreSQL:
//!
//! - a `paddock serve` whose process clock runs two hours ahead
//!   (libfaketime, installed by `scripts/test-tools.sh`) leases, runs,
//!   heartbeats, fires a schedule and moves watermarks, and not one instant
//!   it wrote is on its own clock;
//! - the seed's lease scenario at its own numbers (lease 60 s, a heartbeat
//!   every 15 s, the gate after 2 missed heartbeats) on a database clock
//!   the test sets: every statement reads `clock_timestamp()`, and the
//!   test's schema puts a function of that name before `pg_catalog` on the
//!   search path, so the database's "now" is a row the test moves. Each
//!   runner's heartbeats are paced by a [`ManualClock`] the test moves with
//!   it, so a minute of lease takes no minute of waiting.
//!
//! PostgreSQL only, and named so: SQLite's clock is the process's own
//! (`unixepoch()` is computed in the writing process), so there is no
//! second clock to tell apart and none to set apart from the test's own;
//! SQLite runs the scenario with real processes at a tenth of its times
//! (`faults::the_seeds_scenario_5_at_a_tenth_of_its_times...`).
//!
//! [`ManualClock`]: paddock::lease::ManualClock

mod postgres {
    use crate::procs::{Proc, eventually};
    use crate::{Db, TestHost};
    use paddock::store::prelude::*;
    use serde_json::json;
    use std::time::Duration;

    /// Two hours, the skew; an instant this far from the database's now
    /// was written on the runner's clock.
    const SKEW_MS: i64 = 2 * 3_600_000;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runner_two_hours_ahead_writes_every_instant_on_the_database_clock() {
        assert!(
            std::process::Command::new("faketime")
                .arg("--version")
                .output()
                .is_ok(),
            "faketime is missing: `bash scripts/test-tools.sh` installs it"
        );
        let host = TestHost::new(Db::Postgres).await;
        host.job("solo", "hello", "[params]\nsteps = 3").await;
        host.job(
            "tick",
            "noop",
            "[schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"",
        )
        .await;
        let started = host.store.now_ms().await.unwrap();
        let manual = host.trigger("solo", json!({})).await.id;
        // Timers keep the real monotonic clock: only the wall clock is off.
        let skewed = Proc::spawn_under(
            &[
                "env",
                "FAKETIME_DONT_FAKE_MONOTONIC=1",
                "faketime",
                "-f",
                "+2h",
            ],
            "skewed",
            &host.url,
            host.dir.path(),
            &[
                "serve",
                "--runner-id",
                "skewed",
                "--lease",
                "2s",
                "--heartbeat",
                "200ms",
                "--poll",
                "100ms",
                "--db-connections",
                "4",
            ],
        );
        eventually(
            Duration::from_secs(60),
            "the manual run and 3 fires to succeed",
            || async {
                let manual = host.store.trigger_get(manual).await.unwrap().state == "succeeded";
                let fired: i64 = sqlx::query_scalar(host.store.sql(
                    "SELECT count(*) FROM triggers WHERE job_id = 'tick' AND state = 'succeeded'",
                ))
                .fetch_one(host.store.pool())
                .await
                .unwrap();
                (manual && fired >= 3).then_some(())
            },
        )
        .await;
        drop(skewed);
        let now = host.store.now_ms().await.unwrap();
        // Every instant column the serving process wrote, with its table.
        let instants: Vec<(String, i64)> = sqlx::query_as(host.store.sql(
            "SELECT 'attempts.started_at', started_at FROM attempts \
             UNION ALL SELECT 'attempts.lease_until', lease_until FROM attempts \
             UNION ALL SELECT 'attempts.heartbeat_at', heartbeat_at FROM attempts WHERE heartbeat_at IS NOT NULL \
             UNION ALL SELECT 'attempts.ended_at', ended_at FROM attempts WHERE ended_at IS NOT NULL \
             UNION ALL SELECT 'triggers.scheduled_at', scheduled_at FROM triggers \
             UNION ALL SELECT 'triggers.next_run_at', next_run_at FROM triggers \
             UNION ALL SELECT 'triggers.updated_at', updated_at FROM triggers \
             UNION ALL SELECT 'triggers.finished_at', finished_at FROM triggers WHERE finished_at IS NOT NULL \
             UNION ALL SELECT 'checkpoints.saved_at', saved_at FROM checkpoints \
             UNION ALL SELECT 'schedule_shards.watermark', watermark FROM schedule_shards WHERE watermark IS NOT NULL \
             UNION ALL SELECT 'schedule_shards.lease_until', lease_until FROM schedule_shards WHERE lease_until IS NOT NULL",
        ))
        .fetch_all(host.store.pool())
        .await
        .unwrap();
        assert!(instants.len() > 10, "{instants:?}");
        let off: Vec<&(String, i64)> = instants
            .iter()
            .filter(|(_, at)| *at < started - 60_000 || *at > now + 60_000)
            .collect();
        assert!(
            off.is_empty(),
            "written outside [{started} − 1 min, {now} + 1 min] — on the runner's clock ({} ms ahead)? {off:?}",
            SKEW_MS
        );
    }

    mod scenario_5;
}
