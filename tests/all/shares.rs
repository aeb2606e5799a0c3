//! Quotas that bite, part 2 (issue 16): the recovery lane's share and its
//! ramp, groups' minimum shares, tenants' triggers per minute and fuel per
//! hour, and a group held by a high-water mark — each enforced by the
//! claims of either database, each waiting trigger telling why.

use crate::quotas::{
    claim_until_empty, finish, logistics, quota, slots_runner, tenant_job, tenants_of, triggers,
};
use crate::{Db, TestHost};
use paddock::lease::governor::{Gauges, govern_once};
use paddock::model::group::CapacityInputs;
use paddock::model::shares::GroupShares;
use paddock::model::{AttemptEnd, AttemptOutcome, Claim, TriggerState};
use paddock::store::prelude::*;
use paddock::store::{ClaimRequest, Store};

/// A group of `slots` with these shares and no other input.
async fn group_with(host: &TestHost, name: &str, slots: i64, shares: GroupShares) {
    let mut group = logistics();
    group.name = name.into();
    group.max_concurrency = slots;
    group.capacity = CapacityInputs::default();
    group.shares = shares;
    host.registry.group_put(group, "admin").await.unwrap();
}

/// One claim of up to `limit`, `retry_slots` of them offered to the
/// recovery lane first (as a runner does with half its batch).
async fn claim(store: &Store, limit: i64, retry_slots: i64) -> Vec<Claim> {
    store
        .claim(&ClaimRequest {
            owner: "r",
            lease_ms: 60_000,
            limit,
            retry_slots,
            now: None,
        })
        .await
        .unwrap()
}

/// End `claims` as failed, to be retried at once (the recovery lane).
async fn fail_to_retry(store: &Store, claims: &[Claim]) {
    fail_to_retry_after(store, claims, 0).await;
}

/// End `claims` as failed, to be retried `after_ms` from now.
async fn fail_to_retry_after(store: &Store, claims: &[Claim], after_ms: i64) {
    let ends: Vec<_> = claims
        .iter()
        .map(|c| {
            let end = AttemptEnd {
                trigger_state: TriggerState::RetryWait,
                retry_after_ms: Some(after_ms),
                result: None,
                error_class: Some("guest_error".into()),
                error_message: Some("downstream refused".into()),
                attempt_outcome: AttemptOutcome::Failed,
                ..AttemptEnd::succeeded(Vec::new())
            };
            (c.lease("r"), end)
        })
        .collect();
    for r in store.attempt_finish_batch(&ends).await.unwrap() {
        r.unwrap();
    }
}

/// The newest trigger (of the last 100) that `pick` accepts.
async fn first_listed(
    host: &TestHost,
    pick: impl Fn(&paddock::store::TriggerRecord) -> bool,
) -> paddock::store::TriggerRecord {
    let listed = host.store.triggers_list(100).await.unwrap();
    listed
        .into_iter()
        .find(|t| pick(t))
        .expect("a trigger listed")
}

fn retries(claims: &[Claim]) -> usize {
    claims.iter().filter(|c| c.attempt_no > 1).count()
}

db_test!(the_recovery_lane_keeps_its_share_while_fresh_work_waits_and_follows_its_ramp);
/// A group of 10 slots with a 30% recovery share: alone, ten retries take
/// what the ramp allows (100% → 10, 10% → 1); with fresh work waiting they
/// take 30% (3) and fresh work the other 7 — and a retry left waiting says
/// the lane is full.
async fn the_recovery_lane_keeps_its_share_while_fresh_work_waits_and_follows_its_ramp(db: Db) {
    let host = TestHost::new(db).await;
    group_with(&host, "g", 10, GroupShares::default()).await;
    tenant_job(&host, "j", "t", "g").await;
    triggers(&host, "j", 10).await;
    let first = claim_until_empty(&host.store, "r").await;
    assert_eq!(first.len(), 10);
    fail_to_retry(&host.store, &first).await;

    // Only recovery work, the ramp at 100%: all ten.
    let alone = claim(&host.store, 100, 50).await;
    assert_eq!((alone.len(), retries(&alone)), (10, 10));
    fail_to_retry(&host.store, &alone).await;

    // The ramp at its first step (10% of 10): one at a time.
    assert!(host.store.group_ramp_set("g", 100, 10).await.unwrap());
    let ramped = claim(&host.store, 100, 50).await;
    assert_eq!((ramped.len(), retries(&ramped)), (1, 1));
    fail_to_retry(&host.store, &ramped).await;

    // Back at 100% with 20 fresh triggers waiting: 30% to recovery.
    assert!(host.store.group_ramp_set("g", 10, 100).await.unwrap());
    triggers(&host, "j", 20).await;
    let mixed = claim(&host.store, 100, 50).await;
    assert_eq!((mixed.len(), retries(&mixed)), (10, 3));
    let waiting = first_listed(&host, |t| t.state == TriggerState::RetryWait).await;
    // One fresh attempt ends: the group has room, the lane has none.
    let fresh = mixed.iter().find(|c| c.attempt_no == 1).unwrap().clone();
    finish(&host.store, &[fresh], 10).await;
    assert_eq!(
        host.store.wait_reason(&waiting).await.unwrap().unwrap(),
        "group g's recovery lane is full: 3 running, its share 30% (ramp at 100%) of 10 \
         slots while fresh work waits"
    );
    let next = claim(&host.store, 100, 50).await;
    assert_eq!(
        (next.len(), retries(&next)),
        (1, 0),
        "the freed slot goes to fresh work"
    );
}

