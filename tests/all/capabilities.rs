//! Capabilities a reviewer can trust (issue 17): components from standard
//! toolchains (componentize-py, componentize-js) run as jobs with WASI
//! linked deny-by-default; admin grants bite at `job apply` and at every
//! call; size caps end an oversized guest as `output_too_large`.

use crate::ledger::{Ledger, effect};
use crate::procs::eventually;
use crate::{Db, TestHost, guest};
use paddock::model::Claim;
use paddock::model::ResourceGroup;
use paddock::model::caps::OutputCaps;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;

fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

async fn claim(host: &TestHost, owner: &str, at: Option<i64>) -> Claim {
    let mut claims = host
        .store
        .trigger_claim_batch(owner, 30_000, 1, at)
        .await
        .unwrap();
    assert_eq!(claims.len(), 1, "{owner} expected to claim one trigger");
    claims.remove(0)
}

/// An hour from now by the database's clock: every earlier lease lapsed.
async fn an_hour_on(host: &TestHost) -> Option<i64> {
    Some(host.store.now_ms().await.unwrap() + HOUR_MS)
}

db_test!(
    python_and_javascript_jobs_take_over_and_retry_from_their_checkpoints,
    workers = 4
);
/// The effector job written in Python and in JavaScript (examples/), each
/// against wit/job.wit: context, checkpoints, an effect through the ledger
/// connector and the log. A takeover resumes from the checkpoint a vanished
/// runner saved; a retry after an unknown outcome resumes from the job's
/// own checkpoint and replays the effect from the record, sending nothing.
async fn python_and_javascript_jobs_take_over_and_retry_from_their_checkpoints(db: Db) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(10)).await;
    for lang in ["py", "js"] {
        let job = format!("pay-{lang}");
        host.job(
            &job,
            &format!("{lang}_effector"),
            "connectors = [\"ledger\"]\n[retry]\nmax_attempts = 3\nbackoff = \"10ms\"\njitter = false",
        )
        .await;

        // Takeover: A saved step 1 and vanished; B resumes from it.
        let mut params = effect(
            "ledger",
            &format!("RES-{lang}-1"),
            "reserve",
            &format!("{lang}-1"),
            5,
        );
        params["steps"] = json!(3);
        let t = host.trigger(&job, params).await;
        let a = claim(&host, "A", None).await;
        host.store
            .checkpoint_save(&a.lease("A"), &1u32.to_le_bytes())
            .await
            .unwrap();
        let b = claim(&host, "B", an_hour_on(&host).await).await;
        let summary = host.runner("B", Duration::from_secs(60)).execute(b).await;
        assert!(summary.outcome.committed(), "{lang}: {summary:?}");
        let t = host.store.trigger_get(t.id).await.unwrap();
        assert_eq!(t.state, "succeeded", "{lang}: {:?}", t.error_message);
        let out = result(&t);
        assert_eq!(out["outcome"], "done", "{lang}: {out}");
        assert_eq!(out["resumed_from"], 1, "{lang}: {out}");
        assert_eq!(out["attempt"], 2, "{lang}: {out}");
        assert!(host.store.checkpoint_load(t.id).await.unwrap().unwrap().0 > 0);
        let attempts = host.store.attempts_for(t.id).await.unwrap();
        let log = attempts.last().unwrap().log.clone().unwrap_or_default();
        assert!(log.contains("effector"), "{lang}: the guest's log: {log:?}");

        // Retry: the response is lost after the ledger commits; the first
        // attempt saved its 2 steps and step 3 (the effect was answered,
        // `unknown`); the retry resumes from 3 and replays from the record.
        let key = format!("{lang}-2");
        let mut params = effect("ledger", &format!("RES-{lang}-2"), "reserve", &key, 5);
        params["steps"] = json!(2);
        let t = host.trigger(&job, params).await;
        ledger
            .fault(json!({"drop_response_after_commit": 1, "scope": {"idempotency_key": crate::sent_key(&key)}}))
            .await;
        let first = host
            .runner("A", Duration::from_secs(60))
            .execute(claim(&host, "A", None).await)
            .await;
        assert_eq!(
            first.outcome,
            paddock::model::RunOutcome::Committed(paddock::model::TriggerState::RetryWait),
            "{lang}: {first:?}"
        );
        assert_eq!(first.error_class.as_deref(), Some("unknown"), "{lang}");
        let second = host
            .runner("B", Duration::from_secs(60))
            .execute(claim(&host, "B", an_hour_on(&host).await).await)
            .await;
        assert!(second.outcome.committed(), "{lang}: {second:?}");
        let t = host.store.trigger_get(t.id).await.unwrap();
        let out = result(&t);
        assert_eq!(out["outcome"], "replayed", "{lang}: {out}");
        assert_eq!(out["resumed_from"], 3, "{lang}: {out}");
        assert_eq!(out["attempt"], 2, "{lang}: {out}");
    }
    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 4, "one effect per trigger: {stats}");
    ledger.stop().await;
}

