//! Backlog and drain ETA per group (issue 19, item 3): `paddock status`
//! counts what it says — backlog (due, waiting), arrivals (became due in
//! the window), successes (reached `succeeded` in the window) — and prints
//! the ETA those counts give, or "not recovering". The computation itself
//! is unit-tested in `host/src/model/backlog.rs` with the issue's numbers;
//! here a real runner runs real guests and the printed figures are the
//! ones derived from what the test did.

use crate::{Db, TestHost, guest};
use paddock::model::backlog::Eta;
use paddock::store::prelude::*;
use paddock::store::{GroupStatus, NewException, NewTrigger, StatusQuery, StatusReport};
use serde_json::Value;
use std::process::{Command, Output};
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;

/// A host with group `orders` (room for 64) and its job `ingest` (the
/// no-op guest) of tenant t1.
async fn orders(db: Db) -> TestHost {
    let host = TestHost::new(db).await;
    host.group("orders", 100_000_000, 64 << 20, Duration::from_secs(30))
        .await;
    host.job("ingest", "noop", "resource_group = \"orders\"")
        .await;
    host
}

/// `n` due manual triggers of `job`.
async fn arrive(host: &TestHost, job: &str, n: usize) {
    crate::quotas::triggers(host, job, n).await;
}

/// Run every due trigger to its end with a real runner.
async fn run_all(host: &TestHost) {
    host.runner("r", Duration::from_secs(60))
        .run_until_idle()
        .await
        .unwrap();
}

async fn report(host: &TestHost, query: StatusQuery) -> StatusReport {
    host.store.status_report(&query).await.unwrap()
}

fn group<'a>(report: &'a StatusReport, name: &str) -> &'a GroupStatus {
    report
        .groups
        .iter()
        .find(|g| g.group == name)
        .unwrap_or_else(|| panic!("no line for {name}: {report:?}"))
}

/// `paddock --database-url URL status ARGS...`
fn paddock_status(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(url)
        .arg("status")
        .args(args)
        .env_remove("PADDOCK_LOG")
        .output()
        .expect("run paddock")
}

