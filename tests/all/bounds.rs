//! Every number a person sends has a documented limit
//! (`host/src/model/bounds.rs`): at the limit it is taken, one past it is
//! refused with a 400 (or one line on the command line) naming the field
//! and the limit, and nothing is stored. Backfills are bounded per request
//! and per tenant; the connector body refuses unknown fields like every
//! other body; a tenant's weight at its maximum — or a huge one stored
//! before the limit existed — does not break claims.

use crate::{Db, TestHost, guest};
use paddock::api::{ApiServer, ApiState};
use paddock::model::TriggerState;
use paddock::model::bounds::{BACKFILL_PENDING_PER_TENANT, BACKFILL_PER_REQUEST};
use paddock::model::identity::Role;
use paddock::store::NewToken;
use paddock::store::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The API over a test store, with an admin token, and a component pushed
/// for manifests to name.
struct Api {
    host: TestHost,
    _server: ApiServer,
    base: String,
    http: reqwest::Client,
    admin: String,
    digest: String,
}

async fn start(db: Db) -> Api {
    let host = TestHost::new(db).await;
    let digest = host
        .registry
        .component_push_file(&guest("noop"), "test")
        .await
        .unwrap()
        .digest;
    let admin = host
        .store
        .token_create(
            &NewToken {
                name: "admin".into(),
                role: Role::Admin,
                tenant: None,
                valid_for_ms: 3_600_000,
            },
            "local:test",
        )
        .await
        .unwrap()
        .text;
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
    Api {
        host,
        _server: server,
        base,
        http: reqwest::Client::new(),
        admin,
        digest,
    }
}

impl Api {
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.admin);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Everything a refused setting could have changed.
    async fn stored(&self) -> Vec<String> {
        let mut state = Vec::new();
        for path in [
            "/v1/tenants",
            "/v1/groups",
            "/v1/connectors",
            "/v1/prices",
            "/v1/jobs",
        ] {
            let (status, body) = self.call("GET", path, None).await;
            assert_eq!(status, 200, "{path}: {body}");
            state.push(body.to_string());
        }
        for table in ["jobs", "plan_versions", "triggers"] {
            state.push(format!("{table}: {}", self.host.count(table).await));
        }
        state
    }

    /// A job manifest of tenant `acme` with `lines` added (a `[retry]` or
    /// `[schedule]` table).
    fn manifest(&self, lines: &str) -> Value {
        json!({ "manifest": format!(
            "id = \"bounded\"\ntenant = \"acme\"\ncomponent = \"sha256:{}\"\n{lines}\n",
            self.digest
        ) })
    }
}

/// One setting: where it goes, a body at its limit, a body one past it,
/// and what the refusal must say (the field and the limit).
struct Case {
    method: &'static str,
    path: String,
    at_limit: Value,
    past: Value,
    says: String,
}

fn case(path: &str, at_limit: Value, past: Value, says: &str) -> Case {
    Case {
        method: "PUT",
        path: path.to_string(),
        at_limit,
        past,
        says: says.to_string(),
    }
}

/// A connector at every limit, with one field replaced.
fn connector(field: &str, value: Value) -> Value {
    let mut c = json!({
        "name": "c", "kind": "http", "base_url": "http://127.0.0.1:9",
        "timeout_ms": 3_600_000, "permits": 10_000, "rate_per_sec": 1e6,
        "compares_tokens": false, "queryable": false, "idempotent": true,
        "breaker_failure_rate": 1.0, "breaker_min_calls": 1_000_000,
        "breaker_window_ms": 86_400_000, "breaker_open_ms": 86_400_000,
    });
    c[field] = value;
    c
}

/// A group named `g` with one field set.
fn group(field: &str, value: Value) -> Value {
    let mut g = json!({ "name": "g" });
    g[field] = value;
    g
}

fn tenant(field: &str, value: Value) -> Value {
    let mut t = json!({ "weight": 1 });
    t[field] = value;
    t
}

