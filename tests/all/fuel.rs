//! Fuel and time charged as used: an attempt stopped mid-computation — by
//! its deadline, by its deadline while a closed gate waits for it to pause,
//! by a lost lease or by a drain — is charged at least the fuel it burnt
//! before the stop, with its wall time and peak memory, on its attempt row
//! (what `report cost` sums) and in its tenant's fuel per hour.
//!
//! The `burn` guest counts `rounds` times in a loop without a call, marks
//! the end of that work by growing its memory by 1 MiB (an instruction, not
//! a call), then returns or, with `spin`, loops until the host stops it.
//! What the counting costs is measured, not guessed: a run of [`ROUNDS`]
//! that returns minus a run of 0 that returns. A stopped run did all of
//! that (its peak memory shows the mark) and more, so it must be charged
//! at least that much. No assertion depends on timing: the tests that stop
//! the guest themselves wait for the mark (the sandbox's memory gauge)
//! first.

use crate::procs::eventually;
use crate::{Db, TestHost};
use paddock::lease::governor::{Gauges, govern_once};
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::gates::GateScope;
use paddock::store::prelude::*;
use paddock::store::{AttemptRecord, CostBy, ReportQuery, TriggerRecord};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Rounds of the counted loop: a few hundred million fuel, tens of
/// milliseconds, far more than one fuel slice of the sandbox.
const ROUNDS: u64 = 20_000_000;

/// Fuel granted per attempt: more than any of these runs can burn, so
/// only the stop under test ends them.
const GRANTED: i64 = 1 << 50;

/// The tenant of [`TestHost::job`]'s jobs.
const TENANT: &str = "t1";

/// Group `burn` with `deadline` and job `burn` in it, one attempt a
/// trigger.
async fn burn_job(host: &TestHost, deadline: Duration) {
    host.group("burn", GRANTED, 64 << 20, deadline).await;
    host.job(
        "burn",
        "burn",
        "resource_group = \"burn\"\n[retry]\nmax_attempts = 1\nbackoff = \"1s\"",
    )
    .await;
}

async fn attempt(host: &TestHost, trigger: &TriggerRecord) -> AttemptRecord {
    let attempts = host.store.attempts_for(trigger.id).await.unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    attempts[0].clone()
}

/// What the counted work costs, and the peak memory of a run that did it.
struct Work {
    fuel: i64,
    mark: i64,
}

/// Run the work to completion with and without the counting: the
/// difference is the fuel of the counting alone.
async fn measured(host: &TestHost) -> Work {
    let done = host.run_one("burn", json!({ "rounds": ROUNDS })).await;
    let zero = host.run_one("burn", json!({ "rounds": 0 })).await;
    assert_eq!(
        (done.state.as_str(), zero.state.as_str()),
        ("succeeded", "succeeded")
    );
    let (done, zero) = (attempt(host, &done).await, attempt(host, &zero).await);
    let fuel = done.fuel_used.unwrap() - zero.fuel_used.unwrap();
    assert!(
        fuel > 10 * paddock::sandbox::FUEL_SLICE as i64,
        "the counting burns many fuel slices: {fuel}"
    );
    assert_eq!(done.peak_memory_bytes, zero.peak_memory_bytes);
    Work {
        fuel,
        mark: done.peak_memory_bytes.unwrap(),
    }
}

/// A trigger that does the work, then computes until it is stopped.
async fn spinning(host: &TestHost) -> TriggerRecord {
    host.trigger("burn", json!({ "rounds": ROUNDS, "spin": true }))
        .await
}

/// Until the running guest has done its counted work (its memory mark).
async fn until_marked(host: &TestHost, work: &Work) {
    eventually(
        Duration::from_secs(60),
        "the guest to finish its counting",
        || async { (host.sandbox.memory_in_use() as i64 >= work.mark).then_some(()) },
    )
    .await;
}

/// The stopped attempt did the counted work and is charged for all of it,
/// with its wall time.
fn charged_at_least(a: &AttemptRecord, work: &Work) {
    assert_eq!(
        a.peak_memory_bytes,
        Some(work.mark),
        "the guest finished its counting before the stop: {a:?}"
    );
    let fuel = a.fuel_used.unwrap_or(0);
    assert!(
        fuel >= work.fuel,
        "charged {fuel} fuel for a stop after counting that costs {}: {a:?}",
        work.fuel
    );
    assert!(fuel <= GRANTED);
    assert!(a.wall_ms.unwrap_or(0) > 0, "{a:?}");
}

/// A runner whose heartbeats renew every quarter of `lease`.
fn runner(host: &TestHost, lease: Duration) -> Arc<Runner> {
    host.runner("A", lease)
}

