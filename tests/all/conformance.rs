//! The store's conformance suite: every case runs against SQLite **and**
//! PostgreSQL in the same `cargo test` run, once per database, named by it
//! (`conformance::sqlite::<case>`, `conformance::postgres::<case>`).
//!
//! The cases are grouped by database rather than by `db_test!`'s
//! `<case>::sqlite`, so `cargo test conformance::postgres` runs one
//! database's whole store contract. Each case drives the store through its
//! role traits on a database of its own, made as every test's is
//! ([`crate::fresh_database_url`]: a fresh SQLite file, or a fresh schema in
//! the PostgreSQL test database); an unreachable server fails the
//! PostgreSQL cases, nothing is skipped. Rows are hand-made: a job running
//! the `noop` guest is registered, triggers are created and claimed through
//! the store, and the states a crash could leave behind are written by
//! direct SQL. No runner, no sleeps: claims and shard leases take an
//! injected `now`.
//!
//! What every database must do alike:
//! - **fencing** — every write under a trigger lease, with a current token
//!   (it writes exactly what it should), a stale token (`LeaseLost` with
//!   expected/found, nothing written but the usage its guest measured on
//!   its own attempt row, counted in `stale_token_rejections`),
//!   a finished trigger (refused; a completed trigger is never rewritten) and
//!   a missing row (`found: None`, or what the store defines);
//! - **shard fencing** — a scan commit under a stale shard generation writes
//!   no trigger, no skipped fire and no watermark;
//! - **crash recovery** — after a claim, no attempt of the claimed trigger
//!   but the new one is open, whatever an interrupted host left;
//! - **the state machine in the database** — a state outside
//!   `TriggerState::ALL` is refused by the CHECK constraint;
//! - **conservation** — after a long sequence of operations, every trigger
//!   is in exactly one state, each claim is one token and one attempt, and
//!   no trigger has two open attempts.

use paddock::model::{
    AttemptEnd, AttemptOutcome, Claim, FencingToken, LeaseRef, ReleaseReason, ShardGeneration,
    ShardLease, TriggerState, plan_key_ms,
};
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{
    AttemptRecord, ClaimRequest, EffectOutcome, EffectRecord, NewEffect, NewTrigger, ScanCommit,
    ScheduledTrigger, Store, StoreError, StoreResult, TriggerRecord,
};
use serde_json::json;
use std::fmt::Debug;
use std::future::Future;

/// Generates `sqlite::<case>` and `postgres::<case>` for every case.
macro_rules! on_every_database {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::run(crate::Db::Sqlite, super::$case).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    super::run(crate::Db::Postgres, super::$case).await;
                }
            )*
        }
    };
}

on_every_database!(
    // Claims.
    claim_takes_a_due_trigger_with_the_next_token_and_opens_one_attempt,
    claim_takes_over_a_lapsed_lease_with_the_next_token_and_expires_the_old_attempt,
    claim_leaves_a_live_lease_alone,
    claim_takes_nothing_finished_parked_or_not_yet_due,
    // Heartbeats.
    lease_renew_with_the_current_token_extends_the_lease_on_the_database_clock,
    lease_renew_with_a_stale_token_is_lease_lost,
    lease_renew_by_another_owner_is_lease_lost,
    lease_renew_of_a_finished_trigger_is_lease_lost,
    lease_renew_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    // Checkpoints.
    checkpoint_save_with_the_current_token_writes_the_next_sequence,
    checkpoint_save_with_a_stale_token_is_lease_lost,
    checkpoint_save_of_a_finished_trigger_is_lease_lost,
    checkpoint_save_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    // Effect intents.
    effect_intent_with_the_current_token_records_the_intent_under_it,
    effect_intent_for_a_recorded_key_is_a_conflict_not_a_lease_loss,
    effect_intent_with_a_stale_token_is_lease_lost,
    effect_intent_of_a_finished_trigger_is_lease_lost,
    effect_intent_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    // Effect re-intents.
    effect_reintent_with_the_current_token_takes_the_effect_over,
    effect_reintent_with_a_stale_token_is_lease_lost,
    effect_reintent_of_a_finished_trigger_is_lease_lost,
    effect_reintent_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    effect_reintent_of_an_intent_left_by_a_gone_attempt_marks_it_unknown,
    effect_reintent_after_a_transient_answer_does_not_mark_it_unknown,
    // Effect outcomes.
    effect_settle_with_the_current_token_records_the_outcome,
    effect_settle_with_a_stale_token_is_lease_lost,
    effect_settle_of_a_finished_trigger_is_lease_lost,
    effect_settle_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    effect_settle_of_a_missing_effect_is_a_conflict_not_a_lease_loss,
    // Releases.
    attempt_release_with_the_current_token_puts_the_trigger_back_to_pending,
    attempt_release_with_a_stale_token_is_lease_lost,
    attempt_release_of_a_finished_trigger_is_lease_lost,
    attempt_release_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    // Abandons.
    attempt_abandon_with_the_current_token_closes_only_the_attempt,
    attempt_abandon_with_a_stale_token_closes_nothing_and_records_its_usage,
    attempt_abandon_of_a_finished_trigger_closes_nothing,
    attempt_abandon_of_a_missing_attempt_closes_nothing,
    // Finishes.
    attempt_finish_with_the_current_token_commits_the_end,
    attempt_finish_into_retry_wait_makes_the_trigger_due_again,
    finish_and_release_answer_paused_for_a_trigger_a_gate_asked_to_pause,
    attempt_finish_with_a_stale_token_is_lease_lost,
    attempt_finish_of_a_finished_trigger_is_lease_lost_and_rewrites_nothing,
    attempt_finish_of_a_missing_trigger_is_lease_lost_with_nothing_found,
    attempt_finish_into_a_state_finish_cannot_reach_is_refused,
    attempt_finish_batch_commits_the_current_ends_and_refuses_the_stale_ones,
    attempt_finish_batch_with_a_current_and_a_stale_end_of_one_trigger_refuses_the_stale_one,
    // Cancels.
    trigger_request_cancel_cancels_a_trigger_that_has_not_started,
    trigger_request_cancel_asks_a_running_trigger_to_stop,
    trigger_request_cancel_survives_a_takeover_and_the_stale_holder_stays_fenced,
    trigger_request_cancel_of_a_finished_trigger_is_false_and_rewrites_nothing,
    trigger_request_cancel_of_a_missing_trigger_is_false,
    // Shard fencing.
    scan_commit_under_the_current_generation_writes_triggers_skipped_fires_and_the_watermark,
    scan_commit_again_is_absorbed_by_the_plan_key_and_never_moves_the_watermark_back,
    scan_commit_under_a_stale_generation_writes_nothing_and_is_shard_lost,
    scan_commit_after_the_shard_was_released_is_shard_lost,
    scan_commit_on_a_missing_shard_is_shard_lost_with_nothing_found,
    // Crash states.
    claim_after_a_crash_closes_the_open_attempt_of_a_lapsed_running_trigger,
    claim_after_a_crash_closes_the_open_attempt_of_a_pending_trigger,
    claim_after_a_crash_closes_the_open_attempt_of_a_due_retry,
    claim_after_a_crash_closes_every_open_attempt_of_a_trigger,
    claim_after_a_crash_closes_the_open_attempts_of_every_trigger_in_its_batch,
    // The state machine in the database.
    the_database_accepts_every_state_of_the_state_machine,
    the_database_refuses_a_trigger_state_outside_the_state_machine,
    the_database_holds_an_effect_to_the_effect_state_machine,
    // Conservation.
    conservation_holds_after_a_sequence_of_operations,
);

// ---------------------------------------------------------------- harness --