db_test!(every_numeric_setting_at_its_limit_is_taken_and_one_past_is_refused_naming_it);
async fn every_numeric_setting_at_its_limit_is_taken_and_one_past_is_refused_naming_it(db: Db) {
    let api = start(db).await;
    let ceiling = api.host.sandbox.config().memory_ceiling_bytes;
    let t = "/v1/tenants/acme";
    let g = "/v1/groups/g";
    let c = "/v1/connectors/c";
    let mut cases = vec![
        case(
            t,
            tenant("weight", json!(1000)),
            tenant("weight", json!(1001)),
            "weight must be at most 1000, not 1001",
        ),
        case(
            t,
            tenant("weight", json!(1)),
            tenant("weight", json!(i64::MAX)),
            "weight must be at most 1000",
        ),
        case(
            t,
            tenant("max_in_flight", json!(100_000)),
            tenant("max_in_flight", json!(100_001)),
            "max-in-flight must be at most 100000",
        ),
        case(
            t,
            tenant("triggers_per_minute", json!(1_000_000)),
            tenant("triggers_per_minute", json!(1_000_001)),
            "triggers-per-minute must be at most 1000000",
        ),
        case(
            t,
            tenant("fuel_per_hour", json!(100_000_000_000_000_000i64)),
            tenant("fuel_per_hour", json!(100_000_000_000_000_001i64)),
            "fuel-per-hour must be at most 100000000000000000",
        ),
        case(
            t,
            tenant("max_in_flight", json!(1)),
            tenant("max_in_flight", json!(0)),
            "max-in-flight must be positive, not 0",
        ),
        case(
            g,
            group("fuel", json!(100_000_000_000_000i64)),
            group("fuel", json!(100_000_000_000_001i64)),
            "fuel must be at most 100000000000000",
        ),
        case(
            g,
            group("memory", json!(ceiling.to_string())),
            group("memory", json!((ceiling + 1).to_string())),
            &format!("ceiling of {ceiling} bytes"),
        ),
        case(
            g,
            group("deadline", json!("7d")),
            group("deadline", json!("604800001ms")),
            "deadline must be at most 7d",
        ),
        case(
            g,
            group("concurrency", json!(10_000)),
            group("concurrency", json!(10_001)),
            "concurrency must be at most 10000",
        ),
        case(
            g,
            group("connector_rate", json!(1e6)),
            group("connector_rate", json!(1_000_000.5)),
            "connector-rate must be at most 1000000",
        ),
        case(
            g,
            group("service_time", json!("1d")),
            group("service_time", json!("86400001ms")),
            "service-time must be at most 1d",
        ),
        case(
            g,
            group("db_connections", json!(10_000)),
            group("db_connections", json!(10_001)),
            "db-connections must be at most 10000",
        ),
        case(
            g,
            group("memory_budget", json!("1048576GiB")),
            group("memory_budget", json!("1048577GiB")),
            "memory-budget must be at most 1PiB",
        ),
        case(
            g,
            group("working_set", json!("1048576GiB")),
            group("working_set", json!("1048577GiB")),
            "working-set must be at most 1PiB",
        ),
        case(
            g,
            group("aging", json!("1d")),
            group("aging", json!("86400001ms")),
            "aging must be at most 1d",
        ),
        case(
            g,
            group("ramp_every", json!("1d")),
            group("ramp_every", json!("86400001ms")),
            "ramp-every must be at most 1d",
        ),
        case(
            g,
            group("recovery_share", json!(100)),
            group("recovery_share", json!(101)),
            "recovery-share must be 1% to 100%",
        ),
        case(
            g,
            group("max_log", json!("64MiB")),
            group("max_log", json!("67108865")),
            "max-log must be between 1 byte and 67108864 bytes",
        ),
        case(
            c,
            connector("timeout_ms", json!(3_600_000)),
            connector("timeout_ms", json!(3_600_001)),
            "timeout must be at most 1h",
        ),
        case(
            c,
            connector("permits", json!(10_000)),
            connector("permits", json!(10_001)),
            "permits must be at most 10000",
        ),
        // Below the limit: the database's CHECK answered this with a 500.
        case(
            c,
            connector("permits", json!(1)),
            connector("permits", json!(0)),
            "permits must be positive, not 0",
        ),
        case(
            c,
            connector("rate_per_sec", json!(1e6)),
            connector("rate_per_sec", json!(1_000_000.5)),
            "rate must be at most 1000000",
        ),
        case(
            c,
            connector("breaker_failure_rate", json!(1.0)),
            connector("breaker_failure_rate", json!(1.5)),
            "breaker-failure-rate must be at most 1",
        ),
        case(
            c,
            connector("breaker_min_calls", json!(1_000_000)),
            connector("breaker_min_calls", json!(1_000_001)),
            "breaker-min-calls must be at most 1000000",
        ),
        case(
            c,
            connector("breaker_window_ms", json!(86_400_000)),
            connector("breaker_window_ms", json!(86_400_001)),
            "breaker-window must be at most 1d",
        ),
        case(
            c,
            connector("breaker_open_ms", json!(86_400_000)),
            connector("breaker_open_ms", json!(86_400_001)),
            "breaker-open must be at most 1d",
        ),
        case(
            "/v1/prices",
            json!({ "retry": 1e12 }),
            json!({ "retry": 1e308 }),
            "--retry must be at most 1000000000000",
        ),
        case(
            "/v1/prices",
            json!({ "fuel_per_cpu_second": 1e15 }),
            json!({ "fuel_per_cpu_second": 1.5e15 }),
            "--fuel-per-cpu-second must be at most 1000000000000000",
        ),
    ];
    for (at, past, says) in [
        (
            "[retry]\nmax_attempts = 100",
            "[retry]\nmax_attempts = 101",
            "'retry.max_attempts': must be at most 100, not 101",
        ),
        (
            "[retry]\nmax_attempts = 1",
            "[retry]\nmax_attempts = 1000000000",
            "'retry.max_attempts': must be at most 100",
        ),
        (
            "[retry]\nbackoff = \"1d\"\nbackoff_max = \"7d\"",
            "[retry]\nbackoff = \"86401s\"\nbackoff_max = \"7d\"",
            "'retry.backoff': must be at most 1d",
        ),
        (
            "[retry]\nbackoff_max = \"7d\"",
            "[retry]\nbackoff_max = \"604801s\"",
            "'retry.backoff_max': must be at most 7d",
        ),
        (
            "[retry]\nmax_age = \"366d\"",
            "[retry]\nmax_age = \"367d\"",
            "'retry.max_age': must be at most 366d",
        ),
        (
            "[retry]\nmax_elapsed = \"366d\"",
            "[retry]\nmax_elapsed = \"367d\"",
            "'retry.max_elapsed': must be at most 366d",
        ),
        (
            "[schedule]\nkind = \"manual\"\nmax_catchup = 10000",
            "[schedule]\nkind = \"manual\"\nmax_catchup = 10001",
            "'max_catchup' is invalid: must be at most 10000",
        ),
        (
            "[schedule]\nkind = \"manual\"\nmax_in_flight = 10000",
            "[schedule]\nkind = \"manual\"\nmax_in_flight = 10001",
            "'max_in_flight' is invalid: must be at most 10000",
        ),
    ] {
        cases.push(Case {
            method: "POST",
            path: "/v1/jobs".into(),
            at_limit: api.manifest(at),
            past: api.manifest(past),
            says: says.into(),
        });
    }
    cases.push(Case {
        method: "POST",
        path: "/v1/effects/recover".into(),
        at_limit: json!({ "limit": 10_000 }),
        past: json!({ "limit": 10_001 }),
        says: "limit must be 1 to 10000, not 10001".into(),
    });

    for case in &cases {
        let what = format!("{} {} {}", case.method, case.path, case.past);
        let before = api.stored().await;
        let (status, body) = api.call(case.method, &case.path, Some(&case.past)).await;
        assert_eq!(status, 400, "{what}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&case.says), "{what}: {message}");
        assert!(
            !message.contains('\n') && !message.contains("CHECK"),
            "{what}: {message}"
        );
        assert_eq!(api.stored().await, before, "{what} stored something");

        let (status, body) = api
            .call(case.method, &case.path, Some(&case.at_limit))
            .await;
        assert!(
            (200..300).contains(&status),
            "{} {} {}: {status} {body}",
            case.method,
            case.path,
            case.at_limit
        );
    }
}

db_test!(the_connector_body_refuses_unknown_fields_and_stores_nothing);
async fn the_connector_body_refuses_unknown_fields_and_stores_nothing(db: Db) {
    let api = start(db).await;
    let before = api.stored().await;
    let mut body = connector("permits", json!(4));
    body["colour"] = json!("blue");
    let (status, answer) = api.call("PUT", "/v1/connectors/c", Some(&body)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{answer}"
    );
    assert_eq!(api.stored().await, before);
    let (status, answer) = api
        .call(
            "PUT",
            "/v1/connectors/c",
            Some(&connector("permits", json!(4))),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
}

/// A minutely job of tenant `acme` (10,000 fire times is a week).
async fn minutely(api: &Api) {
    let manifest =
        api.manifest("[schedule]\nkind = \"cron\"\ncron = \"0 * * * * *\"\ntimezone = \"UTC\"");
    let (status, body) = api.call("POST", "/v1/jobs", Some(&manifest)).await;
    assert_eq!(status, 200, "{body}");
}

/// `[from, from + minutes)` as a backfill body.
fn window(from: &str, minutes: i64, max: Option<usize>) -> Value {
    let from: chrono::DateTime<chrono::Utc> = from.parse().unwrap();
    let mut body = json!({ "from": from, "to": from + chrono::TimeDelta::minutes(minutes) });
    if let Some(max) = max {
        body["max"] = json!(max);
    }
    body
}

db_test!(a_backfill_is_bounded_per_request_and_per_tenant_and_a_refusal_stores_nothing);
async fn a_backfill_is_bounded_per_request_and_per_tenant_and_a_refusal_stores_nothing(db: Db) {
    let api = start(db).await;
    minutely(&api).await;
    let path = "/v1/jobs/bounded/backfill";
    let per_request = BACKFILL_PER_REQUEST as i64;

    // Over the per-request limit: asked for, or by the window's size.
    let (status, body) = api
        .call(
            "POST",
            path,
            Some(&window(
                "2026-01-01T00:00:00Z",
                10,
                Some(BACKFILL_PER_REQUEST + 1),
            )),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("between 1 and 10000"),
        "{body}"
    );
    let (status, body) = api
        .call(
            "POST",
            path,
            Some(&window("2026-01-01T00:00:00Z", per_request + 1, None)),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 10000"),
        "{body}"
    );
    assert_eq!(api.host.count("triggers").await, 0);

    // Two full requests reach the per-tenant limit exactly.
    for from in ["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"] {
        let (status, body) = api
            .call("POST", path, Some(&window(from, per_request, None)))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["created"], per_request, "{body}");
    }
    assert_eq!(
        api.host.count("triggers").await,
        BACKFILL_PENDING_PER_TENANT
    );

    // One more waiting trigger is one too many; a window already
    // triggered adds nothing and is still taken.
    let before = api.stored().await;
    let (status, body) = api
        .call("POST", path, Some(&window("2026-03-01T00:00:00Z", 1, None)))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 20000"),
        "{body}"
    );
    assert_eq!(api.stored().await, before);
    let (status, body) = api
        .call("POST", path, Some(&window("2026-01-01T00:00:00Z", 5, None)))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["created"].as_i64(), body["existing"].as_i64()),
        (Some(0), Some(5))
    );

    // Once they no longer wait (cancelled here), the tenant may backfill
    // again.
    let (status, body) = api
        .call(
            "POST",
            "/v1/jobs/bounded/cancel",
            Some(&json!({ "reason": "too many" })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .call("POST", path, Some(&window("2026-03-01T00:00:00Z", 1, None)))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["created"], 1, "{body}");
}

