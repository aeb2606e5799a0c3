//! The four guest behaviours, each contained and classified: a job that
//! works, one that traps, one that loops forever, one that eats memory —
//! and the well-behaved ones keep running beside the bad ones.

use crate::{Db, TestHost};
use paddock::store::prelude::*;
use serde_json::json;
use std::time::Duration;

db_test!(a_well_behaved_job_logs_checkpoints_and_returns_output);
async fn a_well_behaved_job_logs_checkpoints_and_returns_output(db: Db) {
    let host = TestHost::new(db).await;
    host.job("hello", "hello", "[params]\nsteps = 4").await;
    let t = host.trigger("hello", json!({"name": "tests"})).await;
    host.runner("r1", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "succeeded");
    let out: serde_json::Value = serde_json::from_slice(t.result.as_ref().unwrap()).unwrap();
    assert_eq!(out["greeting"], "hello tests");
    assert_eq!(out["steps"], 4);
    let (seq, _) = host.store.checkpoint_load(t.id).await.unwrap().unwrap();
    assert_eq!(seq, 4, "one checkpoint per step");
    let attempts = host.store.attempts_for(t.id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    let a = &attempts[0];
    assert_eq!(a.outcome.as_deref(), Some("succeeded"));
    assert!(a.fuel_used.unwrap() > 0);
    assert!(a.peak_memory_bytes.unwrap() > 0);
    assert!(a.log.as_deref().unwrap().contains("info:"), "{:?}", a.log);
}

db_test!(misbehaving_guests_are_stopped_and_classified_while_others_succeed);
async fn misbehaving_guests_are_stopped_and_classified_while_others_succeed(db: Db) {
    let host = TestHost::new(db).await;
    host.tight_group().await;
    host.job("hello", "hello", "").await;
    host.job("trap", "trap", "").await;
    host.job("spin", "spin", "resource_group = \"tight\"").await;
    host.job("hog", "hog", "resource_group = \"tight\"").await;
    let mut ids = Vec::new();
    // Interleave good and bad work so they run at the same time.
    for job in ["hog", "hello", "spin", "hello", "trap", "hello"] {
        ids.push((job, host.trigger(job, json!({})).await.id));
    }
    host.runner("r1", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    for (job, id) in ids {
        let t = host.store.trigger_get(id).await.unwrap();
        let (state, class) = (t.state.as_str(), t.error_class.as_deref());
        match job {
            "hello" => assert_eq!((state, class), ("succeeded", None)),
            "trap" => assert_eq!((state, class), ("failed", Some("guest_panic"))),
            "spin" => assert_eq!((state, class), ("failed", Some("fuel_exhausted"))),
            "hog" => {
                assert_eq!((state, class), ("failed", Some("memory_limit")));
                let a = &host.store.attempts_for(id).await.unwrap()[0];
                assert!(a.peak_memory_bytes.unwrap() <= 16 << 20);
            }
            _ => unreachable!(),
        }
        // Limits and panics are not retried: one attempt each.
        assert_eq!(t.attempts, 1, "{job}");
    }
}

db_test!(a_guest_that_outlives_its_deadline_is_interrupted);
async fn a_guest_that_outlives_its_deadline_is_interrupted(db: Db) {
    let host = TestHost::new(db).await;
    host.group("short", i64::MAX, 16 << 20, Duration::from_millis(300))
        .await;
    host.job("spin", "spin", "resource_group = \"short\"").await;
    let t = host.trigger("spin", json!({})).await;
    let started = std::time::Instant::now();
    host.runner("r1", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.error_class.as_deref(), Some("deadline_exceeded"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

db_test!(an_effect_on_an_ungranted_connector_fails_permanently_without_retry);
async fn an_effect_on_an_ungranted_connector_fails_permanently_without_retry(db: Db) {
    let host = TestHost::new(db).await;
    host.job("effector", "effector", "").await;
    let t = host
        .trigger(
            "effector",
            json!({"connector": "ledger", "action": "reserve", "key": "k1", "payload": "{}"}),
        )
        .await;
    host.runner("r1", Duration::from_secs(30))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(t.id).await.unwrap();
    assert_eq!(t.state, "failed");
    assert_eq!(t.error_class.as_deref(), Some("permanent"));
    assert!(t.error_message.unwrap().contains("not granted"));
    assert_eq!(t.attempts, 1);
}
