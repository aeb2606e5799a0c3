//! Quotas that bite (issue 16): a group's effective concurrency is the
//! minimum of its inputs, shown with the input that binds, recomputed from
//! what its attempts measured, and enforced by every claim — across
//! processes on PostgreSQL. A runner given more slots than the sandbox's
//! instance pool runs the pool size instead of failing attempts.

use crate::procs::Proc;
use crate::{Db, TestHost};
use paddock::lease::governor::govern_once;
use paddock::model::group::{CONNECTOR, CapacityInputs, MEMORY};
use paddock::model::{AttemptEnd, Claim, ResourceGroup};
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{ClaimRequest, NewTrigger, Store};
use std::time::Duration;

/// The logistics group of issue 16: 50 calls/s × 2 s = 100 in flight, 60
/// reserved connections, 720 MiB / 18 MiB = 40 — and a configured max of
/// 500, so the computed inputs are what bind.
pub(crate) fn logistics() -> ResourceGroup {
    ResourceGroup {
        name: "logistics".into(),
        fuel_per_attempt: 1_000_000_000,
        memory_bytes: 64 << 20,
        deadline_ms: 60_000,
        max_concurrency: 500,
        grants: "[]".into(),
        caps: Default::default(),
        capacity: CapacityInputs {
            connector_rate_per_s: Some(50.0),
            service_time_ms: Some(2_000),
            db_connections: Some(60),
            memory_budget_bytes: Some(720 << 20),
            working_set_bytes: Some(18 << 20),
        },
        aging_ms: paddock::model::group::DEFAULT_AGING_MS,
        shares: Default::default(),
    }
}

/// `n` due manual triggers of `job`.
pub(crate) async fn triggers(host: &TestHost, job: &str, n: usize) {
    for i in 0..n {
        let new = NewTrigger::manual(job, serde_json::json!({ "i": i }), None);
        host.store.trigger_create(&new).await.unwrap();
    }
}

async fn claim(store: &Store, owner: &str, limit: i64) -> Vec<Claim> {
    store
        .claim(&ClaimRequest {
            owner,
            lease_ms: 60_000,
            limit,
            retry_slots: 0,
            now: None,
        })
        .await
        .unwrap()
}

