//! Connector credentials (issue 17): set by an admin from an environment
//! variable or a file, injected by the host into every call, and never
//! printed — not by any command, not in the audit log, not in a trigger's
//! error or an attempt's log. Rotation is audited by fingerprint. At rest
//! they are sealed under a host key kept in a file outside the database:
//! no copy of the database holds one, the key rotates in one command, and a
//! host without it refuses to start.

use crate::ledger::effect;
use crate::{Db, TestHost};
use paddock::model::secret::ConnectorSecret;
use paddock::store::prelude::*;
use paddock::store::{SECRET_KEY_FILE_VAR, SecretKeyConfig};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

const FIRST: &str = "s3cret-first-0d1e";
const SECOND: &str = "s3cret-second-77fa";
const THIRD: &str = "s3cret-third-c4b9";

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
    assert!(out.contains("hmac:"), "{out}");
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
        listed.contains("authorization") && listed.contains("hmac:"),
        "{listed}"
    );

    // Cleared: refused again.
    let (ok, out) = paddock(&host, &["connector", "secret", "clear", "ledger"], &[]);
    assert!(ok, "{out}");
    assert_eq!(pay(&host, "RES-4").await.state, "failed");
    ledger.stop().await;
}

/// A host whose secrets are sealed under a key file of its own, in its
/// directory (not the user's default, which other tests share), with the
/// reference ledger as connectors `ledger` and `bank`; and the key file.
async fn sealed_host(db: Db) -> (TestHost, crate::ledger::Ledger, PathBuf) {
    let (mut host, ledger) = crate::ledger::host_with_ledger(db, Duration::from_secs(5)).await;
    let bank = crate::ledger::connector("bank", &ledger, Duration::from_secs(5), true);
    crate::ledger::put(&host.store, bank).await;
    let key_file = host.dir.path().join("keys").join("secret.key");
    host.store = host
        .store
        .clone()
        .with_secret_key(SecretKeyConfig {
            key_file: Some(key_file.clone()),
        })
        .await
        .unwrap();
    host.job("pay", "effector", "connectors = [\"ledger\", \"bank\"]")
        .await;
    (host, ledger, key_file)
}

/// `paddock ARGS...` with the secret key file `key_file`.
fn paddock_keyed(host: &TestHost, args: &[&str], key_file: &Path) -> (bool, String) {
    paddock(
        host,
        args,
        &[(SECRET_KEY_FILE_VAR, key_file.to_str().unwrap())],
    )
}

/// Set `ledger`'s bearer token (FIRST) and `bank`'s `x-api-key` (SECOND).
async fn set_both(host: &TestHost) {
    for (connector, secret) in [
        ("ledger", ConnectorSecret::bearer(FIRST).unwrap()),
        (
            "bank",
            ConnectorSecret::header("x-api-key", SECOND).unwrap(),
        ),
    ] {
        host.store
            .connector_secret_set(connector, Some(&secret), "admin")
            .await
            .unwrap();
    }
}

/// An effect through each connector, the ledger requiring its credential.
async fn both_connectors_work(host: &TestHost, ledger: &crate::ledger::Ledger, round: &str) {
    for (connector, header, value) in [
        ("ledger", "authorization", format!("Bearer {FIRST}")),
        ("bank", "x-api-key", SECOND.to_string()),
    ] {
        ledger.require(header, &value).await;
        let key = format!("{round}-{connector}");
        let t = host
            .run_one("pay", effect(connector, &key, "reserve", &key, 1))
            .await;
        assert_eq!(t.state, "succeeded", "{connector}: {:?}", t.error_message);
    }
}

fn fingerprints(host: &TestHost, key_file: &Path) -> Vec<String> {
    let (ok, out) = paddock_keyed(host, &["connector", "secret", "list"], key_file);
    assert!(ok, "{out}");
    let prints: Vec<String> = out
        .split_whitespace()
        .filter(|w| w.starts_with("hmac:"))
        .map(String::from)
        .collect();
    assert_eq!(prints.len(), 2, "{out}");
    prints
}

