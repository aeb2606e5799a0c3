//! Identities that cannot be typed: the local command line acts as the
//! operating-system account it runs as (`local:USER`), `--actor` is only a
//! note beside it, and a high-risk approval — a ticket's `mark_succeeded`
//! or `resend`, resuming the global pause — takes two different
//! authenticated people: two tokens of two persons, never one token twice,
//! never two tokens of one person (`alice`, `alice.laptop`), and never the
//! local command line unless an install allows it
//! (`PADDOCK_LOCAL_APPROVALS=allow`). The rule itself is
//! `model::tickets` and `model::identity` (unit tests).

use crate::{Db, TestHost};
use paddock::api::{ApiServer, ApiState};
use paddock::model::gates::GateScope;
use paddock::model::identity::Role;
use paddock::store::prelude::*;
use paddock::store::{NewException, NewToken};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The account this test process (and the `paddock` it starts) runs as,
/// from `id -un`: an oracle apart from the host's own lookup.
pub(crate) fn os_user() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("run id -un");
    assert!(out.status.success(), "id -un failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// How the audit log names this process's command line: `local:USER`.
pub(crate) fn os_actor() -> String {
    format!("local:{}", os_user())
}

/// A test store, the API serving it, and operator-and-admin tokens for
/// three names of two persons: `alice`, `alice.laptop` (both alice) and
/// `bob`.
struct Two {
    host: TestHost,
    _server: ApiServer,
    base: String,
    tokens: HashMap<&'static str, String>,
}

async fn start(db: Db) -> Two {
    let host = TestHost::new(db).await;
    let mut tokens = HashMap::new();
    for name in ["alice", "alice.laptop", "bob"] {
        let issued = host
            .store
            .token_create(
                &NewToken {
                    name: name.into(),
                    role: Role::Admin,
                    tenant: None,
                    valid_for_ms: 3_600_000,
                },
                "local:test",
            )
            .await
            .unwrap();
        tokens.insert(name, issued.text);
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
    Two {
        host,
        _server: server,
        base,
        tokens,
    }
}

impl Two {
    /// `POST path` with `who`'s token and `{"reason": reason}` plus
    /// `extra`: the status and the answer.
    async fn post(&self, who: &str, path: &str, body: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.tokens[who])
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The real `paddock` binary, on the database (`server: None`) or
    /// through the API with `who`'s token; whether it succeeded, and its
    /// output. Run without blocking the runtime the API serves on, and
    /// without the approval setting unless `env` gives it.
    async fn paddock(
        &self,
        server: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (bool, String) {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"));
        command
            .env_remove("PADDOCK_LOCAL_APPROVALS")
            .env_remove("PADDOCK_ACTOR")
            .env_remove("PADDOCK_SERVER")
            .env_remove("PADDOCK_TOKEN")
            .env_remove("PADDOCK_LOG")
            .envs(env.iter().copied());
        match server {
            Some(who) => command.args(["--server", &self.base, "--token", &self.tokens[who]]),
            None => command.args(["--database-url", &self.host.url]),
        };
        let out = command.args(args).output().await.expect("run paddock");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// An open `unknown_outcome` ticket on an effect left `unknown`.
    async fn ticket(&self, key: &str) -> i64 {
        let host = &self.host;
        if host
            .store
            .plan_versions(crate::TENANT, "pay")
            .await
            .unwrap()
            .is_empty()
        {
            host.job("pay", "noop", "").await;
        }
        let trigger = host.trigger("pay", json!({})).await.id;
        sqlx::query(host.store.sql(
            "INSERT INTO effects (tenant, idempotency_key, downstream_key, trigger_id, connector, \
             action, params_digest, request_id, fencing_token, state, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'ledger', 'RES-1/charge', 'd', 'r', 1, 'unknown', 0, 0)",
        ))
        .bind(crate::TENANT)
        .bind(key)
        .bind(crate::sent_key(key))
        .bind(trigger)
        .execute(host.store.pool())
        .await
        .unwrap();
        let (ticket, _) = host
            .store
            .exception_open(&NewException {
                kind: "unknown_outcome",
                subject: key.into(),
                trigger_id: Some(trigger),
                effect_key: Some(key.into()),
                evidence: json!({}),
                allowed_actions: vec!["mark_succeeded", "mark_failed"],
            })
            .await
            .unwrap();
        ticket.id
    }

    async fn effect_state(&self, key: &str) -> String {
        self.host
            .store
            .effect_get(crate::TENANT, key)
            .await
            .unwrap()
            .unwrap()
            .state
            .to_string()
    }

    /// The audit entries about `subject`: actor, action, detail.
    async fn audited(&self, subject: &str) -> Vec<(String, String, Value)> {
        self.host
            .store
            .audit_list()
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.subject == subject)
            .map(|e| (e.actor, e.action, serde_json::from_str(&e.detail).unwrap()))
            .collect()
    }
}

db_test!(
    a_tickets_high_risk_action_runs_only_on_a_second_persons_token,
    workers = 2
);
async fn a_tickets_high_risk_action_runs_only_on_a_second_persons_token(db: Db) {
    let two = start(db).await;
    let id = two.ticket("order-1/charge").await;
    let (status, proposed) = two
        .post(
            "alice",
            &format!("/v1/tickets/{id}/resolve"),
            json!({"action": "mark_succeeded", "reason": "the ledger shows it"}),
        )
        .await;
    assert_eq!(status, 200, "{proposed}");
    assert_eq!(proposed["proposed_by"], "token:alice");

    // The command line cannot be the second person, whatever --actor says
    // (or without it); the refusal names the token route.
    let approve = ["exceptions", "approve", &id.to_string(), "--reason", "ok"];
    let route = format!("paddock --server URL --token T exceptions approve {id}");
    for note in [None, Some("bob"), Some("token:bob")] {
        let mut args = Vec::new();
        if let Some(note) = note {
            args.extend(["--actor", note]);
        }
        args.extend(approve);
        let (ok, out) = two.paddock(None, &args, &[]).await;
        assert!(!ok, "{note:?}: {out}");
        assert!(out.contains(&route), "{note:?}: {out}");
        assert!(out.contains("PADDOCK_LOCAL_APPROVALS=allow"), "{out}");
    }
    // Nor can alice, by her token twice or by her other token.
    for who in ["alice", "alice.laptop"] {
        let (status, refused) = two
            .post(
                who,
                &format!("/v1/tickets/{id}/approve"),
                json!({"reason": "me again"}),
            )
            .await;
        assert_eq!(status, 409, "{who}: {refused}");
        assert!(refused.to_string().contains("two-person rule"), "{refused}");
    }
    assert_eq!(two.effect_state("order-1/charge").await, "unknown");
    let open = two.host.store.exception_get(id).await.unwrap();
    assert_eq!(
        (open.state.as_str(), open.proposed_by.as_deref()),
        ("open", Some("token:alice"))
    );

    // Bob's token, through the route the refusal named: it runs.
    let (ok, out) = two
        .paddock(
            Some("bob"),
            &[
                "exceptions",
                "approve",
                &id.to_string(),
                "--reason",
                "checked the console",
            ],
            &[],
        )
        .await;
    assert!(ok, "{out}");
    assert!(
        out.contains("resolved: mark_succeeded by token:bob"),
        "{out}"
    );
    assert_eq!(two.effect_state("order-1/charge").await, "succeeded");

    // The audit log holds both people, each with their reason, and no
    // entry by the refused attempts.
    let steps = two.audited(&format!("exception:{id}")).await;
    let actions: Vec<(&str, &str)> = steps
        .iter()
        .map(|(actor, action, _)| (actor.as_str(), action.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("paddock", "exception.open"),
            ("token:alice", "exception.propose"),
            ("token:bob", "exception.approve"),
        ]
    );
    assert_eq!(steps[1].2["reason"], "the ledger shows it");
    let approval = &steps[2].2;
    assert_eq!(approval["reason"], "checked the console");
    assert_eq!(approval["proposed_by"], "token:alice");
    assert_eq!(approval["proposed_reason"], "the ledger shows it");
    assert!(approval.get("local_approval").is_none(), "{approval}");
}

db_test!(
    the_command_line_acts_as_its_account_and_actor_is_only_a_note,
    workers = 2
);
async fn the_command_line_acts_as_its_account_and_actor_is_only_a_note(db: Db) {
    let two = start(db).await;
    let me = os_actor();
    two.host.job("in", "noop", "").await;
    let (ok, out) = two
        .paddock(
            None,
            &[
                "--actor", "bob", "pause", "--job", "in", "--reason", "freeze",
            ],
            &[],
        )
        .await;
    assert!(ok, "{out}");
    let (ok, out) = two
        .paddock(
            None,
            &[
                "--actor",
                "token:alice",
                "resume",
                "--job",
                "in",
                "--reason",
                "thaw",
            ],
            &[],
        )
        .await;
    assert!(ok, "{out}");
    let gate = two.host.store.gates_list(true).await.unwrap().remove(0);
    assert_eq!(gate.closed_by, format!("{me} (note: bob)"));
    assert_eq!(
        gate.reopened_by.as_deref(),
        Some(format!("{me} (note: token:alice)").as_str())
    );
    let steps = two.audited("job:t1/in").await;
    let seen: Vec<(&str, &str, &Value)> = steps
        .iter()
        .map(|(actor, action, detail)| (actor.as_str(), action.as_str(), &detail["actor_note"]))
        .collect();
    assert_eq!(
        seen,
        [
            (me.as_str(), "gate.pause", &json!("bob")),
            (me.as_str(), "gate.resume", &json!("token:alice")),
        ]
    );

    // A proposal made here is the account's; its own approval is refused
    // under any note, and an install that allows local approvals records
    // that it did.
    let id = two.ticket("order-2/charge").await;
    let id_text = id.to_string();
    let resolve = [
        "--actor",
        "alice",
        "exceptions",
        "resolve",
        &id_text,
        "--action",
        "mark_succeeded",
        "--reason",
        "seen",
    ];
    let (ok, out) = two.paddock(None, &resolve, &[]).await;
    assert!(ok, "{out}");
    let approve = [
        "--actor",
        "bob",
        "exceptions",
        "approve",
        &id_text,
        "--reason",
        "ok",
    ];
    let (ok, out) = two.paddock(None, &approve, &[]).await;
    assert!(!ok && out.contains("token T exceptions approve"), "{out}");
    assert_eq!(two.effect_state("order-2/charge").await, "unknown");
    let (ok, out) = two
        .paddock(None, &approve, &[("PADDOCK_LOCAL_APPROVALS", "maybe")])
        .await;
    assert!(!ok && out.contains("use allow or refuse"), "{out}");
    let (ok, out) = two
        .paddock(None, &approve, &[("PADDOCK_LOCAL_APPROVALS", "allow")])
        .await;
    assert!(ok, "{out}");
    assert_eq!(two.effect_state("order-2/charge").await, "succeeded");
    let steps = two.audited(&format!("exception:{id}")).await;
    let (actor, action, detail) = steps.last().unwrap();
    assert_eq!(
        (actor.as_str(), action.as_str()),
        (me.as_str(), "exception.approve")
    );
    assert_eq!(detail["actor_note"], "bob");
    assert_eq!(detail["proposed_by"], format!("{me} (note: alice)"));
    assert!(
        detail["local_approval"]
            .as_str()
            .is_some_and(|why| why.contains("by the proposer")),
        "{detail}"
    );

    // No entry anywhere names a typed identity.
    for entry in two.host.store.audit_list().await.unwrap() {
        assert!(
            !["bob", "alice", "local:bob", "local:alice", "token:alice"]
                .contains(&entry.actor.as_str()),
            "{entry:?}"
        );
    }
}

db_test!(
    resuming_the_global_pause_takes_a_second_persons_token,
    workers = 2
);
async fn resuming_the_global_pause_takes_a_second_persons_token(db: Db) {
    let two = start(db).await;
    let me = os_actor();
    two.host.job("in", "noop", "").await;
    let held = two.host.trigger("in", json!({})).await.id;
    let state = |two: &Two| {
        let store = two.host.store.clone();
        async move { store.trigger_get(held).await.unwrap().state }
    };
    let closed = |two: &Two| {
        let store = two.host.store.clone();
        async move {
            store
                .gates_list(false)
                .await
                .unwrap()
                .iter()
                .any(|g| g.scope() == GateScope::Global)
        }
    };

    // Round one: closed and proposed on the command line, refused there
    // as the second person, reopened by a token.
    let pause = ["pause", "--global", "--reason", "incident"];
    let (ok, out) = two.paddock(None, &pause, &[]).await;
    assert!(ok, "{out}");
    assert_eq!(state(&two).await, "paused");
    let resume = ["resume", "--global", "--reason", "over"];
    let (ok, out) = two.paddock(None, &resume, &[]).await;
    assert!(ok && out.contains(&format!("proposed by {me}")), "{out}");
    assert!(closed(&two).await, "a proposal reopens nothing");
    let (ok, out) = two.paddock(None, &["gates"], &[]).await;
    assert!(
        ok && out.contains(&format!(
            "resume proposed by {me}: over (awaiting a second person)"
        )),
        "{out}"
    );
    let again = ["--actor", "bob", "resume", "--global", "--reason", "over"];
    let (ok, out) = two.paddock(None, &again, &[]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("paddock --server URL --token T resume --global"),
        "{out}"
    );
    assert!(closed(&two).await);
    assert_eq!(state(&two).await, "paused");
    let (ok, out) = two.paddock(Some("bob"), &resume, &[]).await;
    assert!(ok && out.contains("resumed global"), "{out}");
    assert!(!closed(&two).await);
    assert_eq!(state(&two).await, "pending");

    // Round two, through the API: alice proposes; her token again and her
    // other token are refused; bob's reopens.
    let (status, answer) = two
        .post(
            "alice",
            "/v1/gates/global/pause",
            json!({"reason": "deploy"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = two
        .post(
            "alice",
            "/v1/gates/global/resume",
            json!({"reason": "deployed"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (&answer["reopened"], &answer["proposed_by"]),
        (&json!(false), &json!("token:alice"))
    );
    for who in ["alice", "alice.laptop"] {
        let (status, answer) = two
            .post(who, "/v1/gates/global/resume", json!({"reason": "me"}))
            .await;
        assert_eq!(status, 409, "{who}: {answer}");
        assert!(answer.to_string().contains("two-person rule"), "{answer}");
    }
    assert!(closed(&two).await);
    assert_eq!(state(&two).await, "paused");
    let (status, answer) = two
        .post(
            "bob",
            "/v1/gates/global/resume",
            json!({"reason": "checked"}),
        )
        .await;
    assert_eq!(
        (status, &answer["reopened"]),
        (200, &json!(true)),
        "{answer}"
    );
    assert_eq!(state(&two).await, "pending");

    let steps = two.audited("global").await;
    let actions: Vec<(&str, &str)> = steps
        .iter()
        .map(|(actor, action, _)| (actor.as_str(), action.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            (me.as_str(), "gate.pause"),
            (me.as_str(), "gate.resume.propose"),
            ("token:bob", "gate.resume"),
            ("token:alice", "gate.pause"),
            ("token:alice", "gate.resume.propose"),
            ("token:bob", "gate.resume"),
        ]
    );
    let last = &steps[5].2;
    assert_eq!(
        (
            &last["reason"],
            &last["proposed_by"],
            &last["proposed_reason"]
        ),
        (&json!("checked"), &json!("token:alice"), &json!("deployed"))
    );
    assert_eq!(steps[2].2["proposed_by"], json!(me));
}
