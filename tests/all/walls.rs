//! Tenants are walls: every name a tenant gives — an effect's key, a
//! compensation's target, a query's key, a ticket's subject — is a name in
//! its own namespace. Two tenants, `alpha` and `beta`, share one connector
//! (the reference ledger) and one group, and try what an attacker with one
//! team's jobs would.

use crate::ledger::{Ledger, connector, effect, put};
use crate::{Db, TestHost, guest};
use paddock::effects::operator::{self, Compensation, OperatorError};
use paddock::model::identity::TenantScope;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// A host with the ledger as connector `ledger`, and job `pay-alpha` of
/// tenant `alpha` and `pay-beta` of tenant `beta`, both the effector guest
/// granted `ledger`.
async fn two_tenants(db: Db) -> (TestHost, Ledger) {
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), true),
    )
    .await;
    for tenant in ["alpha", "beta"] {
        let toml = format!(
            "id = \"pay-{tenant}\"\ntenant = \"{tenant}\"\ncomponent = \"{}\"\n\
             connectors = [\"ledger\"]\n[retry]\nmax_attempts = 1\n",
            guest("effector").display()
        );
        host.grant_connectors(&toml).await;
        host.registry
            .job_apply(&toml, std::path::Path::new("."), "test")
            .await
            .unwrap();
    }
    (host, ledger)
}

fn result(t: &paddock::store::TriggerRecord) -> Value {
    serde_json::from_slice(t.result.as_deref().unwrap_or(b"null")).unwrap()
}

/// Run one trigger of `tenant`'s job with `params` to its end.
async fn run(host: &TestHost, tenant: &str, params: Value) -> paddock::store::TriggerRecord {
    host.run_one(&format!("pay-{tenant}"), params).await
}

db_test!(two_tenants_using_one_effect_key_each_get_their_own_downstream_call_and_answer);
async fn two_tenants_using_one_effect_key_each_get_their_own_downstream_call_and_answer(db: Db) {
    let (host, ledger) = two_tenants(db).await;
    // Both orders: alpha first on one key, beta first on another.
    for (first, second, key) in [
        ("alpha", "beta", "order-1/charge"),
        ("beta", "alpha", "order-2/charge"),
    ] {
        let a = run(&host, first, effect("ledger", "RES-W", "reserve", key, 10)).await;
        let b = run(&host, second, effect("ledger", "RES-W", "reserve", key, 10)).await;
        for (t, tenant) in [(&a, first), (&b, second)] {
            assert_eq!(t.state, "succeeded", "{tenant}: {t:?}");
            assert_eq!(
                result(t)["outcome"],
                "done",
                "{tenant} was sent, not replayed"
            );
            let rec = host.store.effect_get(tenant, key).await.unwrap().unwrap();
            assert_eq!((rec.tenant.as_str(), rec.trigger_id), (tenant, t.id));
            assert_eq!(rec.downstream_key, format!("{tenant}/{key}"));
        }
        // Each answer is its own operation's: the receipts differ.
        assert_ne!(result(&a)["body"], result(&b)["body"]);
    }
    let stats = ledger.stats().await;
    assert_eq!(stats["applied"], 4, "{stats}");
    assert_eq!(stats["replayed"], 0, "{stats}");
    assert_eq!(ledger.resource("RES-W").await["balance"], 60);

    // A query by key sees only its own tenant's record.
    let mut query = effect("ledger", "RES-W", "reserve", "order-1/charge", 10);
    query["mode"] = json!("query");
    let asked = run(&host, "beta", query.clone()).await;
    let beta_rec = host
        .store
        .effect_get("beta", "order-1/charge")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(asked.state, "succeeded", "{asked:?}");
    assert_eq!(
        result(&asked)["body"].as_str().unwrap(),
        String::from_utf8_lossy(beta_rec.response.as_deref().unwrap()),
        "beta's query answers beta's own operation"
    );
    query["key"] = json!("only-alpha/charge");
    run(
        &host,
        "alpha",
        effect("ledger", "RES-X", "reserve", "only-alpha/charge", 5),
    )
    .await;
    let asked = run(&host, "beta", query).await;
    assert_eq!(
        result(&asked)["outcome"],
        "none",
        "alpha's key is not beta's"
    );
    ledger.stop().await;
}