/// Runs one case on a fresh database; a PostgreSQL schema is dropped after
/// a case that passed (one that failed keeps it, to be looked at).
async fn run<F, Fut>(db: crate::Db, case: F)
where
    F: FnOnce(Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let fixture = Fixture::open(db).await;
    let schema = fixture.schema();
    case(fixture).await;
    if let Some(schema) = schema {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&crate::postgres_base_url())
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

/// The lease every claim takes unless a case says otherwise (ms).
const LEASE: i64 = 60_000;
/// A trigger id no row has.
const MISSING: i64 = 987_654_321;
/// The job every case uses (the `noop` guest, plan version 1).
const JOB: &str = "j";

/// What a refused write must find: the trigger's token and state now, or
/// `None` when there is no such trigger.
type Found = Option<(i64, TriggerState)>;

/// One case's database.
struct Fixture {
    store: Store,
    /// The database's clock when the case began; claims and shard leases
    /// inject instants counted from it.
    t0: i64,
    url: String,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// A fresh, migrated database with job [`JOB`] registered.
    async fn open(db: crate::Db) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = crate::fresh_database_url(db, dir.path()).await;
        let store = Store::open(&url).await.unwrap();
        let registry = Registry::new(
            store.clone(),
            Sandbox::new(SandboxConfig::default()).unwrap(),
        );
        let manifest = format!(
            "id = \"{JOB}\"\ntenant = \"t1\"\ncomponent = \"{}\"\n",
            crate::guest("noop").display()
        );
        registry
            .job_apply(&manifest, std::path::Path::new("."), "conformance")
            .await
            .unwrap();
        let t0 = store.now_ms().await.unwrap();
        Self {
            store,
            t0,
            url,
            _dir: dir,
        }
    }

    /// The PostgreSQL schema this case's URL selects, if any.
    fn schema(&self) -> Option<String> {
        let (_, schema) = self.url.split_once("options[search_path]=")?;
        Some(schema.split('&').next().unwrap_or(schema).to_string())
    }

    // --- triggers and leases ---

    /// A new manual trigger of [`JOB`], due a minute before `t0`.
    async fn trigger(&self) -> i64 {
        let new = NewTrigger {
            scheduled_at: Some(self.t0 - 60_000),
            ..NewTrigger::manual(JOB, json!({}), None)
        };
        self.store.trigger_create(&new).await.unwrap().0.id
    }

    async fn get(&self, id: i64) -> TriggerRecord {
        self.store.trigger_get(id).await.unwrap()
    }

    async fn attempts(&self, id: i64) -> Vec<AttemptRecord> {
        self.store.attempts_for(id).await.unwrap()
    }

    async fn claim(&self, owner: &str, now: i64, lease_ms: i64, limit: i64) -> Vec<Claim> {
        self.store
            .claim(&ClaimRequest {
                owner,
                lease_ms,
                limit,
                retry_slots: 0,
                now: Some(now),
            })
            .await
            .unwrap()
    }

    /// Claims exactly trigger `id` as `owner` at `now`.
    async fn claim_one(&self, id: i64, owner: &str, now: i64, lease_ms: i64) -> Claim {
        let mut claims = self.claim(owner, now, lease_ms, 1).await;
        assert_eq!(claims.len(), 1, "{owner} expected to claim trigger {id}");
        assert_eq!(claims[0].trigger_id, id);
        claims.remove(0)
    }

    /// A new trigger, held by `A` at token 1 (claimed at `t0`).
    async fn held(&self) -> LeaseRef {
        let id = self.trigger().await;
        self.claim_one(id, "A", self.t0, LEASE).await.lease("A")
    }

    /// A new trigger claimed by `A` at token 1, then taken over by `B` at
    /// token 2 once `A`'s lease lapsed: (`A`'s stale lease, `B`'s).
    async fn taken_over(&self) -> (LeaseRef, LeaseRef) {
        let a = self.held().await;
        let b = self
            .claim_one(a.trigger_id, "B", self.t0 + 2 * LEASE, LEASE)
            .await
            .lease("B");
        (a, b)
    }

    /// A new trigger that succeeded under `A`'s lease (token 1): the lease
    /// that finished it.
    async fn finished(&self) -> LeaseRef {
        let a = self.held().await;
        self.store
            .attempt_finish(&a, &ended(TriggerState::Succeeded))
            .await
            .unwrap();
        a
    }

    // --- direct SQL: rows a crash or an older host could leave ---

    /// Puts trigger `id` in `state`, due at `next_run_at`, by hand.
    async fn force(&self, id: i64, state: &str, next_run_at: i64) {
        sqlx::query(self.store.sql(
            "UPDATE triggers SET state = ?1, next_run_at = ?2, \
                 finished_at = CASE WHEN ?1 IN ('succeeded', 'failed', 'cancelled', 'skipped') \
                     THEN ?2 END \
             WHERE id = ?3",
        ))
        .bind(state)
        .bind(next_run_at)
        .bind(id)
        .execute(self.store.pool())
        .await
        .unwrap();
    }

    /// Leaves trigger `id` as an interrupted host could: in `state` at
    /// `token` (after as many claims), with `lease` (owner, until) or none,
    /// due at `t0 - 1 s`, and an open attempt at each of `open` tokens.
    async fn leave(
        &self,
        id: i64,
        state: TriggerState,
        token: i64,
        lease: Option<(&str, i64)>,
        open: &[i64],
    ) {
        sqlx::query(self.store.sql(
            "UPDATE triggers SET state = ?1, fencing_token = ?2, attempts = ?2, \
                 lease_owner = ?3, lease_until = ?4, next_run_at = ?5 WHERE id = ?6",
        ))
        .bind(state.as_str())
        .bind(token)
        .bind(lease.map(|(owner, _)| owner.to_string()))
        .bind(lease.map(|(_, until)| until))
        .bind(self.t0 - 1_000)
        .bind(id)
        .execute(self.store.pool())
        .await
        .unwrap();
        for &t in open {
            sqlx::query(self.store.sql(
                "INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, \
                     started_at, lease_until) VALUES (?, ?, ?, ?, ?, ?)",
            ))
            .bind(id)
            .bind(t)
            .bind(format!("ghost-{t}"))
            .bind(t)
            .bind(self.t0 - 100_000 + t)
            .bind(self.t0 - 50_000)
            .execute(self.store.pool())
            .await
            .unwrap();
        }
    }

    async fn scalar(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(self.store.sql(sql))
            .fetch_one(self.store.pool())
            .await
            .unwrap()
    }

    async fn counter(&self, name: &str) -> i64 {
        self.store.counter(name).await.unwrap()
    }

    /// Every row a fenced write could touch, to show that a refused one
    /// touched none (counters are checked on their own).
    async fn snapshot(&self) -> serde_json::Value {
        let triggers = self.store.triggers_list(10_000).await.unwrap();
        let mut attempts = Vec::new();
        for t in &triggers {
            attempts.extend(self.attempts(t.id).await);
        }
        let rows = |sql: &'static str| {
            sqlx::query_as::<_, (i64, i64)>(self.store.sql(sql)).fetch_all(self.store.pool())
        };
        let checkpoints: Vec<(i64, i64, Vec<u8>, i64, i64)> = sqlx::query_as(self.store.sql(
            "SELECT trigger_id, seq, data, fencing_token, saved_at FROM checkpoints \
             ORDER BY trigger_id",
        ))
        .fetch_all(self.store.pool())
        .await
        .unwrap();
        json!({
            "triggers": triggers,
            "cancel_requested": rows("SELECT id, cancel_requested FROM triggers ORDER BY id")
                .await
                .unwrap(),
            "attempts": attempts,
            "progress": rows("SELECT id, progress_seq FROM attempts ORDER BY id").await.unwrap(),
            "checkpoints": checkpoints,
            "effects": self.store.effects_list(10_000).await.unwrap(),
            "skipped": self.store.skipped_list(None, 10_000).await.unwrap(),
            "shards": self.store.shards_list().await.unwrap(),
        })
    }

    /// `write` must be refused as `LeaseLost` under `lease` with `found`,
    /// write nothing, and be counted once in `stale_token_rejections`.
    async fn refused<T: Debug>(
        &self,
        lease: &LeaseRef,
        found: Found,
        write: impl Future<Output = StoreResult<T>>,
    ) {
        let before = without_usage(self.snapshot().await, lease);
        let counted = self.counter("stale_token_rejections").await;
        expect_lease_lost(write.await, lease, found);
        assert_eq!(
            without_usage(self.snapshot().await, lease),
            before,
            "a refused write changed the database"
        );
        assert_eq!(
            self.counter("stale_token_rejections").await,
            counted + 1,
            "a refused write is counted once"
        );
    }

    /// `write` must leave the database as it was (and count nothing stale).
    async fn unchanged<T>(&self, write: impl Future<Output = T>) -> T {
        let before = self.snapshot().await;
        let counted = self.counter("stale_token_rejections").await;
        let out = write.await;
        assert_eq!(self.snapshot().await, before, "the database changed");
        assert_eq!(self.counter("stale_token_rejections").await, counted);
        out
    }

    // --- effects ---

    /// Records `key`'s intent under `lease`, then settles it `unknown`.
    async fn unknown_effect(&self, lease: &LeaseRef, key: &str) {
        self.store
            .effect_intent(lease, &new_effect(key))
            .await
            .unwrap();
        self.store
            .effect_settle(lease, key, &outcome("unknown"))
            .await
            .unwrap();
    }

    async fn effect(&self, key: &str) -> Option<EffectRecord> {
        self.store.effect_get(crate::TENANT, key).await.unwrap()
    }
}

/// `snapshot` without the usage columns of `lease`'s own attempt: a refused
/// end still records what its guest used on its own row (fuel, memory,
/// wall time, log), once, if nothing did yet.
fn without_usage(mut snapshot: serde_json::Value, lease: &LeaseRef) -> serde_json::Value {
    for attempt in snapshot["attempts"].as_array_mut().unwrap() {
        if attempt["id"] == json!(lease.attempt_id) {
            for column in ["fuel_used", "peak_memory_bytes", "wall_ms", "log"] {
                attempt[column] = serde_json::Value::Null;
            }
        }
    }
    snapshot
}

