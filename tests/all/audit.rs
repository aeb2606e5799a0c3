//! The audit chain (issue 19, item 5): keyed with a key outside the
//! database and anchored in a file the database cannot rewrite, so that
//! `audit verify` names the first bad entry after each kind of tampering
//! by someone who holds the database — an edit, a deletion, a forged
//! append, a truncated tail, a chain rewritten whole. The attacker here
//! drops the append-only triggers and writes SQL; they know the hash
//! algorithm (`entry_hash` is public) but not the key.
//!
//! Also: every manual action is in the chain with its actor, no secret is,
//! and `audit export --since` writes JSON lines.

use crate::secrets::paddock;
use crate::{Db, TestHost};
use paddock::model::audit::{Anchor, AuditEntry, ChainBreak, Verified, entry_hash, entry_mac};
use paddock::store::prelude::*;
use paddock::store::{AuditConfig, Dialect, NewTrigger, Store};
use serde_json::json;

/// A chain of `n` entries written with its own key and anchor file, each
/// anchored as the CLI does after a command.
struct Chain {
    host: TestHost,
    store: Store,
    config: AuditConfig,
}

async fn chain(db: Db, n: i64) -> Chain {
    let host = TestHost::new(db).await;
    let config = AuditConfig {
        key_file: Some(host.dir.path().join("keys/audit.key")),
        anchor_file: Some(host.dir.path().join("audit.anchor")),
    };
    let store = host.store.clone().with_audit(config.clone());
    let c = Chain {
        host,
        store,
        config,
    };
    c.append(n).await;
    c
}

impl Chain {
    async fn append(&self, n: i64) {
        for _ in 0..n {
            let seq = self.entries().await.len() + 1;
            self.store
                .audit_record(
                    "ops",
                    "test.step",
                    &format!("step-{seq}"),
                    json!({ "n": seq }),
                )
                .await
                .unwrap();
            assert!(self.store.audit_anchor().await.unwrap().is_ok());
        }
    }

    async fn entries(&self) -> Vec<AuditEntry> {
        self.store.audit_list().await.unwrap()
    }

    async fn verify(&self) -> Result<Verified, ChainBreak> {
        self.store.audit_verify().await.unwrap().result
    }

    /// What an attacker with the database does first.
    async fn drop_guards(&self) {
        let statements: &[&'static str] = match self.store.dialect() {
            Dialect::Sqlite => &[
                "DROP TRIGGER audit_log_no_update",
                "DROP TRIGGER audit_log_no_delete",
            ],
            Dialect::Postgres => &[
                "DROP TRIGGER audit_log_no_update ON audit_log",
                "DROP TRIGGER audit_log_no_delete ON audit_log",
                "DROP TRIGGER audit_log_no_truncate ON audit_log",
            ],
        };
        for sql in statements {
            sqlx::query(*sql).execute(self.store.pool()).await.unwrap();
        }
    }

    async fn exec(&self, sql: &'static str, seq: i64) {
        sqlx::query(self.store.sql(sql))
            .bind(seq)
            .execute(self.store.pool())
            .await
            .unwrap();
    }

    /// Replace the whole table with `entries`, as stored.
    async fn replace(&self, entries: &[AuditEntry]) {
        self.exec("DELETE FROM audit_log WHERE seq >= ?", 0).await;
        for e in entries {
            self.insert(e).await;
        }
    }