db_test!(a_compensation_naming_another_tenants_effect_is_refused_and_nothing_is_sent);
async fn a_compensation_naming_another_tenants_effect_is_refused_and_nothing_is_sent(db: Db) {
    let (host, ledger) = two_tenants(db).await;
    let charge = "alpha-order-1/charge";
    let t = run(
        &host,
        "alpha",
        effect("ledger", "RES-A", "reserve", charge, 30),
    )
    .await;
    assert_eq!(t.state, "succeeded");
    let before = host
        .store
        .effect_get("alpha", charge)
        .await
        .unwrap()
        .unwrap();

    // From beta's guest.
    let mut refund = effect("ledger", "RES-A", "release", "beta/refund", 30);
    refund["compensates"] = json!(charge);
    let t = run(&host, "beta", refund).await;
    assert_eq!(t.state, "failed");
    assert!(
        t.error_message
            .as_deref()
            .unwrap()
            .contains("nothing is recorded"),
        "{t:?}"
    );
    // From an operator, through beta's job.
    let refused = operator::compensate(
        &host.store,
        "local:test",
        &Compensation {
            original: charge.into(),
            job: "pay-beta".into(),
            key: "beta/refund-2".into(),
            action: "RES-A/release".into(),
            payload: json!({"amount": 30}).to_string(),
            reason: "try".into(),
        },
    )
    .await;
    assert!(
        matches!(&refused, Err(OperatorError::Invalid(m)) if m.contains("nothing is recorded")),
        "{refused:?}"
    );

    assert_eq!(
        ledger.stat("requests_received").await,
        1,
        "only alpha's charge"
    );
    assert_eq!(ledger.resource("RES-A").await["balance"], 70);
    assert_eq!(
        host.store
            .effect_get("alpha", charge)
            .await
            .unwrap()
            .unwrap(),
        before
    );
    assert_eq!(
        host.store.effect_get("beta", "beta/refund").await.unwrap(),
        None
    );
    ledger.stop().await;
}

db_test!(a_key_conflict_ticket_is_its_own_tenants_and_shows_nothing_of_another);
async fn a_key_conflict_ticket_is_its_own_tenants_and_shows_nothing_of_another(db: Db) {
    let (host, ledger) = two_tenants(db).await;
    let key = "order-7/charge";
    run(
        &host,
        "alpha",
        effect("ledger", "RES-K", "reserve", key, 10),
    )
    .await;
    // The same key with other params in beta is beta's own first use.
    let b = run(&host, "beta", effect("ledger", "RES-K", "reserve", key, 20)).await;
    assert_eq!(b.state, "succeeded", "{b:?}");
    assert_eq!(result(&b)["outcome"], "done");
    assert!(host.store.exceptions_list(None).await.unwrap().is_empty());

    // The same key with other params in alpha is a conflict, with alpha's
    // record as its evidence and alpha as its tenant.
    let a = run(
        &host,
        "alpha",
        effect("ledger", "RES-K", "reserve", key, 20),
    )
    .await;
    assert_eq!(a.state, "manual", "held for the ticket: {a:?}");
    let tickets = host.store.exceptions_list(None).await.unwrap();
    assert_eq!(tickets.len(), 1);
    let ticket = &tickets[0];
    assert_eq!(
        (ticket.kind.as_str(), ticket.tenant.as_deref()),
        ("key_conflict", Some("alpha"))
    );
    // (The same params give the same digest in any tenant; what is beta's
    // own is its request and its operation at the downstream.)
    let beta = host.store.effect_get("beta", key).await.unwrap().unwrap();
    for secret in [&beta.request_id, &beta.downstream_key] {
        assert!(
            !ticket.evidence.contains(secret.as_str()),
            "{}",
            ticket.evidence
        );
    }

    // beta's team sees no ticket; alpha's sees its own.
    let beta_scope = TenantScope::Only("beta".into());
    let seen = host
        .store
        .exceptions_page_for(&beta_scope, None, None, 10)
        .await
        .unwrap();
    assert!(seen.is_empty(), "{seen:?}");
    assert!(
        host.store
            .exception_get_for(&beta_scope, ticket.id)
            .await
            .is_err()
    );
    let alpha_scope = TenantScope::Only("alpha".into());
    assert_eq!(
        host.store
            .exception_get_for(&alpha_scope, ticket.id)
            .await
            .unwrap()
            .id,
        ticket.id
    );
    ledger.stop().await;
}

