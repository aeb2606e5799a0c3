//! Hostile guests, contained (issue 17): each way a guest can misbehave —
//! an endless loop, a memory bomb, a table bomb, endless recursion, a tight `poll()`
//! loop, giant results, errors and checkpoints, a million log lines, ten
//! thousand effect calls — ends with its own class, stores no more than
//! the group's caps, keeps the host's memory bounded, and a well-behaved
//! job of another tenant runs to the end meanwhile.

use crate::{Db, TestHost, guest};
use paddock::model::ResourceGroup;
use paddock::model::caps::OutputCaps;
use paddock::store::prelude::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The process's resident memory, bytes (Linux).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

db_test!(
    each_hostile_guest_ends_with_its_class_within_the_caps_while_a_victim_runs,
    workers = 4
);
async fn each_hostile_guest_ends_with_its_class_within_the_caps_while_a_victim_runs(db: Db) {
    let host = TestHost::new(db).await;
    let caps = OutputCaps::default();
    host.registry
        .group_put(
            ResourceGroup {
                name: "hostile".into(),
                fuel_per_attempt: 4_000_000_000,
                memory_bytes: 256 << 20,
                deadline_ms: 10_000,
                max_concurrency: 16,
                grants: "[]".into(),
                caps,
                capacity: Default::default(),
                aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            "admin",
        )
        .await
        .unwrap();
    for (id, name, tenant, group) in [
        ("flood", "flood", "evil", "hostile"),
        ("spin", "spin", "evil", "hostile"),
        ("hog", "hog", "evil", "hostile"),
        ("tablegrow", "tablegrow", "evil", "hostile"),
        ("victim", "hello", "good", "default"),
    ] {
        let manifest = format!(
            "id = \"{id}\"\ntenant = \"{tenant}\"\nresource_group = \"{group}\"\n\
             component = \"{}\"\n[retry]\nmax_attempts = 3\nbackoff = \"10ms\"\n",
            guest(name).display()
        );
        host.grant_connectors(&manifest).await;
        host.registry
            .job_apply(&manifest, Path::new("."), "team")
            .await
            .unwrap();
    }
    let mb = 1 << 20;
    // A loop ends on whichever of fuel and the deadline it reaches first:
    // which one depends on the machine's speed, and both are the guest's.
    let cpu: &[&str] = &["fuel_exhausted", "deadline_exceeded"];
    let too_large: &[&str] = &["output_too_large"];
    let succeeded: &[&str] = &["succeeded"];
    let hostile = [
        ("spin", json!({}), cpu),
        ("hog", json!({}), &["memory_limit"][..]),
        ("tablegrow", json!({}), &["memory_limit"][..]),
        ("flood", json!({ "recurse": 1 }), &["stack_overflow"][..]),
        ("flood", json!({ "poll_loop": 1 }), cpu),
        ("flood", json!({ "result_bytes": 100 * mb }), too_large),
        ("flood", json!({ "error_bytes": 100 * mb }), too_large),
        ("flood", json!({ "checkpoint_bytes": 100 * mb }), too_large),
        (
            "flood",
            json!({ "log_lines": 1_000_000 }),
            &["fuel_exhausted"][..],
        ),
        (
            "flood",
            json!({ "effects": 10_000, "connector": "nowhere" }),
            succeeded,
        ),
    ];
    let rss_before = rss_bytes();
    let mut ids = Vec::new();
    for (job, params, class) in &hostile {
        ids.push((
            host.trigger(job, params.clone()).await.id,
            *class,
            params.clone(),
        ));
    }
    let victims: Vec<i64> = futures_ids(&host, 8).await;
    host.runner("r", Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
    let rss_growth = rss_bytes().saturating_sub(rss_before);

    for (id, class, params) in ids {
        let t = host.store.trigger_get(id).await.unwrap();
        let ended = t.error_class.as_deref().unwrap_or(t.state.as_str());
        assert!(
            class.contains(&ended),
            "{params}: {ended}, {:?}",
            t.error_message
        );
        assert_eq!(t.attempts, 1, "never retried: {params}");
        let stored =
            t.result.as_ref().map_or(0, Vec::len) + t.error_message.as_ref().map_or(0, String::len);
        assert!(
            stored as u64 <= caps.result.max(caps.error) + 512,
            "{params}: {stored} bytes stored"
        );
        if let Some((_, state)) = host.store.checkpoint_load(id).await.unwrap() {
            assert!(state.len() as u64 <= caps.checkpoint, "{params}");
        }
        for a in host.store.attempts_for(id).await.unwrap() {
            let log = a.log.unwrap_or_default();
            assert!(
                log.len() as u64 <= caps.log + 64,
                "{params}: log of {} bytes",
                log.len()
            );
        }
    }
    let refused = host
        .store
        .trigger_get(
            host.store
                .triggers_list(100)
                .await
                .unwrap()
                .iter()
                .find(|t| t.params.contains("nowhere"))
                .unwrap()
                .id,
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(refused.result.as_ref().unwrap()).unwrap()["refused"],
        10_000,
        "every ungranted call was refused"
    );
    for id in victims {
        let t = host.store.trigger_get(id).await.unwrap();
        assert_eq!(
            t.state, "succeeded",
            "the victim's trigger {id}: {:?}",
            t.error_message
        );
    }
    println!("hostile guests: host RSS grew by {} MiB", rss_growth >> 20);
    assert!(
        rss_growth < 2 << 30,
        "host RSS grew by {} MiB",
        rss_growth >> 20
    );
}

/// `n` triggers of the victim job.
async fn futures_ids(host: &TestHost, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            host.trigger("victim", json!({ "name": format!("v{i}") }))
                .await
                .id,
        );
    }
    ids
}

