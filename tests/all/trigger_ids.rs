//! New triggers' ids (host/src/store/trigger_ids.rs): on SQLite each
//! tenant takes them from a block of its own, so its triggers lie together
//! in the table; on both databases ids stay unique and, within a tenant,
//! in creation order, and the backlog's count of late arrivals still finds
//! a trigger whose id lies below newer ones of another tenant.

use crate::quotas::{plain_group, tenant_job};
use crate::{Db, TestHost};
use paddock::model::identity::TenantScope;
use paddock::store::prelude::*;
use paddock::store::trigger_ids::{BLOCK, REACH};
use paddock::store::{NewTrigger, StatusQuery};

const HOUR_MS: i64 = 3_600_000;

/// Tenants a and b, each with a job in group `shared`.
async fn two_tenants(db: Db) -> TestHost {
    let host = TestHost::new(db).await;
    plain_group(&host, "shared", 8).await;
    tenant_job(&host, "ja", "a", "shared").await;
    tenant_job(&host, "jb", "b", "shared").await;
    host
}

/// `n` manual triggers of each job, created alternately (ja, jb, ja, ...);
/// each tenant's ids in creation order.
async fn interleaved(host: &TestHost, n: usize) -> (Vec<i64>, Vec<i64>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..n {
        for (job, ids) in [("ja", &mut a), ("jb", &mut b)] {
            let new = NewTrigger::manual(job, serde_json::json!({ "i": i }), None);
            let (record, created) = host.store.trigger_create(&new).await.unwrap();
            assert!(created);
            ids.push(record.id);
        }
    }
    (a, b)
}

db_test!(ids_are_unique_and_follow_creation_within_a_tenant);
/// Whatever the database hands out, ids never repeat, a tenant's rise with
/// creation, and its trigger list (newest first) is in creation order.
async fn ids_are_unique_and_follow_creation_within_a_tenant(db: Db) {
    let host = two_tenants(db).await;
    let (a, b) = interleaved(&host, 3 * BLOCK as usize / 2).await;
    let mut all: Vec<i64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), a.len() + b.len(), "an id handed out twice");
    for ids in [&a, &b] {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    }
    let page = host
        .store
        .triggers_page_for(&TenantScope::Only("a".into()), None, 1000)
        .await
        .unwrap();
    let listed: Vec<i64> = page.iter().rev().map(|t| t.id).collect();
    assert_eq!(
        listed, a,
        "tenant a's list, newest first, is its creation order reversed"
    );
}

db_test!(a_late_arrival_below_newer_ids_of_another_tenant_is_still_counted);
/// The backlog counts triggers created in the window for a plan time
/// already past by walking the newest ids, starting [`REACH`] ids before
/// the last trigger created well before the window. On SQLite a trigger of
/// tenant a created now takes the next id of a's block, below the ids tenant
/// b took since; the walk must still reach it. (It fails on SQLite if the
/// walk starts at that last trigger itself: 0 arrivals.)
async fn a_late_arrival_below_newer_ids_of_another_tenant_is_still_counted(db: Db) {
    let host = two_tenants(db).await;
    interleaved(&host, 4).await;
    // Everything so far was created and due an hour ago (moved on purpose:
    // the walk starts at the last trigger created a minute before the
    // window), so only the late trigger below arrives in the window.
    sqlx::query(host.store.sql(
        "UPDATE triggers SET created_at = created_at - ?1, scheduled_at = scheduled_at - ?1, \
         next_run_at = next_run_at - ?1",
    ))
    .bind(HOUR_MS)
    .execute(host.store.pool())
    .await
    .unwrap();
    let now = host.store.now_ms().await.unwrap();
    let mut late = NewTrigger::manual("ja", serde_json::json!({ "late": true }), Some("late"));
    late.scheduled_at = Some(now - 2 * HOUR_MS);
    let (record, _) = host.store.trigger_create(&late).await.unwrap();
    let newest_of_b: i64 = sqlx::query_scalar(
        host.store
            .sql("SELECT max(id) FROM triggers WHERE tenant = 'b'"),
    )
    .fetch_one(host.store.pool())
    .await
    .unwrap();
    if db == Db::Sqlite {
        assert!(
            record.id < newest_of_b,
            "a's block continues below b's newer ids: {} vs {newest_of_b}",
            record.id
        );
    }
    let after = host.store.now_ms().await.unwrap();
    let report = host
        .store
        .status_report(&StatusQuery {
            window_ms: 10 * 60_000,
            now: Some(after),
            ..Default::default()
        })
        .await
        .unwrap();
    let shared = report
        .groups
        .iter()
        .find(|g| g.group == "shared")
        .expect("a line for shared");
    assert_eq!(shared.arrivals, 1, "{report:?}");
}