/// The database's whole content as another reader would get it: a copy of
/// the SQLite file (and its write-ahead log), or `pg_dump` of the test's
/// schema.
fn database_copy(host: &TestHost) -> String {
    if host.url.starts_with("sqlite:") {
        let file = host.dir.path().join("paddock.db");
        let copy = host.dir.path().join("copy.db");
        let mut bytes = Vec::new();
        for suffix in ["", "-wal"] {
            let from = PathBuf::from(format!("{}{suffix}", file.display()));
            if from.exists() {
                std::fs::copy(&from, &copy).unwrap();
                bytes.extend(std::fs::read(&copy).unwrap());
            }
        }
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    let (base, options) = host.url.split_once('?').unwrap();
    let schema = options
        .split('&')
        .find_map(|o| o.strip_prefix("options[search_path]="))
        .unwrap();
    let pg_dump = ["/usr/lib/postgresql/15/bin/pg_dump", "pg_dump"]
        .into_iter()
        .find(|p| !p.starts_with('/') || Path::new(p).exists())
        .unwrap();
    let out = std::process::Command::new(pg_dump)
        .args(["--no-owner", "--schema", schema, "--dbname", base])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

db_test!(no_secret_is_in_plain_text_in_a_copy_of_the_database);
async fn no_secret_is_in_plain_text_in_a_copy_of_the_database(db: Db) {
    let (host, ledger, key_file) = sealed_host(db).await;
    set_both(&host).await;
    // And one set through the command line.
    ledger
        .require("authorization", &format!("Bearer {THIRD}"))
        .await;
    let (ok, out) = paddock(
        &host,
        &["connector", "secret", "set", "ledger", "--from-env", "T"],
        &[
            ("T", THIRD),
            (SECRET_KEY_FILE_VAR, key_file.to_str().unwrap()),
        ],
    );
    assert!(ok, "{out}");
    let t = host
        .run_one("pay", effect("ledger", "R-1", "reserve", "R-1", 1))
        .await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);

    let copy = database_copy(&host);
    // The copy does hold the secrets' rows: their keyed fingerprints.
    for print in fingerprints(&host, &key_file) {
        assert!(copy.contains(&print), "{print} is not in the copy");
    }
    for secret in [FIRST, SECOND, THIRD] {
        assert!(!copy.contains(secret), "{secret} is in plain text");
        // Nor an unkeyed digest of it a guess could be checked against.
        for value in [secret.to_string(), format!("Bearer {secret}")] {
            let digest = hex::encode(Sha256::digest(value.as_bytes()));
            assert!(!copy.contains(&digest[..12]), "a digest of {secret}");
        }
    }
    ledger.stop().await;
}

db_test!(rotating_the_host_key_keeps_every_connector_working);
async fn rotating_the_host_key_keeps_every_connector_working(db: Db) {
    let (host, ledger, key_file) = sealed_host(db).await;
    set_both(&host).await;
    both_connectors_work(&host, &ledger, "before").await;
    let before = fingerprints(&host, &key_file);
    let old_keys = host.dir.path().join("old.key");
    std::fs::copy(&key_file, &old_keys).unwrap();

    let (ok, out) = paddock_keyed(&host, &["connector", "secret", "rotate-key"], &key_file);
    assert!(ok, "{out}");
    assert!(out.contains("2 secret(s) re-sealed"), "{out}");
    // The file holds the new key alone; the old one opens nothing now.
    let keys = std::fs::read_to_string(&key_file).unwrap();
    assert_eq!(keys.lines().count(), 1);
    assert_ne!(keys, std::fs::read_to_string(&old_keys).unwrap());
    let (ok, out) = paddock_keyed(&host, &["connector", "list"], &old_keys);
    assert!(!ok && out.contains("does not hold host key"), "{out}");

    // This host, which read the old key before, and a new process both
    // reach the downstream with the credentials.
    both_connectors_work(&host, &ledger, "after").await;
    let after = fingerprints(&host, &key_file);
    assert!(
        before.iter().all(|p| !after.contains(p)),
        "{before:?} {after:?}"
    );
    let audit = serde_json::to_string(&host.store.audit_list().await.unwrap()).unwrap();
    assert!(audit.contains("connector.secret.rotate-key"), "{audit}");
    assert!(!audit.contains(FIRST) && !audit.contains(SECOND));
    ledger.stop().await;
}

db_test!(a_host_without_the_key_refuses_to_start_when_secrets_are_sealed);
async fn a_host_without_the_key_refuses_to_start_when_secrets_are_sealed(db: Db) {
    let (host, ledger, key_file) = sealed_host(db).await;
    set_both(&host).await;
    let missing = host.dir.path().join("nowhere.key");
    let (ok, out) = paddock_keyed(&host, &["status"], &missing);
    assert!(!ok, "{out}");
    assert_eq!(out.trim().lines().count(), 1, "{out}");
    assert!(
        out.contains(SECRET_KEY_FILE_VAR)
            && out.contains("nowhere.key")
            && out.contains("does not exist"),
        "{out}"
    );
    // Another host's key is no better.
    let other = host.dir.path().join("other.key");
    std::fs::write(&other, format!("k0 {}\n", "ab".repeat(32))).unwrap();
    let (ok, out) = paddock_keyed(&host, &["serve"], &other);
    assert!(!ok && out.contains("does not hold host key"), "{out}");
    assert!(!out.contains(&"ab".repeat(32)), "{out}");
    // In-process the same.
    let refused = host
        .store
        .clone()
        .with_secret_key(SecretKeyConfig {
            key_file: Some(missing),
        })
        .await
        .err()
        .expect("refused without the key");
    assert!(refused.to_string().contains(SECRET_KEY_FILE_VAR));
    // With it, it starts.
    let (ok, out) = paddock_keyed(&host, &["connector", "list"], &key_file);
    assert!(ok, "{out}");
    ledger.stop().await;
}

db_test!(a_plain_text_secret_from_before_is_sealed_on_first_start);
async fn a_plain_text_secret_from_before_is_sealed_on_first_start(db: Db) {
    let (host, ledger, key_file) = sealed_host(db).await;
    // As a host before sealing stored it: the value as is, an unkeyed
    // fingerprint, no host key.
    let old_print = format!(
        "sha256:{}",
        &hex::encode(Sha256::digest(format!("Bearer {FIRST}").as_bytes()))[..12]
    );
    sqlx::query(host.store.sql(
        "INSERT INTO connector_secrets (connector, header, value, fingerprint, set_by, set_at) \
         VALUES ('ledger', 'authorization', ?, ?, 'admin', 0)",
    ))
    .bind(format!("Bearer {FIRST}"))
    .bind(&old_print)
    .execute(host.store.pool())
    .await
    .unwrap();

    let row = || async {
        let row: (String, String, Option<String>) = sqlx::query_as(
            "SELECT value, fingerprint, key_id FROM connector_secrets WHERE connector = 'ledger'",
        )
        .fetch_one(host.store.pool())
        .await
        .unwrap();
        row
    };
    // The first start seals it, once: a second start changes nothing.
    let (ok, out) = paddock_keyed(&host, &["connector", "secret", "list"], &key_file);
    assert!(ok, "{out}");
    assert!(!out.contains(&old_print) && out.contains("hmac:"), "{out}");
    let sealed = row().await;
    assert!(!sealed.0.contains(FIRST), "still plain text");
    assert!(
        sealed.1.starts_with("hmac:") && sealed.2.is_some(),
        "{sealed:?}"
    );
    let (ok, out) = paddock_keyed(&host, &["connector", "secret", "list"], &key_file);
    assert!(ok, "{out}");
    assert_eq!(row().await, sealed);
    let audit = serde_json::to_string(&host.store.audit_list().await.unwrap()).unwrap();
    assert_eq!(audit.matches("connector.secret.seal").count(), 1, "{audit}");
    let copy = database_copy(&host);
    assert!(copy.contains(&sealed.1), "the row is not in the copy");
    assert!(
        !copy.contains(FIRST) && !copy.contains(&old_print),
        "the plain text is left in a copy"
    );

    ledger
        .require("authorization", &format!("Bearer {FIRST}"))
        .await;
    let t = host
        .run_one("pay", effect("ledger", "R-1", "reserve", "R-1", 1))
        .await;
    assert_eq!(t.state, "succeeded", "{:?}", t.error_message);
    ledger.stop().await;
}

db_test!(the_same_secret_has_different_fingerprints_under_two_host_keys);
async fn the_same_secret_has_different_fingerprints_under_two_host_keys(db: Db) {
    let mut prints = Vec::new();
    for _ in 0..2 {
        let (host, ledger, _) = sealed_host(db).await;
        let secret = ConnectorSecret::bearer(FIRST).unwrap();
        let set = host
            .store
            .connector_secret_set("ledger", Some(&secret), "admin")
            .await
            .unwrap()
            .unwrap();
        let listed = host.store.connector_secrets().await.unwrap();
        assert_eq!(listed[0].fingerprint, set);
        // Stable under one key.
        host.store
            .connector_secret_set("ledger", Some(&secret), "admin")
            .await
            .unwrap();
        assert_eq!(
            host.store.connector_secrets().await.unwrap()[0].fingerprint,
            set
        );
        prints.push(set);
        ledger.stop().await;
    }
    assert_ne!(prints[0], prints[1]);
}
