//! API tokens (issue 18, item 1): created by an admin with one role (and a
//! team token with one tenant), kept as a hash, shown once, revocable,
//! expiring; every change audited by fingerprint under the actor, the
//! local command line labelled `local:ACTOR`. The role matrix itself is
//! `model::identity::tests::role_matrix` (unit).

use crate::secrets::paddock;
use crate::{Db, TestHost};
use paddock::model::identity::{Principal, Role, token_fingerprint};
use paddock::store::prelude::*;
use paddock::store::{AuthError, NewToken};

fn new(name: &str, role: Role, tenant: Option<&str>) -> NewToken {
    NewToken {
        name: name.into(),
        role,
        tenant: tenant.map(str::to_string),
        valid_for_ms: 3_600_000,
    }
}

async fn tokens(host: &TestHost) -> i64 {
    sqlx::query_scalar(host.store.sql("SELECT count(*) FROM api_tokens"))
        .fetch_one(host.store.pool())
        .await
        .unwrap()
}

db_test!(a_token_authenticates_as_its_role_and_tenant_until_revoked_or_expired);
async fn a_token_authenticates_as_its_role_and_tenant_until_revoked_or_expired(db: Db) {
    let host = TestHost::new(db).await;
    let store = &host.store;
    let issued = store
        .token_create(&new("acme-ci", Role::Team, Some("acme")), "local:root")
        .await
        .unwrap();
    assert_eq!(issued.fingerprint, token_fingerprint(&issued.text));
    assert_eq!(
        store.token_authenticate(&issued.text).await.unwrap(),
        Ok(Principal {
            name: "acme-ci".into(),
            role: Role::Team,
            tenant: Some("acme".into()),
        })
    );

    // Kept as a hash: the text is in no row and no audit entry.
    let stored: (String, String) =
        sqlx::query_as(store.sql("SELECT token_hash, fingerprint FROM api_tokens"))
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_ne!(stored.0, issued.text);
    assert!(!stored.0.contains(&issued.text[4..]));
    let audit = store.audit_list().await.unwrap();
    let created = audit.iter().find(|e| e.action == "token.create").unwrap();
    assert_eq!(
        (created.actor.as_str(), created.subject.as_str()),
        ("local:root", "acme-ci")
    );
    assert!(created.detail.contains(&issued.fingerprint));
    assert!(audit.iter().all(|e| !e.detail.contains(&issued.text[4..])));

    // Malformed and unknown tokens are told apart.
    assert!(matches!(
        store.token_authenticate("Bearer x").await.unwrap(),
        Err(AuthError::Malformed(_))
    ));
    let other = paddock::model::identity::new_token_text();
    assert_eq!(
        store.token_authenticate(&other).await.unwrap(),
        Err(AuthError::Unknown)
    );

    // Expired (its expiry moved into the past, as time would): refused.
    let ops = store
        .token_create(&new("ops", Role::Operator, None), "local:root")
        .await
        .unwrap();
    sqlx::query(store.sql("UPDATE api_tokens SET expires_at = 0 WHERE name = 'ops'"))
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(
        store.token_authenticate(&ops.text).await.unwrap(),
        Err(AuthError::Expired("ops".into()))
    );

    // Revoked: refused at once; a second revoke changes nothing.
    assert!(store.token_revoke("acme-ci", "local:root").await.unwrap());
    assert_eq!(
        store.token_authenticate(&issued.text).await.unwrap(),
        Err(AuthError::Revoked("acme-ci".into()))
    );
    assert!(!store.token_revoke("acme-ci", "local:root").await.unwrap());
    let revokes = store
        .audit_list()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "token.revoke")
        .count();
    assert_eq!(revokes, 1);
    let listed = store.tokens_list().await.unwrap();
    assert_eq!(listed.len(), 2);
    let acme = listed.iter().find(|t| t.name == "acme-ci").unwrap();
    assert_eq!(acme.revoked_by.as_deref(), Some("local:root"));
}

db_test!(bad_token_requests_are_refused_by_name_and_store_nothing);
async fn bad_token_requests_are_refused_by_name_and_store_nothing(db: Db) {
    let host = TestHost::new(db).await;
    let store = &host.store;
    store
        .token_create(&new("admin-1", Role::Admin, None), "local:root")
        .await
        .unwrap();
    let audit_before = host.count("audit_log").await;
    let cases = [
        (new("t1", Role::Team, None), "needs --tenant"),
        (new("t2", Role::Reviewer, Some("acme")), "team tokens only"),
        (
            new("admin-1", Role::Admin, None),
            "a token named 'admin-1' exists",
        ),
        (
            new("has space", Role::Admin, None),
            "bad token name 'has space'",
        ),
        (
            NewToken {
                valid_for_ms: 400 * 86_400_000,
                ..new("t3", Role::Admin, None)
            },
            "366 days",
        ),
    ];
    for (request, says) in cases {
        let err = store
            .token_create(&request, "local:root")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    }
    assert!(
        store
            .token_revoke("nobody", "local:root")
            .await
            .unwrap_err()
            .to_string()
            .contains("token 'nobody' not found")
    );
    assert_eq!(tokens(&host).await, 1);
    assert_eq!(host.count("audit_log").await, audit_before);
}

db_test!(the_command_line_prints_a_token_once_and_audits_as_local);
async fn the_command_line_prints_a_token_once_and_audits_as_local(db: Db) {
    let host = TestHost::new(db).await;
    let create = [
        "--actor",
        "dana",
        "token",
        "create",
        "--name",
        "reviewer-1",
        "--role",
        "reviewer",
        "--expires",
        "30d",
    ];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(&host.url)
        .args(create)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let principal = host.store.token_authenticate(&text).await.unwrap().unwrap();
    assert_eq!(
        (principal.role, principal.actor()),
        (Role::Reviewer, "token:reviewer-1".into())
    );

    let (ok, listed) = paddock(&host, &["token", "list"], &[]);
    assert!(ok, "{listed}");
    assert!(listed.contains("reviewer-1") && listed.contains(&token_fingerprint(&text)));
    assert!(!listed.contains(&text[4..]), "list never prints a token");
    let (ok, audit) = paddock(&host, &["audit", "list"], &[]);
    assert!(ok);
    assert!(
        audit.contains(&crate::two_person::os_actor()) && !audit.contains(&text[4..]),
        "{audit}"
    );

    let (ok, err) = paddock(
        &host,
        &["token", "create", "--name", "x", "--role", "root"],
        &[],
    );
    assert!(!ok);
    assert!(err.contains("--role: unknown role 'root'"), "{err}");
    let (ok, err) = paddock(
        &host,
        &[
            "token",
            "create",
            "--name",
            "x",
            "--role",
            "admin",
            "--expires",
            "soon",
        ],
        &[],
    );
    assert!(!ok);
    assert!(err.contains("--expires"), "{err}");
    let (ok, out) = paddock(&host, &["token", "revoke", "reviewer-1"], &[]);
    assert!(ok && out.contains("revoked"), "{out}");
    assert_eq!(
        host.store.token_authenticate(&text).await.unwrap(),
        Err(AuthError::Revoked("reviewer-1".into()))
    );
}