/// Claim until a claim comes back empty; every claim taken.
pub(crate) async fn claim_until_empty(store: &Store, owner: &str) -> Vec<Claim> {
    let mut all = Vec::new();
    loop {
        let batch = claim(store, owner, 100).await;
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

/// End `claims` as succeeded, each having run `wall_ms`.
pub(crate) async fn finish(store: &Store, claims: &[Claim], wall_ms: i64) {
    let ends: Vec<_> = claims
        .iter()
        .map(|c| {
            let mut end = AttemptEnd::succeeded(b"{}".to_vec());
            end.wall_ms = wall_ms;
            (c.lease("quota-test"), end)
        })
        .collect();
    for r in store.attempt_finish_batch(&ends).await.unwrap() {
        r.unwrap();
    }
}

async fn running(host: &TestHost, group: &str) -> i64 {
    host.store.group_load(group).await.unwrap().unwrap().running
}

db_test!(the_logistics_group_runs_40_and_follows_its_service_time);
async fn the_logistics_group_runs_40_and_follows_its_service_time(db: Db) {
    let host = TestHost::new(db).await;
    let capacity = host.registry.group_put(logistics(), "admin").await.unwrap();
    assert_eq!((capacity.effective, capacity.binding), (40, MEMORY));
    let limit = |input: &str| {
        capacity
            .limits
            .iter()
            .find(|l| l.input == input)
            .unwrap()
            .limit
    };
    assert_eq!((limit(CONNECTOR), limit(MEMORY)), (100, 40));
    host.job("ship", "noop", "resource_group = \"logistics\"")
        .await;
    triggers(&host, "ship", 120).await;

    // Enforced at claim time: 40, not 100 or 120, however often we ask.
    let first = claim_until_empty(&host.store, "quota-test").await;
    assert_eq!(first.len(), 40);
    assert_eq!(running(&host, "logistics").await, 40);

    // The service time falls to 0.5 s: 50/s × 0.5 s = 25 in flight keep
    // the connector at its stable rate, and the connector binds.
    finish(&host.store, &first, 500).await;
    let second = governed_claims(&host, (25, CONNECTOR)).await;

    // It rises to 8 s (the window's mean, (40 × 0.5 + 25 × 8) / 65, is
    // 3.4 s): a slower downstream does not widen the limit past the
    // baseline's 100 — not 50 × 8 = 400 — so memory binds again at 40,
    // and 40 in flight at 8 s each complete 5 per second.
    finish(&host.store, &second, 8_000).await;
    governed_claims(&host, (40, MEMORY)).await;
}

/// The governor recomputes the logistics group from what ended: it must
/// now enforce `expected` (limit, binding input), and claims fill exactly
/// that many slots.
async fn governed_claims(host: &TestHost, expected: (i64, &str)) -> Vec<Claim> {
    govern_once(&host.store, &Default::default()).await.unwrap();
    let load = host.store.group_load("logistics").await.unwrap().unwrap();
    assert_eq!(
        (load.effective_concurrency, load.effective_binding.as_str()),
        expected
    );
    let claims = claim_until_empty(&host.store, "quota-test").await;
    assert_eq!(claims.len() as i64, expected.0);
    assert_eq!(running(host, "logistics").await, expected.0);
    claims
}

db_test!(a_full_group_leaves_room_for_others_and_takeovers_need_none);
async fn a_full_group_leaves_room_for_others_and_takeovers_need_none(db: Db) {
    let host = TestHost::new(db).await;
    let mut narrow = logistics();
    narrow.name = "narrow".into();
    narrow.max_concurrency = 3;
    host.registry.group_put(narrow, "admin").await.unwrap();
    host.job("flood", "noop", "resource_group = \"narrow\"")
        .await;
    host.job("other", "noop", "").await;
    // The narrow group's backlog is first in claim order.
    triggers(&host, "flood", 50).await;
    triggers(&host, "other", 5).await;
    let claims = claim_until_empty(&host.store, "a").await;
    let of = |job: &str| claims.iter().filter(|c| c.job_id == job).count();
    assert_eq!((of("flood"), of("other")), (3, 5));

    // The narrow group's holders go silent: their leases lapse. A takeover
    // adds nothing to the running count, so it needs no room.
    let mut lapsed: Vec<i64> = claims
        .iter()
        .filter(|c| c.job_id == "flood")
        .map(|c| c.trigger_id)
        .collect();
    lapsed.sort_unstable();
    let taken = host
        .store
        .claim(&ClaimRequest {
            owner: "b",
            lease_ms: 60_000,
            limit: 100,
            retry_slots: 0,
            now: Some(claims[0].lease_until + 1),
        })
        .await
        .unwrap();
    let mut taken_over: Vec<i64> = taken
        .iter()
        .filter(|c| c.job_id == "flood")
        .map(|c| c.trigger_id)
        .collect();
    taken_over.sort_unstable();
    assert_eq!(taken_over, lapsed, "the lapsed ones, and no new one");
    assert_eq!(running(&host, "narrow").await, 3);
}

db_test!(
    claims_at_once_from_separate_pools_never_exceed_the_limit,
    workers = 4
);
async fn claims_at_once_from_separate_pools_never_exceed_the_limit(db: Db) {
    let host = TestHost::new(db).await;
    let mut group = logistics();
    group.name = "g".into();
    group.max_concurrency = 7;
    host.registry.group_put(group, "admin").await.unwrap();
    host.job("j", "noop", "resource_group = \"g\"").await;
    triggers(&host, "j", 60).await;
    // Four stores with pools of their own, as four processes would have,
    // released together.
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(Store::open(&host.url).await.unwrap());
    }
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(stores.len()));
    let mut claimers = tokio::task::JoinSet::new();
    for (i, store) in stores.into_iter().enumerate() {
        let start = start.clone();
        claimers.spawn(async move {
            start.wait().await;
            let mut n = 0;
            for _ in 0..5 {
                n += claim(&store, &format!("p{i}"), 3).await.len();
            }
            n
        });
    }
    let mut claimed = 0;
    while let Some(n) = claimers.join_next().await {
        claimed += n.unwrap();
    }
    assert_eq!(claimed, 7, "exactly the limit, whichever claimer got it");
    assert_eq!(running(&host, "g").await, 7);
}