/// `paddock status ARGS --format json`, the line of group `name`.
fn status_json(url: &str, args: &[&str], name: &str) -> (Value, Value) {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = paddock_status(url, &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no line for {name}: {json}"));
    (json, line)
}

fn status_text(url: &str, args: &[&str]) -> String {
    let out = paddock_status(url, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Wait until the database clock is past `instant` (a condition on the
/// database, polled; the store's clock moves in milliseconds).
async fn clock_past(host: &TestHost, instant: i64) {
    while host.store.now_ms().await.unwrap() <= instant {
        tokio::task::yield_now().await;
    }
}

db_test!(a_real_run_is_not_recovering_at_600_to_400_and_drains_in_one_window_at_600_to_800);
/// The issue's scenario in small: arrivals against successes at 3 : 2
/// (600/s : 400/s) leave a backlog that is not recovering; then at 3 : 4
/// (600/s : 800/s) the backlog left (one window's net) drains in exactly
/// one window — as 240,000 at a net 200/s drain in the 1,200 s it took
/// to build.
async fn a_real_run_is_not_recovering_at_600_to_400_and_drains_in_one_window_at_600_to_800(db: Db) {
    let host = orders(db).await;

    // Phase A: 60 arrive, 40 of them succeed (a real runner, the no-op
    // guest), 20 wait.
    arrive(&host, "ingest", 40).await;
    run_all(&host).await;
    arrive(&host, "ingest", 20).await;
    let a_end = host.store.now_ms().await.unwrap();

    let last_hour = StatusQuery {
        window_ms: HOUR_MS,
        ..Default::default()
    };
    let a = report(&host, last_hour.clone()).await;
    let orders_a = group(&a, "orders");
    assert_eq!(
        (
            orders_a.arrivals,
            orders_a.successes,
            orders_a.backlog,
            orders_a.running,
            orders_a.limit
        ),
        (60, 40, 20, 0, 64)
    );
    assert_eq!(orders_a.flow(HOUR_MS).eta(), Eta::NotRecovering);

    // What the binary prints for the same hour: the counts, the rates they
    // give (per second over 3,600 s) and the verdict.
    let (json, line) = status_json(&host.url, &["--window", "1h"], "orders");
    assert_eq!(json["window_ms"], HOUR_MS);
    assert_eq!(
        (
            &line["arrivals"],
            &line["successes"],
            &line["backlog"],
            &line["running"],
            &line["limit"]
        ),
        (
            &Value::from(60),
            &Value::from(40),
            &Value::from(20),
            &Value::from(0),
            &Value::from(64)
        )
    );
    assert_eq!(line["arrival_per_s"], 60.0 / 3_600.0);
    assert_eq!(line["success_per_s"], 40.0 / 3_600.0);
    assert_eq!(line["eta"]["state"], "not_recovering");
    let text = status_text(&host.url, &["--window", "1h"]);
    let orders_line = text
        .lines()
        .find(|l| l.starts_with("orders "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(orders_line.contains("0/64"), "{text}");
    assert!(orders_line.contains(" 20 "), "{text}");
    assert!(
        orders_line.contains("not recovering (net -0.00556/s)"),
        "{text}"
    );

    // Phase B, after phase A on the database clock: 20 arrive and succeed
    // along with phase A's 20 waiting (40 successes), then 10 more arrive
    // and wait: 30 arrivals, 40 successes, a backlog of 10.
    clock_past(&host, a_end).await;
    arrive(&host, "ingest", 20).await;
    run_all(&host).await;
    arrive(&host, "ingest", 10).await;
    let b_end = host.store.now_ms().await.unwrap();

    // The window since phase A ended: net 10 per window, 10 waiting — the
    // ETA is the window's own length.
    let window_ms = b_end - a_end;
    let b = report(
        &host,
        StatusQuery {
            window_ms,
            now: Some(b_end),
            ..Default::default()
        },
    )
    .await;
    let orders_b = group(&b, "orders");
    assert_eq!(
        (orders_b.arrivals, orders_b.successes, orders_b.backlog),
        (30, 40, 10)
    );
    assert_eq!(
        orders_b.flow(window_ms).eta(),
        Eta::Drains {
            seconds: window_ms as f64 / 1_000.0
        }
    );
    let first_waiting: i64 = sqlx::query_scalar(host.store.sql(
        "SELECT min(next_run_at) FROM triggers WHERE state = 'pending' AND job_id = 'ingest'",
    ))
    .fetch_one(host.store.pool())
    .await
    .unwrap();
    assert_eq!(orders_b.oldest_due_ms, Some(b_end - first_waiting));

    // The binary, asked for rates since phase A ended: the same counts,
    // and an ETA of one window, whatever the window measured.
    let since = paddock::model::time::rfc3339(paddock::model::time::from_millis(a_end));
    let (json, line) = status_json(&host.url, &["--since", &since], "orders");
    let window_ms = json["window_ms"].as_i64().unwrap();
    assert!(window_ms >= b_end - a_end, "{json}");
    assert_eq!(
        (&line["arrivals"], &line["successes"], &line["backlog"]),
        (&Value::from(30), &Value::from(40), &Value::from(10))
    );
    // Compared within a relative 1e-12: serde_json's float parser (without
    // its `float_roundtrip` feature) may land one ULP off what was printed.
    let close = |got: &Value, want: f64| {
        let got = got.as_f64().unwrap();
        assert!(
            (got - want).abs() <= want.abs() * 1e-12,
            "{got} vs {want}: {json}"
        );
    };
    close(&line["net_per_s"], 10.0 * 1_000.0 / window_ms as f64);
    assert_eq!(line["eta"]["state"], "drains");
    close(&line["eta"]["seconds"], window_ms as f64 / 1_000.0);
    let text = status_text(&host.url, &["--since", &since]);
    assert!(!text.contains("not recovering"), "{text}");
}

db_test!(a_trigger_arrives_once_when_it_first_becomes_due);
/// Arrival is `max(created, scheduled)`: a trigger created for a plan time
/// long past (a catch-up or backfill) arrives when created; one created
/// ahead arrives at its plan time; one not yet due has not arrived and is
/// not backlog. The instant and the window are injected, so every edge is
/// exact.
async fn a_trigger_arrives_once_when_it_first_becomes_due(db: Db) {
    let host = orders(db).await;
    let t = host.store.now_ms().await.unwrap();
    let at = |scheduled_at: i64, key: &str| {
        let mut new = NewTrigger::manual("ingest", serde_json::json!({}), Some(key));
        new.scheduled_at = Some(scheduled_at);
        new
    };
    for (scheduled_at, key) in [
        (t - 24 * HOUR_MS, "yesterday"),
        (t + 10 * MINUTE_MS, "in-ten-minutes"),
        (t + HOUR_MS, "in-an-hour"),
    ] {
        host.store
            .trigger_create(&at(scheduled_at, key))
            .await
            .unwrap();
    }
    let created = host.store.now_ms().await.unwrap();
    let at_20_min = |window_ms| StatusQuery {
        window_ms,
        now: Some(t + 20 * MINUTE_MS),
        ..Default::default()
    };

    // (t + 5 min, t + 20 min]: only the one planned 10 minutes ahead
    // arrived; yesterday's and it wait; the one due in an hour is neither.
    let late = report(&host, at_20_min(15 * MINUTE_MS)).await;
    let g = group(&late, "orders");
    assert_eq!((g.arrivals, g.backlog, g.successes), (1, 2, 0));
    // The oldest waits since its plan time: a day and 20 minutes late.
    assert_eq!(g.oldest_due_ms, Some(24 * HOUR_MS + 20 * MINUTE_MS));

    // A window that reaches back past their creation sees yesterday's
    // trigger arrive too — when it was created, not a day ago.
    let wide = report(&host, at_20_min(20 * MINUTE_MS + (created - t) + 1)).await;
    assert_eq!(group(&wide, "orders").arrivals, 2);

    // Just after creation, nothing planned ahead has arrived yet.
    let now = report(
        &host,
        StatusQuery {
            window_ms: MINUTE_MS,
            now: Some(created),
            ..Default::default()
        },
    )
    .await;
    let g = group(&now, "orders");
    assert_eq!((g.arrivals, g.backlog), (1, 1));
}

db_test!(a_tenant_sees_only_its_triggers_and_tickets);
async fn a_tenant_sees_only_its_triggers_and_tickets(db: Db) {
    let host = orders(db).await;
    let toml = format!(
        "id = \"other\"\ntenant = \"t2\"\ncomponent = \"{}\"\nresource_group = \"orders\"\n",
        guest("noop").display()
    );
    host.grant_connectors(&toml).await;
    host.registry
        .job_apply(&toml, std::path::Path::new("."), "test")
        .await
        .unwrap();
    arrive(&host, "ingest", 5).await;
    arrive(&host, "other", 3).await;
    let t1_trigger = host.store.triggers_list(100).await.unwrap();
    let t1_trigger = t1_trigger.iter().find(|t| t.tenant == "t1").unwrap();
    for (subject, trigger_id) in [("t1-key", Some(t1_trigger.id)), ("loose", None)] {
        host.store
            .exception_open(&NewException {
                kind: "unknown_outcome",
                subject: subject.into(),
                trigger_id,
                effect_key: None,
                evidence: serde_json::json!({}),
                allowed_actions: vec!["mark_succeeded"],
            })
            .await
            .unwrap();
    }
    let query = |tenant: Option<&str>| StatusQuery {
        window_ms: HOUR_MS,
        tenant: tenant.map(Into::into),
        ..Default::default()
    };
    let all = report(&host, query(None)).await;
    let g = group(&all, "orders");
    // The ticket holds its trigger: manual, no longer backlog.
    assert_eq!(
        (g.backlog, g.arrivals, g.open_tickets, g.manual),
        (7, 8, 1, 1)
    );
    assert_eq!(all.unattributed_tickets, 1);

    let t2 = report(&host, query(Some("t2"))).await;
    let g = group(&t2, "orders");
    assert_eq!((g.backlog, g.arrivals, g.open_tickets), (3, 3, 0));
    assert_eq!(t2.unattributed_tickets, 0, "a loose ticket is no tenant's");
    let t1 = report(&host, query(Some("t1"))).await;
    let g = group(&t1, "orders");
    assert_eq!(
        (g.backlog, g.arrivals, g.open_tickets, g.manual),
        (4, 5, 1, 1)
    );

    let (_, line) = status_json(
        &host.url,
        &["--tenant", "t2", "--group", "orders"],
        "orders",
    );
    assert_eq!(
        (&line["backlog"], &line["open_tickets"]),
        (&Value::from(3), &Value::from(0))
    );

    // A closed gate over t2 holds its 3: paused, no longer backlog.
    host.store
        .gate_pause(
            &paddock::model::gates::GateScope::Tenant("t2".into()),
            "local:ops",
            "status test",
        )
        .await
        .unwrap();
    let all = report(&host, query(None)).await;
    let g = group(&all, "orders");
    assert_eq!((g.backlog, g.paused, g.manual), (4, 3, 1));
    let t1 = report(&host, query(Some("t1"))).await;
    assert_eq!(group(&t1, "orders").paused, 0);
    let (json, line) = status_json(
        &host.url,
        &["--tenant", "t2", "--group", "orders"],
        "orders",
    );
    assert_eq!(
        (&line["backlog"], &line["paused"]),
        (&Value::from(0), &Value::from(3)),
        "{json}"
    );
    let text = status_text(&host.url, &["--tenant", "t2"]);
    assert!(text.contains("PAUSED"), "{text}");
}

db_test!(bad_status_flags_are_refused_in_one_line_naming_the_flag);
async fn bad_status_flags_are_refused_in_one_line_naming_the_flag(db: Db) {
    let host = orders(db).await;
    let future = paddock::model::time::rfc3339(paddock::model::time::from_millis(
        host.store.now_ms().await.unwrap() + HOUR_MS,
    ));
    let cases: &[(&[&str], &str)] = &[
        (&["--window", "0s"], "--window: '0s' must be positive"),
        (&["--window", "soon"], "--window:"),
        (
            &["--window", "500ms"],
            "--window: a window of 0.5 s is outside 1s to 24h",
        ),
        (
            &["--window", "2d"],
            "--window: a window of 172800 s is outside 1s to 24h",
        ),
        (
            &["--since", "yesterday"],
            "--since: 'yesterday' is not an RFC 3339 instant",
        ),
        (&["--since", &future], "is not in the past"),
        (
            &["--format", "xml"],
            "--format must be text or json, not 'xml'",
        ),
        (
            &["--group", "nope"],
            "--group: no resource group named 'nope'",
        ),
        (
            &["--tenant", "nope"],
            "--tenant: no job belongs to tenant 'nope'",
        ),
    ];
    for (args, expected) in cases {
        let out = paddock_status(&host.url, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].starts_with("error: "), "{args:?}: {stderr}");
        assert!(lines[0].contains(expected), "{args:?}: {stderr}");
    }
}

/// Each statement's plan, as the report runs it: SQLite's `EXPLAIN QUERY
/// PLAN`; PostgreSQL's `EXPLAIN` under the report's own settings
/// (sequential scans off, so one remains only where no index can serve the
/// statement).
async fn plan(host: &TestHost, db: Db, sql: &'static str, kinds: &str) -> String {
    let mut tx = host.store.pool().begin().await.unwrap();
    let explain = match db {
        Db::Sqlite => "EXPLAIN QUERY PLAN ",
        Db::Postgres => {
            sqlx::query(paddock::store::status_settings())
                .execute(&mut *tx)
                .await
                .unwrap();
            "EXPLAIN "
        }
    };
    let text = format!("{explain}{}", host.store.sql(sql));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(text));
    for kind in kinds.chars() {
        query = match kind {
            'i' => query.bind(1_000_i64),
            _ => query.bind(None::<String>),
        };
    }
    use sqlx::Row;
    let rows = query.fetch_all(&mut *tx).await.unwrap();
    let column = if db == Db::Sqlite { 3 } else { 0 };
    rows.iter()
        .map(|r| r.get::<String, _>(column))
        .collect::<Vec<_>>()
        .join("\n")
}

db_test!(every_status_statement_reaches_triggers_through_an_index);
/// No statement of `paddock status` reads the triggers table whole: the
/// backlog through the claim lanes' partial indexes, running triggers
/// through `triggers_running`, successes through `success_counts_at`,
/// arrivals through `triggers_job` and the primary key.
async fn every_status_statement_reaches_triggers_through_an_index(db: Db) {
    let host = orders(db).await;
    let expected: &[(&str, &[&str])] = &[
        ("running", &["triggers_running"]),
        ("backlog", &["triggers_pending", "triggers_recovery"]),
        ("successes", &["success_counts_at"]),
        ("arrived_on_time", &["triggers_job"]),
        ("newest_before", &[]),
        ("arrived_late", &[]),
        ("tickets", &[]),
    ];
    for (name, sql, kinds) in paddock::store::status_statements(host.store.dialect()) {
        let plan = plan(&host, db, sql, kinds).await;
        let what = format!("{name}:\n{plan}");
        match db {
            Db::Sqlite => {
                // A scan (not a search) of `triggers` (alias `t`) is
                // allowed only over a partial index of waiting or running
                // work, and as the newest-first walk that stops at the
                // window's start.
                let partial = ["triggers_pending", "triggers_recovery", "triggers_running"];
                for line in plan.lines().map(str::trim) {
                    let scans_triggers = line == "SCAN triggers"
                        || line == "SCAN t"
                        || line.starts_with("SCAN triggers ")
                        || line.starts_with("SCAN t ");
                    assert!(
                        !scans_triggers
                            || partial.iter().any(|p| line.contains(p))
                            || name == "newest_before",
                        "a scan of the whole table: {what}"
                    );
                }
                assert!(!plan.contains("TEMP B-TREE FOR ORDER BY"), "{what}");
            }
            Db::Postgres => {
                assert!(!plan.contains("Seq Scan on triggers"), "{what}");
            }
        }
        if let Some((_, indexes)) = expected.iter().find(|(n, _)| *n == name) {
            for index in *indexes {
                assert!(plan.contains(index), "{index} unused: {what}");
            }
        }
    }
}
