//! The HTTP admin API (issue 18, items 2 and 3), served in-process on
//! 127.0.0.1:0 over the test store: the role matrix (every route × every
//! role), the tenant isolation walk (every route with a foreign tenant's
//! token, nothing changed), bad input (clear 4xx, nothing stored), the
//! OpenAPI document against the routes, pagination, and the command line's
//! `--server` mode printing what the local command prints.

use crate::{Db, TestHost, guest};
use paddock::api::{ApiServer, ApiState};
use paddock::model::identity::Role;
use paddock::store::prelude::*;
use paddock::store::{NewException, NewToken, Store};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};

/// A test store with two tenants' work, tokens of every role and the API
/// serving it.
struct Api {
    host: TestHost,
    _server: ApiServer,
    base: String,
    http: reqwest::Client,
    /// Token texts by name: admin, operator, reviewer, acme, globex.
    tokens: HashMap<&'static str, String>,
    /// Each tenant's trigger, ticket and (own) component digest.
    acme: Owned,
    globex: Owned,
}

struct Owned {
    trigger: i64,
    ticket: i64,
    digest: String,
    /// A succeeded effect of its trigger (key `TENANT-effect`).
    effect: String,
}

async fn start(db: Db) -> Api {
    let host = TestHost::new(db).await;
    let mut owned = Vec::new();
    for (job, tenant, component) in [
        ("acme-job", "acme", "noop"),
        ("globex-job", "globex", "hello"),
    ] {
        let digest = host
            .registry
            .component_push_file(&guest(component), "test")
            .await
            .unwrap()
            .digest;
        let toml =
            format!("id = \"{job}\"\ntenant = \"{tenant}\"\ncomponent = \"sha256:{digest}\"\n");
        host.registry
            .job_apply(&toml, std::path::Path::new("."), "test")
            .await
            .unwrap();
        let trigger = host.trigger(job, json!({})).await.id;
        let (ticket, _) = host
            .store
            .exception_open(&NewException {
                kind: "unknown_outcome",
                subject: format!("{tenant}-key"),
                trigger_id: Some(trigger),
                effect_key: None,
                evidence: json!({}),
                allowed_actions: vec!["mark_succeeded"],
            })
            .await
            .unwrap();
        let effect = format!("{tenant}-effect");
        sqlx::query(host.store.sql(
            "INSERT INTO effects (tenant, idempotency_key, downstream_key, trigger_id, connector, \
             action, params_digest, request_id, fencing_token, state, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'ledger', 'RES-1/charge', 'd', 'r', 1, 'succeeded', 0, 0)",
        ))
        .bind(tenant)
        .bind(&effect)
        .bind(&effect)
        .bind(trigger)
        .execute(host.store.pool())
        .await
        .unwrap();
        owned.push(Owned {
            trigger,
            ticket: ticket.id,
            digest,
            effect,
        });
    }
    let mut tokens = HashMap::new();
    for (name, role, tenant) in [
        ("admin", Role::Admin, None),
        ("operator", Role::Operator, None),
        ("reviewer", Role::Reviewer, None),
        ("acme", Role::Team, Some("acme")),
        ("globex", Role::Team, Some("globex")),
    ] {
        tokens.insert(name, token(&host.store, name, role, tenant).await);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = ApiServer::start(
        listener,
        ApiState {
            store: host.store.clone(),
            registry: host.registry.clone(),
        },
    )
    .unwrap();
    let base = format!("http://{}", server.addr());
    let globex = owned.pop().unwrap();
    let acme = owned.pop().unwrap();
    Api {
        host,
        _server: server,
        base,
        http: reqwest::Client::new(),
        tokens,
        acme,
        globex,
    }
}

async fn token(store: &Store, name: &str, role: Role, tenant: Option<&str>) -> String {
    store
        .token_create(
            &NewToken {
                name: name.into(),
                role,
                tenant: tenant.map(str::to_string),
                valid_for_ms: 3_600_000,
            },
            "local:test",
        )
        .await
        .unwrap()
        .text
}

/// A request's body.
enum Send {
    Nothing,
    Json(Value),
    Raw(&'static str, Vec<u8>),
}

impl Api {
    /// `method path` with the named token (`None`: no header); the status
    /// and the JSON answer.
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Send,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(name) = token {
            let text = self.tokens.get(name).map_or(name, |t| t.as_str());
            request = request.bearer_auth(text);
        }
        request = match body {
            Send::Nothing => request,
            Send::Json(v) => request.json(&v),
            Send::Raw(content_type, bytes) => request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes),
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call("GET", path, Some(token), Send::Nothing).await
    }

    /// A route's path with this tenant's rows in it (and the query a
    /// route needs).
    fn path(&self, template: &str, of: &Owned, job: &str) -> String {
        let path = template
            .replace("{id}", &of.trigger.to_string())
            .replace("{job}", job)
            .replace("{digest}", &of.digest)
            .replace("{other}", &of.digest)
            .replace("{key}", &of.effect)
            .replace("{tenant}", "acme")
            .replace("{kind}", "group")
            .replace("{name}", "default");
        let query = match template {
            "/v1/schedule/preview" => format!("?cron=0+*+*+*+*&{DAY}"),
            "/v1/schedule/diff" => format!("?a=cron:0+*+*+*+*&b=cron:0+*/2+*+*+*&{DAY}"),
            "/v1/audit/export" => "?since=1h".to_string(),
            _ => String::new(),
        };
        path + &query
    }
}

/// A window of one day, as a query.
const DAY: &str = "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z";

/// Everything a request could change, as text (the audit log apart: a
/// refusal may be audited, and is meant to be).
async fn snapshot(store: &Store) -> Vec<String> {
    macro_rules! rows {
        ($sql:literal, $t:ty) => {
            format!(
                "{}: {:?}",
                $sql,
                sqlx::query_as::<_, $t>(store.sql($sql))
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            )
        };
    }
    vec![
        rows!("SELECT id, state FROM triggers ORDER BY id", (i64, String)),
        rows!(
            "SELECT job_id, latest_version FROM jobs ORDER BY job_id",
            (String, i64)
        ),
        rows!(
            "SELECT job_id, version FROM plan_versions ORDER BY job_id, version",
            (String, i64)
        ),
        rows!(
            "SELECT digest, pushed_by FROM components ORDER BY digest",
            (String, String)
        ),
        rows!(
            "SELECT digest, tenant FROM component_tenants ORDER BY digest, tenant",
            (String, String)
        ),
        rows!(
            "SELECT name, revoked_at FROM api_tokens ORDER BY name",
            (String, Option<i64>)
        ),
        rows!(
            "SELECT tenant, weight FROM tenants ORDER BY tenant",
            (String, i64)
        ),
        rows!(
            "SELECT name, grants FROM resource_groups ORDER BY name",
            (String, String)
        ),
        rows!(
            "SELECT name, base_url FROM connectors ORDER BY name",
            (String, String)
        ),
        rows!(
            "SELECT id, state FROM exceptions ORDER BY id",
            (i64, String)
        ),
        rows!("SELECT id, state FROM effects ORDER BY id", (i64, String)),
    ]
}

/// Who may call each route: Team, Operator, Admin, Reviewer (`.`: may
/// not); `*`: no token needed. Written out here, not derived from the
/// code, so a role widened or narrowed by mistake fails by name.
const MATRIX: &[(&str, &str, &str)] = &[
    ("GET", "/v1/openapi.json", "*"),
    ("GET", "/v1/triggers", "TOAR"),
    ("POST", "/v1/triggers", "T.A."),
    ("GET", "/v1/triggers/{id}", "TOAR"),
    ("GET", "/v1/triggers/{id}/effects", "TOAR"),
    ("POST", "/v1/triggers/{id}/cancel", "TOA."),
    ("POST", "/v1/triggers/{id}/retry", "T.A."),
    ("POST", "/v1/triggers/{id}/approve", ".OA."),
    ("GET", "/v1/jobs", "TOAR"),
    ("POST", "/v1/jobs", "T.A."),
    ("GET", "/v1/jobs/{job}", "TOAR"),
    ("GET", "/v1/components", "TOAR"),
    ("POST", "/v1/components", "T.A."),
    ("GET", "/v1/components/{digest}", "TOAR"),
    ("GET", "/v1/components/{digest}/diff/{other}", "TOAR"),
    ("GET", "/v1/schedule/preview", "TOAR"),
    ("GET", "/v1/schedule/diff", "TOAR"),
    ("POST", "/v1/jobs/{job}/backfill", "T.A."),
    ("GET", "/v1/schedule/shards", "TOAR"),
    ("GET", "/v1/schedule/skipped", "TOAR"),
    ("GET", "/v1/effects", "TOAR"),
    ("GET", "/v1/effects/{key}", "TOAR"),
    ("POST", "/v1/effects/recover", ".OA."),
    ("POST", "/v1/effects/{key}/compensate", ".OA."),
    ("GET", "/v1/tickets", "TOAR"),
    ("GET", "/v1/tickets/{id}", "TOAR"),
    ("POST", "/v1/tickets/{id}/resolve", ".OA."),
    ("POST", "/v1/tickets/{id}/approve", ".OA."),
    ("POST", "/v1/tickets/{id}/reject", ".OA."),
    ("GET", "/v1/gates", "TOAR"),
    ("POST", "/v1/jobs/{job}/pause", "TOA."),
    ("POST", "/v1/jobs/{job}/resume", "TOA."),
    ("POST", "/v1/jobs/{job}/cancel", "TOA."),
    ("POST", "/v1/gates/{kind}/{name}/pause", ".OA."),
    ("POST", "/v1/gates/{kind}/{name}/resume", ".OA."),
    ("POST", "/v1/gates/{kind}/{name}/cancel", ".OA."),
    ("POST", "/v1/gates/global/pause", "..A."),
    ("POST", "/v1/gates/global/resume", "..A."),
    ("POST", "/v1/gates/global/cancel", "..A."),
    ("GET", "/v1/reports/incident", "TOAR"),
    ("GET", "/v1/reports/cost", "TOAR"),
    ("GET", "/v1/reports/conservation", ".OAR"),
    ("GET", "/v1/prices", "TOAR"),
    ("PUT", "/v1/prices", "..A."),
    ("GET", "/v1/status", "TOAR"),
    ("GET", "/v1/groups", "TOAR"),
    ("GET", "/v1/groups/{name}", "TOAR"),
    ("POST", "/v1/groups", "..A."),
    ("PUT", "/v1/groups/{name}", "..A."),
    ("POST", "/v1/groups/{name}/grants", "..A."),
    ("POST", "/v1/groups/{name}/tenants", "..A."),
    ("GET", "/v1/tenants", "TOAR"),
    ("PUT", "/v1/tenants/{tenant}", "..A."),
    ("GET", "/v1/connectors", "TOAR"),
    ("PUT", "/v1/connectors/{name}", "..A."),
    ("PUT", "/v1/connectors/{name}/secret", "..A."),
    ("DELETE", "/v1/connectors/{name}/secret", "..A."),
    ("GET", "/v1/connectors/secrets", "..A."),
    ("GET", "/v1/tokens", "..A."),
    ("POST", "/v1/tokens", "..A."),
    ("DELETE", "/v1/tokens/{name}", "..A."),
    ("GET", "/v1/audit", ".OAR"),
    ("GET", "/v1/audit/verify", ".OAR"),
    ("GET", "/v1/audit/export", ".OAR"),
    ("GET", "/v1/capabilities", ".OAR"),
    ("GET", "/v1/capabilities/tenants", ".OAR"),
];

const ROLES: [(char, &str); 4] = [
    ('T', "acme"),
    ('O', "operator"),
    ('A', "admin"),
    ('R', "reviewer"),
];

db_test!(every_route_answers_each_role_as_the_matrix_says);
async fn every_route_answers_each_role_as_the_matrix_says(db: Db) {
    let api = start(db).await;
    let before = snapshot(&api.host.store).await;
    for (method, template, who) in MATRIX {
        // Tickets' ids in ticket paths, triggers' in trigger paths.
        let path = if template.starts_with("/v1/tickets/") {
            template.replace("{id}", &api.acme.ticket.to_string())
        } else {
            api.path(template, &api.acme, "acme-job")
        };
        for (letter, token) in ROLES {
            // Writes get a body the handler refuses (an unknown field, no
            // bytes): an allowed role reaches the handler (400), a refused
            // one is stopped before it (403), and nothing changes either way.
            let body = match *method {
                "GET" | "DELETE" => Send::Nothing,
                _ if path == "/v1/components" => Send::Raw("application/wasm", vec![]),
                _ => Send::Json(json!({ "no_such_field": 1 })),
            };
            let path = if *method == "DELETE" {
                path.replace("default", "nobody")
            } else {
                path.clone()
            };
            let (status, answer) = api.call(method, &path, Some(token), body).await;
            let what = format!("{letter} {method} {path}: {status} {answer}");
            if *who == "*" || who.contains(letter) {
                match *method {
                    "GET" => assert_eq!(status, 200, "{what}"),
                    "DELETE" => assert_eq!(status, 404, "{what}"),
                    _ => assert_eq!(status, 400, "{what}"),
                }
            } else {
                assert_eq!(status, 403, "{what}");
                assert_eq!(answer["error"]["code"], "forbidden", "{what}");
                assert!(
                    answer["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("may not"),
                    "{what}"
                );
            }
        }
    }
    assert_eq!(snapshot(&api.host.store).await, before);
}

db_test!(the_openapi_document_lists_exactly_the_routes_and_each_one_answers);
async fn the_openapi_document_lists_exactly_the_routes_and_each_one_answers(db: Db) {
    let api = start(db).await;
    let (status, doc) = api
        .call("GET", "/v1/openapi.json", None, Send::Nothing)
        .await;
    assert_eq!(status, 200);
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let tested: BTreeSet<(String, String)> = MATRIX
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        documented, tested,
        "the OpenAPI document and the role matrix must list the same routes"
    );
    // Every documented route is served (a route documented but not routed
    // answers `no_route`), and an undocumented one is not.
    for (method, template) in &documented {
        let path = api.path(template, &api.acme, "acme-job");
        let (status, answer) = api.call(method, &path, Some("admin"), Send::Nothing).await;
        assert_ne!(answer["error"]["code"], "no_route", "{method} {path}");
        assert_ne!(status, 405, "{method} {path}");
    }
    let (status, answer) = api.get("/v1/nothing-here", "admin").await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (404, Some("no_route"))
    );
}