/// The usage columns of attempt `id` of `trigger`.
async fn usage(db: &Fixture, trigger: i64, id: i64) -> (Option<i64>, Option<i64>, Option<i64>) {
    let attempts = db.attempts(trigger).await;
    let a = attempts.iter().find(|a| a.id == id).unwrap();
    (a.fuel_used, a.peak_memory_bytes, a.wall_ms)
}

/// A lease on a trigger that does not exist.
fn missing_lease() -> LeaseRef {
    LeaseRef {
        trigger_id: MISSING,
        attempt_id: MISSING,
        fencing_token: FencingToken::new(1),
        owner: "A".into(),
    }
}

/// An attempt's end moving its trigger to `state` (a target of finish),
/// with usage figures to find in the attempt row.
fn ended(state: TriggerState) -> AttemptEnd {
    let outcome = match state {
        TriggerState::Succeeded => AttemptOutcome::Succeeded,
        TriggerState::Skipped => AttemptOutcome::Skipped,
        _ => AttemptOutcome::Failed,
    };
    let failed = outcome == AttemptOutcome::Failed;
    AttemptEnd {
        trigger_state: state,
        retry_after_ms: (state == TriggerState::RetryWait).then_some(5_000),
        result: (state == TriggerState::Succeeded).then(|| b"done".to_vec()),
        error_class: failed.then(|| "transient".to_string()),
        error_message: failed.then(|| "it failed".to_string()),
        attempt_outcome: outcome,
        fuel_used: 11,
        peak_memory_bytes: 22,
        wall_ms: 33,
        log: "log".into(),
    }
}

fn new_effect(key: &str) -> NewEffect {
    NewEffect {
        tenant: crate::TENANT.into(),
        downstream_key: crate::sent_key(key),
        idempotency_key: key.into(),
        connector: "ledger".into(),
        action: "debit".into(),
        params_digest: "digest".into(),
        request_id: "request-1".into(),
        compensates: None,
    }
}

fn outcome(state: &'static str) -> EffectOutcome {
    EffectOutcome {
        state: state.parse().unwrap(),
        response: (state == "succeeded").then(|| b"ok".to_vec()),
        error: (state != "succeeded").then(|| format!("{state} outcome")),
        last_status: Some(200),
        resolved_by: "gateway",
    }
}

fn expect_lease_lost<T: Debug>(result: StoreResult<T>, lease: &LeaseRef, found: Found) {
    match result {
        Err(StoreError::LeaseLost {
            trigger_id,
            expected,
            found: token,
            state,
        }) => {
            assert_eq!(trigger_id, lease.trigger_id);
            assert_eq!(
                expected, lease.fencing_token,
                "expected: the writer's token"
            );
            assert_eq!(
                token.map(|t| t.get()).zip(state),
                found,
                "found: the trigger's token and state now"
            );
        }
        other => panic!("expected LeaseLost, got {other:?}"),
    }
}

/// `at` lies within `[before, after]` shifted by `by` (an instant the
/// database computed from its own clock).
fn within(at: i64, before: i64, after: i64, by: i64) {
    assert!(
        (before + by..=after + by).contains(&at),
        "{at} is not within [{}, {}]",
        before + by,
        after + by
    );
}

// ------------------------------------------------------------------ claims --

async fn claim_takes_a_due_trigger_with_the_next_token_and_opens_one_attempt(db: Fixture) {
    let id = db.trigger().await;
    let c = db.claim_one(id, "A", db.t0, LEASE).await;
    assert_eq!(
        (c.fencing_token.get(), c.attempt_no, c.lease_until),
        (1, 1, db.t0 + LEASE)
    );
    assert_eq!((c.started_at, c.first_started_at), (db.t0, db.t0));
    let t = db.get(id).await;
    assert_eq!(t.state, TriggerState::Running);
    assert_eq!((t.fencing_token, t.attempts), (1, 1));
    assert_eq!(t.lease_owner.as_deref(), Some("A"));
    assert_eq!(t.lease_until, Some(db.t0 + LEASE));
    let attempts = db.attempts(id).await;
    assert_eq!(attempts.len(), 1);
    let a = &attempts[0];
    assert_eq!(a.id, c.attempt_id);
    assert_eq!((a.attempt_no, a.fencing_token), (1, 1));
    assert_eq!(a.runner_id, "A");
    assert_eq!((a.started_at, a.lease_until), (db.t0, db.t0 + LEASE));
    assert_eq!((a.ended_at, a.outcome.as_deref()), (None, None));
}

async fn claim_takes_over_a_lapsed_lease_with_the_next_token_and_expires_the_old_attempt(
    db: Fixture,
) {
    let (a, _) = db.taken_over().await;
    let t = db.get(a.trigger_id).await;
    assert_eq!(t.state, TriggerState::Running);
    assert_eq!((t.fencing_token, t.attempts), (2, 2));
    assert_eq!(t.lease_owner.as_deref(), Some("B"));
    assert_eq!(t.lease_until, Some(db.t0 + 3 * LEASE));
    let attempts = db.attempts(a.trigger_id).await;
    assert_eq!(attempts.len(), 2);
    let (old, new) = (&attempts[0], &attempts[1]);
    assert_eq!(old.id, a.attempt_id);
    assert_eq!(old.ended_at, Some(db.t0 + 2 * LEASE));
    assert_eq!(old.outcome.as_deref(), Some("expired"));
    assert_eq!(old.error_class.as_deref(), Some("lease_expired"));
    assert_eq!((new.fencing_token, new.attempt_no), (2, 2));
    assert_eq!(new.runner_id, "B");
    assert_eq!(new.ended_at, None);
    // The total-time budget counts from the first attempt.
    let c = db
        .claim_one(a.trigger_id, "C", db.t0 + 10 * LEASE, LEASE)
        .await;
    assert_eq!((c.fencing_token.get(), c.first_started_at), (3, db.t0));
}

async fn claim_leaves_a_live_lease_alone(db: Fixture) {
    let a = db.held().await;
    let claims = db
        .unchanged(db.store.claim(&ClaimRequest {
            owner: "B",
            lease_ms: LEASE,
            limit: 10,
            retry_slots: 5,
            now: Some(db.t0 + LEASE - 1),
        }))
        .await
        .unwrap();
    assert!(claims.is_empty(), "a live lease was claimed: {claims:?}");
    assert_eq!(db.get(a.trigger_id).await.fencing_token, 1);
}

async fn claim_takes_nothing_finished_parked_or_not_yet_due(db: Fixture) {
    let later = db.t0 + 10 * LEASE;
    db.finished().await;
    for state in ["succeeded", "failed", "cancelled", "skipped", "manual"] {
        let id = db.trigger().await;
        db.force(id, state, db.t0 - 60_000).await;
    }
    for state in ["pending", "retry_wait"] {
        let id = db.trigger().await;
        db.force(id, state, later + 1).await;
    }
    let claims = db
        .unchanged(db.store.claim(&ClaimRequest {
            owner: "B",
            lease_ms: LEASE,
            limit: 100,
            retry_slots: 50,
            now: Some(later),
        }))
        .await
        .unwrap();
    assert!(claims.is_empty(), "claimed: {claims:?}");
}

// -------------------------------------------------------------- heartbeats --

async fn lease_renew_with_the_current_token_extends_the_lease_on_the_database_clock(db: Fixture) {
    let a = db.held().await;
    let before = db.store.now_ms().await.unwrap();
    let renewal = db.store.lease_renew(&a, 5_000, 7).await.unwrap();
    let after = db.store.now_ms().await.unwrap();
    within(renewal.lease_until, before, after, 5_000);
    assert!(!renewal.cancel_requested);
    let t = db.get(a.trigger_id).await;
    assert_eq!(t.lease_until, Some(renewal.lease_until));
    assert_eq!((t.state, t.fencing_token), (TriggerState::Running, 1));
    let attempt = &db.attempts(a.trigger_id).await[0];
    assert_eq!(attempt.lease_until, renewal.lease_until);
    within(attempt.heartbeat_at.unwrap(), before, after, 0);
    assert_eq!(
        db.scalar("SELECT progress_seq FROM attempts").await,
        7,
        "the heartbeat carries the progress"
    );
}

async fn lease_renew_with_a_stale_token_is_lease_lost(db: Fixture) {
    let (a, _) = db.taken_over().await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.lease_renew(&a, LEASE, 1),
    )
    .await;
}

async fn lease_renew_by_another_owner_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    let impostor = LeaseRef {
        owner: "B".into(),
        ..a.clone()
    };
    db.refused(
        &impostor,
        Some((1, TriggerState::Running)),
        db.store.lease_renew(&impostor, LEASE, 1),
    )
    .await;
}

async fn lease_renew_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.finished().await;
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.lease_renew(&a, LEASE, 1),
    )
    .await;
}

async fn lease_renew_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let lease = missing_lease();
    db.refused(&lease, None, db.store.lease_renew(&lease, LEASE, 1))
        .await;
}

// ------------------------------------------------------------- checkpoints --

