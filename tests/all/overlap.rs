//! The overlap rule through takeovers, retries and resumes, at the store
//! (`store/overlap.rs`), on both databases: a run whose holder is gone is
//! still in flight, a takeover of an admitted run goes on without counting
//! newer ones, and every other attempt — a new fire, a retry — is judged
//! again. Claims are given the instant they run at, so a lease lapses
//! without waiting for it.

use crate::{Db, TestHost};
use paddock::model::{AttemptEnd, AttemptOutcome, Claim, LeaseRef, TriggerState};
use paddock::store::prelude::*;
use paddock::store::{Admission, ClaimRequest, ScanCommit, ScheduledTrigger, StoreError};

const LEASE_MS: i64 = 1_000;

/// Job `solo` (cron every 10 s, `overlap`, `max_in_flight = max`) with
/// `fires` scheduled triggers, all due; their ids, oldest first, and the
/// database's now.
async fn solo(db: Db, overlap: &str, max: u32, fires: i64) -> (TestHost, Vec<i64>, i64) {
    let host = TestHost::new(db).await;
    host.job(
        "solo",
        "noop",
        &format!(
            "[schedule]\nkind = \"cron\"\ncron = \"*/10 * * * * *\"\ntimezone = \"UTC\"\n\
             overlap = \"{overlap}\"\nmax_in_flight = {max}"
        ),
    )
    .await;
    let now = host.store.now_ms().await.unwrap();
    let first_at = (now / 10_000 - fires) * 10_000;
    let shard = paddock::model::shard_of("solo", host.store.shard_count().await.unwrap());
    let lease = host
        .store
        .shard_lease(shard, "test", 60_000, None)
        .await
        .unwrap()
        .expect("a free shard");
    let scan = ScanCommit {
        triggers: (0..fires)
            .map(|k| ScheduledTrigger {
                job_id: "solo".into(),
                plan_version: 1,
                tenant: crate::TENANT.into(),
                resource_group: "default".into(),
                priority: 0,
                scheduled_at: first_at + k * 10_000,
                state: TriggerState::Pending,
                recovery: false,
            })
            .collect(),
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
    (host, ids, now)
}

/// Claim up to `limit` triggers as `owner` at instant `at`, fresh work
/// first, for `lease_ms`.
async fn claim_for(host: &TestHost, owner: &str, at: i64, limit: i64, lease_ms: i64) -> Vec<Claim> {
    host.store
        .claim(&ClaimRequest {
            owner,
            lease_ms,
            limit,
            retry_slots: 0,
            now: Some(at),
        })
        .await
        .unwrap()
}

/// [`claim_for`] with a lease of [`LEASE_MS`].
async fn claim(host: &TestHost, owner: &str, at: i64, limit: i64) -> Vec<Claim> {
    claim_for(host, owner, at, limit, LEASE_MS).await
}

fn lease_of(claims: &[Claim], id: i64, owner: &str) -> LeaseRef {
    claims
        .iter()
        .find(|c| c.trigger_id == id)
        .unwrap_or_else(|| panic!("trigger {id} claimed: {claims:?}"))
        .lease(owner)
}

async fn admit(host: &TestHost, lease: &LeaseRef, max: u32) -> Admission {
    host.store.overlap_admit(lease, max).await.unwrap()
}

db_test!(a_run_whose_holder_is_gone_stays_in_flight_and_its_takeover_goes_on);
async fn a_run_whose_holder_is_gone_stays_in_flight_and_its_takeover_goes_on(db: Db) {
    let (host, ids, now) = solo(db, "forbid", 1, 2).await;
    let (old, new) = (ids[0], ids[1]);
    // A claims the older fire and is admitted; then A dies.
    let a = claim(&host, "A", now, 1).await;
    let old_by_a = lease_of(&a, old, "A");
    assert_eq!(admit(&host, &old_by_a, 1).await, Admission::Admitted);
    // Past A's lease, B claims the newer fire and takes the older over.
    let later = now + 5 * LEASE_MS;
    let b = claim(&host, "B", later, 2).await;
    let (old_by_b, new_by_b) = (lease_of(&b, old, "B"), lease_of(&b, new, "B"));
    // The newer fire counts the older run, lapsed lease and all.
    assert_eq!(admit(&host, &new_by_b, 1).await, Admission::Full(vec![old]));
    // The takeover goes on: it was in flight all along.
    assert_eq!(admit(&host, &old_by_b, 1).await, Admission::Admitted);
    // And the other order gives the same answer: the newer is still full.
    assert_eq!(admit(&host, &new_by_b, 1).await, Admission::Full(vec![old]));
    // A's stale lease admits nothing.
    let stale = host.store.overlap_admit(&old_by_a, 1).await.unwrap_err();
    assert!(matches!(stale, StoreError::LeaseLost { .. }), "{stale}");
    // Once the older run ends, the newer one's next attempt is admitted.
    host.store
        .attempt_finish(&old_by_b, &AttemptEnd::succeeded(b"done".to_vec()))
        .await
        .unwrap();
    assert_eq!(admit(&host, &new_by_b, 1).await, Admission::Admitted);
}

db_test!(a_retry_is_judged_again_and_counts_a_newer_run_in_flight);
async fn a_retry_is_judged_again_and_counts_a_newer_run_in_flight(db: Db) {
    let (host, ids, now) = solo(db, "allow", 1, 2).await;
    let (old, new) = (ids[0], ids[1]);
    let a = claim(&host, "A", now, 1).await;
    let old_by_a = lease_of(&a, old, "A");
    assert_eq!(admit(&host, &old_by_a, 1).await, Admission::Admitted);
    // The older run fails and waits to retry: it is no longer in flight.
    let retry = AttemptEnd {
        trigger_state: TriggerState::RetryWait,
        retry_after_ms: Some(0),
        error_class: Some("transient".into()),
        error_message: Some("it failed".into()),
        attempt_outcome: AttemptOutcome::Failed,
        ..AttemptEnd::not_run()
    };
    host.store.attempt_finish(&old_by_a, &retry).await.unwrap();
    // B holds the newer fire for ten hours: it never lapses below.
    let b = claim_for(&host, "B", now + 1, 1, 36_000_000).await;
    let new_by_b = lease_of(&b, new, "B");
    assert_eq!(admit(&host, &new_by_b, 1).await, Admission::Admitted);
    // An hour on, the retry (due since its failure) is claimed afresh: its
    // old admission is gone, and it counts the newer run now in flight.
    let hour = now + 3_600_000;
    let c = claim(&host, "C", hour, 1).await;
    let old_by_c = lease_of(&c, old, "C");
    assert_eq!(admit(&host, &old_by_c, 1).await, Admission::Full(vec![new]));
    // The retry's holder dies before it was admitted: its takeover is
    // judged again too, and still finds the job full.
    let d = claim(&host, "D", hour + 5 * LEASE_MS, 2).await;
    let old_by_d = lease_of(&d, old, "D");
    assert_eq!(admit(&host, &old_by_d, 1).await, Admission::Full(vec![new]));
}

db_test!(max_in_flight_counts_every_admitted_run_of_the_job);
async fn max_in_flight_counts_every_admitted_run_of_the_job(db: Db) {
    let (host, ids, now) = solo(db, "allow", 2, 3).await;
    let claims = claim(&host, "A", now, 3).await;
    let leases: Vec<LeaseRef> = ids.iter().map(|id| lease_of(&claims, *id, "A")).collect();
    assert_eq!(admit(&host, &leases[0], 2).await, Admission::Admitted);
    assert_eq!(admit(&host, &leases[1], 2).await, Admission::Admitted);
    assert_eq!(
        admit(&host, &leases[2], 2).await,
        Admission::Full(vec![ids[0], ids[1]])
    );
    // Judged again, an admitted run stays admitted; the count is not of it.
    assert_eq!(admit(&host, &leases[1], 2).await, Admission::Admitted);
}

db_test!(of_two_fires_claimed_together_the_older_runs_whichever_is_judged_first);
async fn of_two_fires_claimed_together_the_older_runs_whichever_is_judged_first(db: Db) {
    let (host, ids, now) = solo(db, "forbid", 1, 2).await;
    let (old, new) = (ids[0], ids[1]);
    let both = claim(&host, "A", now, 2).await;
    let (old_lease, new_lease) = (lease_of(&both, old, "A"), lease_of(&both, new, "A"));
    // The newer is judged first: the older, still to be judged, holds it.
    assert_eq!(
        admit(&host, &new_lease, 1).await,
        Admission::Full(vec![old])
    );
    // The older never waits for the newer.
    assert_eq!(admit(&host, &old_lease, 1).await, Admission::Admitted);
}