/// What a foreign tenant's request must meet.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// 403: the role may not.
    Denied,
    /// 404: the row is another tenant's.
    Hidden,
    /// 200 with none of the other tenant's rows.
    OwnOnly,
    /// 200: shared configuration, no tenant's data.
    Shared,
    /// 409: a write naming another tenant's row (refused, audited).
    Refused,
}

db_test!(a_team_token_can_neither_read_nor_change_another_tenants_work);
async fn a_team_token_can_neither_read_nor_change_another_tenants_work(db: Db) {
    let api = start(db).await;
    let before = snapshot(&api.host.store).await;
    use Expect::*;
    let g = &api.globex;
    let manifest = |id: &str, tenant: &str, digest: &str| json!({ "manifest": format!("id = \"{id}\"\ntenant = \"{tenant}\"\ncomponent = \"sha256:{digest}\"\n") });
    // Every route (its template first), with globex's rows and valid
    // bodies, as acme.
    let mut walk: Vec<(&str, &str, String, Send, Expect)> = vec![
        (
            "GET",
            "/v1/openapi.json",
            "/v1/openapi.json".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "GET",
            "/v1/triggers",
            "/v1/triggers".into(),
            Send::Nothing,
            OwnOnly,
        ),
        (
            "POST",
            "/v1/triggers",
            "/v1/triggers".into(),
            Send::Json(json!({ "job": "globex-job" })),
            Hidden,
        ),
        (
            "GET",
            "/v1/triggers/{id}",
            format!("/v1/triggers/{}", g.trigger),
            Send::Nothing,
            Hidden,
        ),
        (
            "GET",
            "/v1/triggers/{id}/effects",
            format!("/v1/triggers/{}/effects", g.trigger),
            Send::Nothing,
            Hidden,
        ),
        (
            "POST",
            "/v1/triggers/{id}/cancel",
            format!("/v1/triggers/{}/cancel", g.trigger),
            Send::Json(json!({ "reason": "x" })),
            Hidden,
        ),
        (
            "POST",
            "/v1/triggers/{id}/approve",
            format!("/v1/triggers/{}/approve", g.trigger),
            Send::Json(json!({ "reason": "x" })),
            Denied,
        ),
        ("GET", "/v1/jobs", "/v1/jobs".into(), Send::Nothing, OwnOnly),
        // A manifest of the other tenant; one claiming its job; a job of
        // acme's own on globex's component.
        (
            "POST",
            "/v1/jobs",
            "/v1/jobs".into(),
            Send::Json(manifest("globex-job", "globex", &api.acme.digest)),
            Denied,
        ),
        (
            "POST",
            "/v1/jobs",
            "/v1/jobs".into(),
            Send::Json(manifest("acme-2", "acme", &g.digest)),
            Hidden,
        ),
        (
            "GET",
            "/v1/jobs/{job}",
            "/v1/jobs/globex-job".into(),
            Send::Nothing,
            Hidden,
        ),
        (
            "GET",
            "/v1/components",
            "/v1/components".into(),
            Send::Nothing,
            OwnOnly,
        ),
        (
            "POST",
            "/v1/components",
            "/v1/components".into(),
            Send::Raw("application/wasm", b"\0asm-not-really".to_vec()),
            Refused,
        ),
        (
            "GET",
            "/v1/components/{digest}",
            format!("/v1/components/{}", g.digest),
            Send::Nothing,
            Hidden,
        ),
        (
            "GET",
            "/v1/effects",
            "/v1/effects".into(),
            Send::Nothing,
            OwnOnly,
        ),
        (
            "GET",
            "/v1/tickets",
            "/v1/tickets".into(),
            Send::Nothing,
            OwnOnly,
        ),
        (
            "GET",
            "/v1/tickets/{id}",
            format!("/v1/tickets/{}", g.ticket),
            Send::Nothing,
            Hidden,
        ),
        (
            "POST",
            "/v1/tickets/{id}/resolve",
            format!("/v1/tickets/{}/resolve", g.ticket),
            Send::Json(json!({ "action": "mark_succeeded", "reason": "x" })),
            Denied,
        ),
        (
            "GET",
            "/v1/status",
            "/v1/status?tenant=globex".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/groups",
            "/v1/groups".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "POST",
            "/v1/groups",
            "/v1/groups".into(),
            Send::Json(json!({ "groups": "" })),
            Denied,
        ),
        (
            "POST",
            "/v1/groups/{name}/grants",
            "/v1/groups/default/grants".into(),
            Send::Json(json!({ "add": ["connector:x"] })),
            Denied,
        ),
        (
            "GET",
            "/v1/tenants",
            "/v1/tenants".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "PUT",
            "/v1/tenants/{tenant}",
            "/v1/tenants/globex".into(),
            Send::Json(json!({ "weight": 9 })),
            Denied,
        ),
        (
            "GET",
            "/v1/connectors",
            "/v1/connectors".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "PUT",
            "/v1/connectors/{name}",
            "/v1/connectors/c".into(),
            Send::Json(json!({})),
            Denied,
        ),
        (
            "GET",
            "/v1/connectors/secrets",
            "/v1/connectors/secrets".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/tokens",
            "/v1/tokens".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "POST",
            "/v1/tokens",
            "/v1/tokens".into(),
            Send::Json(json!({ "name": "x", "role": "admin" })),
            Denied,
        ),
        (
            "DELETE",
            "/v1/tokens/{name}",
            "/v1/tokens/globex".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/audit",
            "/v1/audit".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/audit/verify",
            "/v1/audit/verify".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/capabilities",
            "/v1/capabilities".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/capabilities/tenants",
            "/v1/capabilities/tenants".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "POST",
            "/v1/groups/{name}/tenants",
            "/v1/groups/default/tenants".into(),
            Send::Json(json!({ "disallow": ["globex"] })),
            Denied,
        ),
    ];
    walk.extend([
        (
            "GET",
            "/v1/groups/{name}",
            "/v1/groups/default".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "PUT",
            "/v1/connectors/{name}/secret",
            "/v1/connectors/c/secret".into(),
            Send::Json(json!({ "value": "x" })),
            Denied,
        ),
        (
            "DELETE",
            "/v1/connectors/{name}/secret",
            "/v1/connectors/c/secret".into(),
            Send::Nothing,
            Denied,
        ),
    ]);
    // Gates, approvals, reports and prices.
    let reason = || Send::Json(json!({ "reason": "x" }));
    let ticket = |verb: &str| format!("/v1/tickets/{}/{verb}", g.ticket);
    walk.extend([
        (
            "POST",
            "/v1/triggers/{id}/retry",
            format!("/v1/triggers/{}/retry", g.trigger),
            reason(),
            Hidden,
        ),
        (
            "POST",
            "/v1/tickets/{id}/approve",
            ticket("approve"),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/tickets/{id}/reject",
            ticket("reject"),
            reason(),
            Denied,
        ),
        (
            "GET",
            "/v1/gates",
            "/v1/gates".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "POST",
            "/v1/jobs/{job}/pause",
            "/v1/jobs/globex-job/pause".into(),
            reason(),
            Hidden,
        ),
        (
            "POST",
            "/v1/jobs/{job}/resume",
            "/v1/jobs/globex-job/resume".into(),
            reason(),
            Hidden,
        ),
        (
            "POST",
            "/v1/jobs/{job}/cancel",
            "/v1/jobs/globex-job/cancel".into(),
            reason(),
            Hidden,
        ),
        (
            "POST",
            "/v1/gates/{kind}/{name}/pause",
            "/v1/gates/tenant/globex/pause".into(),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/gates/{kind}/{name}/resume",
            "/v1/gates/tenant/globex/resume".into(),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/gates/{kind}/{name}/cancel",
            "/v1/gates/tenant/globex/cancel".into(),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/gates/global/pause",
            "/v1/gates/global/pause".into(),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/gates/global/resume",
            "/v1/gates/global/resume".into(),
            reason(),
            Denied,
        ),
        (
            "POST",
            "/v1/gates/global/cancel",
            "/v1/gates/global/cancel".into(),
            reason(),
            Denied,
        ),
        (
            "GET",
            "/v1/reports/incident",
            "/v1/reports/incident?tenant=globex".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/reports/cost",
            "/v1/reports/cost?tenant=globex".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/reports/conservation",
            "/v1/reports/conservation".into(),
            Send::Nothing,
            Denied,
        ),
        (
            "GET",
            "/v1/prices",
            "/v1/prices".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "PUT",
            "/v1/prices",
            "/v1/prices".into(),
            Send::Json(json!({ "retry": 1.0 })),
            Denied,
        ),
    ]);
    // Diffs, trigger sets, effects by hand, a group's flags, the export.
    let a = &api.acme;
    walk.extend([
        (
            "GET",
            "/v1/components/{digest}/diff/{other}",
            format!("/v1/components/{}/diff/{}", a.digest, g.digest),
            Send::Nothing,
            Hidden,
        ),
        (
            "GET",
            "/v1/schedule/preview",
            format!("/v1/schedule/preview?plan=globex-job&{DAY}"),
            Send::Nothing,
            Hidden,
        ),
        (
            "GET",
            "/v1/schedule/diff",
            format!("/v1/schedule/diff?a=cron:0+*+*+*+*&b=globex-job&{DAY}"),
            Send::Nothing,
            Hidden,
        ),
        (
            "POST",
            "/v1/jobs/{job}/backfill",
            "/v1/jobs/globex-job/backfill".into(),
            Send::Json(json!({ "from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z" })),
            Hidden,
        ),
        (
            "GET",
            "/v1/schedule/shards",
            "/v1/schedule/shards".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "GET",
            "/v1/schedule/skipped",
            "/v1/schedule/skipped?job=globex-job".into(),
            Send::Nothing,
            Shared,
        ),
        (
            "GET",
            "/v1/effects/{key}",
            format!("/v1/effects/{}?tenant=globex", g.effect),
            Send::Nothing,
            Hidden,
        ),
        (
            "POST",
            "/v1/effects/recover",
            "/v1/effects/recover".into(),
            Send::Json(json!({})),
            Denied,
        ),
        (
            "POST",
            "/v1/effects/{key}/compensate",
            format!("/v1/effects/{}/compensate", g.effect),
            Send::Json(
                json!({ "job": "globex-job", "key": "k", "action": "x/refund", "reason": "x" }),
            ),
            Denied,
        ),
        (
            "PUT",
            "/v1/groups/{name}",
            "/v1/groups/default".into(),
            Send::Json(json!({ "name": "default", "concurrency": 1 })),
            Denied,
        ),
        (
            "GET",
            "/v1/audit/export",
            "/v1/audit/export?since=1h".into(),
            Send::Nothing,
            Denied,
        ),
    ]);
    let walked: BTreeSet<(&str, &str)> = walk.iter().map(|(m, t, ..)| (*m, *t)).collect();
    let routes: BTreeSet<(&str, &str)> = MATRIX.iter().map(|(m, t, _)| (*m, *t)).collect();
    assert_eq!(walked, routes, "the walk covers every route");
    for (method, _, path, body, expect) in walk {
        let (status, answer) = api.call(method, &path, Some("acme"), body).await;
        let what = format!("{method} {path}: {status} {answer}");
        match expect {
            Denied => assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (403, Some("forbidden")),
                "{what}"
            ),
            Hidden => assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (404, Some("not_found")),
                "{what}"
            ),
            Refused => assert!(matches!(status, 400 | 409), "{what}"),
            Shared => assert_eq!(status, 200, "{what}"),
            OwnOnly => {
                assert_eq!(status, 200, "{what}");
                let items = answer["items"].as_array().unwrap();
                assert!(!answer.to_string().contains("globex"), "{what}");
                // The effects list is empty for both; the rest show acme's.
                if !path.ends_with("effects") {
                    assert!(!items.is_empty(), "{what}");
                }
            }
        }
    }
    assert_eq!(snapshot(&api.host.store).await, before);
    // Skipped fire times are their job's tenant's: the SQL scopes them.
    for (tenant, job) in [("acme", "acme-job"), ("globex", "globex-job")] {
        sqlx::query(api.host.store.sql(
            "INSERT INTO skipped_fires (tenant, job_id, plan_version, scheduled_at, reason, \
             recorded_at) VALUES (?, ?, 1, 0, 'misfire_skip', 0)",
        ))
        .bind(tenant)
        .bind(job)
        .execute(api.host.store.pool())
        .await
        .unwrap();
    }
    let (_, seen) = api.get("/v1/schedule/skipped", "acme").await;
    assert_eq!(seen["skipped"].as_array().unwrap().len(), 1, "{seen}");
    assert!(!seen.to_string().contains("globex"), "{seen}");
    assert_eq!(seen["counts"], json!([["misfire_skip", 1]]), "{seen}");
    let (_, seen) = api.get("/v1/schedule/skipped", "admin").await;
    assert_eq!(seen["skipped"].as_array().unwrap().len(), 2, "{seen}");
    // A gate on globex's job is globex's to see, not acme's; a group's
    // gate holds everyone's work, so everyone sees it.
    let (status, _) = api
        .call(
            "POST",
            "/v1/jobs/globex-job/pause",
            Some("globex"),
            reason(),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = api
        .call(
            "POST",
            "/v1/gates/group/default/pause",
            Some("operator"),
            reason(),
        )
        .await;
    assert_eq!(status, 200);
    let kinds = |answer: &Value| -> Vec<String> {
        answer
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                format!(
                    "{}:{}",
                    g["kind"].as_str().unwrap(),
                    g["value"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (_, seen_by_acme) = api.get("/v1/gates", "acme").await;
    assert_eq!(kinds(&seen_by_acme), ["group:default"]);
    let (_, seen_by_globex) = api.get("/v1/gates", "globex").await;
    assert_eq!(
        kinds(&seen_by_globex),
        ["group:default", "job:globex/globex-job"]
    );
    // The same rows are globex's to see.
    let (status, _) = api
        .get(&format!("/v1/triggers/{}", g.trigger), "globex")
        .await;
    assert_eq!(status, 200);
}

/// A bad request: method, path, token, body; the status, code and a word
/// the message must contain.
type Case<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Send,
    u16,
    &'a str,
    &'a str,
);

db_test!(bad_input_gets_a_clear_4xx_and_stores_nothing);
async fn bad_input_gets_a_clear_4xx_and_stores_nothing(db: Db) {
    let mut api = start(db).await;
    let store = api.host.store.clone();
    let late = token(&store, "late", Role::Admin, None).await;
    sqlx::query(store.sql("UPDATE api_tokens SET expires_at = 0 WHERE name = 'late'"))
        .execute(store.pool())
        .await
        .unwrap();
    let gone = token(&store, "gone", Role::Admin, None).await;
    store.token_revoke("gone", "local:test").await.unwrap();
    api.tokens.insert("late", late);
    api.tokens.insert("gone", gone);
    let unknown = paddock::model::identity::new_token_text();
    let before = snapshot(&store).await;
    let audit_before = store.audit_list().await.unwrap().len();

    let raw = |text: &str| Send::Raw("application/json", text.as_bytes().to_vec());
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            raw("{\"job\": "),
            400,
            "bad_request",
            "EOF",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            raw("{\"job\": 5}"),
            400,
            "bad_request",
            "invalid type",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            raw("{\"job\": \"acme-job\", \"colour\": 1}"),
            400,
            "bad_request",
            "unknown field `colour`",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            raw("{}"),
            400,
            "bad_request",
            "missing field `job`",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            Send::Raw("text/plain", b"{\"job\": \"acme-job\"}".to_vec()),
            415,
            "unsupported_media_type",
            "application/json",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("acme"),
            Send::Json(json!({ "job": "acme-job", "params": { "pad": "x".repeat(100 << 10) } })),
            413,
            "payload_too_large",
            "64 KiB",
        ),
        (
            "POST",
            "/v1/jobs",
            Some("acme"),
            Send::Json(
                json!({ "manifest": "id = \"x\"\ntenant = \"acme\"\ncomponent = \"/etc/passwd\"\n" }),
            ),
            400,
            "bad_request",
            "push the file first",
        ),
        (
            "POST",
            "/v1/jobs",
            Some("acme"),
            Send::Json(json!({ "manifest": "id = " })),
            400,
            "bad_request",
            "",
        ),
        (
            "POST",
            "/v1/tokens",
            Some("admin"),
            Send::Json(json!({ "name": "x", "role": "root" })),
            400,
            "bad_request",
            "unknown variant `root`",
        ),
        (
            "GET",
            "/v1/triggers/abc",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "abc",
        ),
        (
            "GET",
            "/v1/triggers?limit=0",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "limit must be 1 to 500",
        ),
        (
            "GET",
            "/v1/triggers?limit=many",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "limit",
        ),
        (
            "GET",
            "/v1/triggers?colour=red",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "unknown field `colour`",
        ),
        (
            "GET",
            "/v1/triggers?after=x",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "after must be",
        ),
        (
            "GET",
            "/v1/triggers/999999",
            Some("admin"),
            Send::Nothing,
            404,
            "not_found",
            "trigger 999999",
        ),
        (
            "DELETE",
            "/v1/triggers",
            Some("admin"),
            Send::Nothing,
            405,
            "method_not_allowed",
            "does not take DELETE",
        ),
        (
            "POST",
            "/v1/triggers",
            None,
            Send::Json(json!({ "job": "acme-job" })),
            401,
            "unauthenticated",
            "missing token",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("Basic abc"),
            Send::Json(json!({ "job": "acme-job" })),
            401,
            "unauthenticated",
            "not a Paddock token",
        ),
        (
            "POST",
            "/v1/triggers",
            Some(unknown.as_str()),
            Send::Json(json!({ "job": "acme-job" })),
            401,
            "unauthenticated",
            "unknown token",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("late"),
            Send::Json(json!({ "job": "acme-job" })),
            401,
            "unauthenticated",
            "token 'late' expired",
        ),
        (
            "POST",
            "/v1/triggers",
            Some("gone"),
            Send::Json(json!({ "job": "acme-job" })),
            401,
            "unauthenticated",
            "token 'gone' was revoked",
        ),
        (
            "GET",
            "/v1/schedule/preview?cron=0+*+*+*+*&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "the window is empty",
        ),
        (
            "GET",
            "/v1/schedule/preview?cron=*+*+*+*+*+*&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "narrow the window",
        ),
        (
            "GET",
            "/v1/schedule/preview?cron=0+0+25+*+*+*&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "hour",
        ),
        (
            "GET",
            "/v1/schedule/preview?cron=0+*+*+*+*&tz=Mars/Olympus&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z",
            Some("acme"),
            Send::Nothing,
            400,
            "bad_request",
            "unknown time zone",
        ),
        (
            "POST",
            "/v1/jobs/acme-job/backfill",
            Some("acme"),
            Send::Json(json!({ "from": "yesterday", "to": "2026-01-02T00:00:00Z" })),
            400,
            "bad_request",
            "from",
        ),
        (
            "PUT",
            "/v1/groups/default",
            Some("admin"),
            Send::Json(json!({ "name": "other" })),
            400,
            "bad_request",
            "the body names group 'other'",
        ),
        (
            "PUT",
            "/v1/groups/default",
            Some("admin"),
            Send::Json(json!({ "name": "default", "memory": "0" })),
            400,
            "bad_request",
            "memory",
        ),
        (
            "GET",
            "/v1/components/abc/diff/abcdef12",
            Some("admin"),
            Send::Nothing,
            400,
            "bad_request",
            "at least 8 hex digits",
        ),
        (
            "GET",
            "/v1/audit/export?since=yesterday",
            Some("admin"),
            Send::Nothing,
            400,
            "bad_request",
            "neither an RFC 3339 instant nor a duration",
        ),
        (
            "GET",
            "/v1/audit/export",
            Some("admin"),
            Send::Nothing,
            400,
            "bad_request",
            "since",
        ),
        (
            "POST",
            "/v1/effects/recover",
            Some("operator"),
            Send::Json(json!({ "limit": 0 })),
            400,
            "bad_request",
            "limit must be 1 to 10000",
        ),
        (
            "POST",
            "/v1/effects/acme-effect/compensate",
            Some("operator"),
            Send::Json(json!({ "job": "acme-job", "key": "k", "action": "a", "reason": " " })),
            400,
            "bad_request",
            "needs a reason",
        ),
        (
            "POST",
            "/v1/effects/nobody-effect/compensate",
            Some("operator"),
            Send::Json(json!({ "job": "acme-job", "key": "k", "action": "a", "reason": "r" })),
            404,
            "not_found",
            "effect 'nobody-effect'",
        ),
        (
            "GET",
            "/v1/status?since=2026-01-01&window=5m",
            Some("admin"),
            Send::Nothing,
            400,
            "bad_request",
            "since",
        ),
        // A bad token is refused before the body is read.
        (
            "POST",
            "/v1/triggers",
            None,
            raw("{\"job\": "),
            401,
            "unauthenticated",
            "missing token",
        ),
    ];
    for (method, path, token, body, status, code, names) in cases {
        let (got, answer) = api.call(method, path, token, body).await;
        let what = format!("{method} {path} ({token:?}): {got} {answer}");
        assert_eq!(got, status, "{what}");
        assert_eq!(answer["error"]["code"], code, "{what}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(names),
            "{what}"
        );
    }
    assert_eq!(snapshot(&store).await, before);
    assert_eq!(store.audit_list().await.unwrap().len(), audit_before);
}

