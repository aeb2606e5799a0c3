//! Group commit of attempt ends: one transaction for many attempts, each
//! still fenced by its own token.

use crate::{Db, TestHost};
use paddock::lease::group_commit::CommitQueue;
use paddock::model::AttemptEnd;
use paddock::store::StoreError;
use paddock::store::prelude::*;
use serde_json::json;
use std::sync::Arc;

fn succeeded() -> AttemptEnd {
    AttemptEnd {
        fuel_used: 1,
        peak_memory_bytes: 1,
        wall_ms: 1,
        ..AttemptEnd::succeeded(b"{}".to_vec())
    }
}

db_test!(a_batch_commits_every_current_attempt_and_refuses_only_the_stale_one);
async fn a_batch_commits_every_current_attempt_and_refuses_only_the_stale_one(db: Db) {
    let host = TestHost::new(db).await;
    host.job("noop", "noop", "").await;
    for i in 0..3 {
        host.trigger("noop", json!({ "i": i })).await;
    }
    let claims = host
        .store
        .trigger_claim_batch("A", 60_000, 10, None)
        .await
        .unwrap();
    assert_eq!(claims.len(), 3);
    // The second trigger's lease expires and a rival takes it over.
    let now = host.store.now_ms().await.unwrap();
    let rival = host
        .store
        .trigger_claim_batch("B", 60_000, 10, Some(now + 120_000))
        .await
        .unwrap();
    assert_eq!(rival.len(), 3, "all expired at the injected time");
    // A is now stale on all three; B commits two of them in one batch and
    // A's batch of three is refused as a whole, one by one.
    let a: Vec<_> = claims.iter().map(|c| (c.lease("A"), succeeded())).collect();
    let b: Vec<_> = rival[..2]
        .iter()
        .map(|c| (c.lease("B"), succeeded()))
        .collect();
    let results = host.store.attempt_finish_batch(&b).await.unwrap();
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let before = host.store.counter("stale_token_rejections").await.unwrap();
    let results = host.store.attempt_finish_batch(&a).await.unwrap();
    assert_eq!(results.len(), 3);
    for r in &results {
        assert!(
            matches!(r, Err(StoreError::LeaseLost { .. })),
            "a stale token never commits: {r:?}"
        );
    }
    assert_eq!(
        host.store.counter("stale_token_rejections").await.unwrap(),
        before + 3
    );
    // Mixed batch: B's third is current, A's first is stale.
    let mixed = vec![
        (rival[2].lease("B"), succeeded()),
        (claims[0].lease("A"), succeeded()),
    ];
    let results = host.store.attempt_finish_batch(&mixed).await.unwrap();
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(StoreError::LeaseLost { .. })));
    for c in &rival {
        let t = host.store.trigger_get(c.trigger_id).await.unwrap();
        assert_eq!((t.state.as_str(), t.fencing_token), ("succeeded", 2));
    }
}

db_test!(
    concurrent_finishes_through_the_queue_all_commit_exactly_once,
    workers = 4
);
async fn concurrent_finishes_through_the_queue_all_commit_exactly_once(db: Db) {
    let host = TestHost::new(db).await;
    host.job("noop", "noop", "").await;
    for i in 0..60 {
        host.trigger("noop", json!({ "i": i })).await;
    }
    let claims = host
        .store
        .trigger_claim_batch("A", 60_000, 100, None)
        .await
        .unwrap();
    assert_eq!(claims.len(), 60);
    let queue = Arc::new(CommitQueue::new(Arc::new(host.store.clone()), 100, 1));
    let mut tasks = tokio::task::JoinSet::new();
    for c in claims {
        let queue = queue.clone();
        tasks.spawn(async move { queue.finish(&c.lease("A"), &succeeded()).await });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap().unwrap();
    }
    let counts = host.store.trigger_counts().await.unwrap();
    assert_eq!(counts.by_state, vec![("succeeded".to_string(), 60)]);
    let ended: i64 =
        sqlx::query_scalar(host.store.sql(
            "SELECT count(*) FROM attempts WHERE outcome = 'succeeded' AND ended_at IS NOT NULL",
        ))
        .fetch_one(host.store.pool())
        .await
        .unwrap();
    assert_eq!(ended, 60);
}