db_test!(
    more_slots_than_the_instance_pool_fail_no_attempt,
    workers = 4
);
/// 8 slots, 2 instances: 6 gated jobs are claimed at once, 2 run (parked at
/// their gates, holding their instances) and 4 wait for an instance — none
/// fails to instantiate. Released one by one, all succeed on one attempt.
async fn more_slots_than_the_instance_pool_fail_no_attempt(db: Db) {
    let mut host = TestHost::new(db).await;
    host.sandbox = Sandbox::new(SandboxConfig {
        max_instances: 2,
        ..SandboxConfig::default()
    })
    .unwrap();
    plain_group(&host, "wide", 64).await;
    let (ledger, ids) = gated_burst(&host, "wide", 6).await;
    let runner = slots_runner(&host, 8);
    let run = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run_until_idle().await.unwrap() }
    });
    release_one_by_one(&host, &ledger, &ids, 2, None).await;
    let summaries = run.await.unwrap();
    assert_eq!(summaries.len(), 6);
    for t in host.store.triggers_list(100).await.unwrap() {
        assert_eq!(
            (t.state.as_str(), t.attempts),
            ("succeeded", 1),
            "trigger {}: {:?}",
            t.id,
            t.error_message
        );
    }
    ledger.stop().await;
}

db_test!(a_component_is_compiled_once_however_many_attempts_start_it_together);
/// A runner whose sandbox has not compiled the job's component claims 20
/// of its triggers at once: one attempt fetches and compiles it, the 19
/// others wait their turn and find it compiled (before, each fetched the
/// bytes and compiled its own copy, all at once).
async fn a_component_is_compiled_once_however_many_attempts_start_it_together(db: Db) {
    let mut host = TestHost::new(db).await;
    host.job("solo", "noop", "").await;
    for i in 0..20 {
        host.trigger("solo", serde_json::json!({ "i": i })).await;
    }
    host.sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let runner = slots_runner(&host, 20);
    let summaries = runner.run_until_idle().await.unwrap();
    assert_eq!(summaries.len(), 20);
    for t in host.store.triggers_list(100).await.unwrap() {
        assert_eq!(
            t.state.as_str(),
            "succeeded",
            "trigger {}: {:?}",
            t.id,
            t.error_message
        );
    }
    assert_eq!(host.sandbox.compiles(), 1);
}

/// A runner with `slots` slots, claiming as many at a time.
pub(crate) fn slots_runner(
    host: &TestHost,
    slots: usize,
) -> std::sync::Arc<paddock::lease::Runner> {
    paddock::lease::Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        paddock::lease::RunnerConfig {
            runner_id: "r".into(),
            max_concurrency: slots,
            claim_batch: slots as i64,
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        },
    )
}

/// The ledger, a `gated` job in `group` that waits at its gate before its
/// first step, and `n` of its triggers, each first attempt's gate held.
pub(crate) async fn gated_burst(
    host: &TestHost,
    group: &str,
    n: usize,
) -> (crate::ledger::Ledger, Vec<i64>) {
    let ledger = crate::ledger::Ledger::start().await;
    crate::ledger::put_gate(&host.store, &ledger).await;
    host.job(
        "gated",
        "gated",
        &format!("resource_group = \"{group}\"\nconnectors = [\"gate\"]\n[params]\ngate_at = 0"),
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = host.trigger("gated", serde_json::json!({})).await.id;
        ledger.hold_gate(id, 1).await;
        ids.push(id);
    }
    (ledger, ids)
}