async fn checkpoint_save_with_the_current_token_writes_the_next_sequence(db: Fixture) {
    let (_, b) = db.taken_over().await;
    assert_eq!(db.store.checkpoint_save(&b, b"one").await.unwrap(), 1);
    assert_eq!(db.store.checkpoint_save(&b, b"two").await.unwrap(), 2);
    assert_eq!(
        db.store.checkpoint_load(b.trigger_id).await.unwrap(),
        Some((2, b"two".to_vec()))
    );
    assert_eq!(
        db.scalar("SELECT fencing_token FROM checkpoints").await,
        2,
        "the checkpoint records the token it was saved under"
    );
}

async fn checkpoint_save_with_a_stale_token_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    db.store.checkpoint_save(&a, b"mine").await.unwrap();
    db.claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.checkpoint_save(&a, b"stale"),
    )
    .await;
    assert_eq!(
        db.store.checkpoint_load(a.trigger_id).await.unwrap(),
        Some((1, b"mine".to_vec()))
    );
}

async fn checkpoint_save_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.finished().await;
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.checkpoint_save(&a, b"late"),
    )
    .await;
}

async fn checkpoint_save_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let lease = missing_lease();
    db.refused(&lease, None, db.store.checkpoint_save(&lease, b"x"))
        .await;
}

// ---------------------------------------------------------- effect intents --

async fn effect_intent_with_the_current_token_records_the_intent_under_it(db: Fixture) {
    let (_, b) = db.taken_over().await;
    let record = db.store.effect_intent(&b, &new_effect("k")).await.unwrap();
    assert_eq!(db.effect("k").await.as_ref(), Some(&record));
    assert_eq!(record.idempotency_key, "k");
    assert_eq!(record.trigger_id, b.trigger_id);
    assert_eq!(record.attempt_id, Some(b.attempt_id));
    assert_eq!((record.fencing_token, record.sends), (2, 1));
    assert_eq!(record.state, "intent");
    assert_eq!(
        (
            record.connector.as_str(),
            record.action.as_str(),
            record.params_digest.as_str(),
            record.request_id.as_str()
        ),
        ("ledger", "debit", "digest", "request-1")
    );
    assert_eq!((record.response, record.resolved_by), (None, None));
}

async fn effect_intent_for_a_recorded_key_is_a_conflict_not_a_lease_loss(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    let again = db
        .unchanged(db.store.effect_intent(&a, &new_effect("k")))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict(_))),
        "expected Conflict, got {again:?}"
    );
    assert_eq!(db.counter("stale_effect_writes").await, 0);
}

async fn effect_intent_with_a_stale_token_is_lease_lost(db: Fixture) {
    let (a, _) = db.taken_over().await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.effect_intent(&a, &new_effect("k")),
    )
    .await;
    assert_eq!(db.effect("k").await, None);
    assert_eq!(db.counter("stale_effect_writes").await, 1);
}

async fn effect_intent_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.finished().await;
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.effect_intent(&a, &new_effect("k")),
    )
    .await;
    assert_eq!(db.counter("stale_effect_writes").await, 1);
}

async fn effect_intent_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let lease = missing_lease();
    db.refused(
        &lease,
        None,
        db.store.effect_intent(&lease, &new_effect("k")),
    )
    .await;
    assert_eq!(db.counter("stale_effect_writes").await, 1);
}

// ------------------------------------------------------- effect re-intents --

async fn effect_reintent_with_the_current_token_takes_the_effect_over(db: Fixture) {
    let a = db.held().await;
    db.unknown_effect(&a, "k").await;
    let b = db
        .claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await
        .lease("B");
    let record = db
        .store
        .effect_reintent(&b, "k", "digest", "request-2")
        .await
        .unwrap();
    assert_eq!(db.effect("k").await.as_ref(), Some(&record));
    assert_eq!(record.state, "intent");
    assert_eq!((record.fencing_token, record.sends), (2, 2));
    assert_eq!(record.attempt_id, Some(b.attempt_id));
    assert_eq!(record.request_id, "request-2");
}

/// When the effect's answer was first lost (`unknown_at`), or `None`.
async fn unknown_at(db: &Fixture, key: &str) -> Option<i64> {
    sqlx::query_scalar(
        db.store
            .sql("SELECT unknown_at FROM effects WHERE idempotency_key = ?"),
    )
    .bind(key)
    .fetch_one(db.store.pool())
    .await
    .unwrap()
}

async fn effect_reintent_of_an_intent_left_by_a_gone_attempt_marks_it_unknown(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    assert_eq!(unknown_at(&db, "k").await, None);
    let b = db
        .claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await
        .lease("B");
    db.store
        .effect_reintent(&b, "k", "digest", "request-2")
        .await
        .unwrap();
    assert!(unknown_at(&db, "k").await.is_some());
    db.store
        .effect_settle(&b, "k", &outcome("succeeded"))
        .await
        .unwrap();
    assert!(
        unknown_at(&db, "k").await.is_some(),
        "kept through the resend's settle"
    );
}

async fn effect_reintent_after_a_transient_answer_does_not_mark_it_unknown(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    db.store
        .effect_settle(&a, "k", &outcome("retryable"))
        .await
        .unwrap();
    db.store
        .effect_reintent(&a, "k", "digest", "request-2")
        .await
        .unwrap();
    assert_eq!(unknown_at(&db, "k").await, None);
}

async fn effect_reintent_with_a_stale_token_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    db.unknown_effect(&a, "k").await;
    db.claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.effect_reintent(&a, "k", "digest", "request-2"),
    )
    .await;
    assert_eq!(db.counter("stale_effect_writes").await, 1);
}

async fn effect_reintent_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    db.unknown_effect(&a, "k").await;
    db.store
        .attempt_finish(&a, &ended(TriggerState::Failed))
        .await
        .unwrap();
    db.refused(
        &a,
        Some((1, TriggerState::Failed)),
        db.store.effect_reintent(&a, "k", "digest", "request-2"),
    )
    .await;
}

async fn effect_reintent_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let a = db.held().await;
    db.unknown_effect(&a, "k").await;
    let lease = missing_lease();
    db.refused(
        &lease,
        None,
        db.store.effect_reintent(&lease, "k", "digest", "request-2"),
    )
    .await;
}

// -------------------------------------------------------- effect outcomes --

async fn effect_settle_with_the_current_token_records_the_outcome(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    let record = db
        .store
        .effect_settle(&a, "k", &outcome("succeeded"))
        .await
        .unwrap();
    assert_eq!(db.effect("k").await.as_ref(), Some(&record));
    assert_eq!(record.state, "succeeded");
    assert_eq!(record.response.as_deref(), Some(&b"ok"[..]));
    assert_eq!(
        (record.last_status, record.resolved_by.as_deref()),
        (Some(200), Some("gateway"))
    );
    assert_eq!((record.fencing_token, record.sends), (1, 1));
    // A newer holder may settle what an older one left unresolved (after
    // querying the downstream by key).
    db.store.effect_intent(&a, &new_effect("u")).await.unwrap();
    let b = db
        .claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await
        .lease("B");
    let record = db
        .store
        .effect_settle(&b, "u", &outcome("failed"))
        .await
        .unwrap();
    assert_eq!((record.state.as_str(), record.fencing_token), ("failed", 1));
}

async fn effect_settle_with_a_stale_token_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    db.claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.effect_settle(&a, "k", &outcome("succeeded")),
    )
    .await;
    assert_eq!(db.effect("k").await.unwrap().state, "intent");
    assert_eq!(db.counter("stale_effect_writes").await, 1);
}

async fn effect_settle_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    db.store
        .attempt_finish(&a, &ended(TriggerState::Succeeded))
        .await
        .unwrap();
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.effect_settle(&a, "k", &outcome("succeeded")),
    )
    .await;
}

async fn effect_settle_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let a = db.held().await;
    db.store.effect_intent(&a, &new_effect("k")).await.unwrap();
    let lease = missing_lease();
    db.refused(
        &lease,
        None,
        db.store.effect_settle(&lease, "k", &outcome("succeeded")),
    )
    .await;
}

async fn effect_settle_of_a_missing_effect_is_a_conflict_not_a_lease_loss(db: Fixture) {
    let a = db.held().await;
    let settled = db
        .unchanged(db.store.effect_settle(&a, "nobody", &outcome("succeeded")))
        .await;
    assert!(
        matches!(settled, Err(StoreError::Conflict(_))),
        "expected Conflict, got {settled:?}"
    );
    assert_eq!(db.counter("stale_effect_writes").await, 0);
}

// ---------------------------------------------------------------- releases --

