//! The seed's scenario 5 at its own numbers, on a database clock the test
//! sets. Runners A and B run in this process with the seed's flags (lease
//! 60 s, a heartbeat every 15 s, the commit gate after 2 missed
//! heartbeats); their heartbeats are paced by manual clocks, and the
//! database's `clock_timestamp()` reads a row the test moves. Timeline, in
//! seconds from the trigger's creation:
//!
//! - 3: A claims with token 41 (lease to 63) and parks in its effect;
//! - 18: A's heartbeat fails (a refusal injected in the database): one
//!   missed heartbeat, under the gate's two, so A's gate stays open and its
//!   lease still ends at 63;
//! - 22: A is paused — its clock stops, its request stays parked;
//! - 63 (+1 ms, once the lease has lapsed): B claims with token 42, resumes
//!   from A's checkpoint, sends the effect and commits;
//! - 82: A is back — its overdue heartbeat is refused, its parked request
//!   is refused downstream, its effect outcome write is refused and its
//!   checkpoint and commit are stopped at the closed gate, each counted.
//!
//! Every instant is asserted exactly, so a lease or attempt time taken from
//! the process clock (today, not 2030) fails the test.

use crate::faults::{assert_effect, checkpoint, counter, held, held_release, result, scalar};
use crate::ledger::Ledger;
use crate::procs::eventually;
use crate::{Db, TestHost};
use paddock::effects::EffectGateway;
use paddock::lease::{Heartbeats, ManualClock, ProcessClock, Runner, RunnerConfig};
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// 2030-01-01T00:00:00Z in ms: the database clock's start, far from the
/// machine's own clock.
const T0: i64 = 1_893_456_000_000;
const SECOND: i64 = 1_000;

/// The database's clock: a row in the test's schema, read by the
/// `clock_timestamp()` the schema puts before `pg_catalog`.
struct DatabaseClock {
    host: TestHost,
}

impl DatabaseClock {
    /// A test host on a fresh schema whose clock stands at `T0`.
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = crate::fresh_database_url(Db::Postgres, dir.path()).await;
        let (_, schema) = url.split_once("options[search_path]=").unwrap();
        let mut conn = crate::connect_postgres(&crate::postgres_base_url()).await;
        for sql in [
            format!("CREATE TABLE {schema}.test_database_clock (ms BIGINT NOT NULL)"),
            format!("INSERT INTO {schema}.test_database_clock VALUES ({T0})"),
            format!(
                "CREATE FUNCTION {schema}.clock_timestamp() RETURNS timestamptz \
                 LANGUAGE sql VOLATILE \
                 AS $$ SELECT to_timestamp(ms / 1000.0) FROM {schema}.test_database_clock $$"
            ),
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        // Listed explicitly, `pg_catalog` is searched after the schema, so
        // the schema's `clock_timestamp()` is the one every statement calls.
        let host = TestHost::on(format!("{url},pg_catalog"), dir).await;
        Self { host }
    }

    async fn set(&self, ms: i64) {
        sqlx::query("UPDATE test_database_clock SET ms = $1")
            .bind(ms)
            .execute(self.host.store.pool())
            .await
            .unwrap();
        assert_eq!(self.host.store.now_ms().await.unwrap(), ms);
    }
}

/// The database clock and the two processes' clocks, moved together
/// except while A is paused.
struct Timeline {
    db: DatabaseClock,
    a: Arc<ManualClock>,
    b: Arc<ManualClock>,
    a_paused: AtomicBool,
}

impl Timeline {
    async fn at(&self, ms: i64) {
        self.db.set(T0 + ms).await;
        let since = Duration::from_millis(ms as u64);
        if !self.a_paused.load(Ordering::SeqCst) {
            self.a.set(since);
        }
        self.b.set(since);
    }

    /// A's clock stands still until [`Timeline::resume_a`], as a stopped
    /// process's timers do.
    fn pause_a(&self) {
        self.a_paused.store(true, Ordering::SeqCst);
    }

    fn resume_a(&self) {
        self.a_paused.store(false, Ordering::SeqCst);
    }
}

/// A runner with the seed's flags whose heartbeats `clock` paces.
fn runner(host: &TestHost, id: &str, concurrency: usize, clock: &Arc<ManualClock>) -> Arc<Runner> {
    let store: Arc<dyn RunnerStore> = Arc::new(host.store.clone());
    let heartbeats = Heartbeats::on_clock(store.clone(), ProcessClock::Manual(clock.clone()));
    Runner::with_parts(
        store,
        host.sandbox.clone(),
        RunnerConfig {
            runner_id: id.into(),
            lease: Duration::from_secs(60),
            heartbeat_every: Duration::from_secs(15),
            max_missed_heartbeats: 2,
            max_concurrency: concurrency,
            poll_interval: Duration::from_millis(20),
            ..RunnerConfig::default()
        },
        EffectGateway::new(host.store.clone()),
        heartbeats,
    )
}

