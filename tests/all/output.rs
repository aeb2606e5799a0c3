//! Output that cannot be forged: people's text (reasons, error messages,
//! logs) is printed with its control characters escaped; a database URL is
//! never printed with its password, whatever its form; the incident report
//! counts only triggers something happened to.

use crate::secrets::paddock;
use crate::{Db, TestHost};
use paddock::model::report::Incident;
use paddock::model::{AttemptEnd, AttemptOutcome, LeaseRef, TriggerState};
use paddock::store::prelude::*;
use paddock::store::{ClaimRequest, NewTrigger, ReportQuery, Store};
use serde_json::json;
use std::collections::BTreeMap;

/// A reason written to forge a second line, clear the screen and recolour
/// it, with a C1 control and a right-to-left override.
const FORGED: &str = "deploy\u{1b}[2J\u{1b}[31m\nj resumed by admin: all clear\u{9b}1m\u{202e}";

/// Nothing of `FORGED` reached the output raw.
fn escaped(out: &str) {
    for raw in ['\u{1b}', '\u{9b}', '\u{202e}'] {
        assert!(!out.contains(raw), "{raw:?} printed raw: {out:?}");
    }
    assert!(
        !out.lines().any(|l| l.trim_start().starts_with("j resumed")),
        "a forged line: {out}"
    );
    assert!(out.contains("deploy\\u{1b}[2J"), "{out}");
    assert!(out.contains("\\nj resumed by admin"), "{out}");
}

db_test!(a_reason_with_escape_sequences_prints_escaped_in_gates_history_and_trigger_show);
async fn a_reason_with_escape_sequences_prints_escaped_in_gates_history_and_trigger_show(db: Db) {
    let host = TestHost::new(db).await;
    host.job("j", "noop", "").await;
    for verb in ["pause", "resume"] {
        let (ok, out) = paddock(&host, &[verb, "--job", "j", "--reason", FORGED], &[]);
        assert!(ok, "{out}");
    }
    let (ok, out) = paddock(&host, &["gates", "--history"], &[]);
    assert!(ok, "{out}");
    escaped(&out);
    assert_eq!(out.lines().count(), 1, "one gate, one line: {out}");

    // A guest's error message and log are people's text too.
    let t = host.trigger("j", json!({})).await;
    let lease = claim(&host.store, "r", host.store.now_ms().await.unwrap())
        .await
        .remove(&t.id)
        .unwrap();
    let end = AttemptEnd {
        trigger_state: TriggerState::Failed,
        retry_after_ms: None,
        result: None,
        error_class: Some("permanent".into()),
        error_message: Some(FORGED.into()),
        attempt_outcome: AttemptOutcome::Failed,
        fuel_used: 1,
        peak_memory_bytes: 1,
        wall_ms: 1,
        log: format!("INFO {FORGED}"),
    };
    host.store.attempt_finish(&lease, &end).await.unwrap();
    let (ok, out) = paddock(&host, &["trigger", "show", &t.id.to_string()], &[]);
    assert!(ok, "{out}");
    escaped(&out);
    let (ok, out) = paddock(&host, &["trigger", "list"], &[]);
    assert!(ok, "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
}

/// Claims as `owner` at `now`: the leases by trigger id.
async fn claim(store: &Store, owner: &str, now: i64) -> BTreeMap<i64, LeaseRef> {
    store
        .claim(&ClaimRequest {
            owner,
            lease_ms: LEASE,
            limit: 100,
            retry_slots: 0,
            now: Some(now),
        })
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.trigger_id, c.lease(owner)))
        .collect()
}

const LEASE: i64 = 60_000;

fn succeeded() -> AttemptEnd {
    AttemptEnd {
        trigger_state: TriggerState::Succeeded,
        retry_after_ms: None,
        result: Some(b"ok".to_vec()),
        error_class: None,
        error_message: None,
        attempt_outcome: AttemptOutcome::Succeeded,
        fuel_used: 1,
        peak_memory_bytes: 1,
        wall_ms: 1,
        log: String::new(),
    }
}

async fn due_trigger(store: &Store, t0: i64, n: i64) -> i64 {
    let new = NewTrigger {
        scheduled_at: Some(t0 - 60_000),
        ..NewTrigger::manual("j", json!({ "n": n }), None)
    };
    store.trigger_create(&new).await.unwrap().0.id
}

async fn incident(store: &Store, since: i64, until: i64) -> (Incident, Vec<i64>) {
    let facts = store
        .incident_facts(&ReportQuery {
            since,
            until,
            tenant: None,
            group: None,
        })
        .await
        .unwrap();
    (
        Incident::of(&facts),
        facts.iter().map(|f| f.trigger_id).collect(),
    )
}

db_test!(an_incident_window_of_clean_successes_has_nothing_affected);
async fn an_incident_window_of_clean_successes_has_nothing_affected(db: Db) {
    let host = TestHost::new(db).await;
    host.job("j", "noop", "").await;
    let store = &host.store;
    let t0 = store.now_ms().await.unwrap();
    for n in 0..7 {
        due_trigger(store, t0, n).await;
    }
    let leases = claim(store, "A", t0).await;
    assert_eq!(leases.len(), 7);
    for lease in leases.values() {
        store.attempt_finish(lease, &succeeded()).await.unwrap();
    }
    let (i, ids) = incident(store, t0 - 1_000, t0 + 3 * LEASE).await;
    assert_eq!((i.affected, ids.len()), (0, 0), "{i:?}");
    assert_eq!(i.auto_closure_pct(), None);
}

