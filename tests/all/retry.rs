//! Retry-now (issue 18 item 5): a failed trigger is final, so its retry is
//! a new run; a waiting retry is only brought forward. Both audited.

use crate::{Db, TestHost};
use paddock::store::Retried;
use paddock::store::prelude::*;
use serde_json::json;
use std::time::Duration;

db_test!(a_failed_trigger_is_retried_as_a_new_run_and_never_rewritten);
async fn a_failed_trigger_is_retried_as_a_new_run_and_never_rewritten(db: Db) {
    let host = TestHost::new(db).await;
    host.job("trap", "trap", "[retry]\nmax_attempts = 1").await;
    let failed = host.run_one("trap", json!({ "day": "2026-12-04" })).await;
    assert_eq!(failed.state, "failed", "{:?}", failed.error_message);

    // Needs a reason; a finished-but-not-failed or unknown trigger is refused.
    assert!(
        host.store
            .trigger_retry(failed.id, "local:ops", " ")
            .await
            .is_err()
    );
    let retried = host
        .store
        .trigger_retry(failed.id, "local:ops", "the fix is out")
        .await
        .unwrap();
    let Retried::NewRun { trigger, created } = retried else {
        panic!("{retried:?}");
    };
    assert!(created);
    let run = host.store.trigger_get(trigger).await.unwrap();
    assert_eq!(
        (
            run.state.as_str(),
            run.job_id.as_str(),
            run.plan_version,
            run.params.as_str()
        ),
        (
            "pending",
            "trap",
            failed.plan_version,
            failed.params.as_str()
        )
    );
    // Asking again is the same run.
    assert_eq!(
        host.store
            .trigger_retry(failed.id, "local:ops", "again")
            .await
            .unwrap(),
        Retried::NewRun {
            trigger,
            created: false
        }
    );
    // The failed trigger is as it was.
    let after = host.store.trigger_get(failed.id).await.unwrap();
    assert_eq!(
        (
            &after.state,
            after.finished_at,
            after.updated_at,
            after.attempts
        ),
        (
            &failed.state,
            failed.finished_at,
            failed.updated_at,
            failed.attempts
        )
    );
    let audit = host.store.audit_list().await.unwrap();
    let retry = audit
        .iter()
        .find(|e| e.action == "trigger.retry")
        .expect("audited");
    assert_eq!(
        (retry.actor.as_str(), retry.subject.clone()),
        ("local:ops", failed.id.to_string())
    );
    assert!(retry.detail.contains("the fix is out"), "{}", retry.detail);
    assert_eq!(
        audit.iter().filter(|e| e.action == "trigger.retry").count(),
        1
    );

    // The new run runs (and fails again, as this guest always does).
    host.runner("r", Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
    assert_eq!(
        host.store.trigger_get(trigger).await.unwrap().state,
        "failed"
    );
    // A succeeded or pending trigger is not retried.
    host.job("hello", "hello", "").await;
    let ok = host.run_one("hello", json!({})).await;
    assert_eq!(ok.state, "succeeded");
    let refused = host
        .store
        .trigger_retry(ok.id, "local:ops", "why not")
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("is succeeded"), "{refused}");
}

db_test!(a_waiting_retry_is_brought_forward_and_nothing_else_moves);
async fn a_waiting_retry_is_brought_forward_and_nothing_else_moves(db: Db) {
    let host = TestHost::new(db).await;
    host.job("trap", "trap", "").await;
    // A trigger an hour into its backoff after a first attempt (set in
    // place: this guest's failures are permanent, and the runner's way
    // into `retry_wait` is proven in `conformance`).
    let t = host.trigger("trap", json!({})).await;
    sqlx::query(host.store.sql(
        "UPDATE triggers SET state = 'retry_wait', attempts = 1, fencing_token = 1, \
         next_run_at = next_run_at + 3600000 WHERE id = ?",
    ))
    .bind(t.id)
    .execute(host.store.pool())
    .await
    .unwrap();
    let waiting = host.store.trigger_get(t.id).await.unwrap();
    let now = host.store.now_ms().await.unwrap();
    assert!(waiting.next_run_at > now + 3_000_000, "backoff of an hour");

    let retried = host
        .store
        .trigger_retry(waiting.id, "local:ops", "downstream is back")
        .await
        .unwrap();
    assert_eq!(retried, Retried::DueNow);
    let due = host.store.trigger_get(waiting.id).await.unwrap();
    assert_eq!(
        (due.state.as_str(), due.fencing_token, due.attempts),
        ("retry_wait", waiting.fencing_token, waiting.attempts)
    );
    assert!(due.next_run_at <= host.store.now_ms().await.unwrap());
    // The runner takes it now: its second attempt.
    host.runner("r", Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
    let t = host.store.trigger_get(waiting.id).await.unwrap();
    assert_eq!(t.attempts, 2, "{t:?}");
}
