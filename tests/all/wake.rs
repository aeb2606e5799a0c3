//! Wake-ups across processes: PostgreSQL LISTEN/NOTIFY announces new work;
//! polling stays the fallback, so a lost notification loses nothing.
//!
//! Announcements exist only on PostgreSQL (one process owns a SQLite file
//! and wakes its runner in memory), so most of these tests live in the
//! `postgres` module; `sqlite` checks that nothing listens there.

use crate::procs::{Proc, eventually};
use crate::{Db, TestHost};
use paddock::store::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A listener that records when each wake-up came.
fn recording_listener(
    host: &TestHost,
) -> (
    Option<paddock::store::WakeListener>,
    Arc<Mutex<Vec<Instant>>>,
) {
    let wakes = Arc::new(Mutex::new(Vec::new()));
    let listener = host.store.listen_wakes({
        let wakes = wakes.clone();
        Arc::new(move || wakes.lock().unwrap().push(Instant::now()))
    });
    (listener, wakes)
}

fn count(wakes: &Mutex<Vec<Instant>>) -> usize {
    wakes.lock().unwrap().len()
}

mod sqlite {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_listens_for_wake_ups_because_one_process_owns_the_file() {
        let host = TestHost::new(Db::Sqlite).await;
        let (listener, _) = recording_listener(&host);
        assert!(listener.is_none(), "SQLite has no cross-process wake-ups");
    }
}

mod postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_created_trigger_is_announced_to_listeners() {
        let host = TestHost::new(Db::Postgres).await;
        host.job("hello", "hello", "").await;
        let (listener, wakes) = recording_listener(&host);
        let listener = listener.expect("PostgreSQL listens for wake-ups");
        // An announcement reaches only sessions that LISTEN at its commit.
        listener.listening().await;
        host.trigger("hello", json!({})).await;
        eventually(Duration::from_secs(30), "a wake-up", || async {
            (count(&wakes) >= 1).then_some(())
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_trigger_due_later_wakes_listeners_when_it_comes_due_not_before() {
        const LATER: Duration = Duration::from_secs(2);
        let host = TestHost::new(Db::Postgres).await;
        host.job("hello", "hello", "").await;
        let (listener, wakes) = recording_listener(&host);
        let listener = listener.expect("PostgreSQL listens for wake-ups");
        listener.listening().await;
        // Taken before the database's now is read, so "due" below is no
        // earlier than `asked + LATER` on this machine's clock.
        let asked = Instant::now();
        let now = host.store.now_ms().await.unwrap();
        let mut later = paddock::store::NewTrigger::manual("hello", json!({}), None);
        later.scheduled_at = Some(now + LATER.as_millis() as i64);
        host.store.trigger_create(&later).await.unwrap();
        let first = eventually(Duration::from_secs(30), "the due-time wake-up", || async {
            wakes.lock().unwrap().first().copied()
        })
        .await;
        // The payload is whole milliseconds of the database's clock: allow
        // for their rounding, nothing more.
        let early_by = (asked + LATER).saturating_duration_since(first);
        assert!(
            early_by <= Duration::from_millis(5),
            "woken {early_by:?} before the trigger was due"
        );
    }

    /// Channels are per database, not per schema: installations sharing one
    /// database in separate schemas (each test here has its own) must not
    /// wake each other's runners.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_in_another_schema_of_the_same_database_wakes_nobody() {
        let here = TestHost::new(Db::Postgres).await;
        let elsewhere = TestHost::new(Db::Postgres).await;
        here.job("hello", "hello", "").await;
        elsewhere.job("hello", "hello", "").await;
        let (listener, wakes) = recording_listener(&here);
        let listener = listener.expect("PostgreSQL listens for wake-ups");
        listener.listening().await;
        let before = count(&wakes);
        // The other schema's announcement commits first. PostgreSQL
        // delivers notifications to a session in commit order, so had it
        // reached this listener it would have done so before this schema's
        // own: once that one has arrived, the count is final.
        elsewhere.trigger("hello", json!({})).await;
        here.trigger("hello", json!({})).await;
        eventually(Duration::from_secs(30), "this schema's wake-up", || async {
            (count(&wakes) > before).then_some(())
        })
        .await;
        assert_eq!(
            count(&wakes),
            before + 1,
            "another schema's work woke this listener"
        );
    }

    /// The `LISTEN` session of the process serving `url`'s schema, seen
    /// from the server: its last statement was the `LISTEN` and it is idle.
    async fn serve_is_listening(host: &TestHost) -> bool {
        let schema: String = sqlx::query_scalar("SELECT current_schema()::text")
            .fetch_one(host.store.pool())
            .await
            .unwrap();
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND query = $1",
        )
        .bind(format!(
            "LISTEN \"{}:{schema}\"",
            paddock::store::WAKE_CHANNEL
        ))
        .fetch_one(host.store.pool())
        .await
        .unwrap();
        listening >= 1
    }