db_test!(an_incident_with_one_takeover_counts_exactly_that_trigger);
async fn an_incident_with_one_takeover_counts_exactly_that_trigger(db: Db) {
    let host = TestHost::new(db).await;
    host.job("j", "noop", "").await;
    let store = &host.store;
    let t0 = store.now_ms().await.unwrap();
    let taken = due_trigger(store, t0, 0).await;
    let a = claim(store, "A", t0).await;
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), [taken]);
    // A's lease lapses; B takes it over and, beside it, runs six clean ones.
    for n in 1..7 {
        due_trigger(store, t0, n).await;
    }
    let b = claim(store, "B", t0 + 2 * LEASE).await;
    assert_eq!(b.len(), 7);
    for lease in b.values() {
        store.attempt_finish(lease, &succeeded()).await.unwrap();
    }
    let (i, ids) = incident(store, t0 - 1_000, t0 + 3 * LEASE).await;
    assert_eq!(ids, [taken]);
    assert_eq!((i.affected, i.completed), (1, 1), "{i:?}");
    assert_eq!(i.auto_closure_pct(), Some(100.0));
}

/// Every URL form the store accepts, each with a password that must not be
/// printed. `{pg}` is a PostgreSQL server that answers (the test server,
/// when there is one), so a connect fails at once on the wrong password
/// instead of retrying a closed port until its timeout.
const DATABASE_URLS: &[(&str, &str)] = &[
    ("postgres://app:pw-s3cret/x?y@{pg}/db", "pw-s3cret"),
    ("postgres://app:pw%2Fs3cret%3F@{pg}/db", "s3cret"),
    ("postgresql://app:pw@s3cret#x@{pg}/db", "s3cret"),
    (
        "postgres://{pg}/db?user=app&password=pw-s3cret",
        "pw-s3cret",
    ),
    (
        "host=127.0.0.1 port=1 user=app password=pw-s3cret dbname=db",
        "pw-s3cret",
    ),
    (
        "host=127.0.0.1 port=1 password='pw s3cret' dbname=db",
        "s3cret",
    ),
];

#[test]
fn a_failing_connect_prints_no_database_password_in_any_form() {
    let pg = std::env::var("PADDOCK_TEST_DATABASE_URL")
        .ok()
        .and_then(|url| reqwest::Url::parse(&url).ok())
        .and_then(|url| {
            Some(format!(
                "{}:{}",
                url.host_str()?,
                url.port().unwrap_or(5432)
            ))
        })
        .unwrap_or_else(|| "127.0.0.1:1".into());
    for (url, password) in DATABASE_URLS {
        let url = url.replace("{pg}", &pg);
        for args in [&["trigger", "list"][..], &["status"], &["serve"]] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
                .arg("--database-url")
                .arg(&url)
                .args(args)
                .env("PADDOCK_LOG", "paddock=debug")
                .output()
                .expect("run paddock");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!out.status.success(), "{url} {args:?}: {text}");
            assert!(!text.contains(password), "{url} {args:?} printed: {text}");
            assert!(text.contains("***"), "{url} {args:?}: {text}");
        }
    }
}

/// The CLI prints through macros that escape every value (`main.rs`); a
/// value captured inline in a format string (`{name}`) would pass them by,
/// and a direct `std::println!` would too (JSON output excepted).
#[test]
fn every_cli_printer_passes_its_values_through_the_escaping_macros() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin/paddock");
    let mut files = vec![root.clone()];
    let mut found = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                files.push(entry.unwrap().path());
            }
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            if line.contains("::std::print") || line.contains("::std::eprint") {
                found.push(format!("{name}:{}: direct std print", n + 1));
            }
        }
        for mac in ["println!(", "print!(", "eprintln!(", "eprint!("] {
            let mut at = 0;
            while let Some(i) = text[at..].find(mac) {
                let start = at + i + mac.len();
                at = start;
                let rest = text[start..].trim_start();
                let Some(literal) = rest.strip_prefix('"') else {
                    continue;
                };
                let end = literal
                    .char_indices()
                    .scan(false, |escaped, (i, c)| {
                        let close = !*escaped && c == '"';
                        *escaped = !*escaped && c == '\\';
                        Some((i, close))
                    })
                    .find(|&(_, close)| close)
                    .map_or(literal.len(), |(i, _)| i);
                let literal = literal[..end].replace("{{", "");
                let line = text[..start].lines().count();
                for (j, _) in literal.match_indices('{') {
                    if literal[j + 1..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphabetic() || c == '_')
                    {
                        found.push(format!("{name}:{line}: inline capture in {literal:?}"));
                    }
                }
            }
        }
    }
    found.sort();
    let allowed = [
        // The macros themselves, JSON output and the audit export.
        "main.rs",
        "cli/print.rs",
        "cli/remote/ops.rs",
    ];
    found.retain(|f| !(f.contains("direct std print") && allowed.iter().any(|a| f.starts_with(a))));
    assert!(found.is_empty(), "{found:#?}");
}