/// A group with no grants and the default caps.
fn bare_group(name: &str) -> ResourceGroup {
    ResourceGroup {
        name: name.into(),
        fuel_per_attempt: 50_000_000_000,
        memory_bytes: 256 << 20,
        deadline_ms: 120_000,
        max_concurrency: 16,
        grants: "[]".into(),
        caps: OutputCaps::default(),
        capacity: Default::default(),
        aging_ms: paddock::model::group::DEFAULT_AGING_MS,
        shares: Default::default(),
    }
}

fn last_log(attempts: &[paddock::store::AttemptRecord]) -> String {
    attempts.last().unwrap().log.clone().unwrap_or_default()
}

db_test!(wasi_is_denied_by_default_and_each_grant_gives_exactly_its_capability);
/// The Python probe reports what WASI gives it. A job asking for
/// capabilities its group does not grant is refused at apply, one line per
/// grant. Not asked for (even if the group grants it): an empty
/// environment, the wall clock frozen at the trigger's scheduled time, no
/// file, no socket (the ledger listens on the port it tries), stdout
/// discarded, no scratch directory. Asked for and granted: clocks, random, stdio, one
/// variable and a 1 MiB scratch directory: exactly those — other files and
/// sockets stay refused; the directory is removed after the attempt, and a
/// guest writing past its size is stopped as `output_too_large`.
async fn wasi_is_denied_by_default_and_each_grant_gives_exactly_its_capability(db: Db) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    let port: u16 = ledger.url.rsplit(':').next().unwrap().parse().unwrap();
    host.registry
        .group_put(bare_group("probe"), "admin")
        .await
        .unwrap();
    host.registry
        .group_tenants("probe", &[crate::TENANT.into()], &[], "admin")
        .await
        .unwrap();
    let needs = "resource_group = \"probe\"\n\
                 capabilities = [\"clocks\", \"random\", \"stdio\", \"env:REGION\", \"scratch\"]";
    // Asking for what the group does not grant is refused, one line each.
    let manifest = format!(
        "id = \"probe\"\ntenant = \"t1\"\ncomponent = \"{}\"\n{needs}\n",
        guest("py_probe").display()
    );
    let err = host
        .registry
        .job_apply(&manifest, Path::new("."), "team")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err.lines().count(), 6, "{err}");
    for missing in [
        "clocks",
        "random",
        "stdio",
        "env:REGION=VALUE",
        "scratch:SIZE",
    ] {
        assert!(
            err.contains(&format!(
                "{missing}: an admin grants it with `paddock group grant probe {missing}`"
            )),
            "{err}"
        );
    }
    host.registry
        .group_grant(
            "probe",
            &[
                "clocks".into(),
                "random".into(),
                "stdio".into(),
                "env:REGION=eu-1".into(),
                "scratch:1MiB".into(),
            ],
            &[],
            "admin",
        )
        .await
        .unwrap();
    // Granted to the group but not asked for by the job: not given.
    host.job("probe", "py_probe", "resource_group = \"probe\"")
        .await;

    let t = host.run_one("probe", json!({ "port": port })).await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);
    let seen = result(&t);
    assert_eq!(seen["env"], json!({}), "{seen}");
    assert_eq!(
        seen["time"].as_f64().unwrap() as i64,
        t.scheduled_at / 1000,
        "the frozen wall clock: {seen}"
    );
    for denied in ["file", "listdir", "socket", "scratch"] {
        assert!(
            seen[denied].as_str().unwrap().starts_with("refused"),
            "{denied}: {seen}"
        );
    }
    let log = last_log(&host.store.attempts_for(t.id).await.unwrap());
    assert!(!log.contains("hello from"), "stdout is discarded: {log:?}");

    // Asked for and granted: given.
    host.job("probe", "py_probe", needs).await;
    let before = host.store.now_ms().await.unwrap() / 1000;
    let t = host.run_one("probe", json!({ "port": port })).await;
    let seen = result(&t);
    assert_eq!(seen["env"], json!({ "REGION": "eu-1" }), "{seen}");
    let now = seen["time"].as_f64().unwrap() as i64;
    assert!(
        (before - 5..before + 600).contains(&now),
        "the real clock: {now} vs {before}"
    );
    for denied in ["file", "listdir", "socket"] {
        assert!(
            seen[denied].as_str().unwrap().starts_with("refused"),
            "{denied} stays refused with every grant: {seen}"
        );
    }
    let log = last_log(&host.store.attempts_for(t.id).await.unwrap());
    assert!(log.contains("stdout: hello from stdout"), "{log:?}");
    assert!(log.contains("stderr: hello from stderr"), "{log:?}");
    assert_eq!(
        seen["scratch"], "ok: hi",
        "the granted scratch directory: {seen}"
    );
    let left = |id: i64| {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(&format!("paddock-scratch-{id}-{}-", std::process::id()))
            })
            .count()
    };
    // This test's SQLite and PostgreSQL runs share the process and their
    // trigger ids, so the other run's attempt may hold a directory of the
    // same name for a moment: wait for none to be left (a leaked one stays).
    let none_left = |id: i64, what: &'static str| {
        eventually(Duration::from_secs(30), what, move || async move {
            (left(id) == 0).then_some(())
        })
    };
    none_left(t.id, "the scratch directory removed after the attempt").await;

    // Over the scratch grant: stopped as output_too_large, and removed.
    let t = host
        .run_one("probe", json!({ "port": port, "scratch_bytes": 2 << 20 }))
        .await;
    assert_eq!(
        t.error_class.as_deref(),
        Some("output_too_large"),
        "{:?}",
        t.error_message
    );
    assert!(
        t.error_message
            .as_deref()
            .unwrap()
            .contains("scratch directory holds"),
        "{:?}",
        t.error_message
    );
    none_left(
        t.id,
        "the scratch directory removed after an attempt over its cap",
    )
    .await;
    ledger.stop().await;
}