    async fn insert(&self, e: &AuditEntry) {
        sqlx::query(self.store.sql(
            "INSERT INTO audit_log (seq, at, actor, action, subject, detail, prev_hash, \
             hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(e.seq)
        .bind(e.at)
        .bind(&e.actor)
        .bind(&e.action)
        .bind(&e.subject)
        .bind(&e.detail)
        .bind(&e.prev_hash)
        .bind(&e.hash)
        .bind(e.mac.clone())
        .execute(self.store.pool())
        .await
        .unwrap();
    }
}

/// What the attacker can do to MACs: keep the stored ones, drop them, or
/// make their own with a key of their own.
#[derive(Clone, Copy)]
enum Macs {
    Keep,
    Drop,
    Forge,
}

/// Renumber from 1 and recompute every hash, as someone without the key.
fn rechain(entries: &mut [AuditEntry], macs: Macs) {
    let mut prev = paddock::model::audit::GENESIS.to_string();
    for (i, e) in entries.iter_mut().enumerate() {
        e.seq = i as i64 + 1;
        e.prev_hash = prev.clone();
        e.hash = entry_hash(
            &e.prev_hash,
            e.seq,
            e.at,
            &e.actor,
            &e.action,
            &e.subject,
            &e.detail,
        );
        e.mac = match macs {
            Macs::Keep => e.mac.take(),
            Macs::Drop => None,
            Macs::Forge => Some(entry_mac(b"the attacker's own key", &e.hash)),
        };
        prev = e.hash.clone();
    }
}

db_test!(an_untouched_chain_verifies_keyed_from_its_first_entry_and_anchored_to_its_last);
async fn an_untouched_chain_verifies_keyed_from_its_first_entry_and_anchored_to_its_last(db: Db) {
    let c = chain(db, 5).await;
    let v = c.verify().await.unwrap();
    assert_eq!(
        (v.entries, v.keyed_from, v.anchors_matched, v.anchored_to),
        (5, Some(1), 5, Some(5))
    );
    assert!(c.entries().await.iter().all(|e| e.mac.is_some()));
    // The key file is private and the anchor file holds one line per head.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = c.config.key_file.as_ref().unwrap();
        let mode = std::fs::metadata(key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let anchors = c.store.audit_anchors().unwrap();
    assert_eq!(
        anchors.iter().map(|a| a.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
}

db_test!(an_edited_entry_is_named_even_when_every_hash_after_it_is_recomputed);
async fn an_edited_entry_is_named_even_when_every_hash_after_it_is_recomputed(db: Db) {
    let c = chain(db, 5).await;
    c.drop_guards().await;
    c.exec("UPDATE audit_log SET actor = 'mallory' WHERE seq = ?", 3)
        .await;
    assert_eq!(c.verify().await, Err(ChainBreak::BadHash { seq: 3 }));
    let mut entries = c.entries().await;
    rechain(&mut entries, Macs::Keep);
    c.replace(&entries).await;
    assert_eq!(
        paddock::model::audit::verify_chain(&entries),
        Ok(5),
        "the hash chain alone is fooled"
    );
    assert_eq!(c.verify().await, Err(ChainBreak::BadMac { seq: 3 }));
}

db_test!(a_deleted_entry_is_named_even_when_the_rest_are_renumbered);
async fn a_deleted_entry_is_named_even_when_the_rest_are_renumbered(db: Db) {
    let c = chain(db, 5).await;
    c.drop_guards().await;
    c.exec("DELETE FROM audit_log WHERE seq = ?", 3).await;
    assert_eq!(
        c.verify().await,
        Err(ChainBreak::Gap {
            seq: 4,
            previous: 2
        })
    );
    let mut entries = c.entries().await;
    rechain(&mut entries, Macs::Keep);
    c.replace(&entries).await;
    assert_eq!(c.verify().await, Err(ChainBreak::BadMac { seq: 3 }));
}

db_test!(an_entry_appended_without_the_key_is_named_as_forged);
async fn an_entry_appended_without_the_key_is_named_as_forged(db: Db) {
    let c = chain(db, 5).await;
    c.drop_guards().await;
    for (macs, expected) in [
        (Macs::Drop, ChainBreak::Unkeyed { seq: 6, keyed: 1 }),
        (Macs::Forge, ChainBreak::BadMac { seq: 6 }),
    ] {
        // A well-formed sixth entry, chained to the fifth.
        let mut entries = c.entries().await;
        let mut forged = entries[4].clone();
        forged.actor = "mallory".into();
        entries.push(forged);
        rechain(&mut entries, macs);
        c.insert(&entries[5]).await;
        assert_eq!(c.verify().await, Err(expected));
        // Anchoring refuses to vouch for it.
        assert_eq!(c.store.audit_anchor().await.unwrap(), Err(expected));
        c.exec("DELETE FROM audit_log WHERE seq = ?", 6).await;
    }
}

db_test!(a_truncated_tail_is_named_by_the_anchor_file);
async fn a_truncated_tail_is_named_by_the_anchor_file(db: Db) {
    let c = chain(db, 5).await;
    c.drop_guards().await;
    c.exec("DELETE FROM audit_log WHERE seq >= ?", 4).await;
    assert_eq!(
        c.verify().await,
        Err(ChainBreak::Truncated {
            first_missing: 4,
            last: 3,
            anchored: 5
        })
    );
    // MACs alone cannot see it: the same database without the anchor file.
    let unanchored = c.store.clone().with_audit(AuditConfig {
        anchor_file: None,
        ..c.config.clone()
    });
    assert!(unanchored.audit_verify().await.unwrap().result.is_ok());
}

db_test!(a_chain_rewritten_whole_is_named_at_its_first_entry);
async fn a_chain_rewritten_whole_is_named_at_its_first_entry(db: Db) {
    let c = chain(db, 5).await;
    c.drop_guards().await;
    let mut entries = c.entries().await;
    entries[0].subject = "nothing happened".into();
    for (macs, expected) in [
        // Passed off as a chain from before keying: the anchors disagree.
        (Macs::Drop, ChainBreak::Rewritten { seq: 1 }),
        (Macs::Forge, ChainBreak::BadMac { seq: 1 }),
    ] {
        rechain(&mut entries, macs);
        c.replace(&entries).await;
        assert_eq!(c.verify().await, Err(expected));
    }
    // Even emptied: the anchored entries are missing from the first.
    c.replace(&[]).await;
    assert_eq!(c.verify().await.unwrap_err().seq(), 1);
}

db_test!(anchoring_checks_the_tail_since_the_last_anchor_and_writes_nothing_when_it_breaks);
async fn anchoring_checks_the_tail_since_the_last_anchor_and_writes_nothing_when_it_breaks(db: Db) {
    let c = chain(db, 3).await;
    // Two entries written by a process that did not anchor them.
    for n in 0..2 {
        c.store
            .audit_record("ops", "test.unanchored", "x", json!({ "n": n }))
            .await
            .unwrap();
    }
    c.drop_guards().await;
    c.exec("UPDATE audit_log SET detail = '{}' WHERE seq = ?", 5)
        .await;
    let before = c.store.audit_anchors().unwrap();
    assert_eq!(
        c.store.audit_anchor().await.unwrap(),
        Err(ChainBreak::BadHash { seq: 5 })
    );
    assert_eq!(c.store.audit_anchors().unwrap(), before);
    assert_eq!(before.last().map(|a: &Anchor| a.seq), Some(3));
}

db_test!(entries_written_before_keying_verify_as_the_hash_chain_and_none_may_follow_a_keyed_one);
async fn entries_written_before_keying_verify_as_the_hash_chain_and_none_may_follow_a_keyed_one(
    db: Db,
) {
    let c = chain(db, 0).await;
    let unkeyed = c.store.clone().with_audit(AuditConfig {
        key_file: None,
        ..c.config.clone()
    });
    for n in 0..2 {
        unkeyed
            .audit_record("ops", "test.old", "x", json!({ "n": n }))
            .await
            .unwrap();
    }
    c.append(2).await;
    let v = c.verify().await.unwrap();
    assert_eq!((v.entries, v.keyed_from), (4, Some(3)));
    unkeyed
        .audit_record("mallory", "test.late", "x", json!({}))
        .await
        .unwrap();
    assert_eq!(
        c.verify().await,
        Err(ChainBreak::Unkeyed { seq: 5, keyed: 3 })
    );
}

/// The audit files of a CLI run: the chain's own key and anchor file.
fn audit_env(c: &Chain) -> Vec<(&'static str, String)> {
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().unwrap().display().to_string();
    vec![
        ("PADDOCK_AUDIT_KEY_FILE", path(&c.config.key_file)),
        ("PADDOCK_AUDIT_ANCHOR_FILE", path(&c.config.anchor_file)),
        ("PADDOCK_ACTOR", "alice".into()),
    ]
}

fn cli(c: &Chain, args: &[&str], extra: &[(&str, &str)]) -> (bool, String) {
    let env = audit_env(c);
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    paddock(&c.host, args, &all)
}

const SECRET: &str = "tok-9f3c-never-audited";

db_test!(every_manual_action_is_in_the_chain_with_its_actor_and_no_secret);
async fn every_manual_action_is_in_the_chain_with_its_actor_and_no_secret(db: Db) {
    let c = chain(db, 0).await;
    let manifest = c.host.dir.path().join("hello.toml");
    std::fs::write(
        &manifest,
        format!(
            "id = \"hello\"\ntenant = \"t1\"\ncomponent = \"{}\"\n",
            crate::guest("hello").display()
        ),
    )
    .unwrap();
    let manifest = manifest.display().to_string();
    let runs = [
        vec!["job", "apply", manifest.as_str()],
        vec!["group", "set", "batch", "--concurrency", "2"],
        vec!["group", "grant", "batch", "clocks"],
        vec!["tenant", "set", "t1", "--weight", "2"],
        vec![
            "connector",
            "set",
            "ledger",
            "--base-url",
            "http://127.0.0.1:9/",
        ],
        vec![
            "connector",
            "secret",
            "set",
            "ledger",
            "--from-env",
            "TOKEN",
        ],
        vec!["connector", "secret", "clear", "ledger"],
        vec!["trigger", "run", "hello", "--param", "password=hunter2"],
        vec!["effects", "recover"],
    ];
    for args in &runs {
        let (ok, out) = cli(&c, args, &[("TOKEN", SECRET)]);
        assert!(ok, "{args:?}: {out}");
    }
    let running = c
        .store
        .trigger_create(&NewTrigger::manual("hello", json!({}), None).by("bob"))
        .await
        .unwrap()
        .0;
    let (ok, out) = cli(
        &c,
        &[
            "trigger",
            "cancel",
            &running.id.to_string(),
            "--reason",
            "wrong day",
        ],
        &[],
    );
    assert!(ok, "{out}");
    assert_eq!(
        c.store.trigger_get(running.id).await.unwrap().state,
        "cancelled"
    );

    let entries = c.entries().await;
    let by = |action: &str| -> Vec<&AuditEntry> {
        entries.iter().filter(|e| e.action == action).collect()
    };
    for action in [
        "component.push",
        "plan.created",
        "group.put",
        "tenant.put",
        "connector.put",
        "connector.secret.set",
        "connector.secret.clear",
        "trigger.run",
        "effects.recover",
        "trigger.cancel",
    ] {
        assert!(
            by(action)
                .iter()
                .any(|e| e.actor == crate::two_person::os_actor()
                    && e.detail.contains(r#""actor_note":"alice""#)),
            "{action} by alice is missing: {entries:#?}"
        );
    }
    let run = by("trigger.run");
    assert!(
        run.iter()
            .any(|e| e.actor == "bob" && e.subject == running.id.to_string())
    );
    let cancel = by("trigger.cancel")[0];
    assert_eq!(cancel.subject, running.id.to_string());
    assert!(cancel.detail.contains("wrong day") && cancel.detail.contains("cancelled"));
    for e in &entries {
        assert!(!e.detail.contains(SECRET), "a secret in the chain: {e:?}");
        assert!(!e.detail.contains("hunter2"), "params in the chain: {e:?}");
    }
    // Each command anchored what it wrote; the chain verifies from the CLI.
    let (ok, out) = cli(&c, &["audit", "verify"], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("keyed: every entry's MAC checked"), "{out}");
    let anchored = c.store.audit_anchors().unwrap();
    assert!(anchored.len() >= runs.len(), "{anchored:?}");
}

db_test!(audit_verify_exits_nonzero_naming_the_first_bad_entry_and_export_writes_json_lines);
async fn audit_verify_exits_nonzero_naming_the_first_bad_entry_and_export_writes_json_lines(
    db: Db,
) {
    let c = chain(db, 4).await;
    let (ok, out) = cli(&c, &["audit", "export", "--since", "1h"], &[]);
    assert!(ok, "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[3]["seq"], 4);
    assert_eq!(lines[3]["detail"]["n"], 4);
    assert_eq!(lines[3]["actor"], "ops");
    let (ok, out) = cli(
        &c,
        &["audit", "export", "--since", "2999-01-01T00:00:00Z"],
        &[],
    );
    assert!(ok && out.is_empty(), "{out}");
    let (ok, out) = cli(&c, &["audit", "export", "--since", "yesterday"], &[]);
    assert!(!ok);
    assert!(
        out.contains("--since: 'yesterday' is neither an RFC 3339 instant nor a duration"),
        "{out}"
    );

    c.drop_guards().await;
    c.exec("DELETE FROM audit_log WHERE seq >= ?", 3).await;
    let (ok, out) = cli(&c, &["audit", "verify"], &[]);
    assert!(!ok, "{out}");
    assert!(out.contains("audit entry 3: missing"), "{out}");
    assert!(out.contains("first bad entry: 3"), "{out}");
    // Export still writes what is there, and says the chain is broken.
    let (ok, out) = cli(&c, &["audit", "export", "--since", "1h"], &[]);
    assert!(!ok);
    assert_eq!(out.lines().filter(|l| l.starts_with('{')).count(), 2);
    assert!(out.contains("audit log BROKEN: audit entry 3"), "{out}");
}