/// Let the held attempts of `ids` go one at a time: each round waits until
/// `at_most` of them (or all that are left) wait at their gates, checks no
/// more do (and, given a group, that it runs no more) and that no trigger
/// erred, then opens one gate.
async fn release_one_by_one(
    host: &TestHost,
    ledger: &crate::ledger::Ledger,
    ids: &[i64],
    at_most: usize,
    group: Option<&str>,
) {
    for released in 0..ids.len() {
        let want = at_most.min(ids.len() - released);
        let at_gates = crate::procs::eventually(
            Duration::from_secs(60),
            "attempts at their gates",
            || async {
                for t in host.store.triggers_list(100).await.unwrap() {
                    assert_eq!(
                        t.error_class, None,
                        "trigger {}: {:?}",
                        t.id, t.error_message
                    );
                }
                let at = postgres::parked(ledger, ids).await;
                (at.len() >= want).then_some(at)
            },
        )
        .await;
        assert!(
            at_gates.len() <= at_most,
            "more than {at_most} at their gates: {at_gates:?}"
        );
        if let Some(group) = group {
            assert!(running(host, group).await <= at_most as i64);
        }
        ledger.open_gate(at_gates[0], 1).await;
    }
}

pub(crate) mod postgres {
    use super::*;

    /// Three `paddock serve` processes, 10 slots each, on a group limited
    /// to 4: while a burst of gated jobs runs, the group's running count
    /// never exceeds 4 (sampled at every step and between), reaches it,
    /// and every job completes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_processes_never_run_more_than_the_group_limit() {
        let host = TestHost::new(Db::Postgres).await;
        plain_group(&host, "burst", 4).await;
        let (ledger, ids) = gated_burst(&host, "burst", 12).await;
        let flags = [
            "--concurrency",
            "10",
            "--claim-batch",
            "10",
            "--poll",
            "20ms",
        ];
        let procs: Vec<Proc> = (0..3)
            .map(|i| Proc::serve(&format!("q{i}"), &host.url, host.dir.path(), &flags))
            .collect();
        // A sampler: the running count, as often as the database answers.
        let sampler = {
            let store = host.store.clone();
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stop = done.clone();
            let task = tokio::spawn(async move {
                let mut max = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let load = store.group_load("burst").await.unwrap().unwrap();
                    max = max.max(load.running);
                    tokio::task::yield_now().await;
                }
                max
            });
            (done, task)
        };
        release_one_by_one(&host, &ledger, &ids, 4, Some("burst")).await;
        crate::procs::eventually(Duration::from_secs(60), "every job completes", || async {
            let done = sqlx::query_scalar::<_, i64>(
                host.store
                    .sql("SELECT count(*) FROM triggers WHERE state = 'succeeded'"),
            )
            .fetch_one(host.store.pool())
            .await
            .unwrap();
            (done == ids.len() as i64).then_some(())
        })
        .await;
        sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
        let max = sampler.1.await.unwrap();
        assert_eq!(max, 4, "the limit was reached and never exceeded");
        drop(procs);
        ledger.stop().await;
    }

    /// The triggers among `ids` whose first attempt waits at its gate now.
    pub(crate) async fn parked(ledger: &crate::ledger::Ledger, ids: &[i64]) -> Vec<i64> {
        let mut at = Vec::new();
        for id in ids {
            if ledger.waiting_sent(&ledger.gate_key(*id, 1)).await > 0 {
                at.push(*id);
            }
        }
        at
    }
}

db_test!(a_groups_file_applies_whole_or_not_at_all);
async fn a_groups_file_applies_whole_or_not_at_all(db: Db) {
    let host = TestHost::new(db).await;
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/groups.toml"),
    )
    .unwrap();
    let (applied, tenants) = host.registry.groups_apply(&example, "admin").await.unwrap();
    let mut acme = quota("acme", 2, Some(20));
    acme.triggers_per_minute = Some(600);
    acme.fuel_per_hour = Some(500_000_000_000);
    assert_eq!(tenants, vec![acme]);
    let effective: Vec<(&str, i64, &str)> = applied
        .iter()
        .map(|(name, c)| (name.as_str(), c.effective, c.binding))
        .collect();
    assert_eq!(
        effective,
        vec![("logistics", 40, MEMORY), ("batch", 8, "configured max")]
    );
    // The second group is refused (memory above the host's ceiling), so
    // the first, valid one is not stored either.
    let err = host
        .registry
        .groups_apply(
            "[[group]]\nname = \"fine\"\n[[group]]\nname = \"huge\"\nmemory = \"512GiB\"\n",
            "admin",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("resource group 'huge': memory must be between"),
        "{err}"
    );
    assert!(host.store.group_get("fine").await.unwrap().is_none());
    // Every stored group was audited.
    let puts = host
        .store
        .audit_list()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "group.put" || e.action == "tenant.put")
        .count();
    assert_eq!(puts, 3);
}

