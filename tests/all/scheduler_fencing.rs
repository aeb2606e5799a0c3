//! A scheduler that stalls after leasing a shard and before writing its
//! scan (a paused process, a slow query) loses the shard to another
//! scheduler; when it resumes it must write nothing — no trigger for a fire
//! time its successor recorded as skipped, no skipped fire, no watermark.
//! The stall is a barrier the test controls: a [`SchedulerStore`] wrapper
//! that holds the scan's commit until released. Time is injected as the
//! database's `now`.

use crate::{Db, TestHost};
use paddock::model::ShardLease;
use paddock::schedule::scanner::{Scanner, ScannerConfig};
use paddock::store::prelude::*;
use paddock::store::{JobScheduleRecord, ScanCommit, ScanWritten, Store, StoreError, StoreResult};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// The store, with one scan commit held at a barrier: the first commit
/// that writes anything waits for `release` after signalling `entered`.
struct StallingScheduler {
    store: Store,
    armed: AtomicBool,
    entered: Notify,
    release: Notify,
}

paddock::forward_reads!(StallingScheduler => store);

#[paddock::store::async_trait]
impl SchedulerStore for StallingScheduler {
    async fn shard_lease(
        &self,
        shard: u32,
        owner: &str,
        ttl_ms: i64,
        now: Option<i64>,
    ) -> StoreResult<Option<ShardLease>> {
        self.store.shard_lease(shard, owner, ttl_ms, now).await
    }
    async fn shard_release(&self, lease: &ShardLease) -> StoreResult<()> {
        self.store.shard_release(lease).await
    }
    async fn schedules_fingerprint(&self, shard: u32) -> StoreResult<(i64, i64, i64)> {
        self.store.schedules_fingerprint(shard).await
    }
    async fn schedules_in_shard(&self, shard: u32) -> StoreResult<Vec<JobScheduleRecord>> {
        self.store.schedules_in_shard(shard).await
    }
    async fn shard_existing(
        &self,
        shard: u32,
        from: i64,
        to: i64,
    ) -> StoreResult<HashSet<(String, String, i64)>> {
        self.store.shard_existing(shard, from, to).await
    }
    async fn decided_times(
        &self,
        tenant: &str,
        job_id: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<i64>> {
        self.store.decided_times(tenant, job_id, from, to).await
    }
    async fn scan_commit(&self, lease: &ShardLease, scan: &ScanCommit) -> StoreResult<ScanWritten> {
        let writes = !scan.triggers.is_empty() || !scan.skipped.is_empty();
        if writes && self.armed.swap(false, Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        self.store.scan_commit(lease, scan).await
    }
}

fn config(owner: &str) -> ScannerConfig {
    ScannerConfig {
        owner: owner.into(),
        shard_lease: Duration::from_secs(1),
        overlap: Duration::from_secs(10),
        lookahead: Duration::from_secs(2),
        initial_lookback: Duration::from_secs(60),
        max_window: Duration::from_secs(3600),
        tick: Duration::from_secs(1),
    }
}

async fn no_fire_time_is_both_skipped_and_run(db: Db, misfire: &str) {
    let host = TestHost::new(db).await;
    host.job(
        "tick",
        "noop",
        &format!(
            "[schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"\n\
             misfire = \"{misfire}\"\nmisfire_threshold = \"5s\""
        ),
    )
    .await;
    // Well after the job became active (its `active_from` is the real now).
    let t = (host.store.now_ms().await.unwrap() / 1000 + 3600) * 1000;

    let stalling = Arc::new(StallingScheduler {
        store: host.store.clone(),
        armed: AtomicBool::new(true),
        entered: Notify::new(),
        release: Notify::new(),
    });
    let a = Scanner::with_store(stalling.clone(), config("A"));
    let a_tick = tokio::spawn(async move { a.tick(Some(t)).await });
    // A leased the shard and computed its scan (fire times up to t + 2 s,
    // those after t - 5 s on time) and is stalled before writing it.
    stalling.entered.notified().await;

    // 30 s later by the database's reckoning A's 1 s shard lease has
    // lapsed: B takes the shard over and decides the same times, most of
    // them now missed.
    let b = Scanner::new(host.store.clone(), config("B"));
    let b_report = b.tick(Some(t + 30_000)).await.unwrap();
    assert!(
        b_report.created >= 1 && b_report.skipped >= 1,
        "{b_report:?}"
    );

    // A resumes: its scan is refused whole.
    stalling.release.notify_one();
    let a_report = a_tick.await.unwrap().unwrap();
    assert_eq!(a_report.stale, 1, "{a_report:?}");
    assert_eq!(a_report.created, 0, "{a_report:?}");

    let run: BTreeSet<i64> = sqlx::query_scalar(
        host.store
            .sql("SELECT scheduled_at FROM triggers WHERE job_id = 'tick'"),
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap()
    .into_iter()
    .collect();
    let skipped: BTreeSet<i64> = host
        .store
        .skipped_list(Some((crate::TENANT, "tick")), 1_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, _, _, at, _)| at)
        .collect();
    assert_eq!(
        run.len() as i64,
        b_report.created,
        "only B's triggers exist"
    );
    assert_eq!(
        skipped.len() as i64,
        b_report.skipped,
        "only B's skips exist"
    );
    let both: Vec<_> = run.intersection(&skipped).collect();
    assert!(both.is_empty(), "fire times both skipped and run: {both:?}");
    // The shard's watermark is B's.
    let shards = host.store.shards_list().await.unwrap();
    assert!(shards.iter().all(|s| s.owner.as_deref() != Some("A")));
    assert_eq!(
        host.store
            .counter("stale_shard_generation_rejections")
            .await
            .unwrap(),
        1
    );
}

db_test!(a_stalled_scheduler_that_lost_its_shard_writes_nothing_under_skip);
async fn a_stalled_scheduler_that_lost_its_shard_writes_nothing_under_skip(db: Db) {
    no_fire_time_is_both_skipped_and_run(db, "skip").await;
}

db_test!(a_stalled_scheduler_that_lost_its_shard_writes_nothing_under_latest);
async fn a_stalled_scheduler_that_lost_its_shard_writes_nothing_under_latest(db: Db) {
    no_fire_time_is_both_skipped_and_run(db, "latest").await;
}

db_test!(a_scan_commit_under_a_stale_generation_is_refused_with_both_generations);
async fn a_scan_commit_under_a_stale_generation_is_refused_with_both_generations(db: Db) {
    let host = TestHost::new(db).await;
    let a = host
        .store
        .shard_lease(0, "A", 1_000, Some(1_000_000))
        .await
        .unwrap()
        .unwrap();
    let b = host
        .store
        .shard_lease(0, "B", 1_000, Some(2_000_000))
        .await
        .unwrap()
        .unwrap();
    assert!(b.generation > a.generation);
    let refused = host
        .store
        .scan_commit(&a, &ScanCommit::default())
        .await
        .unwrap_err();
    match refused {
        StoreError::ShardLost {
            expected,
            found,
            owner,
            ..
        } => {
            assert_eq!(expected, a.generation);
            assert_eq!(found, Some(b.generation));
            assert_eq!(owner.as_deref(), Some("B"));
        }
        other => panic!("{other}"),
    }
}