async fn attempt_release_with_the_current_token_puts_the_trigger_back_to_pending(db: Fixture) {
    let a = db.held().await;
    let before = db.store.now_ms().await.unwrap();
    let written = db
        .store
        .attempt_release(
            &a,
            &ended(TriggerState::Succeeded),
            ReleaseReason::OverlapWait,
            "waiting for a slot",
            5_000,
        )
        .await
        .unwrap();
    let after = db.store.now_ms().await.unwrap();
    let t = db.get(a.trigger_id).await;
    assert_eq!(t.state, TriggerState::Pending);
    assert_eq!(written, t.state, "the release answers the state it wrote");
    assert_eq!((t.fencing_token, t.attempts), (1, 1));
    assert_eq!(
        (t.lease_owner, t.lease_until, t.finished_at),
        (None, None, None)
    );
    assert_eq!(t.result, None);
    within(t.next_run_at, before, after, 5_000);
    let attempt = &db.attempts(a.trigger_id).await[0];
    assert_eq!(attempt.outcome.as_deref(), Some("released"));
    within(attempt.ended_at.unwrap(), before, after, 0);
    assert_eq!(attempt.error_class.as_deref(), Some("overlap_wait"));
    assert_eq!(attempt.error_message.as_deref(), Some("waiting for a slot"));
    assert_eq!(
        (
            attempt.fuel_used,
            attempt.peak_memory_bytes,
            attempt.wall_ms
        ),
        (Some(11), Some(22), Some(33))
    );
    assert_eq!(
        db.store
            .released_before(a.trigger_id, a.attempt_id + 1)
            .await
            .unwrap(),
        1
    );
    // Due again: the next claim takes the next token.
    let c = db
        .claim_one(a.trigger_id, "B", after + 10 * LEASE, LEASE)
        .await;
    assert_eq!((c.fencing_token.get(), c.attempt_no), (2, 2));
}

/// A trigger a closed gate asked to pause lands `paused`, whether its
/// attempt is released or commits a retry, and each write answers
/// `paused` — the state the database wrote, not the one asked for — so
/// the runner's log and its drain report say what happened.
async fn finish_and_release_answer_paused_for_a_trigger_a_gate_asked_to_pause(db: Fixture) {
    for release in [true, false] {
        let a = db.held().await;
        sqlx::query(
            db.store
                .sql("UPDATE triggers SET pause_requested = 1 WHERE id = ?"),
        )
        .bind(a.trigger_id)
        .execute(db.store.pool())
        .await
        .unwrap();
        let written = if release {
            db.store
                .attempt_release(
                    &a,
                    &ended(TriggerState::Succeeded),
                    ReleaseReason::Drained,
                    "drained",
                    0,
                )
                .await
                .unwrap()
        } else {
            db.store
                .attempt_finish(&a, &ended(TriggerState::RetryWait))
                .await
                .unwrap()
        };
        let t = db.get(a.trigger_id).await;
        assert_eq!(
            (written, t.state),
            (TriggerState::Paused, TriggerState::Paused),
            "release: {release}"
        );
    }
}

async fn attempt_release_with_a_stale_token_is_lease_lost(db: Fixture) {
    let (a, _) = db.taken_over().await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.attempt_release(
            &a,
            &ended(TriggerState::Succeeded),
            ReleaseReason::Drained,
            "drain",
            0,
        ),
    )
    .await;
    assert_eq!(
        usage(&db, a.trigger_id, a.attempt_id).await,
        (Some(11), Some(22), Some(33)),
        "what the guest used up to its stop is on its (expired) row"
    );
}

async fn attempt_release_of_a_finished_trigger_is_lease_lost(db: Fixture) {
    let a = db.finished().await;
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.attempt_release(
            &a,
            &ended(TriggerState::Succeeded),
            ReleaseReason::CircuitOpen,
            "breaker open",
            0,
        ),
    )
    .await;
}

async fn attempt_release_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let lease = missing_lease();
    db.refused(
        &lease,
        None,
        db.store.attempt_release(
            &lease,
            &ended(TriggerState::Succeeded),
            ReleaseReason::Drained,
            "drain",
            0,
        ),
    )
    .await;
}

// ---------------------------------------------------------------- abandons --

async fn attempt_abandon_with_the_current_token_closes_only_the_attempt(db: Fixture) {
    let a = db.held().await;
    let trigger = serde_json::to_value(db.get(a.trigger_id).await).unwrap();
    let closed = db
        .store
        .attempt_abandon(&a, &ended(TriggerState::Succeeded), "commit gate closed")
        .await
        .unwrap();
    assert!(closed);
    assert_eq!(
        serde_json::to_value(db.get(a.trigger_id).await).unwrap(),
        trigger,
        "an abandon leaves the trigger to its lease"
    );
    let attempt = &db.attempts(a.trigger_id).await[0];
    assert!(attempt.ended_at.is_some());
    assert_eq!(attempt.outcome.as_deref(), Some("lease_lost"));
    assert_eq!(attempt.error_message.as_deref(), Some("commit gate closed"));
    // Closed once: a second abandon rewrites nothing.
    let again = db
        .unchanged(
            db.store
                .attempt_abandon(&a, &ended(TriggerState::Succeeded), "again"),
        )
        .await
        .unwrap();
    assert!(!again);
}

async fn attempt_abandon_with_a_stale_token_closes_nothing_and_records_its_usage(db: Fixture) {
    let (a, _) = db.taken_over().await;
    let before = without_usage(db.snapshot().await, &a);
    let closed = db
        .store
        .attempt_abandon(&a, &ended(TriggerState::Succeeded), "late")
        .await
        .unwrap();
    assert!(!closed, "the takeover already closed it as expired");
    assert_eq!(without_usage(db.snapshot().await, &a), before);
    assert_eq!(
        usage(&db, a.trigger_id, a.attempt_id).await,
        (Some(11), Some(22), Some(33)),
        "what the guest used up to its stop is on its (expired) row"
    );
    // Once: a second abandon rewrites nothing.
    let mut other = ended(TriggerState::Succeeded);
    other.fuel_used = 99;
    db.unchanged(db.store.attempt_abandon(&a, &other, "later"))
        .await
        .unwrap();
}

async fn attempt_abandon_of_a_finished_trigger_closes_nothing(db: Fixture) {
    let a = db.finished().await;
    let closed = db
        .unchanged(
            db.store
                .attempt_abandon(&a, &ended(TriggerState::Succeeded), "late"),
        )
        .await
        .unwrap();
    assert!(!closed);
}

async fn attempt_abandon_of_a_missing_attempt_closes_nothing(db: Fixture) {
    db.held().await;
    let closed = db
        .unchanged(db.store.attempt_abandon(
            &missing_lease(),
            &ended(TriggerState::Succeeded),
            "late",
        ))
        .await
        .unwrap();
    assert!(!closed);
}

// ---------------------------------------------------------------- finishes --

async fn attempt_finish_with_the_current_token_commits_the_end(db: Fixture) {
    let a = db.held().await;
    let before = db.store.now_ms().await.unwrap();
    db.store
        .attempt_finish(&a, &ended(TriggerState::Succeeded))
        .await
        .unwrap();
    let after = db.store.now_ms().await.unwrap();
    let t = db.get(a.trigger_id).await;
    assert_eq!((t.state, t.fencing_token), (TriggerState::Succeeded, 1));
    assert_eq!(t.result.as_deref(), Some(&b"done"[..]));
    assert_eq!((t.lease_owner, t.lease_until), (None, None));
    within(t.finished_at.unwrap(), before, after, 0);
    let attempt = &db.attempts(a.trigger_id).await[0];
    assert_eq!(attempt.outcome.as_deref(), Some("succeeded"));
    within(attempt.ended_at.unwrap(), before, after, 0);
    assert_eq!(
        (
            attempt.fuel_used,
            attempt.peak_memory_bytes,
            attempt.wall_ms
        ),
        (Some(11), Some(22), Some(33))
    );
    assert_eq!(attempt.log.as_deref(), Some("log"));
}

async fn attempt_finish_into_retry_wait_makes_the_trigger_due_again(db: Fixture) {
    let a = db.held().await;
    let before = db.store.now_ms().await.unwrap();
    let written = db
        .store
        .attempt_finish(&a, &ended(TriggerState::RetryWait))
        .await
        .unwrap();
    let after = db.store.now_ms().await.unwrap();
    let t = db.get(a.trigger_id).await;
    assert_eq!(t.state, TriggerState::RetryWait);
    assert_eq!(written, t.state, "the commit answers the state it wrote");
    assert_eq!(
        (t.lease_owner, t.lease_until, t.finished_at),
        (None, None, None)
    );
    assert_eq!(t.error_class.as_deref(), Some("transient"));
    within(t.next_run_at, before, after, 5_000);
    let attempt = &db.attempts(a.trigger_id).await[0];
    assert_eq!(attempt.outcome.as_deref(), Some("failed"));
    let c = db
        .claim_one(a.trigger_id, "B", after + 10 * LEASE, LEASE)
        .await;
    assert_eq!((c.fencing_token.get(), c.attempt_no), (2, 2));
}

async fn attempt_finish_with_a_stale_token_is_lease_lost(db: Fixture) {
    let (a, _) = db.taken_over().await;
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.attempt_finish(&a, &ended(TriggerState::Succeeded)),
    )
    .await;
    assert_eq!(
        usage(&db, a.trigger_id, a.attempt_id).await,
        (Some(11), Some(22), Some(33)),
        "what the guest used up to its stop is on its (expired) row"
    );
}