db_test!(a_weight_at_its_maximum_or_past_it_from_before_the_limit_does_not_break_claims);
async fn a_weight_at_its_maximum_or_past_it_from_before_the_limit_does_not_break_claims(db: Db) {
    let api = start(db).await;
    let host = &api.host;
    // One slot for two tenants' triggers: claims share it by weight.
    host.group_sized("one", 10_000_000_000, 64 << 20, Duration::from_secs(60), 1)
        .await;
    for tenant in ["heavy", "legacy"] {
        let manifest = format!(
            "id = \"{tenant}-job\"\ntenant = \"{tenant}\"\ncomponent = \"sha256:{}\"\nresource_group = \"one\"\n",
            api.digest
        );
        host.registry
            .job_apply(&manifest, std::path::Path::new("."), "test")
            .await
            .unwrap();
    }
    let (status, body) = api
        .call("PUT", "/v1/tenants/heavy", Some(&json!({ "weight": 1000 })))
        .await;
    assert_eq!(status, 200, "{body}");
    // A weight stored before the limit existed: the API refuses it now,
    // claims must still cope with it.
    let (status, _) = api
        .call(
            "PUT",
            "/v1/tenants/legacy",
            Some(&json!({ "weight": i64::MAX })),
        )
        .await;
    assert_eq!(status, 400);
    sqlx::query(host.store.sql(
        "INSERT INTO tenants (tenant, weight, created_at, updated_at) VALUES ('legacy', ?, 0, 0)",
    ))
    .bind(i64::MAX)
    .execute(host.store.pool())
    .await
    .unwrap();
    let triggers = [
        host.trigger("heavy-job", json!({})).await.id,
        host.trigger("legacy-job", json!({})).await.id,
        host.trigger("heavy-job", json!({})).await.id,
    ];
    host.runner("r", Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
    for id in triggers {
        let t = host.store.trigger_get(id).await.unwrap();
        assert_eq!(t.state, TriggerState::Succeeded, "trigger {id}: {t:?}");
    }
}

/// `paddock --database-url URL ARGS...`: success, and stderr.
fn paddock(url: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(url)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("PADDOCK_LOG")
        .env_remove("PADDOCK_SERVER")
        .env_remove("PADDOCK_TOKEN")
        .output()
        .expect("run paddock");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

db_test!(the_command_line_takes_settings_at_their_limits_and_refuses_one_past_in_one_line);
async fn the_command_line_takes_settings_at_their_limits_and_refuses_one_past_in_one_line(db: Db) {
    let api = start(db).await;
    minutely(&api).await;
    let url = api.host.url.clone();
    let dir = api.host.dir.path();
    let manifest = |attempts: u32| {
        let path = dir.join(format!("job-{attempts}.toml"));
        std::fs::write(
            &path,
            format!(
                "id = \"cli-job\"\ntenant = \"acme\"\ncomponent = \"sha256:{}\"\n[retry]\nmax_attempts = {attempts}\n",
                api.digest
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let (at, past) = (manifest(100), manifest(101));
    let connector = ["connector", "set", "c", "--base-url", "http://127.0.0.1:9"];
    let with = |base: &[&'static str], more: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(more).copied().collect()
    };
    let backfill = [
        "schedule",
        "backfill",
        "bounded",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T00:10:00Z",
        "--max",
    ];
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (
            vec!["tenant", "set", "acme", "--weight", "1000"],
            vec!["tenant", "set", "acme", "--weight", "1001"],
            "weight must be at most 1000, not 1001",
        ),
        (
            vec![
                "tenant",
                "set",
                "acme",
                "--fuel-per-hour",
                "100000000000000000",
            ],
            vec![
                "tenant",
                "set",
                "acme",
                "--fuel-per-hour",
                "100000000000000001",
            ],
            "fuel-per-hour must be at most 100000000000000000",
        ),
        (
            vec!["group", "set", "g", "--concurrency", "10000"],
            vec!["group", "set", "g", "--concurrency", "10001"],
            "concurrency must be at most 10000",
        ),
        (
            vec!["group", "set", "g", "--deadline", "7d"],
            vec!["group", "set", "g", "--deadline", "604801s"],
            "deadline must be at most 7d",
        ),
        (
            with(&connector, &["--permits", "10000"]),
            with(&connector, &["--permits", "10001"]),
            "permits must be at most 10000",
        ),
        (
            with(&connector, &["--permits", "1"]),
            with(&connector, &["--permits", "0"]),
            "permits must be positive, not 0",
        ),
        (
            with(&connector, &["--timeout", "1h"]),
            with(&connector, &["--timeout", "3601s"]),
            "timeout must be at most 1h",
        ),
        (
            vec!["price", "set", "--retry", "1e12"],
            vec!["price", "set", "--retry", "1e13"],
            "--retry must be at most 1000000000000",
        ),
        (
            with(&backfill, &["10000"]),
            with(&backfill, &["10001"]),
            "--max must be between 1 and 10000",
        ),
        (
            vec!["effects", "recover", "--limit", "10000"],
            vec!["effects", "recover", "--limit", "10001"],
            "--limit must be at most 10000",
        ),
        (
            vec!["job", "apply", &at],
            vec!["job", "apply", &past],
            "'retry.max_attempts': must be at most 100, not 101",
        ),
    ];
    for (at_limit, past, says) in &cases {
        let before = api.stored().await;
        let (ok, stderr) = paddock(&url, past);
        let what = format!("paddock {}: {stderr}", past.join(" "));
        assert!(!ok, "{what}");
        assert_eq!(stderr.lines().count(), 1, "one line: {what}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{what}"
        );
        assert!(!stderr.contains("panicked"), "{what}");
        assert_eq!(api.stored().await, before, "{what} stored something");
        let (ok, stderr) = paddock(&url, at_limit);
        assert!(ok, "paddock {}: {stderr}", at_limit.join(" "));
    }
}

db_test!(every_json_body_the_api_takes_refuses_unknown_fields);
async fn every_json_body_the_api_takes_refuses_unknown_fields(db: Db) {
    use paddock::api::routes::{Body, ROUTES};
    let api = start(db).await;
    let before = api.stored().await;
    let mut walked = 0;
    for route in ROUTES {
        let Body::Json(kind) = route.body else {
            continue;
        };
        let path = route
            .path
            .replace("{id}", "1")
            .replace("{kind}", "group")
            .replace('{', "")
            .replace('}', "");
        // An unknown field is refused where it is met, before any missing
        // field is noticed: a body that skipped the rule would say
        // "missing field" or be taken.
        let (status, body) = api
            .call(route.method, &path, Some(&json!({ "zz_unknown": 1 })))
            .await;
        let what = format!("{} {} ({kind}): {status} {body}", route.method, route.path);
        assert_eq!(status, 400, "{what}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown field `zz_unknown`"),
            "{what}"
        );
        walked += 1;
    }
    assert!(walked >= 20, "{walked} bodies");
    assert_eq!(api.stored().await, before);
}