db_test!(lists_come_in_pages_that_cover_every_row_once);
async fn lists_come_in_pages_that_cover_every_row_once(db: Db) {
    let api = start(db).await;
    for _ in 0..6 {
        api.host.trigger("acme-job", json!({})).await;
        api.host.trigger("globex-job", json!({})).await;
    }
    for (token, tenant, expected) in [("acme", Some("acme"), 7), ("admin", None, 14)] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let path = match &after {
                Some(a) => format!("/v1/triggers?limit=3&after={a}"),
                None => "/v1/triggers?limit=3".to_string(),
            };
            let (status, page) = api.get(&path, token).await;
            assert_eq!(status, 200, "{page}");
            let items = page["items"].as_array().unwrap();
            assert!(items.len() <= 3);
            for row in items {
                if let Some(t) = tenant {
                    assert_eq!(row["trigger"]["tenant"], t);
                }
                seen.push(row["trigger"]["id"].as_i64().unwrap());
            }
            pages += 1;
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_string()),
                None => break,
            }
        }
        assert_eq!(seen.len(), expected, "{token}: {seen:?}");
        assert!(
            seen.windows(2).all(|w| w[0] > w[1]),
            "newest first, once each: {seen:?}"
        );
        assert_eq!(pages, expected.div_ceil(3));
    }
}