db_test!(an_effect_is_read_by_key_only_within_its_tenant);
async fn an_effect_is_read_by_key_only_within_its_tenant(db: Db) {
    let (host, ledger) = two_tenants(db).await;
    let key = "shared/charge";
    run(&host, "alpha", effect("ledger", "RES-R", "reserve", key, 1)).await;
    let alpha = TenantScope::Only("alpha".into());
    let beta = TenantScope::Only("beta".into());
    assert_eq!(
        host.store
            .effect_get_for(&alpha, None, key)
            .await
            .unwrap()
            .tenant,
        "alpha"
    );
    // beta's scope: not found, even naming alpha.
    assert!(host.store.effect_get_for(&beta, None, key).await.is_err());
    assert!(
        host.store
            .effect_get_for(&beta, Some("alpha"), key)
            .await
            .is_err()
    );
    // Every tenant's caller: one match is found; two ask for a tenant.
    run(&host, "beta", effect("ledger", "RES-R", "reserve", key, 1)).await;
    let every = TenantScope::Every;
    let err = host
        .store
        .effect_get_for(&every, None, key)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than one tenant"), "{err}");
    assert_eq!(
        host.store
            .effect_get_for(&every, Some("beta"), key)
            .await
            .unwrap()
            .tenant,
        "beta"
    );
    ledger.stop().await;
}

/// Group `bankgrp`, granted connector `ledger` with a credential the
/// ledger requires, admitting `alpha` only; a token of each tenant, and
/// the API serving the host.
pub(crate) struct Bank {
    pub(crate) host: TestHost,
    pub(crate) ledger: Ledger,
    pub(crate) api: paddock::api::ApiServer,
    pub(crate) tokens: std::collections::HashMap<&'static str, String>,
}

const BANK_SECRET: &str = "bank-s3cret-9f2e";

