//! A job id is a name inside its tenant: `alpha`'s `nightly` and `beta`'s
//! `nightly` are two jobs — two plans, two schedules firing under the same
//! plan keys, two request-key namespaces, two gates — and a team never
//! learns that the other exists. Everything through the HTTP API with each
//! team's token, as an attacker holding one of them would try it.

use crate::Db;
use crate::walls::{Bank, bank};
use paddock::schedule::scanner::{Scanner, ScannerConfig};
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// Job `nightly` of `tenant` on the effector, firing every second.
fn nightly(tenant: &str, digest: &str, label: &str) -> String {
    format!(
        "id = \"nightly\"\ntenant = \"{tenant}\"\ncomponent = \"sha256:{digest}\"\n\
         [params]\nlabel = \"{label}\"\n\
         [schedule]\nkind = \"cron\"\ncron = \"* * * * * *\"\ntimezone = \"UTC\"\n"
    )
}

/// Both teams apply `nightly` through their own tokens; the component's
/// digest.
async fn two_nightlies(bank: &Bank) -> String {
    let digest = bank.push_effector("alpha").await;
    assert_eq!(bank.push_effector("beta").await, digest);
    for tenant in ["alpha", "beta"] {
        let manifest = nightly(tenant, &digest, tenant);
        let (status, body) = bank
            .call(
                tenant,
                "POST",
                "/v1/jobs",
                Some(json!({ "manifest": manifest })),
            )
            .await;
        assert!(status == 200 || status == 201, "{tenant}: {status} {body}");
    }
    digest
}

fn tenant_of(body: &Value) -> &str {
    body["job"]["tenant"].as_str().unwrap_or_default()
}

db_test!(the_same_job_id_in_two_tenants_is_two_jobs_each_seen_only_by_its_own_team);
async fn the_same_job_id_in_two_tenants_is_two_jobs_each_seen_only_by_its_own_team(db: Db) {
    let bank = bank(db).await;
    let digest = two_nightlies(&bank).await;
    let store = &bank.host.store;

    // Each tenant has its own job at version 1, with its own plan.
    for tenant in ["alpha", "beta"] {
        let job = store.job_get(tenant, "nightly").await.unwrap().unwrap();
        assert_eq!(job.latest_version, 1, "{tenant}: {job:?}");
        let plan = store.plan_get(tenant, "nightly", 1).await.unwrap();
        assert!(
            plan.spec.contains(&format!("\"label\":\"{tenant}\"")),
            "{plan:?}"
        );
    }

    // A team's bare name is its own job; the other's, qualified, is not found.
    for (me, other) in [("alpha", "beta"), ("beta", "alpha")] {
        let (status, body) = bank.call(me, "GET", "/v1/jobs/nightly", None).await;
        assert_eq!((status, tenant_of(&body)), (200, me), "{body}");
        let (status, body) = bank
            .call(me, "GET", &format!("/v1/jobs/{other}%2Fnightly"), None)
            .await;
        assert_eq!(status, 404, "{me} reads {other}'s job: {body}");
        // Answered exactly as a job that exists nowhere.
        let (_, none) = bank
            .call(me, "GET", "/v1/jobs/nobody%2Fnightly", None)
            .await;
        assert_eq!(
            body.to_string().replace(other, "nobody"),
            none.to_string(),
            "the answer tells nothing of {other}"
        );
        let (_, list) = bank.call(me, "GET", "/v1/jobs", None).await;
        let tenants: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["tenant"].as_str().unwrap())
            .collect();
        assert_eq!(tenants, vec![me], "{list}");
    }

    // An admin sees both: the bare name is ambiguous and says so, with
    // the names to choose from; the qualified name is one job.
    let (status, body) = bank.call("admin", "GET", "/v1/jobs/nightly", None).await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("alpha/nightly") && message.contains("beta/nightly"),
        "{message}"
    );
    let (status, body) = bank
        .call("admin", "GET", "/v1/jobs/beta%2Fnightly", None)
        .await;
    assert_eq!((status, tenant_of(&body)), (200, "beta"), "{body}");
    let (_, list) = bank.call("admin", "GET", "/v1/jobs?limit=1", None).await;
    let next = list["next"].as_str().unwrap().to_string();
    assert_eq!(next, "alpha/nightly", "{list}");
    let (_, rest) = bank
        .call(
            "admin",
            "GET",
            &format!("/v1/jobs?limit=1&after={next}"),
            None,
        )
        .await;
    assert_eq!(
        rest["items"][0]["tenant"], "beta",
        "the page goes on: {rest}"
    );

    // A re-apply of one tenant's job with new content is its version 2;
    // the other's stays at 1.
    let changed = nightly("alpha", &digest, "v2");
    let (status, body) = bank
        .call(
            "alpha",
            "POST",
            "/v1/jobs",
            Some(json!({ "manifest": changed })),
        )
        .await;
    assert!(status == 200 || status == 201, "{body}");
    assert_eq!(
        store
            .job_get("alpha", "nightly")
            .await
            .unwrap()
            .unwrap()
            .latest_version,
        2
    );
    assert_eq!(
        store
            .job_get("beta", "nightly")
            .await
            .unwrap()
            .unwrap()
            .latest_version,
        1
    );
    bank.ledger.stop().await;
}

