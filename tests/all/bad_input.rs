//! Bad input gets a clear error naming the problem, and nothing already
//! stored is lost, nor any partial row left behind.

use crate::{Db, TestHost, guest};
use paddock::store::prelude::*;
use std::path::Path;

/// Row counts of every registration table.
async fn snapshot(host: &TestHost) -> [i64; 3] {
    [
        host.count("components").await,
        host.count("jobs").await,
        host.count("plan_versions").await,
    ]
}

async fn apply_err(host: &TestHost, text: &str) -> String {
    host.registry
        .job_apply(text, Path::new("."), "ci")
        .await
        .unwrap_err()
        .to_string()
}

async fn stored_host(db: Db) -> TestHost {
    let host = TestHost::new(db).await;
    host.job("existing", "hello", "").await;
    host
}

db_test!(malformed_toml_is_refused_and_stores_nothing);
async fn malformed_toml_is_refused_and_stores_nothing(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let err = apply_err(&host, "id = \"x\"\ntenant = ").await;
    assert!(err.contains("not valid TOML"), "{err}");
    assert_eq!(snapshot(&host).await, before);
}

db_test!(unknown_manifest_fields_are_named);
async fn unknown_manifest_fields_are_named(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let text = format!(
        "id = \"x\"\ntenant = \"t\"\ncomponent = \"{}\"\nretries = 5\n",
        guest("hello").display()
    );
    let err = apply_err(&host, &text).await;
    assert!(err.contains("unknown field `retries`"), "{err}");
    assert_eq!(snapshot(&host).await, before);
}

db_test!(a_file_that_is_not_wasm_is_refused_as_such);
async fn a_file_that_is_not_wasm_is_refused_as_such(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let err = host
        .registry
        .component_push(b"#!/bin/sh\necho hi\n", "ci")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a WebAssembly file"), "{err}");
    assert_eq!(snapshot(&host).await, before);
}

db_test!(a_core_module_is_refused_with_how_to_make_a_component);
async fn a_core_module_is_refused_with_how_to_make_a_component(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let empty_core_module = b"\0asm\x01\0\0\0";
    let err = host
        .registry
        .component_push(empty_core_module, "ci")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("core WebAssembly module, not a component"),
        "{err}"
    );
    assert_eq!(snapshot(&host).await, before);
}

db_test!(a_component_importing_what_the_host_does_not_provide_is_refused_by_import_name);
async fn a_component_importing_what_the_host_does_not_provide_is_refused_by_import_name(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let audit_before = host.count("audit_log").await;
    let err = host
        .registry
        .component_push_file(&guest("forbidden"), "ci")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("'acme:net/sockets@0.1.0'"), "{err}");
    assert_eq!(snapshot(&host).await, before);
    // The refusal is a capability decision, so it is audited.
    let audit = host.store.audit_list().await.unwrap();
    assert_eq!(audit.len() as i64, audit_before + 1);
    assert_eq!(audit.last().unwrap().action, "component.rejected");
}

db_test!(a_manifest_naming_an_unknown_group_or_component_is_refused);
async fn a_manifest_naming_an_unknown_group_or_component_is_refused(db: Db) {
    let host = stored_host(db).await;
    let before = snapshot(&host).await;
    let text = format!(
        "id = \"x\"\ntenant = \"t\"\ncomponent = \"{}\"\nresource_group = \"gpu\"\n",
        guest("hello").display()
    );
    let err = apply_err(&host, &text).await;
    assert!(err.contains("unknown resource group 'gpu'"), "{err}");
    let err = apply_err(
        &host,
        "id = \"x\"\ntenant = \"t\"\ncomponent = \"sha256:0000\"\n",
    )
    .await;
    assert!(err.contains("no component sha256:0000"), "{err}");
    let err = apply_err(
        &host,
        "id = \"x\"\ntenant = \"t\"\ncomponent = \"missing.wasm\"\n",
    )
    .await;
    assert!(
        err.contains("cannot read") && err.contains("missing.wasm"),
        "{err}"
    );
    assert_eq!(snapshot(&host).await, before);
}

db_test!(bad_durations_in_the_retry_budget_name_the_field);
async fn bad_durations_in_the_retry_budget_name_the_field(db: Db) {
    let host = stored_host(db).await;
    let text = format!(
        "id = \"x\"\ntenant = \"t\"\ncomponent = \"{}\"\n[retry]\nbackoff = \"soon\"\n",
        guest("hello").display()
    );
    let err = apply_err(&host, &text).await;
    assert!(err.contains("retry.backoff"), "{err}");
}