/// What only SQLite does: blocks.
mod sqlite {
    use super::*;

    /// Backfill job `ja` (version 1) at hours 1..=`hours` of the epoch, in
    /// one backfill; the ids of every backfilled trigger, in order.
    async fn backfill_hours(host: &TestHost, hours: i64) -> Vec<i64> {
        let times: Vec<i64> = (1..=hours).map(|h| h * HOUR_MS).collect();
        let job = host.store.job_get("a", "ja").await.unwrap().unwrap();
        host.store
            .triggers_backfill(&job, 1, &times, "test")
            .await
            .unwrap();
        sqlx::query_scalar("SELECT id FROM triggers WHERE origin = 'backfill' ORDER BY id")
            .fetch_all(host.store.pool())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn interleaved_tenants_take_ids_from_blocks_of_their_own() {
        let host = two_tenants(Db::Sqlite).await;
        let (a, b) = interleaved(&host, BLOCK as usize).await;
        // One block each: consecutive ids, though created alternately.
        for ids in [&a, &b] {
            assert_eq!(ids.last().unwrap() - ids[0], BLOCK - 1, "{ids:?}");
        }
        // The next of each opens a new block above both.
        let (a2, b2) = interleaved(&host, 1).await;
        assert!(a2[0] > *b.last().unwrap() && b2[0] > *a.last().unwrap());
        // A backfill reserves its times at once: consecutive, after b's.
        let filled = backfill_hours(&host, 5).await;
        assert_eq!(filled.len(), 5);
        assert_eq!(filled[4] - filled[0], 4, "{filled:?}");
    }

    #[tokio::test]
    async fn an_insert_of_a_block_or_more_takes_a_run_of_its_own_and_asks_share_nothing() {
        let host = two_tenants(Db::Sqlite).await;
        interleaved(&host, 2).await;
        let newest: i64 = sqlx::query_scalar("SELECT max(id) FROM triggers")
            .fetch_one(host.store.pool())
            .await
            .unwrap();
        // BLOCK times at once: AUTOINCREMENT's ids, consecutive, above all.
        let filled = backfill_hours(&host, BLOCK).await;
        assert_eq!(filled.len() as i64, BLOCK);
        assert!(filled[0] > newest, "{} vs {newest}", filled[0]);
        assert_eq!(filled[filled.len() - 1] - filled[0], BLOCK - 1);
        // One reservation asking for the same tenant twice and another:
        // every id handed out once.
        let mut tx = host.store.pool().begin().await.unwrap();
        let firsts = host
            .store
            .reserve_trigger_ids(&mut tx, &[("a", 3), ("b", 2), ("a", 3)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let mut ids: Vec<i64> = [(firsts[0], 3), (firsts[1], 2), (firsts[2], 3)]
            .iter()
            .flat_map(|(first, k)| first.unwrap()..first.unwrap() + k)
            .collect();
        // And a's block as written goes on after them.
        let mut tx = host.store.pool().begin().await.unwrap();
        let next = host
            .store
            .reserve_trigger_ids(&mut tx, &[("a", 1)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        ids.push(next[0].unwrap());
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 9, "{firsts:?} then {next:?}");
    }

    #[tokio::test]
    async fn a_block_far_behind_the_newest_trigger_is_left_for_a_new_one() {
        let host = two_tenants(Db::Sqlite).await;
        let (a, _) = interleaved(&host, 1).await;
        // b runs far ahead (moved on purpose: 2 × REACH ids handed out
        // elsewhere, and b's block spent), so a's block now starts more
        // than REACH below the newest trigger.
        sqlx::query("UPDATE sqlite_sequence SET seq = seq + ? WHERE name = 'triggers'")
            .bind(2 * REACH)
            .execute(host.store.pool())
            .await
            .unwrap();
        sqlx::query("DELETE FROM trigger_id_blocks WHERE tenant = 'b'")
            .execute(host.store.pool())
            .await
            .unwrap();
        let far = NewTrigger::manual("jb", serde_json::json!({}), None);
        host.store.trigger_create(&far).await.unwrap();
        let newest: i64 = sqlx::query_scalar("SELECT max(id) FROM triggers")
            .fetch_one(host.store.pool())
            .await
            .unwrap();
        assert!(newest > a[0] + REACH);
        let (a2, _) = interleaved(&host, 1).await;
        assert!(a2[0] > newest, "a new block for a: {} vs {newest}", a2[0]);
    }
}