db_test!(the_ramp_steps_up_while_healthy_and_back_when_failures_rise);
/// The governor moves the ramp: at rest (no recovery work) at 10%; with
/// retries waiting and the group healthy one step per period (25, 50,
/// 100); when the failure rate passes 20%, one step back.
async fn the_ramp_steps_up_while_healthy_and_back_when_failures_rise(db: Db) {
    let host = TestHost::new(db).await;
    let shares = GroupShares {
        ramp_every_ms: 1,
        ..GroupShares::default()
    };
    group_with(&host, "g", 100, shares).await;
    tenant_job(&host, "j", "t", "g").await;
    let group = host.store.group_get("g").await.unwrap().unwrap();
    let pct = || async { host.store.group_ramp(&group).await.unwrap().pct };
    let govern = || async {
        // The ramp moves at most once per period (1 ms here): wait for the
        // condition the governor checks — the database clock a period past
        // the ramp's last move.
        crate::procs::eventually(
            std::time::Duration::from_secs(10),
            "a ramp period since its last move",
            || async {
                let since = host.store.group_ramp(&group).await.unwrap();
                (since.inputs.since_moved_ms >= 1).then_some(())
            },
        )
        .await;
        govern_once(&host.store, &Gauges::default()).await.unwrap()
    };
    govern().await;
    assert_eq!(pct().await, 10, "no recovery work: the ramp rests");

    // 50 successes, then 5 failures to retry: 9% failed, healthy.
    triggers(&host, "j", 55).await;
    let claims = claim_until_empty(&host.store, "r").await;
    finish(&host.store, &claims[..50], 10).await;
    fail_to_retry(&host.store, &claims[50..]).await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        govern().await;
        seen.push(pct().await);
    }
    assert_eq!(seen, vec![25, 50, 100, 100]);

    // 10 more failures (15 of 65, 23%): one step back, then another.
    triggers(&host, "j", 5).await;
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!((claims.len(), retries(&claims)), (10, 5));
    fail_to_retry(&host.store, &claims).await;
    govern().await;
    assert_eq!(pct().await, 50);
    govern().await;
    assert_eq!(pct().await, 25);
}

db_test!(a_group_short_of_its_minimum_share_goes_first);
/// Two groups compete for a claim of 4. Tenant x of `big` weighs 10, so
/// by fair-share score all four would go to `big`; `small` with a minimum
/// share of 2 gets its two first.
async fn a_group_short_of_its_minimum_share_goes_first(db: Db) {
    let host = TestHost::new(db).await;
    host.registry
        .tenant_put(&quota("x", 10, None), "admin")
        .await
        .unwrap();
    group_with(&host, "big", 10, GroupShares::default()).await;
    group_with(&host, "small", 10, GroupShares::default()).await;
    tenant_job(&host, "bulk", "x", "big").await;
    tenant_job(&host, "urgent", "y", "small").await;
    triggers(&host, "urgent", 10).await;
    triggers(&host, "bulk", 10).await;
    let by_group = |claims: &[Claim]| {
        let small = claims
            .iter()
            .filter(|c| c.resource_group == "small")
            .count();
        (small, claims.len() - small)
    };
    // No minimum share: all four to `big`.
    let before = claim(&host.store, 4, 0).await;
    assert_eq!(by_group(&before), (0, 4));
    finish(&host.store, &before, 10).await;
    let shares = GroupShares {
        min_share: 2,
        ..GroupShares::default()
    };
    group_with(&host, "small", 10, shares).await;
    let after = claim(&host.store, 4, 0).await;
    assert_eq!(by_group(&after), (2, 2));
    // Holding its two, `small` is no longer short: fair shares again.
    let next = claim(&host.store, 2, 0).await;
    assert_eq!(by_group(&next), (0, 2));
    // A minimum share above the ceiling is refused by name.
    let mut bad = logistics();
    bad.name = "small".into();
    bad.max_concurrency = 3;
    bad.shares.min_share = 4;
    let err = host.registry.group_put(bad, "admin").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource group 'small': min-share 4 is above the group's max concurrency 3"
    );
}