/// While present, the database refuses every renewal of a lease A holds.
const REFUSE_A_RENEWALS: &str = "\
CREATE FUNCTION test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$ \
BEGIN RAISE EXCEPTION 'injected fault: the database refuses this renewal'; END $$; \
CREATE TRIGGER test_refuse_renewal BEFORE UPDATE OF lease_until ON triggers FOR EACH ROW \
WHEN (OLD.lease_owner = 'A' AND NEW.lease_owner = 'A') EXECUTE FUNCTION test_refuse_renewal()";
const ALLOW_RENEWALS: &str = "\
DROP TRIGGER test_refuse_renewal ON triggers; DROP FUNCTION test_refuse_renewal()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_scenario_5_at_its_own_numbers_on_a_database_clock_the_test_sets() {
    let time = Timeline {
        db: DatabaseClock::start().await,
        a: ManualClock::new(),
        b: ManualClock::new(),
        a_paused: AtomicBool::new(false),
    };
    let ledger = Ledger::start().await;
    let host = &time.db.host;
    let key = "RES-41/release/v1";
    let t = held_release(host, &ledger, "RES-41", 41).await;
    assert_eq!((t.scheduled_at, t.next_run_at), (T0, T0));

    // 3 s: A claims (one slot, which its parked attempt keeps).
    time.at(3 * SECOND).await;
    let a_runner = runner(host, "A", 1, &time.a);
    let a = TestHost::serve(&a_runner);
    eventually(Duration::from_secs(60), "A's effect parked", || async {
        (held(&ledger, key).await >= 1).then_some(())
    })
    .await;
    let tr = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (tr.lease_owner.as_deref(), tr.fencing_token, tr.lease_until),
        (Some("A"), 41, Some(T0 + 63 * SECOND)),
        "A's lease runs 60 s from its claim on the database clock"
    );
    assert_eq!(checkpoint(host, t.id).await, Some((5, 5, 41)));

    // 18 s: A's first heartbeat is refused by the database. One miss:
    // the gate stays open and the lease is not extended.
    sqlx::raw_sql(REFUSE_A_RENEWALS)
        .execute(host.store.pool())
        .await
        .unwrap();
    time.at(18 * SECOND).await;
    eventually(Duration::from_secs(30), "A's heartbeat to fail", || async {
        (a_runner.metrics().missed_heartbeats.get() >= 1).then_some(())
    })
    .await;
    sqlx::raw_sql(ALLOW_RENEWALS)
        .execute(host.store.pool())
        .await
        .unwrap();
    assert_eq!(a_runner.metrics().missed_heartbeats.get(), 1);
    let given_up: u64 = a_runner
        .metrics()
        .lease_conflicts
        .get_or_create(&paddock::lease::metrics::ConflictLabel {
            reason: "unconfirmed",
        })
        .get();
    assert_eq!(
        given_up, 0,
        "one missed heartbeat of two keeps the gate open"
    );
    let tr = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (tr.state.as_str(), tr.lease_until),
        ("running", Some(T0 + 63 * SECOND))
    );

    // 22 s: A is paused. B starts; until 63 s A's lease holds.
    time.at(22 * SECOND).await;
    time.pause_a();
    let b_runner = runner(host, "B", 2, &time.b);
    let b = TestHost::serve(&b_runner);
    time.at(63 * SECOND).await;
    assert_eq!(
        host.store
            .trigger_get(t.id)
            .await
            .unwrap()
            .lease_owner
            .as_deref(),
        Some("A"),
        "a lease that ends at 63 s still holds at 63 s"
    );
    time.at(63 * SECOND + 1).await;
    let done = eventually(
        Duration::from_secs(60),
        "B completes the trigger",
        || async {
            let tr = host.store.trigger_get(t.id).await.unwrap();
            (tr.state == "succeeded").then_some(tr)
        },
    )
    .await;
    assert_eq!(done.fencing_token, 42);
    assert_eq!(done.finished_at, Some(T0 + 63 * SECOND + 1));
    let out = result(&done);
    assert_eq!(
        (&out["outcome"], &out["attempt"], &out["resumed_from"]),
        (&json!("done"), &json!(2), &json!(5)),
        "{out}"
    );
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["fencing_token"], 42, "{body}");
    assert_eq!(checkpoint(host, t.id).await, Some((6, 6, 42)));
    assert_eq!(counter(host, "stale_token_rejections").await, 0);

    // 82 s: A is back. Its heartbeat (due at 33 s on its clock) is refused.
    time.resume_a();
    time.at(82 * SECOND).await;
    eventually(Duration::from_secs(30), "A's heartbeat refused", || async {
        (counter(host, "stale_token_rejections").await >= 1).then_some(())
    })
    .await;
    // The parked request (token 41) reaches the ledger, which has seen 42.
    ledger.release(key).await;
    a.stop().await;
    b.stop().await;

    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 1, "one effect downstream: {stats}");
    assert_eq!(stats["stale_token_rejections"], 1, "{stats}");
    assert_eq!(ledger.resource("RES-41").await["balance"], 110);
    assert_eq!(counter(host, "downstream_stale_token_rejections").await, 1);
    assert_eq!(counter(host, "stale_effect_writes").await, 1);
    assert_eq!(counter(host, "stale_token_rejections").await, 2);
    let lost: u64 = a_runner
        .metrics()
        .lease_conflicts
        .get_or_create(&paddock::lease::metrics::ConflictLabel { reason: "lost" })
        .get();
    assert_eq!(lost, 1, "A's gate closed on the refused heartbeat");

    // None of A's writes landed, and every instant is the database's.
    let after = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(
        (
            after.fencing_token,
            &after.result,
            after.updated_at,
            after.finished_at
        ),
        (42, &done.result, done.updated_at, done.finished_at)
    );
    assert_eq!(checkpoint(host, t.id).await, Some((6, 6, 42)));
    assert_effect(host, key, ("succeeded", 42, 2)).await;
    let attempts: Vec<_> = host
        .store
        .attempts_for(t.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| {
            (
                a.runner_id,
                a.fencing_token,
                a.started_at - T0,
                a.outcome,
                a.ended_at.map(|at| at - T0),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (
                "A".into(),
                41,
                3 * SECOND,
                Some("expired".into()),
                Some(63 * SECOND + 1)
            ),
            (
                "B".into(),
                42,
                63 * SECOND + 1,
                Some("succeeded".into()),
                Some(63 * SECOND + 1)
            ),
        ]
    );
    assert_eq!(scalar(host, "SELECT count(*) FROM effects").await, 1);
    ledger.stop().await;
}