db_test!(a_return_over_the_caps_is_refused_before_the_host_copies_it);
/// 100 MB and 300 MB results, errors and checkpoints from a guest with
/// 1 GiB of memory: each refused by wasmtime's per-call copy limit, which
/// the sandbox sets from the caps (`set_hostcall_fuel`), before the host
/// allocates it — `output_too_large`, one attempt — not copied and then
/// cut (100 MB is under wasmtime's own 128 MiB default) and not
/// `host_error` (300 MB is over it).
async fn a_return_over_the_caps_is_refused_before_the_host_copies_it(db: Db) {
    let host = TestHost::new(db).await;
    host.group("big", i64::MAX, 1 << 30, Duration::from_secs(60))
        .await;
    host.job("flood", "flood", "resource_group = \"big\"").await;
    for size in [100 << 20, 300 << 20] {
        for what in ["result_bytes", "error_bytes", "checkpoint_bytes"] {
            let params = json!({ what: size });
            let t = host.run_one("flood", params.clone()).await;
            assert_eq!(
                t.error_class.as_deref(),
                Some("output_too_large"),
                "{params}: {:?}",
                t.error_message
            );
            let message = t.error_message.unwrap();
            assert!(
                message.contains("refused before it was copied"),
                "{params}: {message}"
            );
            assert_eq!(t.attempts, 1, "{params}");
            assert_eq!(t.result, None, "{params}");
        }
    }
}

db_test!(a_guest_spinning_on_a_host_call_runs_out_of_fuel_not_time);
/// Host calls are charged fuel (`HOST_CALL_FUEL` each): a guest calling
/// `poll()` in a tight loop ends as `fuel_exhausted` well before a
/// 10-minute deadline, like a guest spinning in wasm, instead of holding
/// its thread until the deadline.
async fn a_guest_spinning_on_a_host_call_runs_out_of_fuel_not_time(db: Db) {
    let host = TestHost::new(db).await;
    host.group("polls", 100_000_000, 64 << 20, Duration::from_secs(600))
        .await;
    host.job("flood", "flood", "resource_group = \"polls\"")
        .await;
    let t = host.run_one("flood", json!({ "poll_loop": 1 })).await;
    assert_eq!(
        t.error_class.as_deref(),
        Some("fuel_exhausted"),
        "{:?}",
        t.error_message
    );
    let message = t.error_message.unwrap();
    assert!(
        message.contains("host calls)"),
        "charged for its host calls: {message}"
    );
    let attempt = &host.store.attempts_for(t.id).await.unwrap()[0];
    assert_eq!(
        attempt.fuel_used,
        Some(100_000_000),
        "host calls are charged"
    );
}