db_test!(writes_through_the_api_are_audited_as_the_token);
async fn writes_through_the_api_are_audited_as_the_token(db: Db) {
    let api = start(db).await;
    let (status, ran) = api
        .call(
            "POST",
            "/v1/triggers",
            Some("acme"),
            Send::Json(
                json!({ "job": "acme-job", "request_key": "k1", "params": { "pin": "hunter2" } }),
            ),
        )
        .await;
    assert_eq!(status, 201, "{ran}");
    // Params are shown as a digest only.
    assert!(!ran.to_string().contains("hunter2"), "{ran}");
    let id = ran["trigger"]["id"].as_i64().unwrap();
    // The same request key is the same run.
    let (status, again) = api
        .call(
            "POST",
            "/v1/triggers",
            Some("acme"),
            Send::Json(json!({ "job": "acme-job", "request_key": "k1" })),
        )
        .await;
    assert_eq!((status, again["created"].as_bool()), (200, Some(false)));
    let (status, answer) = api
        .call(
            "POST",
            &format!("/v1/triggers/{id}/cancel"),
            Some("acme"),
            Send::Json(json!({ "reason": "not needed" })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    // A component pushed by a team token is its tenant's.
    let bytes = std::fs::read(guest("spin")).unwrap();
    let (status, pushed) = api
        .call(
            "POST",
            "/v1/components",
            Some("acme"),
            Send::Raw("application/wasm", bytes),
        )
        .await;
    assert_eq!(status, 201, "{pushed}");
    let digest = pushed["digest"].as_str().unwrap();
    let (status, _) = api.get(&format!("/v1/components/{digest}"), "acme").await;
    assert_eq!(status, 200);
    let (status, _) = api.get(&format!("/v1/components/{digest}"), "globex").await;
    assert_eq!(status, 404);
    let (_, shown) = api.get(&format!("/v1/triggers/{id}"), "acme").await;
    assert!(
        shown["trigger"]["params"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{shown}"
    );
    assert!(!shown.to_string().contains("hunter2"), "{shown}");
    // An admin sets a connector and its credential; no answer, list or
    // audit entry carries the value.
    let connector = json!({
        "name": "ledger", "kind": "http", "base_url": "http://127.0.0.1:9/v1",
        "timeout_ms": 1000, "permits": 4, "rate_per_sec": 0.0, "compares_tokens": false,
        "queryable": false, "idempotent": true, "breaker_failure_rate": 0.5,
        "breaker_min_calls": 10, "breaker_window_ms": 10000, "breaker_open_ms": 5000,
    });
    let (status, answer) = api
        .call(
            "PUT",
            "/v1/connectors/ledger",
            Some("admin"),
            Send::Json(connector),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = api
        .call(
            "PUT",
            "/v1/connectors/ledger/secret",
            Some("admin"),
            Send::Json(json!({ "value": "s3cr3t-value" })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(!answer.to_string().contains("s3cr3t"), "{answer}");
    let (_, listed) = api.get("/v1/connectors/secrets", "admin").await;
    assert_eq!(listed[0]["connector"], "ledger", "{listed}");
    assert!(!listed.to_string().contains("s3cr3t"), "{listed}");
    let audit = api.host.store.audit_list().await.unwrap();
    assert!(audit.iter().all(|e| !e.detail.contains("s3cr3t")));
    let set = audit
        .iter()
        .find(|e| e.action.starts_with("connector.secret"))
        .unwrap();
    assert_eq!(set.actor, "token:admin");
    for action in ["trigger.run", "trigger.cancel", "component.push"] {
        let entry = audit
            .iter()
            .rev()
            .find(|e| e.action == action)
            .unwrap_or_else(|| panic!("no {action} in {audit:?}"));
        assert_eq!(entry.actor, "token:acme", "{action}");
    }
    // No token's text is in any answer or entry but its creation's.
    let text = &api.tokens["acme"];
    assert!(audit.iter().all(|e| !e.detail.contains(&text[4..])));
}

/// A cron job of acme's (hourly, UTC) on acme's component.
async fn acme_cron(api: &Api) {
    let toml = format!(
        "id = \"acme-cron\"\ntenant = \"acme\"\ncomponent = \"sha256:{}\"\n\
         [schedule]\nkind = \"cron\"\ncron = \"0 0 * * * *\"\ntimezone = \"UTC\"\n",
        api.acme.digest
    );
    api.host
        .registry
        .job_apply(&toml, std::path::Path::new("."), "test")
        .await
        .unwrap();
}

db_test!(group_set_trigger_sets_and_effects_by_hand_work_over_the_api_audited_as_the_token);
async fn group_set_trigger_sets_and_effects_by_hand_work_over_the_api_audited_as_the_token(db: Db) {
    let api = start(db).await;
    acme_cron(&api).await;
    // `group set`'s flags as JSON; the rest take the flags' defaults.
    let body =
        json!({ "name": "batch", "concurrency": 4, "memory": "32MiB", "grants": ["clocks"] });
    let (status, set) = api
        .call("PUT", "/v1/groups/batch", Some("admin"), Send::Json(body))
        .await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["effective_concurrency"], 4, "{set}");
    let group = api.host.store.group_get("batch").await.unwrap().unwrap();
    assert_eq!((group.memory_bytes, group.max_concurrency), (32 << 20, 4));
    assert_eq!(group.grant_list(), ["clocks"]);
    // Trigger sets: a plan previewed and compared, then backfilled once.
    let (status, p) = api
        .get(
            &format!("/v1/schedule/preview?plan=acme-cron&{DAY}"),
            "acme",
        )
        .await;
    assert_eq!(
        (status, p["times"].as_array().unwrap().len()),
        (200, 24),
        "{p}"
    );
    assert_eq!(p["zone"], "UTC");
    let (_, d) = api
        .get(
            &format!("/v1/schedule/diff?a=acme-cron@v1&b=cron:0+*/2+*+*+*&{DAY}"),
            "acme",
        )
        .await;
    assert_eq!(
        (
            d["only_a"].as_array().unwrap().len(),
            d["only_b"].as_array().unwrap().len(),
            &d["both"]
        ),
        (12, 0, &json!(12)),
        "{d}"
    );
    let window = json!({ "from": "2026-01-01T00:00:00Z", "to": "2026-01-01T06:00:00Z" });
    for (created, existing) in [(6, 0), (0, 6)] {
        let (status, done) = api
            .call(
                "POST",
                "/v1/jobs/acme-cron/backfill",
                Some("acme"),
                Send::Json(window.clone()),
            )
            .await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(
            (done["created"].as_i64(), done["existing"].as_i64()),
            (Some(created), Some(existing))
        );
    }
    // An operator's compensation of acme's succeeded effect, and a
    // recovery scan (nothing to settle).
    let body = json!({ "job": "acme-job", "key": "acme-refund", "action": "RES-1/refund",
                       "payload": "{}", "reason": "customer refund" });
    let (status, done) = api
        .call(
            "POST",
            &format!("/v1/effects/{}/compensate", api.acme.effect),
            Some("operator"),
            Send::Json(body),
        )
        .await;
    assert_eq!(status, 201, "{done}");
    let trigger = done["trigger"].as_i64().unwrap();
    let (_, shown) = api.get(&format!("/v1/triggers/{trigger}"), "acme").await;
    assert_eq!(shown["trigger"]["job_id"], "acme-job", "{shown}");
    let (status, scan) = api
        .call(
            "POST",
            "/v1/effects/recover",
            Some("operator"),
            Send::Json(json!({})),
        )
        .await;
    assert_eq!((status, &scan["scanned"]), (200, &json!(0)), "{scan}");
    // The effect by key; another tenant's is 404 (the walk checks it too).
    let (status, e) = api
        .get(&format!("/v1/effects/{}", api.acme.effect), "acme")
        .await;
    assert_eq!((status, &e["state"]), (200, &json!("succeeded")), "{e}");
    // Each write audited as the token.
    let audit = api.host.store.audit_list().await.unwrap();
    for (action, actor) in [
        ("group.put", "token:admin"),
        ("job.backfill", "token:acme"),
        ("effect.compensate", "token:operator"),
        ("effects.recover", "token:operator"),
    ] {
        let entry = audit
            .iter()
            .rev()
            .find(|e| e.action == action)
            .unwrap_or_else(|| panic!("no {action}"));
        assert_eq!(entry.actor, actor, "{action}");
    }
    // The export: JSON lines, the chain's state in a header.
    let response = api
        .http
        .get(format!("{}/v1/audit/export?since=1h", api.base))
        .bearer_auth(&api.tokens["reviewer"])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["paddock-audit-chain"], "intact");
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["action"] == "effect.compensate"),
        "{text}"
    );
}

db_test!(a_result_is_json_text_or_base64_and_says_which);
async fn a_result_is_json_text_or_base64_and_says_which(db: Db) {
    let api = start(db).await;
    let admin = api.tokens["admin"].clone();
    let id = api.acme.trigger;
    let cases: [(&[u8], Value, &str); 4] = [
        (
            b"{\"total\": 3, \"ok\": true}",
            json!({ "total": 3, "ok": true }),
            "json",
        ),
        (b"\"quoted\"", json!("quoted"), "json"),
        (b"plain text", json!("plain text"), "utf8"),
        (&[0xff, 0x00, 0x7f], json!("/wB/"), "base64"),
    ];
    for (bytes, value, encoding) in cases {
        sqlx::query(
            api.host
                .store
                .sql("UPDATE triggers SET result = ? WHERE id = ?"),
        )
        .bind(bytes)
        .bind(id)
        .execute(api.host.store.pool())
        .await
        .unwrap();
        let (status, shown) = api.get(&format!("/v1/triggers/{id}"), "acme").await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown["trigger"]["result"], value, "{shown}");
        assert_eq!(shown["trigger"]["result_encoding"], encoding, "{shown}");
        // The command line prints the same bytes from either side.
        let url = api.host.url.clone();
        let local = cli(&["--database-url", &url, "trigger", "show", &id.to_string()]).await;
        let remote = cli(&[
            "--server",
            &api.base,
            "--token",
            &admin,
            "trigger",
            "show",
            &id.to_string(),
        ])
        .await;
        assert!(local.0 && remote.0, "{} / {}", local.2, remote.2);
        assert_eq!(remote.1, local.1, "{encoding}");
    }
}

/// `paddock ARGS` with the environment cleared of Paddock's variables.
async fn cli(args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(args)
        .env_remove("PADDOCK_SERVER")
        .env_remove("PADDOCK_TOKEN")
        .env_remove("PADDOCK_DATABASE_URL")
        .env_remove("PADDOCK_LOG")
        .output()
        .await
        .expect("run paddock");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

db_test!(the_command_line_prints_the_same_from_a_server_as_from_the_database);
async fn the_command_line_prints_the_same_from_a_server_as_from_the_database(db: Db) {
    let api = start(db).await;
    let admin = api.tokens["admin"].clone();
    let url = api.host.url.clone();
    let id = api.acme.trigger.to_string();
    for command in [
        vec!["trigger", "show", id.as_str()],
        vec!["trigger", "list"],
        vec!["job", "list"],
        vec!["job", "show", "acme-job"],
        vec!["component", "list"],
        vec!["component", "inspect", api.acme.digest.as_str()],
        vec!["effects", "list"],
        vec!["exceptions", "list"],
        vec!["exceptions", "list", "--all"],
        vec!["audit", "list"],
    ] {
        let mut local = vec!["--database-url", url.as_str()];
        local.extend(&command);
        let mut remote = vec!["--server", api.base.as_str(), "--token", admin.as_str()];
        remote.extend(&command);
        let (ok_local, local_out, local_err) = cli(&local).await;
        let (ok_remote, remote_out, remote_err) = cli(&remote).await;
        assert!(
            ok_local && ok_remote,
            "{command:?}: {local_err} / {remote_err}"
        );
        assert!(!local_out.is_empty(), "{command:?}");
        assert_eq!(remote_out, local_out, "{command:?}");
    }
    // A remote run is the token's, and a refusal is one line naming it.
    let (ok, out, err) = cli(&[
        "--server",
        &api.base,
        "--token",
        &api.tokens["acme"],
        "trigger",
        "run",
        "acme-job",
    ])
    .await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("trigger ") && out.contains(" created "),
        "{out}"
    );
    let (ok, _, err) = cli(&[
        "--server",
        &api.base,
        "--token",
        &api.tokens["acme"],
        "trigger",
        "show",
        &api.globex.trigger.to_string(),
    ])
    .await;
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not found (HTTP 404)"), "{err}");
    let (ok, _, err) = cli(&["--server", &api.base, "trigger", "list"]).await;
    assert!(!ok && err.contains("--server needs --token"), "{err}");
    // Gates through the server, then the same listing both ways: pause
    // and resume print what they changed, as on the database.
    for command in [
        vec!["pause", "--job", "acme-job", "--reason", "remote test"],
        vec!["gates"],
        vec![
            "resume",
            "--job",
            "acme-job",
            "--reason",
            "remote test over",
        ],
    ] {
        let mut remote = vec!["--server", api.base.as_str(), "--token", admin.as_str()];
        remote.extend(&command);
        let (ok, out, err) = cli(&remote).await;
        assert!(ok, "{command:?}: {err}");
        // A job gate names the job with its tenant once stored.
        assert!(
            out.contains("job 'acme-job'") || out.contains("job 'acme/acme-job'"),
            "{command:?}: {out}"
        );
    }
    for command in [vec!["gates", "--history"]] {
        let mut local = vec!["--database-url", url.as_str()];
        local.extend(&command);
        let mut remote = vec!["--server", api.base.as_str(), "--token", admin.as_str()];
        remote.extend(&command);
        let (local_out, remote_out) = (cli(&local).await.1, cli(&remote).await.1);
        assert!(local_out.contains("reopened"), "{local_out}");
        assert_eq!(remote_out, local_out);
    }
    let (ok, _, err) = cli(&[
        "--server", &api.base, "--token", &admin, "trigger", "run", "acme-job", "--wait",
    ])
    .await;
    assert!(!ok && err.contains("does not work with --server"), "{err}");
    let (ok, _, err) = cli(&["--server", &api.base, "--token", &admin, "demo"]).await;
    assert!(!ok && err.contains("does not take --server"), "{err}");
}

/// `paddock ARGS` on the database and through the server (admin token):
/// (success, stdout) of each.
async fn both(api: &Api, command: &[&str]) -> ((bool, String), (bool, String)) {
    let url = api.host.url.clone();
    let admin = api.tokens["admin"].clone();
    let mut local = vec!["--database-url", url.as_str()];
    local.extend(command);
    let mut remote = vec!["--server", api.base.as_str(), "--token", admin.as_str()];
    remote.extend(command);
    let (ok_local, local_out, local_err) = cli(&local).await;
    let (ok_remote, remote_out, remote_err) = cli(&remote).await;
    assert!(
        ok_local == ok_remote && !local_out.is_empty(),
        "{command:?}: {local_err} / {remote_err}"
    );
    ((ok_local, local_out), (ok_remote, remote_out))
}

db_test!(every_read_prints_the_same_from_a_server_as_from_the_database);
async fn every_read_prints_the_same_from_a_server_as_from_the_database(db: Db) {
    let api = start(db).await;
    acme_cron(&api).await;
    sqlx::query(api.host.store.sql(
        "INSERT INTO skipped_fires (tenant, job_id, plan_version, scheduled_at, reason, \
         recorded_at) VALUES ('acme', 'acme-cron', 1, 0, 'misfire_skip', 0)",
    ))
    .execute(api.host.store.pool())
    .await
    .unwrap();
    let ticket = api.acme.ticket.to_string();
    let (a, b) = (&api.acme.digest[..12], api.globex.digest.as_str());
    let from_to = [
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-02T00:00:00Z",
    ];
    let window = [
        "--since",
        "2000-01-01T00:00:00Z",
        "--until",
        "2100-01-01T00:00:00Z",
    ];
    let with = |head: &[&'static str], tail: &[&'static str]| -> Vec<&'static str> {
        head.iter().chain(tail).copied().collect()
    };
    let commands: Vec<Vec<&str>> = vec![
        vec!["exceptions", "show", &ticket],
        vec!["component", "diff", a, b],
        with(&["schedule", "preview", "--cron", "0 */6 * * *"], &from_to),
        with(&["schedule", "preview", "acme-cron"], &from_to),
        with(
            &["schedule", "diff", "acme-cron", "cron:0 */2 * * *"],
            &from_to,
        ),
        vec!["schedule", "shards"],
        vec!["schedule", "skipped"],
        vec!["audit", "capabilities"],
        vec!["audit", "capabilities", "--format", "json"],
        vec!["audit", "export", "--since", "1h"],
        vec!["token", "list"],
        vec!["group", "list"],
        vec!["group", "show", "default"],
        vec!["tenant", "list"],
        vec!["connector", "list"],
        vec!["connector", "secret", "list"],
        vec!["price", "list"],
        with(&["report", "incident"], &window),
        with(&["report", "incident", "--format", "json"], &window),
        with(&["report", "cost", "--by", "tenant"], &window),
        with(&["report", "cost", "--format", "json"], &window),
        vec!["report", "conservation"],
        vec!["report", "conservation", "--format", "json"],
    ];
    for command in &commands {
        let (local, remote) = both(&api, command).await;
        assert_eq!(remote, local, "{command:?}");
    }
    // `status` reads the clock: the same but for the instants and the
    // oldest due age (a text line is compared up to its backlog).
    for format in ["text", "json"] {
        let (local, remote) = both(&api, &["status", "--format", format]).await;
        let rest = |out: &str| -> Vec<String> {
            out.lines()
                .filter(|l| {
                    ![
                        "paddock status at",
                        "\"at\"",
                        "now_ms",
                        "\"since\"",
                        "oldest_due_ms",
                    ]
                    .iter()
                    .any(|clock| l.contains(clock))
                })
                .map(|l| l.chars().take(42).collect())
                .collect()
        };
        assert_eq!(rest(&remote.1), rest(&local.1), "status --format {format}");
    }
    // `audit verify` anchors the head it verified: once on each side, then
    // the same answer.
    let (local, _) = both(&api, &["audit", "verify"]).await;
    let (again, remote) = both(&api, &["audit", "verify"]).await;
    assert!(
        local.0 && local.1.contains("audit log intact"),
        "{}",
        local.1
    );
    assert_eq!(remote, again);
}