/// Tenant a with `per_minute` manual triggers a minute and its job `ja`,
/// in group g of 100 slots.
async fn per_minute_tenant(db: Db, per_minute: i64) -> TestHost {
    let host = TestHost::new(db).await;
    let mut a = quota("a", 1, None);
    a.triggers_per_minute = Some(per_minute);
    host.registry.tenant_put(&a, "admin").await.unwrap();
    group_with(&host, "g", 100, GroupShares::default()).await;
    tenant_job(&host, "ja", "a", "g").await;
    host
}

db_test!(a_tenant_over_its_triggers_per_minute_waits_with_the_reason);
/// Tenant a may create 3 manual triggers a minute: of 7 created at once,
/// 3 are due now, 3 a minute later and 1 two minutes later — all created,
/// none refused — and a deferred one says why. Tenant b has no quota.
async fn a_tenant_over_its_triggers_per_minute_waits_with_the_reason(db: Db) {
    let host = per_minute_tenant(db, 3).await;
    tenant_job(&host, "jb", "b", "g").await;
    triggers(&host, "ja", 7).await;
    triggers(&host, "jb", 5).await;
    let listed = host.store.triggers_list(100).await.unwrap();
    let mut delays: Vec<i64> = listed
        .iter()
        .filter(|t| t.tenant == "a")
        .map(|t| (t.next_run_at - t.scheduled_at + 30_000) / 60_000)
        .collect();
    delays.sort_unstable();
    assert_eq!(delays, vec![0, 0, 0, 1, 1, 1, 2]);
    assert!(
        listed
            .iter()
            .filter(|t| t.tenant == "b")
            .all(|t| t.next_run_at == t.scheduled_at)
    );
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (3, 5));
    let deferred = listed
        .iter()
        .find(|t| t.tenant == "a" && t.next_run_at > t.scheduled_at)
        .unwrap();
    let reason = host.store.wait_reason(deferred).await.unwrap().unwrap();
    assert!(
        reason.starts_with("waits for tenant a's quota of 3 manual triggers per minute: due at "),
        "{reason}"
    );
    let mut bad = quota("a", 1, None);
    bad.triggers_per_minute = Some(0);
    let err = host.registry.tenant_put(&bad, "admin").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "tenant 'a': triggers-per-minute must be positive, not 0"
    );
}

db_test!(a_retried_manual_run_counts_once_in_its_tenants_minute);
/// A manual run counts in its tenant's per-minute window at the time it
/// was made due for (`quota_due_at`): a retry that moves it 30 s later
/// does not count it again there, so at 1 a minute the tenant's next run
/// is due a minute after the first, not a minute after the retry.
async fn a_retried_manual_run_counts_once_in_its_tenants_minute(db: Db) {
    let host = per_minute_tenant(db, 1).await;
    triggers(&host, "ja", 1).await;
    let claims = claim(&host.store, 10, 0).await;
    assert_eq!(claims.len(), 1);
    fail_to_retry_after(&host.store, &claims, 30_000).await;
    triggers(&host, "ja", 1).await;
    let listed = host.store.triggers_list(100).await.unwrap();
    let first = listed
        .iter()
        .find(|t| t.id == claims[0].trigger_id)
        .unwrap();
    assert_eq!(first.state, "retry_wait");
    assert!(first.next_run_at >= first.scheduled_at + 30_000);
    let second = listed.iter().find(|t| t.id != first.id).unwrap();
    assert_eq!(
        second.next_run_at - first.scheduled_at,
        60_000,
        "due a minute after the first run's own time, not after its retry"
    );
}