db_test!(an_attempt_stopped_by_its_deadline_is_charged_the_fuel_it_burnt_in_cost_and_quota);
async fn an_attempt_stopped_by_its_deadline_is_charged_the_fuel_it_burnt_in_cost_and_quota(db: Db) {
    let host = TestHost::new(db).await;
    burn_job(&host, Duration::from_secs(2)).await;
    let work = measured(&host).await;
    let t = spinning(&host).await;
    let runner = runner(&host, Duration::from_secs(60));
    runner.run_until_idle().await.unwrap();
    let a = attempt(&host, &t).await;
    assert_eq!(a.error_class.as_deref(), Some("deadline_exceeded"));
    charged_at_least(&a, &work);

    // `report cost` sums the attempt rows: the stopped run's fuel is in it.
    let all = ReportQuery {
        since: 0,
        until: i64::MAX,
        tenant: None,
        group: None,
    };
    let usage = host.store.cost_usage(&all, CostBy::Job).await.unwrap();
    let burn = usage
        .iter()
        .find(|u| u.key == format!("{}/burn", crate::TENANT))
        .unwrap();
    assert_eq!(burn.attempts, 3);
    assert!(
        burn.fuel >= a.fuel_used.unwrap() + work.fuel,
        "{} fuel in the report, {} in the stopped attempt",
        burn.fuel,
        a.fuel_used.unwrap()
    );

    // The tenant's fuel per hour counts it: a quota of what it burnt holds
    // the tenant.
    let gauges = Gauges {
        fuel: runner.fuel().clone(),
        ..Gauges::default()
    };
    govern_once(&host.store, &gauges).await.unwrap();
    let used = host.store.tenant_fuel_used(TENANT).await.unwrap();
    assert_eq!(used, a.fuel_used.unwrap());
    let mut quota = paddock::model::group::TenantQuota::weighted(TENANT, 1);
    quota.fuel_per_hour = Some(work.fuel);
    host.registry.tenant_put(&quota, "admin").await.unwrap();
    let round = govern_once(&host.store, &Gauges::default()).await.unwrap();
    assert_eq!(round.tenant_holds_moved, 1, "the tenant is held");
}

db_test!(an_attempt_asked_to_pause_by_a_gate_that_runs_to_its_deadline_is_charged_its_fuel);
/// A closed gate asks a running attempt to pause at its next host call; a
/// guest that never makes one runs on until its deadline stops it.
async fn an_attempt_asked_to_pause_by_a_gate_that_runs_to_its_deadline_is_charged_its_fuel(db: Db) {
    let host = TestHost::new(db).await;
    burn_job(&host, Duration::from_secs(3)).await;
    let work = measured(&host).await;
    let t = spinning(&host).await;
    let runner = runner(&host, Duration::from_secs(1));
    let running = tokio::spawn(async move { runner.run_until_idle().await.unwrap() });
    until_marked(&host, &work).await;
    let gate = host
        .store
        .gate_pause(&GateScope::Job("burn".into()), "local:ops", "fuel test")
        .await
        .unwrap();
    assert_eq!(gate.running_asked, 1);
    running.await.unwrap();
    let a = attempt(&host, &t).await;
    assert_eq!(a.error_class.as_deref(), Some("deadline_exceeded"));
    charged_at_least(&a, &work);
}

db_test!(an_attempt_that_lost_its_lease_is_charged_its_fuel_on_the_row_the_takeover_closed);
async fn an_attempt_that_lost_its_lease_is_charged_its_fuel_on_the_row_the_takeover_closed(db: Db) {
    let host = TestHost::new(db).await;
    burn_job(&host, Duration::from_secs(300)).await;
    let work = measured(&host).await;
    let t = spinning(&host).await;
    let runner = runner(&host, Duration::from_secs(1));
    let meter = runner.fuel().clone();
    let running = tokio::spawn(async move { runner.run_until_idle().await.unwrap() });
    until_marked(&host, &work).await;
    // Another runner takes the trigger over as if A's lease had lapsed:
    // token 2, and A's attempt closed as expired.
    let later = host.store.now_ms().await.unwrap() + 3_600_000;
    let taken = host
        .store
        .trigger_claim_batch("B", 60_000, 10, Some(later))
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    let ended = running.await.unwrap();
    assert_eq!(
        ended[0].outcome,
        paddock::model::RunOutcome::LeaseLost,
        "{ended:?}"
    );
    let a = host.store.attempts_for(t.id).await.unwrap()[0].clone();
    assert_eq!(
        a.outcome.as_deref(),
        Some("expired"),
        "the takeover's verdict stays"
    );
    charged_at_least(&a, &work);
    let charged: i64 = meter.take().iter().map(|(_, fuel)| fuel).sum();
    assert_eq!(
        charged,
        a.fuel_used.unwrap(),
        "the tenant is charged the same"
    );
}

db_test!(an_attempt_interrupted_by_a_drain_is_released_and_charged_its_fuel);
async fn an_attempt_interrupted_by_a_drain_is_released_and_charged_its_fuel(db: Db) {
    let host = TestHost::new(db).await;
    burn_job(&host, Duration::from_secs(300)).await;
    let work = measured(&host).await;
    let t = spinning(&host).await;
    let runner = Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        RunnerConfig {
            runner_id: "A".into(),
            poll_interval: Duration::from_millis(20),
            // The guest never reaches a safe point: interrupt it at once.
            drain_timeout: Duration::ZERO,
            drain_grace: Duration::ZERO,
            ..RunnerConfig::default()
        },
    );
    let report = runner.run_and_drain(until_marked(&host, &work)).await;
    assert_eq!(report.released(), 1, "{report:?}");
    let a = attempt(&host, &t).await;
    assert_eq!(
        (a.outcome.as_deref(), a.error_class.as_deref()),
        (Some("released"), Some("drained"))
    );
    charged_at_least(&a, &work);
}