    /// A runner in another process that polls once a minute still starts a
    /// new trigger at once: the creating process's notification wakes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_notification_wakes_a_runner_in_another_process_long_before_its_poll() {
        let host = TestHost::new(Db::Postgres).await;
        let ledger = crate::ledger::Ledger::start().await;
        crate::ledger::put_gate(&host.store, &ledger).await;
        host.job("hello", "hello", "").await;
        host.group("held", i64::MAX, 64 << 20, Duration::from_secs(600))
            .await;
        host.job(
            "held",
            "gated",
            "resource_group = \"held\"\nconnectors = [\"gate\"]\n[params]\ngate_at = 0",
        )
        .await;
        // A first trigger the runner claims at start and that then waits at
        // its gate for the rest of the test: once it is there, the runner's
        // start-up claims are long done, and it has a free slot and nothing
        // to do but wait for its 60 s poll, or a wake-up.
        let held = host.trigger("held", json!({})).await;
        ledger.hold_gate(held.id, 1).await;
        let _runner = Proc::serve(
            "R",
            &host.url,
            host.dir.path(),
            &["--poll", "60s", "--lease", "30s", "--concurrency", "2"],
        );
        ledger.at_gate(held.id, 1).await;
        eventually(Duration::from_secs(60), "R to LISTEN", || async {
            serve_is_listening(&host).await.then_some(())
        })
        .await;
        let started = Instant::now();
        let t = host.trigger("hello", json!({})).await;
        eventually(
            Duration::from_secs(30),
            "the trigger to succeed",
            || async {
                let t = host.store.trigger_get(t.id).await.unwrap();
                (t.state == "succeeded").then_some(())
            },
        )
        .await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(30),
            "woken by the notification, not the 60 s poll ({took:?})"
        );
        assert_eq!(
            ledger.waiting_sent(&ledger.gate_key(held.id, 1)).await,
            1,
            "the first trigger never ended, so no finished attempt woke the runner"
        );
        drop(_runner);
        ledger.stop().await;
    }
}

db_test!(
    a_lost_notification_loses_nothing_the_poll_finds_the_work,
    workers = 2
);
/// Work inserted without any announcement (a lost notification) is still
/// found by the next poll.
async fn a_lost_notification_loses_nothing_the_poll_finds_the_work(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "").await;
    let _runner = Proc::serve(
        "R",
        &host.url,
        host.dir.path(),
        &["--poll", "1s", "--lease", "5s"],
    );
    let plan = host
        .store
        .plan_get(crate::TENANT, "hello", 1)
        .await
        .unwrap();
    sqlx::query(host.store.sql(
        "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, origin, \
         scheduled_at, params, state, priority, next_run_at, created_at, updated_at) \
         VALUES ('hello@silent', 'hello', 1, 't1', ?1, 'manual', 0, '{}', 'pending', 0, 0, 0, 0)",
    ))
    .bind(&plan.resource_group)
    .execute(host.store.pool())
    .await
    .unwrap();
    eventually(
        Duration::from_secs(60),
        "the silent trigger to succeed",
        || async {
            let t = host
                .store
                .trigger_by_key(crate::TENANT, "hello@silent")
                .await
                .unwrap();
            (t.state == "succeeded").then_some(())
        },
    )
    .await;
}