/// A job of `tenant` in `group`, running the noop guest.
pub(crate) async fn tenant_job(host: &TestHost, id: &str, tenant: &str, group: &str) {
    let toml = format!(
        "id = \"{id}\"\ntenant = \"{tenant}\"\nresource_group = \"{group}\"\ncomponent = \"{}\"\n",
        crate::guest("noop").display()
    );
    host.grant_connectors(&toml).await;
    host.registry
        .job_apply(&toml, std::path::Path::new("."), "test")
        .await
        .unwrap();
}

/// A group of `slots` with no other input, for the fair-share tests.
pub(crate) async fn plain_group(host: &TestHost, name: &str, slots: i64) {
    let mut group = logistics();
    group.name = name.into();
    group.max_concurrency = slots;
    group.capacity = CapacityInputs::default();
    host.registry.group_put(group, "admin").await.unwrap();
}

pub(crate) fn tenants_of(claims: &[Claim]) -> (usize, usize) {
    let a = claims.iter().filter(|c| c.tenant == "a").count();
    (a, claims.len() - a)
}

db_test!(a_flooding_tenant_yields_freed_slots_to_a_newcomer_until_they_are_even);
async fn a_flooding_tenant_yields_freed_slots_to_a_newcomer_until_they_are_even(db: Db) {
    let host = TestHost::new(db).await;
    plain_group(&host, "shared", 4).await;
    tenant_job(&host, "flood", "a", "shared").await;
    tenant_job(&host, "victim", "b", "shared").await;
    triggers(&host, "flood", 100).await;
    // Alone, A takes the whole room: work-conserving.
    let first = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&first), (4, 0));
    // B arrives behind A's 96 waiting. Two of A's end: both freed slots go
    // to B (B runs 0, A 2), then B and A are even.
    triggers(&host, "victim", 10).await;
    finish(&host.store, &first[..2], 10).await;
    let second = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&second), (0, 2));
    // Even at 2 and 2: the next two freed slots split one each.
    finish(&host.store, &[first[2].clone(), second[0].clone()], 10).await;
    let third = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&third), (1, 1));
}

db_test!(one_claim_fills_its_batch_when_a_tenant_has_less_than_its_share);
/// SQLite's claim reads each tenant's queue only as deep as the fair-share
/// order could reach into it if every queue were full; when one holds
/// less, the others are read deeper before the batch is cut, so a single
/// claim still takes a whole batch (work-conserving, not one claim per
/// depth). PostgreSQL reads each queue to the batch; both must agree.
async fn one_claim_fills_its_batch_when_a_tenant_has_less_than_its_share(db: Db) {
    let host = TestHost::new(db).await;
    plain_group(&host, "shared", 10).await;
    tenant_job(&host, "few", "a", "shared").await;
    tenant_job(&host, "many", "b", "shared").await;
    triggers(&host, "few", 1).await;
    triggers(&host, "many", 20).await;
    // Equal weights: read as if both were full, each queue would be read 7
    // deep for a batch of 10; A has 1, so B gives the other 9.
    let claims = claim(&host.store, "r", 10).await;
    assert_eq!(tenants_of(&claims), (1, 9));
}

db_test!(tenants_share_a_group_by_weight);
async fn tenants_share_a_group_by_weight(db: Db) {
    let host = TestHost::new(db).await;
    plain_group(&host, "shared", 8).await;
    host.registry
        .tenant_put(&quota("b", 3, None), "admin")
        .await
        .unwrap();
    tenant_job(&host, "flood", "a", "shared").await;
    tenant_job(&host, "victim", "b", "shared").await;
    triggers(&host, "flood", 50).await;
    triggers(&host, "victim", 50).await;
    // Weight 3 against 1: 6 slots to 2 of 8.
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (2, 6));
    let err = host
        .registry
        .tenant_put(&quota("b", 0, None), "admin")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tenant 'b': weight must be positive, not 0"
    );
}