async fn attempt_finish_of_a_finished_trigger_is_lease_lost_and_rewrites_nothing(db: Fixture) {
    let a = db.finished().await;
    db.refused(
        &a,
        Some((1, TriggerState::Succeeded)),
        db.store.attempt_finish(&a, &ended(TriggerState::Failed)),
    )
    .await;
    assert_eq!(
        db.get(a.trigger_id).await.result.as_deref(),
        Some(&b"done"[..])
    );
}

async fn attempt_finish_of_a_missing_trigger_is_lease_lost_with_nothing_found(db: Fixture) {
    let lease = missing_lease();
    db.refused(
        &lease,
        None,
        db.store
            .attempt_finish(&lease, &ended(TriggerState::Succeeded)),
    )
    .await;
}

async fn attempt_finish_into_a_state_finish_cannot_reach_is_refused(db: Fixture) {
    let a = db.held().await;
    for state in [
        TriggerState::Pending,
        TriggerState::Running,
        TriggerState::Manual,
    ] {
        let refused = db
            .unchanged(db.store.attempt_finish(&a, &ended(state)))
            .await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(_))),
            "finish into {state}: {refused:?}"
        );
    }
}

async fn attempt_finish_batch_commits_the_current_ends_and_refuses_the_stale_ones(db: Fixture) {
    // X is held by A with a long lease; Y was held by A and taken over by B.
    let x = db.trigger().await;
    let ax = db.claim_one(x, "A", db.t0, 10 * LEASE).await.lease("A");
    let (ay, by) = db.taken_over().await;
    let counted = db.counter("stale_token_rejections").await;
    let results = db
        .store
        .attempt_finish_batch(&[
            (ax.clone(), ended(TriggerState::Succeeded)),
            (ay.clone(), ended(TriggerState::Failed)),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok(), "{:?}", results[0]);
    let mut results = results.into_iter();
    results.next();
    expect_lease_lost(
        results.next().unwrap(),
        &ay,
        Some((2, TriggerState::Running)),
    );
    assert_eq!(db.counter("stale_token_rejections").await, counted + 1);
    assert_eq!(db.get(x).await.state, TriggerState::Succeeded);
    let y = db.get(ay.trigger_id).await;
    assert_eq!((y.state, y.fencing_token), (TriggerState::Running, 2));
    assert_eq!(y.lease_owner.as_deref(), Some("B"));
    let attempts = db.attempts(ay.trigger_id).await;
    assert_eq!(attempts[0].outcome.as_deref(), Some("expired"));
    assert_eq!(
        (attempts[1].id, attempts[1].ended_at),
        (by.attempt_id, None)
    );
}

async fn attempt_finish_batch_with_a_current_and_a_stale_end_of_one_trigger_refuses_the_stale_one(
    db: Fixture,
) {
    let (a, b) = db.taken_over().await;
    let results = db
        .store
        .attempt_finish_batch(&[
            (b.clone(), ended(TriggerState::Succeeded)),
            (a.clone(), ended(TriggerState::Failed)),
        ])
        .await
        .unwrap();
    let mut results = results.into_iter();
    let current = results.next().unwrap();
    assert!(current.is_ok(), "{current:?}");
    expect_lease_lost(
        results.next().unwrap(),
        &a,
        Some((2, TriggerState::Succeeded)),
    );
    let t = db.get(a.trigger_id).await;
    assert_eq!((t.state, t.fencing_token), (TriggerState::Succeeded, 2));
    let attempts = db.attempts(a.trigger_id).await;
    assert_eq!(
        attempts[0].outcome.as_deref(),
        Some("expired"),
        "the stale attempt is not rewritten"
    );
    assert_eq!(attempts[1].outcome.as_deref(), Some("succeeded"));
}

// ----------------------------------------------------------------- cancels --

async fn trigger_request_cancel_cancels_a_trigger_that_has_not_started(db: Fixture) {
    let pending = db.trigger().await;
    let retry = db.trigger().await;
    db.force(retry, "retry_wait", db.t0).await;
    let parked = db.trigger().await;
    db.force(parked, "manual", db.t0).await;
    for id in [pending, retry, parked] {
        let before = db.store.now_ms().await.unwrap();
        assert!(
            db.store
                .trigger_request_cancel(id, "test", "")
                .await
                .unwrap()
        );
        let after = db.store.now_ms().await.unwrap();
        let t = db.get(id).await;
        assert_eq!((t.state, t.fencing_token), (TriggerState::Cancelled, 0));
        assert_eq!(t.error_class.as_deref(), Some("cancelled"));
        within(t.finished_at.unwrap(), before, after, 0);
        assert!(db.attempts(id).await.is_empty());
    }
}

async fn trigger_request_cancel_asks_a_running_trigger_to_stop(db: Fixture) {
    let a = db.held().await;
    assert!(
        db.store
            .trigger_request_cancel(a.trigger_id, "test", "")
            .await
            .unwrap()
    );
    let t = db.get(a.trigger_id).await;
    assert_eq!((t.state, t.fencing_token), (TriggerState::Running, 1));
    assert!(
        db.store
            .lease_renew(&a, LEASE, 0)
            .await
            .unwrap()
            .cancel_requested
    );
    // The holder ends it through finish, under its token.
    db.store
        .attempt_finish(&a, &ended(TriggerState::Cancelled))
        .await
        .unwrap();
    assert_eq!(db.get(a.trigger_id).await.state, TriggerState::Cancelled);
}

async fn trigger_request_cancel_survives_a_takeover_and_the_stale_holder_stays_fenced(db: Fixture) {
    let a = db.held().await;
    assert!(
        db.store
            .trigger_request_cancel(a.trigger_id, "test", "")
            .await
            .unwrap()
    );
    let b = db
        .claim_one(a.trigger_id, "B", db.t0 + 2 * LEASE, LEASE)
        .await
        .lease("B");
    assert!(
        db.store
            .lease_renew(&b, LEASE, 0)
            .await
            .unwrap()
            .cancel_requested,
        "a person's cancel outlives the holder it was sent to"
    );
    db.refused(
        &a,
        Some((2, TriggerState::Running)),
        db.store.attempt_finish(&a, &ended(TriggerState::Cancelled)),
    )
    .await;
}

async fn trigger_request_cancel_of_a_finished_trigger_is_false_and_rewrites_nothing(db: Fixture) {
    let a = db.finished().await;
    let failed = db.trigger().await;
    db.force(failed, "failed", db.t0).await;
    for id in [a.trigger_id, failed] {
        let cancelled = db
            .unchanged(db.store.trigger_request_cancel(id, "test", ""))
            .await
            .unwrap();
        assert!(!cancelled, "a completed trigger is never rewritten");
    }
}

async fn trigger_request_cancel_of_a_missing_trigger_is_false(db: Fixture) {
    db.held().await;
    let cancelled = db
        .unchanged(db.store.trigger_request_cancel(MISSING, "test", ""))
        .await
        .unwrap();
    assert!(!cancelled);
}

// ----------------------------------------------------------- shard fencing --

/// The shard the scan cases use.
const SHARD: u32 = 3;

/// A scan: a due trigger and a parked one after `at`, one skipped fire
/// before it, and the watermark `watermark`.
fn scan(at: i64, watermark: i64) -> ScanCommit {
    let trigger = |scheduled_at, state| ScheduledTrigger {
        job_id: JOB.into(),
        plan_version: 1,
        tenant: "t1".into(),
        resource_group: "default".into(),
        priority: 0,
        scheduled_at,
        state,
        recovery: false,
    };
    ScanCommit {
        triggers: vec![
            trigger(at + 1_000, TriggerState::Pending),
            trigger(at + 2_000, TriggerState::Manual),
        ],
        skipped: vec![(crate::TENANT.into(), JOB.into(), 1, at - 5_000)],
        watermark,
    }
}

impl Fixture {
    async fn shard_lease(&self, owner: &str, now: i64) -> Option<ShardLease> {
        self.store
            .shard_lease(SHARD, owner, 1_000, Some(now))
            .await
            .unwrap()
    }

    async fn shard(&self, shard: u32) -> paddock::store::ShardRecord {
        self.store
            .shards_list()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.shard == shard as i64)
            .unwrap()
    }

    /// `commit` must be refused as `ShardLost` with (generation, owner)
    /// `found`, write nothing, and be counted once.
    async fn shard_refused(
        &self,
        lease: &ShardLease,
        found: Option<(i64, Option<&str>)>,
        commit: &ScanCommit,
    ) {
        let before = self.snapshot().await;
        let counted = self.counter("stale_shard_generation_rejections").await;
        match self.store.scan_commit(lease, commit).await {
            Err(StoreError::ShardLost {
                shard,
                expected,
                found: generation,
                owner,
            }) => {
                assert_eq!((shard, expected), (lease.shard, lease.generation));
                assert_eq!(
                    generation.map(|g| (g.get(), owner)),
                    found.map(|(g, o)| (g, o.map(str::to_string)))
                );
            }
            other => panic!("expected ShardLost, got {other:?}"),
        }
        assert_eq!(
            self.snapshot().await,
            before,
            "a refused scan wrote something"
        );
        assert_eq!(
            self.counter("stale_shard_generation_rejections").await,
            counted + 1
        );
    }
}

