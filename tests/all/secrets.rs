//! Connector credentials (issue 17): set by an admin from an environment
//! variable or a file, injected by the host into every call, and never
//! printed — not by any command, not in the audit log, not in a trigger's
//! error or an attempt's log. Rotation is audited by fingerprint.

use crate::ledger::effect;
use crate::{Db, TestHost};
use paddock::store::prelude::*;
use std::time::Duration;

const FIRST: &str = "s3cret-first-0d1e";
const SECOND: &str = "s3cret-second-77fa";

/// `paddock ARGS...` against the host's database with `env`; stdout and
/// stderr together, and whether it succeeded.
pub(crate) fn paddock(host: &TestHost, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(&host.url)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("PADDOCK_LOG")
        .output()
        .expect("run paddock");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn pay(host: &TestHost, resource: &str) -> paddock::store::TriggerRecord {
    host.run_one("pay", effect("ledger", resource, "reserve", resource, 1))
        .await
}

db_test!(a_connector_secret_reaches_the_downstream_and_is_never_printed);
async fn a_connector_secret_reaches_the_downstream_and_is_never_printed(db: Db) {
    let (host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    host.job("pay", "effector", "connectors = [\"ledger\"]")
        .await;
    ledger
        .require("authorization", &format!("Bearer {FIRST}"))
        .await;

    // Without the credential the downstream refuses.
    let t = pay(&host, "RES-1").await;
    assert_eq!(t.state, "failed");
    assert!(ledger.stat("unauthorized").await >= 1);

    // Set from an environment variable: the call carries it.
    let (ok, out) = paddock(
        &host,
        &[
            "connector",
            "secret",
            "set",
            "ledger",
            "--from-env",
            "LEDGER_TOKEN",
        ],
        &[("LEDGER_TOKEN", FIRST)],
    );
    assert!(ok, "{out}");
    assert!(out.contains("sha256:"), "{out}");
    let t = pay(&host, "RES-2").await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);

    // Rotated from a file: the old value is refused, the new one works.
    ledger
        .require("authorization", &format!("Bearer {SECOND}"))
        .await;
    let file = host.dir.path().join("token");
    std::fs::write(&file, format!("{SECOND}\n")).unwrap();
    let (ok, out) = paddock(
        &host,
        &[
            "connector",
            "secret",
            "set",
            "ledger",
            "--from-file",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(ok, "{out}");
    let t = pay(&host, "RES-3").await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);

    // Nothing shows either value: commands, audit, triggers, attempts.
    let mut shown = String::new();
    for args in [
        &["connector", "list"][..],
        &["connector", "secret", "list"],
        &["audit", "list"],
        &["trigger", "list"],
    ] {
        let (_, out) = paddock(&host, args, &[]);
        shown.push_str(&out);
    }
    let audit = serde_json::to_string(&host.store.audit_list().await.unwrap()).unwrap();
    shown.push_str(&audit);
    for t in host.store.triggers_list(100).await.unwrap() {
        shown.push_str(&format!("{:?}", t));
        shown.push_str(&format!(
            "{:?}",
            host.store.attempts_for(t.id).await.unwrap()
        ));
    }
    for secret in [FIRST, SECOND] {
        assert!(!shown.contains(secret), "{secret} was printed");
    }
    assert!(audit.contains("connector.secret.set") && audit.contains("connector.secret.rotate"));
    let (_, listed) = paddock(&host, &["connector", "secret", "list"], &[]);
    assert!(
        listed.contains("authorization") && listed.contains("sha256:"),
        "{listed}"
    );

    // Cleared: refused again.
    let (ok, out) = paddock(&host, &["connector", "secret", "clear", "ledger"], &[]);
    assert!(ok, "{out}");
    assert_eq!(pay(&host, "RES-4").await.state, "failed");
    ledger.stop().await;
}