db_test!(two_tenants_jobs_of_one_id_fire_run_and_pause_apart);
async fn two_tenants_jobs_of_one_id_fire_run_and_pause_apart(db: Db) {
    let bank = bank(db).await;
    two_nightlies(&bank).await;
    let store = &bank.host.store;

    // The scanner fires both schedules: the same plan keys, once per tenant.
    let scanner = Scanner::new(
        store.clone(),
        ScannerConfig {
            owner: "scan".into(),
            shard_lease: Duration::from_secs(30),
            overlap: Duration::from_secs(10),
            lookahead: Duration::ZERO,
            initial_lookback: Duration::from_secs(10),
            max_window: Duration::from_secs(3600),
            tick: Duration::from_secs(1),
        },
    );
    let now = store.now_ms().await.unwrap();
    let report = scanner.tick(Some(now + 5_000)).await.unwrap();
    let keys = |tenant: &'static str| async move {
        let mut keys: Vec<String> = store
            .triggers_list(10_000)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.tenant == tenant && t.origin == "schedule")
            .map(|t| t.plan_key)
            .collect();
        keys.sort();
        keys
    };
    let (alpha, beta) = (keys("alpha").await, keys("beta").await);
    assert!(!alpha.is_empty(), "{report:?}");
    assert_eq!(
        alpha, beta,
        "each tenant's job fires every time, under the same keys"
    );
    assert_eq!(report.created, 2 * alpha.len() as i64, "{report:?}");

    // One request key, two tenants: two runs, each of its own job.
    let mut runs = Vec::new();
    for tenant in ["alpha", "beta"] {
        let (status, body) = bank
            .call(
                tenant,
                "POST",
                "/v1/triggers",
                Some(json!({ "job": "nightly", "request_key": "deploy-1" })),
            )
            .await;
        assert_eq!(status, 201, "{tenant}: {body}");
        assert_eq!(body["trigger"]["tenant"], tenant, "{body}");
        runs.push(body["trigger"]["id"].as_i64().unwrap());
        // The same key again is the same run.
        let (status, again) = bank
            .call(
                tenant,
                "POST",
                "/v1/triggers",
                Some(json!({ "job": "nightly", "request_key": "deploy-1" })),
            )
            .await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["trigger"]["id"].as_i64(), runs.last().copied());
    }
    assert_ne!(runs[0], runs[1]);

    // alpha pauses its nightly: beta's is untouched, and beta's team sees
    // no gate of alpha's.
    let (status, body) = bank
        .call(
            "alpha",
            "POST",
            "/v1/jobs/nightly/pause",
            Some(json!({ "reason": "alpha's maintenance" })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let run = |tenant: &'static str| {
        bank.call(
            tenant,
            "POST",
            "/v1/triggers",
            Some(json!({ "job": "nightly" })),
        )
    };
    let (status, body) = run("alpha").await;
    assert_eq!(status, 409, "alpha's job is paused: {body}");
    let (status, body) = run("beta").await;
    assert_eq!(status, 201, "beta's job is not: {body}");
    let paused = |tenant: &'static str| async move {
        store
            .triggers_list(10_000)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.tenant == tenant && t.state == "paused")
            .count()
    };
    assert!(paused("alpha").await > 0);
    assert_eq!(paused("beta").await, 0);
    let (_, gates) = bank.call("beta", "GET", "/v1/gates", None).await;
    assert_eq!(gates, json!([]), "{gates}");
    let (_, gates) = bank.call("alpha", "GET", "/v1/gates", None).await;
    assert_eq!(gates[0]["value"], "alpha/nightly", "{gates}");

    // beta cannot resume or cancel alpha's job by naming it.
    let held = paused("alpha").await;
    for verb in ["pause", "resume", "cancel"] {
        let (status, body) = bank
            .call(
                "beta",
                "POST",
                &format!("/v1/jobs/alpha%2Fnightly/{verb}"),
                Some(json!({ "reason": "hostile" })),
            )
            .await;
        assert_eq!(status, 404, "{verb}: {body}");
    }
    assert_eq!(paused("alpha").await, held, "alpha's job is still paused");
    let (_, gates) = bank.call("alpha", "GET", "/v1/gates", None).await;
    assert_eq!(gates.as_array().unwrap().len(), 1, "{gates}");
    bank.ledger.stop().await;
}