db_test!(successes_are_counted_per_group_and_tenant_whichever_store_claimed_them);
/// A group commit counts its successes per (group, tenant) in
/// `success_counts`: those this store claimed (on SQLite, from its claims'
/// record, `store/runner/claimed.rs`) and those another store on the same
/// database claimed (read from their rows), in one batch — and nothing for
/// an end that is not a success or whose token is stale.
async fn successes_are_counted_per_group_and_tenant_whichever_store_claimed_them(db: Db) {
    let host = TestHost::new(db).await;
    crate::quotas::plain_group(&host, "g", 10).await;
    crate::quotas::tenant_job(&host, "ja", "a", "g").await;
    crate::quotas::tenant_job(&host, "jb", "b", "g").await;
    crate::quotas::triggers(&host, "ja", 3).await;
    crate::quotas::triggers(&host, "jb", 3).await;
    let mine = host
        .store
        .trigger_claim_batch("A", 60_000, 4, None)
        .await
        .unwrap();
    let other = paddock::Store::open(&host.url).await.unwrap();
    let theirs = other
        .trigger_claim_batch("B", 60_000, 10, None)
        .await
        .unwrap();
    assert_eq!((mine.len(), theirs.len()), (4, 2));
    // All six end through this store: the first of its own is skipped
    // (terminal, not a success), the rest succeed; a stale end of one of
    // the others' triggers counts nothing.
    let mut ends = vec![(mine[0].lease("A"), AttemptEnd::skipped("forbid".into()))];
    ends.extend(mine[1..].iter().map(|c| (c.lease("A"), succeeded())));
    ends.extend(theirs.iter().map(|c| (c.lease("B"), succeeded())));
    let mut stale = theirs[0].lease("B");
    stale.fencing_token = paddock::model::FencingToken::new(stale.fencing_token.get() - 1);
    ends.push((stale, succeeded()));
    let results = host.store.attempt_finish_batch(&ends).await.unwrap();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        6,
        "{results:?}"
    );
    let expected = |tenant: &str| {
        mine[1..]
            .iter()
            .chain(&theirs)
            .filter(|c| c.tenant == tenant)
            .count() as i64
    };
    let counted: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT resource_group, tenant, CAST(sum(n) AS BIGINT) FROM success_counts \
         GROUP BY resource_group, tenant ORDER BY tenant",
    )
    .fetch_all(host.store.pool())
    .await
    .unwrap();
    assert_eq!(
        counted,
        vec![
            ("g".to_string(), "a".to_string(), expected("a")),
            ("g".to_string(), "b".to_string(), expected("b")),
        ]
    );
    assert_eq!(expected("a") + expected("b"), 5);
    other.close().await;
}

/// In-memory stores exist only on SQLite.
mod sqlite {
    use super::*;

    /// `sqlite::memory:` is one private database for the whole store: claims
    /// and group commits (on SQLite's writer connection) and every other query
    /// (on the pool) see the same rows, and nothing is left on disk after.
    #[tokio::test]
    async fn an_in_memory_store_is_one_database_for_the_writer_and_the_pool() {
        let files = || -> Vec<std::path::PathBuf> {
            std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with(&format!("paddock-memory-{}-", std::process::id()))
                    })
                })
                .collect()
        };
        let host = TestHost::on("sqlite::memory:".into(), tempfile::tempdir().unwrap()).await;
        assert!(!files().is_empty(), "a private file stands in for memory");
        host.job("noop", "noop", "").await;
        let trigger = host.trigger("noop", json!({})).await;
        let claims = host
            .store
            .trigger_claim_batch("A", 60_000, 10, None)
            .await
            .unwrap();
        assert_eq!(claims.len(), 1, "the writer sees what the pool wrote");
        let ends = [(claims[0].lease("A"), succeeded())];
        let results = host.store.attempt_finish_batch(&ends).await.unwrap();
        assert!(results[0].is_ok(), "{results:?}");
        let row = host.store.trigger_get(trigger.id).await.unwrap();
        assert_eq!(
            row.state, "succeeded",
            "the pool sees what the writer wrote"
        );
        // A second in-memory store is a database of its own.
        let other = paddock::Store::open("sqlite::memory:").await.unwrap();
        assert!(
            other
                .trigger_claim_batch("B", 60_000, 10, None)
                .await
                .unwrap()
                .is_empty()
        );
        drop(other);
        host.store.close().await;
        drop(host);
        assert_eq!(
            files(),
            Vec::<std::path::PathBuf>::new(),
            "removed with the store"
        );
    }
}