db_test!(every_write_works_through_a_server);
async fn every_write_works_through_a_server(db: Db) {
    let api = start(db).await;
    acme_cron(&api).await;
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups.toml");
    std::fs::write(&groups, "[[group]]\nname = \"filed\"\nconcurrency = 3\n").unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cr3t-value\n").unwrap();
    let (groups, secret) = (groups.to_str().unwrap(), secret.to_str().unwrap());
    let (acme_ticket, globex_ticket) = (api.acme.ticket.to_string(), api.globex.ticket.to_string());
    // (token, command, what its output says)
    let steps: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "admin",
            vec!["token", "create", "--name", "ci", "--role", "reviewer"],
            "pdk_",
        ),
        ("admin", vec!["token", "revoke", "ci"], "token ci revoked"),
        (
            "admin",
            vec![
                "group",
                "set",
                "batch",
                "--concurrency",
                "4",
                "--grant",
                "clocks",
            ],
            "group batch set: effective concurrency 4",
        ),
        (
            "admin",
            vec!["group", "grant", "batch", "stdio"],
            "group batch grants: clocks, stdio",
        ),
        (
            "admin",
            vec!["group", "revoke", "batch", "clocks"],
            "group batch grants: stdio",
        ),
        (
            "admin",
            vec!["group", "apply", groups],
            "group filed set: effective concurrency 3",
        ),
        (
            "admin",
            vec!["tenant", "set", "acme", "--weight", "2"],
            "acme",
        ),
        (
            "admin",
            vec![
                "connector",
                "set",
                "ledger",
                "--base-url",
                "http://127.0.0.1:9/v1",
            ],
            "connector ledger set",
        ),
        (
            "admin",
            vec![
                "connector",
                "secret",
                "set",
                "ledger",
                "--from-file",
                secret,
            ],
            "connector ledger secret set: ",
        ),
        (
            "admin",
            vec!["connector", "secret", "clear", "ledger"],
            "connector ledger secret cleared",
        ),
        (
            "admin",
            vec!["price", "set", "--retry", "0.5"],
            "retry                0.5",
        ),
        (
            "operator",
            vec![
                "exceptions",
                "resolve",
                &acme_ticket,
                "--action",
                "mark_succeeded",
                "--reason",
                "checked the ledger",
            ],
            "proposed by token:operator",
        ),
        (
            "admin",
            vec!["exceptions", "approve", &acme_ticket, "--reason", "agreed"],
            "resolved: mark_succeeded by token:admin",
        ),
        (
            "operator",
            vec![
                "exceptions",
                "resolve",
                &globex_ticket,
                "--action",
                "mark_succeeded",
                "--reason",
                "checked",
            ],
            "proposed by token:operator",
        ),
        (
            "admin",
            vec![
                "exceptions",
                "reject",
                &globex_ticket,
                "--reason",
                "not yet",
            ],
            "proposal withdrawn",
        ),
        ("operator", vec!["effects", "recover"], "scanned 0:"),
        (
            "operator",
            vec![
                "effects",
                "compensate",
                "acme-effect",
                "--job",
                "acme-job",
                "--key",
                "acme-refund",
                "--action",
                "RES-1/refund",
                "--reason",
                "refund",
            ],
            "compensation of 'acme-effect' recorded as trigger",
        ),
        (
            "acme",
            vec![
                "schedule",
                "backfill",
                "acme-cron",
                "--from",
                "2026-01-01T00:00:00Z",
                "--to",
                "2026-01-01T03:00:00Z",
            ],
            "3 trigger(s) created in the recovery lane",
        ),
    ];
    for (token, command, says) in steps {
        let mut remote = vec![
            "--server",
            api.base.as_str(),
            "--token",
            api.tokens[token].as_str(),
        ];
        remote.extend(&command);
        let (ok, out, err) = cli(&remote).await;
        assert!(ok, "{command:?}: {err}");
        assert!(out.contains(says), "{command:?}: {out}");
        assert!(
            !out.contains("s3cr3t") && !err.contains("s3cr3t"),
            "{command:?}"
        );
    }
    let audit = api.host.store.audit_list().await.unwrap();
    for action in [
        "token.create",
        "group.put",
        "tenant.put",
        "connector.put",
        "price.set",
        "effect.compensate",
        "effects.recover",
        "job.backfill",
    ] {
        assert!(
            audit
                .iter()
                .any(|e| e.action == action && e.actor.starts_with("token:")),
            "{action} as a token: {:?}",
            audit
                .iter()
                .map(|e| (&e.action, &e.actor))
                .collect::<Vec<_>>()
        );
    }
}

db_test!(a_database_failure_answers_internal_error_with_a_request_id_and_no_driver_text);
/// A 500 tells the client only that it happened and the id under which
/// the server logged it: the driver's text (which names tables and values)
/// stays out of the answer.
async fn a_database_failure_answers_internal_error_with_a_request_id_and_no_driver_text(db: Db) {
    let api = start(db).await;
    sqlx::query(
        api.host
            .store
            .sql("ALTER TABLE exceptions RENAME TO exceptions_elsewhere"),
    )
    .execute(api.host.store.pool())
    .await
    .unwrap();
    let response = api
        .http
        .get(format!("{}/v1/tickets", api.base))
        .bearer_auth(&api.tokens["admin"])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 500);
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("exceptions"),
        "the table's name leaked: {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "internal", "{body}");
    assert_eq!(body["error"]["request_id"], id.as_str(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("internal error (request id {id})")),
        "{body}"
    );
}