async fn scan_commit_under_the_current_generation_writes_triggers_skipped_fires_and_the_watermark(
    db: Fixture,
) {
    let lease = db.shard_lease("A", db.t0).await.unwrap();
    assert_eq!(lease.generation.get(), 1);
    let written = db
        .store
        .scan_commit(&lease, &scan(db.t0, db.t0 + 3_000))
        .await
        .unwrap();
    assert_eq!((written.created, written.existing), (2, 0));
    for (offset, state) in [
        (1_000, TriggerState::Pending),
        (2_000, TriggerState::Manual),
    ] {
        let at = db.t0 + offset;
        let t = db
            .store
            .trigger_by_key(crate::TENANT, &plan_key_ms(JOB, at, 1, None))
            .await
            .unwrap();
        assert_eq!((t.state, t.origin.as_str()), (state, "schedule"));
        assert_eq!((t.scheduled_at, t.next_run_at), (at, at));
    }
    let skipped = db
        .store
        .skipped_list(Some((crate::TENANT, JOB)), 10)
        .await
        .unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].3, db.t0 - 5_000);
    let shard = db.shard(SHARD).await;
    assert_eq!(shard.watermark, Some(db.t0 + 3_000));
    assert_eq!(shard.last_scan_at, Some(db.t0));
    assert_eq!((shard.triggers_created, shard.triggers_existing), (2, 0));
}

async fn scan_commit_again_is_absorbed_by_the_plan_key_and_never_moves_the_watermark_back(
    db: Fixture,
) {
    let lease = db.shard_lease("A", db.t0).await.unwrap();
    db.store
        .scan_commit(&lease, &scan(db.t0, db.t0 + 3_000))
        .await
        .unwrap();
    let again = db
        .store
        .scan_commit(&lease, &scan(db.t0, db.t0 + 1_000))
        .await
        .unwrap();
    assert_eq!((again.created, again.existing), (0, 2));
    assert_eq!(db.scalar("SELECT count(*) FROM triggers").await, 2);
    assert_eq!(db.scalar("SELECT count(*) FROM skipped_fires").await, 1);
    let shard = db.shard(SHARD).await;
    assert_eq!(shard.watermark, Some(db.t0 + 3_000));
    assert_eq!((shard.triggers_created, shard.triggers_existing), (2, 2));
}

async fn scan_commit_under_a_stale_generation_writes_nothing_and_is_shard_lost(db: Fixture) {
    let a = db.shard_lease("A", db.t0).await.unwrap();
    assert_eq!(
        db.shard_lease("B", db.t0 + 500).await,
        None,
        "a live shard lease is not taken"
    );
    let b = db.shard_lease("B", db.t0 + 5_000).await.unwrap();
    assert_eq!(b.generation.get(), a.generation.get() + 1);
    db.shard_refused(
        &a,
        Some((b.generation.get(), Some("B"))),
        &scan(db.t0, db.t0 + 3_000),
    )
    .await;
    // The new owner's scan goes through.
    let written = db
        .store
        .scan_commit(&b, &scan(db.t0, db.t0 + 3_000))
        .await
        .unwrap();
    assert_eq!(written.created, 2);
}

async fn scan_commit_after_the_shard_was_released_is_shard_lost(db: Fixture) {
    let a = db.shard_lease("A", db.t0).await.unwrap();
    db.store.shard_release(&a).await.unwrap();
    db.shard_refused(
        &a,
        Some((a.generation.get(), None)),
        &scan(db.t0, db.t0 + 3_000),
    )
    .await;
}

async fn scan_commit_on_a_missing_shard_is_shard_lost_with_nothing_found(db: Fixture) {
    let lease = ShardLease {
        shard: 999,
        generation: ShardGeneration::new(1),
        owner: "A".into(),
        watermark: None,
        now: db.t0,
    };
    db.shard_refused(&lease, None, &scan(db.t0, db.t0 + 3_000))
        .await;
}

// ------------------------------------------------------------ crash states --

impl Fixture {
    /// Claims trigger `id` as `C` and checks that every attempt of it but
    /// the new one is closed as `expired` at the claim's instant.
    async fn claim_closes_the_leftovers(&self, id: i64, token: i64) {
        let now = self.t0 + 10 * LEASE;
        let c = self.claim_one(id, "C", now, LEASE).await;
        self.check_leftovers_closed(&c, token, now).await;
    }

    async fn check_leftovers_closed(&self, c: &Claim, token: i64, now: i64) {
        assert_eq!(
            (c.fencing_token.get(), c.attempt_no),
            (token + 1, token + 1)
        );
        let attempts = self.attempts(c.trigger_id).await;
        let first = attempts.iter().map(|a| a.started_at).min().unwrap();
        assert_eq!(c.first_started_at, first);
        for a in &attempts {
            if a.id == c.attempt_id {
                assert_eq!((a.ended_at, a.outcome.as_deref()), (None, None));
                assert_eq!(a.fencing_token, token + 1);
            } else {
                assert_eq!(
                    (a.ended_at, a.outcome.as_deref()),
                    (Some(now), Some("expired")),
                    "attempt {} (token {}) left open by a crash",
                    a.id,
                    a.fencing_token
                );
            }
        }
    }
}

async fn claim_after_a_crash_closes_the_open_attempt_of_a_lapsed_running_trigger(db: Fixture) {
    let id = db.trigger().await;
    db.leave(
        id,
        TriggerState::Running,
        1,
        Some(("ghost", db.t0 - 1)),
        &[1],
    )
    .await;
    db.claim_closes_the_leftovers(id, 1).await;
}

async fn claim_after_a_crash_closes_the_open_attempt_of_a_pending_trigger(db: Fixture) {
    // An older host released the trigger and crashed before closing its
    // attempt.
    let id = db.trigger().await;
    db.leave(id, TriggerState::Pending, 1, None, &[1]).await;
    db.claim_closes_the_leftovers(id, 1).await;
}

async fn claim_after_a_crash_closes_the_open_attempt_of_a_due_retry(db: Fixture) {
    // A failure was committed to the trigger, and the host crashed before
    // closing the attempt.
    let id = db.trigger().await;
    db.leave(id, TriggerState::RetryWait, 1, None, &[1]).await;
    db.claim_closes_the_leftovers(id, 1).await;
}

async fn claim_after_a_crash_closes_every_open_attempt_of_a_trigger(db: Fixture) {
    let id = db.trigger().await;
    db.leave(
        id,
        TriggerState::Running,
        3,
        Some(("ghost", db.t0 - 1)),
        &[1, 2, 3],
    )
    .await;
    db.claim_closes_the_leftovers(id, 3).await;
}

async fn claim_after_a_crash_closes_the_open_attempts_of_every_trigger_in_its_batch(db: Fixture) {
    let lapsed = db.trigger().await;
    db.leave(
        lapsed,
        TriggerState::Running,
        2,
        Some(("ghost", db.t0 - 1)),
        &[1, 2],
    )
    .await;
    let pending = db.trigger().await;
    db.leave(pending, TriggerState::Pending, 1, None, &[1])
        .await;
    let retry = db.trigger().await;
    db.leave(retry, TriggerState::RetryWait, 4, None, &[3, 4])
        .await;
    let clean = db.trigger().await;
    let tokens = [(lapsed, 2), (pending, 1), (retry, 4), (clean, 0)];
    let now = db.t0 + 10 * LEASE;
    let claims = db.claim("C", now, LEASE, 10).await;
    assert_eq!(claims.len(), tokens.len(), "{claims:?}");
    for (id, token) in tokens {
        let c = claims.iter().find(|c| c.trigger_id == id).unwrap();
        db.check_leftovers_closed(c, token, now).await;
    }
    assert_eq!(
        db.scalar("SELECT count(*) FROM attempts WHERE ended_at IS NULL")
            .await,
        4
    );
}

// ------------------------------------------------ the state machine in SQL --

async fn the_database_accepts_every_state_of_the_state_machine(db: Fixture) {
    let id = db.trigger().await;
    for state in TriggerState::ALL {
        sqlx::query(db.store.sql("UPDATE triggers SET state = ? WHERE id = ?"))
            .bind(state.as_str())
            .bind(id)
            .execute(db.store.pool())
            .await
            .unwrap_or_else(|e| panic!("{state} refused: {e}"));
        assert_eq!(db.get(id).await.state, state);
    }
}