db_test!(
    with_real_runners_a_victim_starts_within_its_bound_under_a_flood,
    workers = 4
);
/// Tenant A enqueues 200 no-op triggers, then tenant B 10, in a group of
/// S = 4 slots, and one runner with 4 slots drains them all. With equal
/// weights every start goes to the tenant with fewer running (the aging
/// bonus moves that by at most one slot), so B's k-th start comes within
/// 2k + S + 2 starts; B's 10th within the first 26 — batching (claims of
/// 2 to 4) can shift an end of a batch, so 28 is asserted. In FIFO order B
/// would start after all of A's 200. A still gets every slot B does not
/// want: all 210 run, on one attempt each.
async fn with_real_runners_a_victim_starts_within_its_bound_under_a_flood(db: Db) {
    let host = TestHost::new(db).await;
    plain_group(&host, "shared", 4).await;
    tenant_job(&host, "flood", "a", "shared").await;
    tenant_job(&host, "victim", "b", "shared").await;
    triggers(&host, "flood", 200).await;
    triggers(&host, "victim", 10).await;
    let summaries = slots_runner(&host, 4).run_until_idle().await.unwrap();
    assert_eq!(summaries.len(), 210);
    let starts: Vec<String> = sqlx::query_scalar(host.store.sql(
        "SELECT t.tenant FROM attempts a JOIN triggers t ON t.id = a.trigger_id ORDER BY a.id",
    ))
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(starts.len(), 210, "one attempt each");
    let last_b = starts.iter().rposition(|t| t == "b").unwrap() + 1;
    assert!(
        last_b <= 28,
        "B's last start was start {last_b} of 210: {starts:?}"
    );
}

pub(crate) fn quota(
    tenant: &str,
    weight: i64,
    max_in_flight: Option<i64>,
) -> paddock::model::group::TenantQuota {
    paddock::model::group::TenantQuota {
        max_in_flight,
        ..paddock::model::group::TenantQuota::weighted(tenant, weight)
    }
}

db_test!(a_tenant_at_its_max_in_flight_waits_with_the_reason_shown);
async fn a_tenant_at_its_max_in_flight_waits_with_the_reason_shown(db: Db) {
    let host = TestHost::new(db).await;
    plain_group(&host, "one", 10).await;
    plain_group(&host, "two", 10).await;
    host.registry
        .tenant_put(&quota("a", 1, Some(3)), "admin")
        .await
        .unwrap();
    tenant_job(&host, "a1", "a", "one").await;
    tenant_job(&host, "a2", "a", "two").await;
    tenant_job(&host, "b1", "b", "one").await;
    triggers(&host, "a1", 5).await;
    triggers(&host, "a2", 5).await;
    triggers(&host, "b1", 2).await;
    // Across both groups, A runs 3 at most; B is not held back by it.
    let claims = claim_until_empty(&host.store, "r").await;
    assert_eq!(tenants_of(&claims), (3, 2));
    let waiting = host
        .store
        .triggers_list(100)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.tenant == "a" && t.state.as_str() == "pending")
        .unwrap();
    let reason = host.store.wait_reason(&waiting).await.unwrap().unwrap();
    assert_eq!(reason, "tenant a is at its max in flight: 3 of 3 running");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(["--database-url", &host.url, "trigger", "show"])
        .arg(waiting.id.to_string())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("waiting       tenant a is at its max in flight: 3 of 3 running"),
        "{shown}"
    );
    // One of A's ends: one more of A's may start.
    finish(&host.store, &claims[..1], 10).await;
    let more = claim_until_empty(&host.store, "r").await;
    let ended_a = claims[0].tenant == "a";
    assert_eq!(tenants_of(&more), (usize::from(ended_a), 0));
    // A full group says so.
    let mut full = logistics();
    full.name = "full".into();
    full.max_concurrency = 1;
    full.capacity = CapacityInputs::default();
    host.registry.group_put(full, "admin").await.unwrap();
    tenant_job(&host, "c1", "c", "full").await;
    triggers(&host, "c1", 2).await;
    claim_until_empty(&host.store, "r").await;
    let queued = host
        .store
        .triggers_list(100)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.tenant == "c" && t.state.as_str() == "pending")
        .unwrap();
    assert_eq!(
        host.store.wait_reason(&queued).await.unwrap().unwrap(),
        "group full is full: 1 of 1 running (bound by configured max)"
    );
}
