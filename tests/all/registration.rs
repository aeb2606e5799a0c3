//! Registration: components are content-addressed and idempotent; plan
//! versions are immutable; every refusal is audited.

use crate::{Db, TestHost, guest};
use paddock::model::ApplyOutcome;
use paddock::store::NewTrigger;
use paddock::store::prelude::*;
use serde_json::json;
use std::path::Path;

fn manifest(params: &str) -> String {
    format!(
        "id = \"billing\"\ntenant = \"acme\"\ncomponent = \"{}\"\nversion = 1\n[params]\n{params}\n",
        crate::guest("hello").display()
    )
}

db_test!(a_job_submitted_six_times_yields_one_version_four_hits_and_one_audited_rejection);
async fn a_job_submitted_six_times_yields_one_version_four_hits_and_one_audited_rejection(db: Db) {
    let host = TestHost::new(db).await;
    let same = manifest("region = \"eu\"");
    let mut created = 0;
    let mut hits = 0;
    let mut rejected = Vec::new();
    // 5 retries of the same submission (client timeouts), 1 with other
    // params under the same explicit version.
    for text in [
        &same,
        &same,
        &same,
        &manifest("region = \"us\""),
        &same,
        &same,
    ] {
        match host.registry.job_apply(text, Path::new("."), "ci").await {
            Ok((_, ApplyOutcome::Created { .. })) => created += 1,
            Ok((_, ApplyOutcome::Unchanged { version, .. })) => {
                assert_eq!(version, 1);
                hits += 1
            }
            Err(e) => rejected.push(e.to_string()),
        }
    }
    assert_eq!((created, hits, rejected.len()), (1, 4, 1));
    assert!(
        rejected[0].contains("version 1 already exists with different content"),
        "{}",
        rejected[0]
    );
    assert_eq!(host.count("plan_versions").await, 1);
    assert_eq!(host.store.counter("plan_idempotent_hits").await.unwrap(), 4);
    let audit = host.store.audit_list().await.unwrap();
    let rejections: Vec<_> = audit
        .iter()
        .filter(|e| e.action == "plan.rejected")
        .collect();
    assert_eq!(rejections.len(), 1);
    assert!(rejections[0].detail.contains("version_conflict"));
    assert_eq!(paddock::model::audit::verify_chain(&audit), Ok(audit.len()));
}

db_test!(changing_content_without_a_version_creates_the_next_version_and_keeps_the_old);
async fn changing_content_without_a_version_creates_the_next_version_and_keeps_the_old(db: Db) {
    let host = TestHost::new(db).await;
    let v1 = manifest("n = 1").replace("version = 1\n", "");
    let v2 = manifest("n = 2").replace("version = 1\n", "");
    let apply = |t: String| {
        let host = &host;
        async move {
            host.registry
                .job_apply(&t, Path::new("."), "ci")
                .await
                .unwrap()
                .1
        }
    };
    assert_eq!(apply(v1.clone()).await.version(), 1);
    assert_eq!(apply(v2).await.version(), 2);
    // Going back to v1's content is a new version: history is never rewritten.
    assert!(matches!(
        apply(v1).await,
        ApplyOutcome::Created { version: 3, .. }
    ));
    let versions = host.store.plan_versions("acme", "billing").await.unwrap();
    assert_eq!(versions.len(), 3);
    assert_eq!(versions[0].digest, versions[2].digest);
}

db_test!(pushing_the_same_component_twice_is_an_idempotent_hit);
async fn pushing_the_same_component_twice_is_an_idempotent_hit(db: Db) {
    let host = TestHost::new(db).await;
    let a = host
        .registry
        .component_push_file(&guest("hello"), "ci")
        .await
        .unwrap();
    let b = host
        .registry
        .component_push_file(&guest("hello"), "ci")
        .await
        .unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.digest, b.digest);
    assert_eq!(host.count("components").await, 1);
    assert_eq!(
        host.store
            .counter("component_idempotent_hits")
            .await
            .unwrap(),
        1
    );
}

db_test!(the_capability_manifest_lists_every_import_and_the_run_export);
async fn the_capability_manifest_lists_every_import_and_the_run_export(db: Db) {
    let host = TestHost::new(db).await;
    let pushed = host
        .registry
        .component_push_file(&guest("hello"), "ci")
        .await
        .unwrap();
    let imports: Vec<_> = pushed
        .manifest
        .imports
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    for wanted in [
        "paddock:job/context@0.1.0",
        "paddock:job/checkpoint@0.1.0",
        "paddock:job/log@0.1.0",
    ] {
        assert!(imports.contains(&wanted), "{imports:?}");
    }
    let context = pushed
        .manifest
        .imports
        .iter()
        .find(|i| i.name.starts_with("paddock:job/context"))
        .unwrap();
    assert!(
        context.functions.contains(&"current".to_string()),
        "{context:?}"
    );
    assert!(
        pushed
            .manifest
            .exports
            .iter()
            .any(|e| e.name == "run" && e.kind == "function")
    );
}

db_test!(a_job_id_another_tenant_uses_is_another_job);
async fn a_job_id_another_tenant_uses_is_another_job(db: Db) {
    let host = TestHost::new(db).await;
    let first = manifest("a = 1").replace("version = 1\n", "");
    host.registry
        .job_apply(&first, Path::new("."), "ci")
        .await
        .unwrap();
    // The same id and content in another tenant: its own version 1, not
    // a refusal that would tell the team the id exists elsewhere.
    let other = first.replace("tenant = \"acme\"", "tenant = \"globex\"");
    let (_, outcome) = host
        .registry
        .job_apply(&other, Path::new("."), "ci")
        .await
        .unwrap();
    assert_eq!(outcome.version(), 1);
    assert_eq!(host.count("plan_versions").await, 2);
    assert_eq!(
        host.store
            .plan_versions("acme", "billing")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        host.store
            .plan_versions("globex", "billing")
            .await
            .unwrap()
            .len(),
        1
    );
    // A bare name both tenants use names neither: the refusal lists the
    // qualified names, and a qualified name is one job.
    let err = host
        .store
        .trigger_create(&NewTrigger::manual("billing", json!({}), None))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("acme/billing") && err.contains("globex/billing"),
        "{err}"
    );
    let (run, _) = host
        .store
        .trigger_create(&NewTrigger::manual("globex/billing", json!({}), None))
        .await
        .unwrap();
    assert_eq!(
        (run.tenant.as_str(), run.job_id.as_str()),
        ("globex", "billing")
    );
}

db_test!(the_audit_log_refuses_updates_and_deletes);
async fn the_audit_log_refuses_updates_and_deletes(db: Db) {
    let host = TestHost::new(db).await;
    host.registry
        .component_push_file(&guest("noop"), "ci")
        .await
        .unwrap();
    let update = sqlx::query(host.store.sql("UPDATE audit_log SET actor = 'mallory'"))
        .execute(host.store.pool())
        .await;
    assert!(update.unwrap_err().to_string().contains("append-only"));
    let delete = sqlx::query(host.store.sql("DELETE FROM audit_log"))
        .execute(host.store.pool())
        .await;
    assert!(delete.is_err());
    let audit = host.store.audit_list().await.unwrap();
    assert_eq!(paddock::model::audit::verify_chain(&audit), Ok(1));
}