async fn the_database_refuses_a_trigger_state_outside_the_state_machine(db: Fixture) {
    let id = db.trigger().await;
    let before = db.snapshot().await;
    for bogus in ["", "PENDING", "done", "held", "compensating", "running "] {
        let update = sqlx::query(db.store.sql("UPDATE triggers SET state = ? WHERE id = ?"))
            .bind(bogus)
            .bind(id)
            .execute(db.store.pool())
            .await;
        expect_check_violation(update, bogus);
        let insert = sqlx::query(db.store.sql(
            "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, \
                 origin, scheduled_at, params, state, next_run_at, created_at, updated_at) \
             SELECT plan_key || '-copy', job_id, plan_version, tenant, resource_group, origin, \
                 scheduled_at, params, ?, next_run_at, created_at, updated_at \
             FROM triggers WHERE id = ?",
        ))
        .bind(bogus)
        .bind(id)
        .execute(db.store.pool())
        .await;
        expect_check_violation(insert, bogus);
    }
    assert_eq!(db.snapshot().await, before);
}

/// Every state of `EffectState::ALL` is stored; any other is refused by
/// the CHECK, on update and on insert.
async fn the_database_holds_an_effect_to_the_effect_state_machine(db: Fixture) {
    let id = db.trigger().await;
    let insert = |state: &'static str, key: &'static str| {
        sqlx::query(db.store.sql(
            "INSERT INTO effects (tenant, idempotency_key, downstream_key, trigger_id, connector, \
                 action, params_digest, request_id, fencing_token, state, created_at, updated_at) \
             SELECT tenant, ?, ?, id, 'ledger', 'RES-1/charge', 'd', 'r', 1, ?, 0, 0 \
             FROM triggers WHERE id = ?",
        ))
        .bind(key)
        .bind(key)
        .bind(state)
        .bind(id)
        .execute(db.store.pool())
    };
    insert("intent", "k").await.unwrap();
    for state in paddock::model::EffectState::ALL {
        sqlx::query(
            db.store
                .sql("UPDATE effects SET state = ? WHERE idempotency_key = 'k'"),
        )
        .bind(state.as_str())
        .execute(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{state} refused: {e}"));
        let stored = db
            .store
            .effect_get(crate::TENANT, "k")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.state, state);
    }
    for bogus in ["", "INTENT", "pending", "compensated", "unknown "] {
        let update = sqlx::query(
            db.store
                .sql("UPDATE effects SET state = ? WHERE idempotency_key = 'k'"),
        )
        .bind(bogus)
        .execute(db.store.pool())
        .await;
        expect_violation_of(update, bogus, "effects_state_known");
        expect_violation_of(insert(bogus, "k2").await, bogus, "effects_state_known");
    }
}

fn expect_check_violation<T: Debug>(result: Result<T, sqlx::Error>, state: &str) {
    expect_violation_of(result, state, "triggers_state_known");
}

fn expect_violation_of<T: Debug>(result: Result<T, sqlx::Error>, state: &str, check: &str) {
    let error = match result {
        Err(sqlx::Error::Database(error)) => error,
        other => panic!("state '{state}' was not refused by the database: {other:?}"),
    };
    assert!(
        error.is_check_violation() && error.message().contains(check),
        "state '{state}': expected the CHECK {check}, got {error}"
    );
}

// ------------------------------------------------------------ conservation --

/// A small deterministic generator, so both databases run the same
/// sequence.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// What a sequence observed, to check the database against.
#[derive(Default)]
struct Observed {
    claims: i64,
    lease_lost: i64,
}

impl Observed {
    /// A fenced write either applies or is refused as `LeaseLost`; any
    /// other answer fails the case.
    fn fenced<T: Debug>(&mut self, what: &str, result: StoreResult<T>) {
        match result {
            Ok(_) => {}
            Err(StoreError::LeaseLost { .. }) => self.lease_lost += 1,
            Err(other) => panic!("{what}: {other}"),
        }
    }
}

impl Fixture {
    /// The conservation rules (DESIGN §2), checked by queries.
    async fn assert_conserved(&self, seen: &Observed) {
        let counts = self.store.trigger_counts().await.unwrap();
        let by_state: i64 = counts.by_state.iter().map(|(_, n)| n).sum();
        assert_eq!(by_state, counts.total, "triggers by state sum to the total");
        for (state, _) in &counts.by_state {
            assert!(
                state.parse::<TriggerState>().is_ok(),
                "unknown state {state}"
            );
        }
        assert_eq!(
            self.scalar("SELECT count(*) FROM attempts").await,
            seen.claims,
            "one attempt per claim"
        );
        assert_eq!(
            self.scalar("SELECT CAST(coalesce(sum(attempts), 0) AS BIGINT) FROM triggers")
                .await,
            seen.claims
        );
        assert_eq!(
            self.scalar("SELECT count(*) FROM triggers WHERE fencing_token <> attempts")
                .await,
            0,
            "one token per claim"
        );
        assert_eq!(
            self.scalar(
                "SELECT count(*) FROM (SELECT trigger_id FROM attempts WHERE ended_at IS NULL \
                 GROUP BY trigger_id HAVING count(*) > 1) AS twice"
            )
            .await,
            0,
            "at most one open attempt per trigger"
        );
        assert_eq!(
            self.scalar(
                "SELECT count(*) FROM attempts a JOIN triggers t ON t.id = a.trigger_id \
                 WHERE a.ended_at IS NULL \
                   AND (t.state <> 'running' OR t.fencing_token <> a.fencing_token)"
            )
            .await,
            0,
            "an open attempt holds its trigger's current lease"
        );
        assert_eq!(
            self.scalar(
                "SELECT count(*) FROM triggers WHERE \
                 (state IN ('succeeded', 'failed', 'cancelled', 'skipped')) \
                     <> (finished_at IS NOT NULL) \
                 OR (state = 'running') <> (lease_owner IS NOT NULL)"
            )
            .await,
            0,
            "finished triggers carry finished_at, running ones a lease, and no others"
        );
        assert_eq!(
            self.counter("stale_token_rejections").await,
            seen.lease_lost,
            "every refused write is counted once"
        );
    }
}

async fn conservation_holds_after_a_sequence_of_operations(db: Fixture) {
    let mut rng = Lcg(0x5eed);
    let mut seen = Observed::default();
    let mut triggers: Vec<i64> = Vec::new();
    let mut leases: Vec<LeaseRef> = Vec::new();
    let mut now = db.t0;
    for step in 0..160 {
        // Leases are 3 s; each step is 1 s on the claims' clock.
        now += 1_000;
        let pick = |rng: &mut Lcg, leases: &[LeaseRef]| leases[rng.below(leases.len())].clone();
        match rng.below(10) {
            0 | 1 => triggers.push(db.trigger().await),
            2 | 3 => {
                let owner = ["A", "B", "C"][rng.below(3)];
                let claims = db.claim(owner, now, 3_000, 1 + rng.below(3) as i64).await;
                seen.claims += claims.len() as i64;
                leases.extend(claims.iter().map(|c| c.lease(owner)));
            }
            _ if leases.is_empty() => {}
            4 => {
                let state = [
                    TriggerState::Succeeded,
                    TriggerState::Failed,
                    TriggerState::RetryWait,
                    TriggerState::Skipped,
                ][rng.below(4)];
                let end = AttemptEnd {
                    retry_after_ms: (state == TriggerState::RetryWait).then_some(0),
                    ..ended(state)
                };
                let lease = pick(&mut rng, &leases);
                seen.fenced("finish", db.store.attempt_finish(&lease, &end).await);
            }
            5 => {
                let lease = pick(&mut rng, &leases);
                let end = ended(TriggerState::Succeeded);
                let released = db
                    .store
                    .attempt_release(&lease, &end, ReleaseReason::Drained, "drain", 0)
                    .await;
                seen.fenced("release", released);
            }
            6 => {
                let lease = pick(&mut rng, &leases);
                let end = ended(TriggerState::Succeeded);
                db.store
                    .attempt_abandon(&lease, &end, "gate")
                    .await
                    .unwrap();
            }
            7 => {
                let lease = pick(&mut rng, &leases);
                seen.fenced("renew", db.store.lease_renew(&lease, 3_000, step).await);
                let saved = db.store.checkpoint_save(&lease, b"state").await;
                seen.fenced("checkpoint", saved);
            }
            8 => {
                let lease = pick(&mut rng, &leases);
                let key = format!("k{step}");
                let intent = db.store.effect_intent(&lease, &new_effect(&key)).await;
                seen.fenced("effect intent", intent);
            }
            _ => {
                let id = match triggers.len() {
                    0 => MISSING,
                    n => triggers[rng.below(n)],
                };
                db.store
                    .trigger_request_cancel(id, "test", "")
                    .await
                    .unwrap();
            }
        }
        if step % 20 == 19 {
            db.assert_conserved(&seen).await;
        }
    }
    db.assert_conserved(&seen).await;
    assert!(
        seen.claims > 10 && seen.lease_lost > 0,
        "the sequence should claim and meet stale leases: {} claims, {} refusals",
        seen.claims,
        seen.lease_lost
    );
}