db_test!(a_tenant_over_its_fuel_per_hour_is_held_until_it_may_burn_again);
/// Real runs report their fuel; a tenant at its fuel per hour is held —
/// its triggers wait, saying why, while other tenants run — and released
/// once its quota allows the hour's usage.
async fn a_tenant_over_its_fuel_per_hour_is_held_until_it_may_burn_again(db: Db) {
    let host = TestHost::new(db).await;
    group_with(&host, "g", 100, GroupShares::default()).await;
    tenant_job(&host, "ja", "a", "g").await;
    tenant_job(&host, "jb", "b", "g").await;
    // Two real runs of tenant a's guest: what they burnt is reported.
    triggers(&host, "ja", 2).await;
    let runner = slots_runner(&host, 2);
    assert_eq!(runner.run_until_idle().await.unwrap().len(), 2);
    let gauges = Gauges {
        fuel: runner.fuel().clone(),
        ..Gauges::default()
    };
    govern_once(&host.store, &gauges).await.unwrap();
    let burnt = host.store.tenant_fuel_used("a").await.unwrap();
    assert!(burnt > 0, "the noop guest burns some fuel");
    assert!(runner.fuel().take().is_empty(), "reported once");

    // A quota the hour's usage already reaches: held.
    let mut a = quota("a", 1, None);
    a.fuel_per_hour = Some(burnt);
    host.registry.tenant_put(&a, "admin").await.unwrap();
    let round = govern_once(&host.store, &Gauges::default()).await.unwrap();
    assert_eq!(round.tenant_holds_moved, 1);
    triggers(&host, "ja", 3).await;
    triggers(&host, "jb", 3).await;
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (0, 3));
    let waiting = first_listed(&host, |t| {
        t.tenant == "a" && t.state == TriggerState::Pending
    })
    .await;
    assert_eq!(
        host.store.wait_reason(&waiting).await.unwrap().unwrap(),
        format!(
            "tenant a is held: over its fuel quota: {burnt} of {burnt} fuel per hour used in the \
             last hour"
        )
    );
    // Raised above the usage: released, and a's triggers run.
    a.fuel_per_hour = Some(burnt * 10);
    host.registry.tenant_put(&a, "admin").await.unwrap();
    let round = govern_once(&host.store, &Gauges::default()).await.unwrap();
    assert_eq!(round.tenant_holds_moved, 1);
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (3, 0));
}

db_test!(a_held_group_claims_nothing_until_released_and_says_why);
/// A high-water hold on a group (its downstream's breaker open) stops its
/// claims — other groups run — and is counted; only its holder releases
/// it before it lapses.
async fn a_held_group_claims_nothing_until_released_and_says_why(db: Db) {
    let host = TestHost::new(db).await;
    group_with(&host, "held", 10, GroupShares::default()).await;
    group_with(&host, "other", 10, GroupShares::default()).await;
    tenant_job(&host, "jh", "a", "held").await;
    tenant_job(&host, "jo", "b", "other").await;
    triggers(&host, "jh", 3).await;
    triggers(&host, "jo", 3).await;
    let until = host.store.now_ms().await.unwrap() + 600_000;
    let why = "breaker open on connector ledger";
    assert!(
        host.store
            .group_hold("held", why, "p1", until)
            .await
            .unwrap()
    );
    assert!(
        !host
            .store
            .group_hold("held", why, "p1", until)
            .await
            .unwrap()
    );
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (0, 3));
    let waiting = first_listed(&host, |t| t.tenant == "a").await;
    assert_eq!(
        host.store.wait_reason(&waiting).await.unwrap().unwrap(),
        format!("group held is held: {why}")
    );
    // Another process cannot release a live hold; its holder can.
    assert!(!host.store.group_release("held", "p2").await.unwrap());
    assert!(host.store.group_release("held", "p1").await.unwrap());
    assert_eq!(
        host.store.group_held("held").await.unwrap(),
        (None, 1),
        "released, counted once"
    );
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (3, 0));
    // A hold whose holder stopped renewing it lapses for anyone.
    let past = host.store.now_ms().await.unwrap() - 1;
    assert!(
        host.store
            .group_hold("held", why, "p1", past)
            .await
            .unwrap()
    );
    assert!(host.store.group_release("held", "p2").await.unwrap());
}