db_test!(a_connector_is_granted_by_an_admin_never_by_the_manifest);
/// `job apply` refuses a manifest asking for connectors its group does not
/// grant, one line per missing grant with the command; after the grant it
/// applies; after a revoke, the next call is refused at runtime as
/// `not-granted` and nothing reaches the downstream.
async fn a_connector_is_granted_by_an_admin_never_by_the_manifest(db: Db) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    host.registry
        .group_put(bare_group("pay"), "admin")
        .await
        .unwrap();
    host.registry
        .group_tenants("pay", &[crate::TENANT.into()], &[], "admin")
        .await
        .unwrap();
    let manifest = format!(
        "id = \"pay\"\ntenant = \"t1\"\nresource_group = \"pay\"\ncomponent = \"{}\"\n\
         connectors = [\"ledger\", \"mailer\"]\n",
        guest("effector").display()
    );
    let err = host
        .registry
        .job_apply(&manifest, Path::new("."), "team")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(
        err.contains(
            "connector:ledger: an admin grants it with `paddock group grant pay connector:ledger`"
        ),
        "{err}"
    );
    assert!(
        err.contains("`paddock group grant pay connector:mailer`"),
        "{err}"
    );
    assert_eq!(host.count("jobs").await, 0, "nothing stored");

    host.registry
        .group_grant(
            "pay",
            &["connector:ledger".into(), "connector:mailer".into()],
            &[],
            "admin",
        )
        .await
        .unwrap();
    host.registry
        .job_apply(&manifest, Path::new("."), "team")
        .await
        .unwrap();
    let t = host
        .run_one("pay", effect("ledger", "RES-1", "reserve", "k-1", 1))
        .await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);

    host.registry
        .group_grant("pay", &[], &["connector:ledger".into()], "admin")
        .await
        .unwrap();
    let t = host
        .run_one("pay", effect("ledger", "RES-2", "reserve", "k-2", 1))
        .await;
    assert_eq!(t.state, "failed");
    let message = t.error_message.unwrap();
    assert!(message.contains("not-granted"), "{message}");
    assert_eq!(
        ledger.stat("requests_received").await,
        1,
        "only the granted call"
    );
    let audit = host.store.audit_list().await.unwrap();
    assert!(
        audit.iter().filter(|e| e.action == "group.put").count() >= 3,
        "every grant and revoke is audited"
    );
    ledger.stop().await;
}