pub(crate) async fn bank(db: Db) -> Bank {
    use paddock::model::ResourceGroup;
    use paddock::model::identity::Role;
    let host = TestHost::new(db).await;
    let ledger = Ledger::start().await;
    put(
        &host.store,
        connector("ledger", &ledger, Duration::from_secs(5), true),
    )
    .await;
    let secret = paddock::model::secret::ConnectorSecret::bearer(BANK_SECRET).unwrap();
    host.store
        .connector_secret_set("ledger", Some(&secret), "admin")
        .await
        .unwrap();
    ledger
        .require("authorization", &format!("Bearer {BANK_SECRET}"))
        .await;
    host.registry
        .group_put(
            ResourceGroup {
                name: "bankgrp".into(),
                fuel_per_attempt: 10_000_000_000,
                memory_bytes: 64 << 20,
                deadline_ms: 60_000,
                max_concurrency: 4,
                grants: json!(["connector:ledger", "env:BANK_REGION=eu-west"]).to_string(),
                caps: Default::default(),
                capacity: Default::default(),
                aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            "admin",
        )
        .await
        .unwrap();
    let admitted = host
        .registry
        .group_tenants("bankgrp", &["alpha".into()], &[], "admin")
        .await
        .unwrap();
    assert_eq!(admitted, vec!["alpha"]);
    let mut tokens = std::collections::HashMap::new();
    for (name, role, tenant) in [
        ("alpha", Role::Team, Some("alpha")),
        ("beta", Role::Team, Some("beta")),
        ("admin", Role::Admin, None),
    ] {
        let new = paddock::store::NewToken {
            name: name.into(),
            role,
            tenant: tenant.map(str::to_string),
            valid_for_ms: 3_600_000,
        };
        let text = host
            .store
            .token_create(&new, "local:test")
            .await
            .unwrap()
            .text;
        tokens.insert(name, text);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let state = paddock::api::ApiState {
        store: host.store.clone(),
        registry: host.registry.clone(),
    };
    let api = paddock::api::ApiServer::start(listener, state).unwrap();
    Bank {
        host,
        ledger,
        api,
        tokens,
    }
}

impl Bank {
    /// Push the effector as token `who` (a team's component is its
    /// tenant's); its digest.
    pub(crate) async fn push_effector(&self, who: &str) -> String {
        let bytes = std::fs::read(guest("effector")).unwrap();
        let response = reqwest::Client::new()
            .post(format!("http://{}/v1/components", self.api.addr()))
            .bearer_auth(&self.tokens[who])
            .header("content-type", "application/wasm")
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let body: Value = response.json().await.unwrap();
        body["digest"].as_str().unwrap().to_string()
    }

    /// `method path` as token `who`: the status and the JSON answer.
    pub(crate) async fn call(
        &self,
        who: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("http://{}{path}", self.api.addr());
        let client = reqwest::Client::new();
        let request = match method {
            "GET" => client.get(url),
            "POST" => client.post(url),
            other => panic!("{other}"),
        };
        let request = request.bearer_auth(&self.tokens[who]);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// A manifest of the effector in `bankgrp`, asking for the ledger.
fn bank_job(id: &str, tenant: &str, digest: &str) -> String {
    format!(
        "id = \"{id}\"\ntenant = \"{tenant}\"\ncomponent = \"sha256:{digest}\"\n\
         resource_group = \"bankgrp\"\nconnectors = [\"ledger\"]\n[retry]\nmax_attempts = 1\n"
    )
}

db_test!(a_team_cannot_run_in_a_group_that_does_not_admit_its_tenant_and_a_revoked_binding_stops_the_next_attempt);
async fn a_team_cannot_run_in_a_group_that_does_not_admit_its_tenant_and_a_revoked_binding_stops_the_next_attempt(
    db: Db,
) {
    let bank = bank(db).await;
    let host = &bank.host;
    let digest = bank.push_effector("beta").await;
    assert_eq!(bank.push_effector("alpha").await, digest);

    // beta through its team token: refused, naming the group and tenant.
    let (status, body) = bank
        .call(
            "beta",
            "POST",
            "/v1/jobs",
            Some(json!({ "manifest": bank_job("steal", "beta", &digest) })),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("'bankgrp'") && message.contains("'beta'"),
        "{message}"
    );
    // beta through the command line: refused the same way.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("steal.toml");
    std::fs::write(&file, bank_job("steal", "beta", &digest)).unwrap();
    let (ok, out) = crate::secrets::paddock(host, &["job", "apply", file.to_str().unwrap()], &[]);
    assert!(!ok, "{out}");
    assert!(out.contains("does not admit tenant 'beta'"), "{out}");
    assert!(
        out.contains("paddock group allow bankgrp --tenant beta"),
        "{out}"
    );
    assert!(
        host.store.jobs_named("steal").await.unwrap().is_empty(),
        "nothing stored"
    );

    // alpha is admitted: its job runs and its call carries the credential.
    let (status, body) = bank
        .call(
            "alpha",
            "POST",
            "/v1/jobs",
            Some(json!({ "manifest": bank_job("pay", "alpha", &digest) })),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    let t = host
        .run_one("pay", effect("ledger", "RES-B", "reserve", "pay/1", 5))
        .await;
    assert_eq!(t.state, "succeeded", "{t:?}");
    assert_eq!(bank.ledger.stat("applied").await, 1);

    // The binding taken back: the next attempt ends before any guest code,
    // saying why, and the downstream receives nothing.
    let (ok, out) = crate::secrets::paddock(
        host,
        &["group", "disallow", "bankgrp", "--tenant", "alpha"],
        &[],
    );
    assert!(ok, "{out}");
    let t = host
        .run_one("pay", effect("ledger", "RES-B", "reserve", "pay/2", 5))
        .await;
    assert_eq!(t.state, "failed", "{t:?}");
    let why = t.error_message.clone().unwrap();
    assert!(why.contains("does not admit tenant 'alpha'"), "{why}");
    let stats = bank.ledger.stats().await;
    assert_eq!(stats["requests_received"], 1, "{stats}");
    assert_eq!(host.store.effect_get("alpha", "pay/2").await.unwrap(), None);
    let audited: Vec<_> = host
        .store
        .audit_list()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action.starts_with("group.allow") || e.action.starts_with("group.disallow"))
        .map(|e| (e.action, e.subject))
        .collect();
    assert_eq!(
        audited,
        vec![
            ("group.allow".to_string(), "bankgrp".to_string()),
            ("group.disallow".to_string(), "bankgrp".to_string())
        ]
    );
    bank.ledger.stop().await;
}

db_test!(a_team_sees_only_the_groups_that_admit_it_and_no_value_an_admin_set_in_a_grant);
async fn a_team_sees_only_the_groups_that_admit_it_and_no_value_an_admin_set_in_a_grant(db: Db) {
    let bank = bank(db).await;
    let names = |body: &Value| -> Vec<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (status, body) = bank.call("beta", "GET", "/v1/groups", None).await;
    assert_eq!(status, 200);
    assert_eq!(names(&body), vec!["default"], "{body}");
    let (status, _) = bank.call("beta", "GET", "/v1/groups/bankgrp", None).await;
    assert_eq!(status, 404);

    let (_, body) = bank.call("alpha", "GET", "/v1/groups", None).await;
    assert!(names(&body).contains(&"bankgrp".to_string()), "{body}");
    let (status, body) = bank.call("alpha", "GET", "/v1/groups/bankgrp", None).await;
    assert_eq!(status, 200);
    let text = body.to_string();
    assert!(
        text.contains("env:BANK_REGION") && !text.contains("eu-west"),
        "{text}"
    );
    // An admin sees the whole grant.
    let (_, body) = bank.call("admin", "GET", "/v1/groups/bankgrp", None).await;
    assert!(body.to_string().contains("eu-west"));
    // Other tenants' names are theirs.
    bank.host
        .registry
        .tenant_put(
            &paddock::model::group::TenantQuota::weighted("alpha", 2),
            "admin",
        )
        .await
        .unwrap();
    let (_, body) = bank.call("beta", "GET", "/v1/tenants", None).await;
    assert_eq!(body, json!([]));
    bank.ledger.stop().await;
}

db_test!(the_capability_report_by_tenant_lists_each_tenants_groups_and_their_grants);
async fn the_capability_report_by_tenant_lists_each_tenants_groups_and_their_grants(db: Db) {
    let bank = bank(db).await;
    let report = paddock::registry::report::tenant_grants(&bank.host.store)
        .await
        .unwrap();
    let of = |tenant: &str| -> Vec<String> {
        report
            .iter()
            .find(|t| t.tenant == tenant)
            .unwrap()
            .groups
            .iter()
            .map(|g| g.group.clone())
            .collect()
    };
    assert_eq!(of("alpha"), vec!["bankgrp", "default"]);
    assert_eq!(of("*"), vec!["default"]);
    let alpha = report.iter().find(|t| t.tenant == "alpha").unwrap();
    let bankgrp = alpha.groups.iter().find(|g| g.group == "bankgrp").unwrap();
    assert_eq!(bankgrp.admitted, "by name");
    let credential = bankgrp.credentials["ledger"].as_deref().unwrap();
    assert!(!credential.contains(BANK_SECRET), "{credential}");
    // The command line prints it too, and no secret.
    let (ok, out) = crate::secrets::paddock(
        &bank.host,
        &["audit", "capabilities", "--by", "tenant"],
        &[],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("tenant alpha:") && out.contains("group bankgrp"),
        "{out}"
    );
    assert!(!out.contains(BANK_SECRET), "{out}");
    bank.ledger.stop().await;
}
