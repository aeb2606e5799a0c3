//! Wake-ups across processes: PostgreSQL LISTEN/NOTIFY announces new work;
//! polling stays the fallback, so a lost notification loses nothing.

use crate::TestHost;
use crate::procs::{Proc, eventually};
use paddock::store::prelude::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn counting_listener(host: &TestHost) -> (Option<paddock::store::WakeListener>, Arc<AtomicUsize>) {
    let wakes = Arc::new(AtomicUsize::new(0));
    let listener = host.store.listen_wakes({
        let wakes = wakes.clone();
        Arc::new(move || {
            wakes.fetch_add(1, Ordering::SeqCst);
        })
    });
    (listener, wakes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_trigger_is_announced_to_listeners_and_only_on_postgres() {
    let host = TestHost::new().await;
    host.job("hello", "hello", "").await;
    let (listener, wakes) = counting_listener(&host);
    if crate::postgres_base_url().is_none() {
        // One process owns a SQLite file and wakes its runner in memory.
        assert!(listener.is_none(), "SQLite has no cross-process wake-ups");
        return;
    }
    // Let the listener connect before the announcement is sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    host.trigger("hello", json!({})).await;
    eventually(Duration::from_secs(10), "a wake-up", || async {
        (wakes.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_due_later_wakes_listeners_when_it_comes_due_not_before() {
    let host = TestHost::new().await;
    host.job("hello", "hello", "").await;
    let (listener, wakes) = counting_listener(&host);
    if listener.is_none() {
        return; // SQLite: see the test above.
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let now = host.store.now_ms().await.unwrap();
    let mut later = paddock::store::NewTrigger::manual("hello", json!({}), None);
    later.scheduled_at = Some(now + 2_000);
    host.store.trigger_create(&later).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(wakes.load(Ordering::SeqCst), 0, "not due yet");
    eventually(Duration::from_secs(10), "the due-time wake-up", || async {
        (wakes.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
}

/// Channels are per database, not per schema: installations sharing one
/// database in separate schemas (each test here has its own) must not wake
/// each other's runners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_in_another_schema_of_the_same_database_wakes_nobody() {
    let here = TestHost::new().await;
    let elsewhere = TestHost::new().await;
    let (listener, wakes) = counting_listener(&here);
    if listener.is_none() {
        return; // SQLite: see the first test.
    }
    here.job("hello", "hello", "").await;
    elsewhere.job("hello", "hello", "").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = wakes.load(Ordering::SeqCst);
    elsewhere.trigger("hello", json!({})).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        wakes.load(Ordering::SeqCst),
        before,
        "another schema's work woke this listener"
    );
    here.trigger("hello", json!({})).await;
    eventually(Duration::from_secs(10), "this schema's wake-up", || async {
        (wakes.load(Ordering::SeqCst) > before).then_some(())
    })
    .await;
}

/// A runner in another process that polls once a minute still starts a new
/// trigger at once: the creating process's notification wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_wakes_a_runner_in_another_process_long_before_its_poll() {
    let host = TestHost::new().await;
    if crate::postgres_base_url().is_none() {
        return; // SQLite: one process per file, nothing to notify.
    }
    host.job("hello", "hello", "").await;
    let _runner = Proc::serve(
        "R",
        &host.url,
        host.dir.path(),
        &["--poll", "60s", "--lease", "5s"],
    );
    // Its first claim pass happens at start; wait until it is listening.
    tokio::time::sleep(Duration::from_secs(3)).await;
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
}

/// Work inserted without any announcement (a lost notification) is still
/// found by the next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_notification_loses_nothing_the_poll_finds_the_work() {
    let host = TestHost::new().await;
    host.job("hello", "hello", "").await;
    let _runner = Proc::serve(
        "R",
        &host.url,
        host.dir.path(),
        &["--poll", "1s", "--lease", "5s"],
    );
    let plan = host.store.plan_get("hello", 1).await.unwrap();
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
            let t = host.store.trigger_by_key("hello@silent").await.unwrap();
            (t.state == "succeeded").then_some(())
        },
    )
    .await;
}