db_test!(a_guest_over_a_size_cap_fails_as_output_too_large_and_nothing_past_the_cap_is_stored);
/// The `flood` guest in a group with 1 KiB caps: an oversized result,
/// error message, checkpoint and effect payload each end the attempt as
/// `output_too_large` — permanent (one attempt though the plan allows
/// three), nothing past the cap stored; a flood of log lines is cut at
/// the log cap and the run succeeds; oversized params are refused at apply
/// and at trigger creation.
async fn a_guest_over_a_size_cap_fails_as_output_too_large_and_nothing_past_the_cap_is_stored(
    db: Db,
) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    let kib = 1024;
    let mut group = bare_group("capped");
    group.caps = OutputCaps {
        params: kib,
        result: kib,
        error: kib,
        checkpoint: kib,
        effect_payload: kib,
        effect_response: kib,
        log: 4 * kib,
    };
    host.registry.group_put(group, "admin").await.unwrap();
    host.job(
        "flood",
        "flood",
        "resource_group = \"capped\"\nconnectors = [\"ledger\"]\n[retry]\nmax_attempts = 3\nbackoff = \"10ms\"",
    )
    .await;
    for (params, what) in [
        (json!({ "result_bytes": 2000 }), "the result of 2000 bytes"),
        (
            json!({ "error_bytes": 5000 }),
            "the error message of 5000 bytes",
        ),
        (
            json!({ "checkpoint_bytes": 2000 }),
            "a checkpoint of 2000 bytes",
        ),
        (
            json!({ "effects": 1, "payload_bytes": 2000 }),
            "an effect's payload of 2000 bytes",
        ),
    ] {
        let t = host.run_one("flood", params.clone()).await;
        assert_eq!(t.state, "failed", "{params}");
        assert_eq!(
            t.error_class.as_deref(),
            Some("output_too_large"),
            "{params}"
        );
        let message = t.error_message.clone().unwrap();
        assert!(
            message.starts_with(&format!(
                "{what} exceeds the resource group's cap of 1024 bytes"
            )),
            "{message}"
        );
        assert!(
            message.len() < 512,
            "the stored message is bounded: {}",
            message.len()
        );
        assert_eq!(t.result, None);
        assert_eq!(t.attempts, 1, "never retried: {params}");
        assert_eq!(
            host.store.checkpoint_load(t.id).await.unwrap(),
            None,
            "{params}"
        );
    }
    assert_eq!(
        ledger.stat("requests_received").await,
        0,
        "the oversized payload was not sent"
    );

    let t = host.run_one("flood", json!({ "log_lines": 100_000 })).await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);
    let log = last_log(&host.store.attempts_for(t.id).await.unwrap());
    assert!(log.len() <= 4 * 1024 + 64, "log of {} bytes", log.len());
    assert!(
        log.ends_with("more lines dropped]\n"),
        "{}",
        &log[log.len() - 60..]
    );

    let big = "x".repeat(2000);
    let err = host
        .store
        .trigger_create(&paddock::store::NewTrigger::manual(
            "flood",
            json!({ "pad": big }),
            None,
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the trigger's params of 2010 bytes exceeds"),
        "{err}"
    );
    let manifest = format!(
        "id = \"flood2\"\ntenant = \"t1\"\nresource_group = \"capped\"\ncomponent = \"{}\"\n[params]\npad = \"{big}\"\n",
        guest("flood").display()
    );
    let err = host
        .registry
        .job_apply(&manifest, Path::new("."), "team")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("--max-params"), "{err}");
    ledger.stop().await;
}