db_test!(a_backfill_runs_past_fire_times_in_the_recovery_lane_once_each);
/// `paddock schedule backfill` creates one recovery-lane trigger per fire
/// time in the window; run again over an overlapping window it creates
/// only the times not triggered yet.
async fn a_backfill_runs_past_fire_times_in_the_recovery_lane_once_each(db: Db) {
    let host = TestHost::new(db).await;
    host.job(
        "minutely",
        "noop",
        "[schedule]\nkind = \"cron\"\ncron = \"0 * * * * *\"\ntimezone = \"UTC\"",
    )
    .await;
    let backfill = |from: &str, to: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
            .args([
                "--database-url",
                &host.url,
                "schedule",
                "backfill",
                "minutely",
            ])
            .args(["--from", from, "--to", to])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        backfill("2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z"),
        "backfill of minutely@v1 in [2026-01-01 00:00:00 UTC, 2026-01-01 00:10:00 UTC): 10 \
         trigger(s) created in the recovery lane, 0 time(s) already triggered"
    );
    assert_eq!(
        backfill("2026-01-01T00:05:00Z", "2026-01-01T00:15:00Z"),
        "backfill of minutely@v1 in [2026-01-01 00:05:00 UTC, 2026-01-01 00:15:00 UTC): 5 \
         trigger(s) created in the recovery lane, 5 time(s) already triggered"
    );
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(host.store.sql(
        "SELECT origin, CAST(recovery AS BIGINT), count(*) FROM triggers GROUP BY origin, recovery",
    ))
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(rows, [("backfill".to_string(), 1, 15)]);
    // A window that is too large is refused before anything is written.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args([
            "--database-url",
            &host.url,
            "schedule",
            "backfill",
            "minutely",
        ])
        .args([
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-02-01T00:00:00Z",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds more than 10000 fire times"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

db_test!(
    a_runner_at_its_memory_high_water_mark_claims_nothing_until_below,
    workers = 4
);
/// A runner whose guests' memory reaches its high-water mark stops
/// claiming — the held guest runs on — counts the hold, and claims again
/// once the memory is given back. (The mark is 1 byte: any live guest of
/// its sandbox reaches it.)
async fn a_runner_at_its_memory_high_water_mark_claims_nothing_until_below(db: Db) {
    let host = TestHost::new(db).await;
    group_with(&host, "g", 10, GroupShares::default()).await;
    let (ledger, held) = crate::quotas::gated_burst(&host, "g", 1).await;
    let runner = paddock::lease::Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        paddock::lease::RunnerConfig {
            runner_id: "r".into(),
            max_concurrency: 4,
            claim_batch: 4,
            poll_interval: std::time::Duration::from_millis(20),
            memory_high_water: Some(1),
            ..Default::default()
        },
    );
    // The serving loop (it polls for work while the guest runs).
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn({
        let runner = runner.clone();
        async move {
            runner
                .run_and_drain(async {
                    let _ = stopped.await;
                })
                .await
        }
    });
    crate::procs::eventually(
        std::time::Duration::from_secs(60),
        "the guest at its gate",
        || async {
            (!crate::quotas::postgres::parked(&ledger, &held)
                .await
                .is_empty())
            .then_some(())
        },
    )
    .await;
    tenant_job(&host, "later", "t", "g").await;
    let later = host
        .store
        .trigger_create(&paddock::store::NewTrigger::manual(
            "later",
            serde_json::json!({}),
            None,
        ))
        .await
        .unwrap()
        .0;
    crate::procs::eventually(
        std::time::Duration::from_secs(60),
        "a held claim",
        || async { (host.store.counter("claims_held_memory").await.unwrap() >= 1).then_some(()) },
    )
    .await;
    let waiting = host.store.trigger_get(later.id).await.unwrap();
    assert_eq!(waiting.state, "pending", "not claimed while the mark holds");
    ledger.open_gate(held[0], 1).await;
    // The guest gave its memory back: the later trigger is claimed and runs.
    crate::procs::eventually(
        std::time::Duration::from_secs(60),
        "the later trigger",
        || async {
            let t = host.store.trigger_get(later.id).await.unwrap();
            (t.state == "succeeded").then_some(())
        },
    )
    .await;
    let _ = stop.send(());
    run.await.unwrap();
    ledger.stop().await;
}