db_test!(a_reviewer_reads_each_components_capabilities_and_what_a_new_version_changes);
/// `paddock audit capabilities` judges each import of each component
/// against the grants of the group that runs it, lists its jobs and the
/// connectors it reaches (with a credential's fingerprint, never its
/// value); `paddock component diff` names what a new component adds.
async fn a_reviewer_reads_each_components_capabilities_and_what_a_new_version_changes(db: Db) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    let secret = paddock::model::secret::ConnectorSecret::bearer("never-shown-42").unwrap();
    let fingerprint = host
        .store
        .connector_secret_set("ledger", Some(&secret), "admin")
        .await
        .unwrap()
        .unwrap();
    let mut probe = bare_group("probe");
    probe.grants = r#"["clocks"]"#.into();
    host.registry.group_put(probe, "admin").await.unwrap();
    host.job("probe", "py_probe", "resource_group = \"probe\"")
        .await;
    host.job("pay", "effector", "connectors = [\"ledger\"]")
        .await;

    let (ok, json_out) =
        crate::secrets::paddock(&host, &["audit", "capabilities", "--format", "json"], &[]);
    assert!(ok, "{json_out}");
    assert!(!json_out.contains("never-shown-42"));
    let reports: Vec<Value> = serde_json::from_str(&json_out).unwrap();
    let by_job = |job: &str| {
        reports
            .iter()
            .find(|r| {
                r["used_by"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|u| u["job"] == job)
            })
            .unwrap_or_else(|| panic!("no component used by {job}: {json_out}"))
            .clone()
    };
    let probe = by_job("probe");
    let import = |name: &str| {
        probe["imports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("{name} not imported: {probe}"))["in_groups"]["probe"]
            .clone()
    };
    assert_eq!(import("wasi:clocks/wall-clock")["granted"], true, "{probe}");
    assert_eq!(import("wasi:sockets/tcp@")["granted"], false, "{probe}");
    assert_eq!(import("wasi:random/random")["granted"], false, "{probe}");
    assert_eq!(probe["used_by"][0]["tenant"], "t1");
    let pay = by_job("pay");
    let reach = &pay["connectors"][0];
    assert_eq!(reach["connector"], "ledger");
    assert_eq!(
        (reach["granted"].clone(), reach["configured"].clone()),
        (json!(true), json!(true))
    );
    assert!(
        reach["secret"].as_str().unwrap().contains(&fingerprint),
        "{reach}"
    );

    let (ok, text) = crate::secrets::paddock(&host, &["audit", "capabilities"], &[]);
    assert!(ok, "{text}");
    assert!(text.contains("[probe] GRANTED granted: clocks"), "{text}");
    assert!(
        text.contains("[probe] denied  never granted: TCP, UDP and name lookup refused"),
        "{text}"
    );

    let (effector, py) = (
        pay["digest"].as_str().unwrap(),
        probe["digest"].as_str().unwrap(),
    );
    let (ok, diff) =
        crate::secrets::paddock(&host, &["component", "diff", &effector[..12], py], &[]);
    assert!(ok, "{diff}");
    assert!(diff.contains("+ import wasi:sockets/tcp@0.2.9"), "{diff}");
    let (ok, same) =
        crate::secrets::paddock(&host, &["component", "diff", effector, effector], &[]);
    assert!(ok && same.contains("the same capabilities"), "{same}");
    ledger.stop().await;
}

db_test!(a_downstream_answer_over_the_response_cap_is_never_stored);
/// The ledger's answer (a few hundred bytes) is over a group's 64-byte
/// `effect_response` cap: the host does not read it past the cap, stores
/// none of it, and records the outcome as unknown (settled later by query
/// or by people), which the guest hears as `unknown`.
async fn a_downstream_answer_over_the_response_cap_is_never_stored(db: Db) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    let mut group = bare_group("tiny");
    group.caps.effect_response = 64;
    host.registry.group_put(group, "admin").await.unwrap();
    host.job(
        "pay",
        "effector",
        "resource_group = \"tiny\"\nconnectors = [\"ledger\"]\n[retry]\nmax_attempts = 1",
    )
    .await;
    let t = host
        .run_one("pay", effect("ledger", "RES-1", "reserve", "big-1", 1))
        .await;
    assert_eq!(
        t.error_class.as_deref(),
        Some("unknown"),
        "{:?}",
        t.error_message
    );
    let rec = host
        .store
        .effect_get(crate::TENANT, "big-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, "unknown");
    assert_eq!(rec.response, None, "nothing past the cap is stored");
    assert!(
        rec.error
            .as_deref()
            .unwrap_or_default()
            .contains("64-byte cap"),
        "{:?}",
        rec.error
    );
    assert_eq!(
        ledger.stat("applied").await,
        1,
        "the downstream did apply it"
    );
    ledger.stop().await;
}
