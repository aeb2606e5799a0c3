//! The protocol's decisions, one rule per test, with the texts a guest or a
//! ticket sees spelled out in full.

use super::*;
use crate::model::FencingToken;

const KEY: &str = "order-17/reserve/v1";

fn recorded(state: &str, digest: &str, sends: i64) -> EffectRecord {
    EffectRecord {
        id: 1,
        tenant: "t1".into(),
        idempotency_key: KEY.into(),
        downstream_key: format!("t1/{KEY}"),
        trigger_id: 7,
        attempt_id: Some(3),
        connector: "ledger".into(),
        action: "RES-1/reserve".into(),
        params_digest: digest.into(),
        request_id: "req-1".into(),
        fencing_token: 4,
        state: state.parse().unwrap(),
        response: None,
        error: None,
        compensates: None,
        sends,
        last_status: None,
        resolved_by: None,
        created_at: 0,
        updated_at: 0,
    }
}

fn connector(queryable: bool, idempotent: bool) -> Connector<'static> {
    Connector {
        name: "ledger",
        queryable,
        idempotent,
    }
}

fn queryable() -> Connector<'static> {
    connector(true, true)
}

fn status(status: u16, body: &str) -> Answer {
    Answer::Status {
        status,
        replayed: false,
        body: body.as_bytes().to_vec(),
    }
}

fn found(status: u16, body: &str, evidence: serde_json::Value) -> Found {
    Found::Recorded {
        status,
        body: body.as_bytes().to_vec(),
        record: evidence,
    }
}

fn unknown_text(answer: Result<Outcome, EffectError>) -> String {
    match answer {
        Ok(Outcome::Unknown(text)) => text,
        other => panic!("expected unknown, got {other:?}"),
    }
}

fn ticketed(reply: Reply) -> Ticketed {
    match reply {
        Reply::Ticketed(t) => t,
        Reply::Now(answer) => panic!("expected a ticket, got {answer:?}"),
    }
}

fn now(reply: Reply) -> Result<Outcome, EffectError> {
    match reply {
        Reply::Now(answer) => answer,
        Reply::Ticketed(t) => panic!("expected no ticket, got {:?}", t.ticket),
    }
}

// ------------------------------------------------------------ the lookup --

#[test]
fn a_first_send_skips_the_read_only_while_the_breaker_is_closed() {
    assert!(!Lookup::start(true).reads());
    assert!(Lookup::start(false).reads());
}

#[test]
fn races_are_read_again_twice_after_the_first_read_then_refused() {
    let key = "k";
    let read = Lookup::start(true).after_race(key).unwrap();
    assert_eq!(read, Lookup::Read);
    let again = read.after_race(key).unwrap();
    assert_eq!(again, Lookup::ReadAfterRace);
    assert!(again.reads());
    match again.after_race(key) {
        Err(EffectError::Invalid(text)) => assert_eq!(
            text,
            "key 'k' is being written concurrently by another attempt"
        ),
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------------------ next step --

#[test]
fn what_is_recorded_under_a_key_is_classified_against_the_presented_digest() {
    assert!(matches!(KeyRecord::of(None, "d"), KeyRecord::Unrecorded));
    let other = recorded("succeeded", "other", 1);
    assert!(matches!(
        KeyRecord::of(Some(&other), "d"),
        KeyRecord::OtherParams(_)
    ));
    for state in ["succeeded", "failed"] {
        let rec = recorded(state, "d", 1);
        assert!(matches!(
            KeyRecord::of(Some(&rec), "d"),
            KeyRecord::Settled(_)
        ));
    }
    for state in ["intent", "unknown"] {
        let rec = recorded(state, "d", 1);
        assert!(matches!(
            KeyRecord::of(Some(&rec), "d"),
            KeyRecord::Unresolved(_)
        ));
    }
    let retryable = recorded("retryable", "d", 2);
    assert!(matches!(
        KeyRecord::of(Some(&retryable), "d"),
        KeyRecord::Resendable { sends: 2 }
    ));
}

#[test]
fn a_new_key_is_sent_as_a_new_intent_and_a_resendable_one_rewrites_its_own() {
    assert!(matches!(
        next_step(KeyRecord::Unrecorded, queryable(), 3, None),
        Step::Send {
            rewrite_intent: false
        }
    ));
    assert!(matches!(
        next_step(KeyRecord::Resendable { sends: 2 }, queryable(), 3, None),
        Step::Send {
            rewrite_intent: true
        }
    ));
}

#[test]
fn a_settled_key_is_replayed_even_while_the_attempt_stops() {
    let mut ok = recorded("succeeded", "d", 1);
    ok.response = Some(b"{\"outcome\":\"applied\"}".to_vec());
    let step = next_step(
        KeyRecord::Settled(&ok),
        queryable(),
        3,
        Some(StopReason::LeaseLost),
    );
    assert!(
        matches!(step, Step::Replay(Outcome::Replayed(body)) if body == b"{\"outcome\":\"applied\"}")
    );

    let mut refused = recorded("failed", "d", 1);
    refused.error = Some("422: insufficient".into());
    assert!(matches!(
        next_step(KeyRecord::Settled(&refused), queryable(), 3, None),
        Step::Replay(Outcome::Failed(why)) if why == "422: insufficient"
    ));
    let bare = recorded("failed", "d", 1);
    assert!(matches!(replay(&bare), Outcome::Failed(why) if why == "failed"));
}

#[test]
fn other_params_under_a_recorded_key_are_a_conflict_before_anything_else() {
    let rec = recorded("intent", "other", 9);
    assert!(matches!(
        next_step(
            KeyRecord::OtherParams(&rec),
            queryable(),
            1,
            Some(StopReason::Shutdown)
        ),
        Step::KeyConflict(_)
    ));
}

#[test]
fn an_unresolved_key_is_queried_first_or_ticketed_when_the_connector_cannot_answer() {
    let rec = recorded("unknown", "d", 5);
    assert!(matches!(
        next_step(KeyRecord::Unresolved(&rec), queryable(), 3, None),
        Step::QueryFirst(_)
    ));
    assert!(matches!(
        next_step(
            KeyRecord::Unresolved(&rec),
            connector(false, true),
            3,
            Some(StopReason::LeaseLost)
        ),
        Step::UnknownUnqueryable(_)
    ));
}

#[test]
fn an_interrupted_attempt_sends_nothing_even_with_budget_left() {
    for reason in [StopReason::LeaseLost, StopReason::Shutdown] {
        assert!(matches!(
            next_step(KeyRecord::Unrecorded, queryable(), 3, Some(reason)),
            Step::Refuse
        ));
        assert!(matches!(
            next_step(
                KeyRecord::Resendable { sends: 9 },
                queryable(),
                3,
                Some(reason)
            ),
            Step::Refuse
        ));
    }
}

#[test]
fn a_key_sent_as_often_as_the_plan_allows_is_not_sent_again() {
    match next_step(KeyRecord::Resendable { sends: 3 }, queryable(), 3, None) {
        Step::BudgetExhausted(spent) => assert_eq!(
            spent,
            Spent {
                sends: 3,
                budget: 3,
                last: None
            }
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_send_budget_is_the_plans_max_attempts_and_at_least_one() {
    let mut retry = RetryPolicy::host_fallback();
    assert_eq!(send_budget(&retry), 3);
    retry.max_attempts = 0;
    assert_eq!(send_budget(&retry), 1);
}

// -------------------------------------------------------------- breaker --

#[test]
fn an_open_breaker_refuses_at_once_unless_inline_parking_is_allowed() {
    match when_refused(queryable(), 750, Duration::ZERO, Duration::ZERO) {
        Refused::Refuse(EffectError::CircuitOpen(text)) => {
            assert_eq!(text, "connector 'ledger' is open; retry after 750 ms")
        }
        other => panic!("{other:?}"),
    }
    let max = Duration::from_millis(150);
    assert!(matches!(
        when_refused(queryable(), 750, Duration::ZERO, max),
        Refused::Wait(w) if w == Duration::from_millis(100)
    ));
    assert!(matches!(
        when_refused(queryable(), 1, Duration::from_millis(100), max),
        Refused::Wait(w) if w == Duration::from_millis(5)
    ));
    assert!(matches!(
        when_refused(queryable(), 750, Duration::from_millis(100), max),
        Refused::Refuse(_)
    ));
}

// -------------------------------------------------------------- answers --

#[test]
fn a_success_is_recorded_with_its_body_and_a_downstream_replay_counts_as_a_hit() {
    let fresh = on_answer(
        KEY,
        &status(200, "ok"),
        Verdict::Succeeded { replayed: false },
    );
    match fresh {
        Answered::Settled {
            outcome,
            counter,
            reply: Ok(Outcome::Done(body)),
        } => {
            assert_eq!(outcome.state, "succeeded");
            assert_eq!(outcome.response.as_deref(), Some(&b"ok"[..]));
            assert_eq!(outcome.last_status, Some(200));
            assert_eq!(outcome.resolved_by, "gateway");
            assert_eq!(counter, None);
            assert_eq!(body, b"ok");
        }
        other => panic!("{other:?}"),
    }
    let replayed = on_answer(
        KEY,
        &status(200, "ok"),
        Verdict::Succeeded { replayed: true },
    );
    assert!(matches!(
        replayed,
        Answered::Settled {
            counter: Some(counter::IDEMPOTENCY_HIT),
            reply: Ok(Outcome::Replayed(_)),
            ..
        }
    ));
}

#[test]
fn a_refusal_is_recorded_failed_and_an_invalid_request_is_an_error() {
    match on_answer(KEY, &status(422, ""), Verdict::Failed("422: no".into())) {
        Answered::Settled {
            outcome,
            reply: Ok(Outcome::Failed(why)),
            ..
        } => {
            assert_eq!(outcome.state, "failed");
            assert_eq!(outcome.error.as_deref(), Some("422: no"));
            assert_eq!(why, "422: no");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        on_answer(KEY, &status(404, ""), Verdict::Invalid("404: x".into())),
        Answered::Settled { outcome, reply: Err(EffectError::Invalid(why)), .. }
            if outcome.state == "failed" && why == "404: x"
    ));
}

#[test]
fn a_downstream_key_conflict_is_recorded_failed_and_ticketed_under_its_own_subject() {
    match on_answer(KEY, &status(422, ""), Verdict::KeyConflict("held".into())) {
        Answered::KeyConflict { outcome, reply } => {
            assert_eq!(outcome.state, "failed");
            assert_eq!(reply.ticket.kind, TicketKind::KeyConflict);
            assert_eq!(reply.ticket.subject, format!("{KEY}#downstream"));
            assert_eq!(
                reply.ticket.detail,
                serde_json::json!({"downstream": "held"})
            );
            match reply.reply(Some(12)) {
                Err(EffectError::KeyConflict(text)) => assert_eq!(
                    text,
                    format!(
                        "the downstream holds '{KEY}' with other params: held; exception ticket 12"
                    )
                ),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fenced_and_transient_answers_record_retryable_and_a_lost_one_records_unknown() {
    assert!(matches!(
        on_answer(KEY, &status(409, ""), Verdict::Fenced("stale".into())),
        Answered::Fenced { outcome, .. } if outcome.state == "retryable"
    ));
    assert!(matches!(
        on_answer(KEY, &status(503, ""), Verdict::Transient("503".into())),
        Answered::Transient { outcome, .. } if outcome.state == "retryable"
    ));
    let lost = Answer::Lost("timed out".into());
    match on_answer(KEY, &lost, Verdict::Unknown("no answer: timed out".into())) {
        Answered::Unknown { outcome, why } => {
            assert_eq!(outcome.state, "unknown");
            assert_eq!(outcome.response, None);
            assert_eq!(outcome.last_status, None);
            assert_eq!(why, "no answer: timed out");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transient_answer_is_sent_again_until_the_last_allowed_send() {
    assert!(matches!(
        after_transient("503".into(), 2, 3),
        Resend::AfterBackoff
    ));
    match after_transient("503".into(), 3, 3) {
        Resend::Exhausted(spent) => assert_eq!(spent.last.as_deref(), Some("503")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_inline_backoff_follows_the_plan_and_is_capped() {
    let retry = RetryPolicy {
        max_attempts: 5,
        backoff_ms: 100,
        backoff_max_ms: 60_000,
        jitter: false,
        max_age_ms: None,
        max_elapsed_ms: None,
    };
    let cap = Duration::from_millis(250);
    assert_eq!(
        inline_backoff(&retry, 1, 0.0, cap),
        Duration::from_millis(100)
    );
    assert_eq!(
        inline_backoff(&retry, 2, 0.0, cap),
        Duration::from_millis(200)
    );
    assert_eq!(inline_backoff(&retry, 3, 0.0, cap), cap);
}

#[test]
fn an_unknown_is_left_to_the_next_attempts_query_while_it_can_be_asked_and_sent() {
    let text = unknown_text(now(after_unknown(
        KEY,
        "no answer".into(),
        1,
        3,
        queryable(),
    )));
    assert_eq!(
        text,
        format!("no answer; the next attempt queries '{KEY}' before resending")
    );
}

#[test]
fn an_unknown_that_cannot_be_asked_or_sent_again_is_a_persons_to_decide() {
    for (sends, connector) in [(1, connector(false, true)), (3, queryable())] {
        let t = ticketed(after_unknown(KEY, "no answer".into(), sends, 3, connector));
        assert_eq!(t.ticket.kind, TicketKind::UnknownOutcome);
        assert_eq!(t.ticket.subject, KEY);
        assert_eq!(t.ticket.detail, serde_json::json!({"answer": "no answer"}));
        assert_eq!(
            unknown_text(t.reply(Some(4))),
            "no answer; exception ticket 4"
        );
    }
    let t = ticketed(after_unknown(KEY, "no answer".into(), 3, 3, queryable()));
    assert_eq!(
        unknown_text(t.reply(None)),
        "no answer; exception ticket not written"
    );
}

#[test]
fn a_spent_budget_is_the_jobs_failure_on_an_idempotent_connector() {
    let spent = Spent {
        sends: 3,
        budget: 3,
        last: None,
    };
    match now(budget_exhausted(KEY, spent, queryable())) {
        Err(EffectError::BudgetExhausted(text)) => assert_eq!(
            text,
            format!("'{KEY}' was sent 3 times (budget 3); nothing was committed")
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_spent_budget_on_a_connector_without_idempotency_is_ticketed() {
    let spent = Spent {
        sends: 2,
        budget: 2,
        last: Some("503: busy".into()),
    };
    let t = ticketed(budget_exhausted(KEY, spent, connector(true, false)));
    let why = format!("'{KEY}' failed 2 times (budget 2), last: 503: busy; nothing was committed");
    assert_eq!(t.ticket.kind, TicketKind::BudgetExhausted);
    assert_eq!(
        t.ticket.detail,
        serde_json::json!({"why": why, "connector": "ledger", "idempotent": false})
    );
    match t.reply(Some(8)) {
        Err(EffectError::BudgetExhausted(text)) => assert_eq!(
            text,
            format!(
                "{why}; connector 'ledger' does not honour idempotency keys, \
                 so a person decides: exception ticket 8"
            )
        ),
        other => panic!("{other:?}"),
    }
}

// -------------------------------------------------------------- queries --

#[test]
fn a_record_found_by_query_is_recorded_as_the_downstream_answered_it() {
    let rec = recorded("unknown", "d", 1);
    let evidence = serde_json::json!({"resource": "RES-1", "action": "reserve"});
    match after_query(&rec, found(200, "ok", evidence.clone()), 3) {
        Queried::Recorded(outcome) => {
            assert_eq!(outcome.state, "succeeded");
            assert_eq!(outcome.error, None);
            assert_eq!(outcome.resolved_by, "query");
        }
        other => panic!("{other:?}"),
    }
    match after_query(&rec, found(422, "no", evidence), 3) {
        Queried::Recorded(outcome) => {
            assert_eq!(outcome.state, "failed");
            assert_eq!(outcome.error.as_deref(), Some("422: no"));
            assert_eq!(outcome.last_status, Some(422));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        after_query(&rec, Found::NotFound, 3),
        Queried::NotFound
    ));
}

#[test]
fn a_record_found_by_query_for_another_operation_is_an_evidence_ticket() {
    let rec = recorded("intent", "d", 1);
    let evidence = serde_json::json!({"resource": "RES-2", "action": "reserve"});
    match after_query(&rec, found(200, "ok", evidence.clone()), 3) {
        Queried::EvidenceConflict(t) => {
            assert_eq!(t.ticket.kind, TicketKind::EvidenceConflict);
            assert_eq!(
                t.ticket.detail,
                serde_json::json!({"downstream_record": evidence})
            );
            assert_eq!(
                unknown_text(t.reply(Some(2))),
                format!(
                    "the downstream's record for '{KEY}' is for another operation; exception ticket 2"
                )
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_query_stays_unknown_and_is_ticketed_once_no_send_is_left() {
    let early = recorded("unknown", "d", 1);
    let Queried::Undecided(reply) = after_query(&early, Found::Undecided("down".into()), 3) else {
        panic!("expected undecided");
    };
    assert_eq!(
        unknown_text(now(reply)),
        format!("'{KEY}' is unknown and the query failed: down")
    );
    let spent = recorded("unknown", "d", 3);
    let Queried::Undecided(reply) = after_query(&spent, Found::Undecided("down".into()), 3) else {
        panic!("expected undecided");
    };
    let t = ticketed(reply);
    assert_eq!(t.ticket.detail, serde_json::json!({"query": "down"}));
    assert_eq!(
        unknown_text(t.reply(Some(5))),
        format!("'{KEY}' is still unknown after 3 sends (down); exception ticket 5")
    );
}

#[test]
fn an_unqueryable_unknown_and_a_key_conflict_name_their_tickets() {
    let rec = recorded("intent", "d", 1);
    let t = unqueryable(&rec, connector(false, true));
    assert_eq!(t.ticket.subject, KEY);
    assert_eq!(
        unknown_text(t.reply(Some(3))),
        format!(
            "'{KEY}' may have happened and connector 'ledger' cannot be queried; exception ticket 3"
        )
    );

    let lease = LeaseRef {
        trigger_id: 7,
        attempt_id: 11,
        fencing_token: FencingToken::new(5),
        owner: "runner-a".into(),
    };
    let t = key_conflict(&recorded("succeeded", "old", 1), "new", &lease);
    assert_eq!(t.ticket.subject, format!("{KEY}#new"));
    assert_eq!(
        t.ticket.detail,
        serde_json::json!({
            "presented_digest": "new", "presented_by_attempt": 11, "presented_token": 5,
        })
    );
    match t.reply(Some(6)) {
        Err(EffectError::KeyConflict(text)) => assert_eq!(
            text,
            format!(
                "key '{KEY}' was recorded with other params (digest old, presented new); \
                 nothing was sent; exception ticket 6"
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_guests_query_answers_from_the_record_before_asking_the_downstream() {
    let other = Connector {
        name: "mailer",
        queryable: true,
        idempotent: true,
    };
    let rec = recorded("succeeded", "d", 1);
    assert!(matches!(
        query_step(KEY, other, Some(&rec)),
        QueryStep::Answer(Err(EffectError::Invalid(text)))
            if text == format!("'{KEY}' was recorded for connector 'ledger'")
    ));
    assert!(matches!(
        query_step(KEY, queryable(), Some(&rec)),
        QueryStep::Answer(Ok(Some(Outcome::Replayed(_))))
    ));
    let retryable = recorded("retryable", "d", 1);
    assert!(matches!(
        query_step(KEY, queryable(), Some(&retryable)),
        QueryStep::Answer(Ok(None))
    ));
    let unresolved = recorded("intent", "d", 1);
    assert!(matches!(
        query_step(KEY, queryable(), Some(&unresolved)),
        QueryStep::QueryFirst(_)
    ));
    assert!(matches!(
        query_step(KEY, connector(false, true), Some(&unresolved)),
        QueryStep::Unqueryable(_)
    ));
    assert!(matches!(
        query_step(KEY, queryable(), None),
        QueryStep::AskDownstream
    ));
    assert!(matches!(
        query_step(KEY, connector(false, true), None),
        QueryStep::Answer(Ok(None))
    ));
}

#[test]
fn what_the_downstream_knows_of_an_unrecorded_key_is_passed_on() {
    let any = serde_json::json!({});
    assert!(matches!(
        found_unrecorded(found(201, "ok", any.clone())),
        Some(Outcome::Replayed(body)) if body == b"ok"
    ));
    assert!(matches!(
        found_unrecorded(found(422, "no", any)),
        Some(Outcome::Failed(why)) if why == "422: no"
    ));
    assert!(found_unrecorded(Found::NotFound).is_none());
    assert!(matches!(
        found_unrecorded(Found::Undecided("down".into())),
        Some(Outcome::Unknown(why)) if why == "down"
    ));
    let not_found = not_found_by_query();
    assert_eq!(
        (
            not_found.state,
            not_found.last_status,
            not_found.resolved_by
        ),
        (crate::model::EffectState::Retryable, Some(404), "query")
    );
}

// ------------------------------------------------------------- recovery --

#[test]
fn recovery_marks_what_the_downstream_found_and_never_resends() {
    let rec = recorded("unknown", "d", 1);
    let evidence = serde_json::json!({"resource": "RES-1", "action": "reserve"});
    assert!(matches!(
        recovery_found(&rec, found(200, "ok", evidence.clone())),
        Recovered::Succeeded(o) if o.state == "succeeded" && o.resolved_by == "recovery"
    ));
    assert!(matches!(
        recovery_found(&rec, found(422, "no", evidence)),
        Recovered::Failed(o) if o.error.as_deref() == Some("422: no")
    ));
    assert!(matches!(
        recovery_found(&rec, Found::NotFound),
        Recovered::NotFound(o) if o.state == "retryable"
            && o.error.as_deref() == Some("not found at the downstream by recovery")
    ));
    assert!(matches!(
        recovery_found(&rec, Found::Undecided("down".into())),
        Recovered::Undecided(why) if why == "down"
    ));
    let elsewhere = serde_json::json!({"resource": "RES-9", "action": "reserve"});
    assert!(matches!(
        recovery_found(&rec, found(200, "ok", elsewhere)),
        Recovered::EvidenceConflict(t) if t.kind == TicketKind::EvidenceConflict
    ));
}

#[test]
fn recovery_of_an_unqueryable_effect_tickets_it_and_keeps_what_was_recorded() {
    let mut rec = recorded("intent", "d", 1);
    rec.error = Some("no answer".into());
    rec.last_status = Some(504);
    match recovery_unqueryable(&rec) {
        Recovered::Unqueryable { ticket, outcome } => {
            assert_eq!(ticket.kind, TicketKind::UnknownOutcome);
            assert_eq!(outcome.state, "unknown");
            assert_eq!(outcome.error.as_deref(), Some("no answer"));
            assert_eq!(outcome.last_status, Some(504));
            assert_eq!(outcome.resolved_by, "recovery");
        }
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------ grants, compensations --

#[test]
fn an_ungranted_or_unconfigured_connector_is_refused_with_how_to_fix_it() {
    let granted = vec!["ledger".to_string()];
    assert!(check_grant(&granted, "ledger").is_ok());
    assert!(matches!(
        check_grant(&granted, "mailer"),
        Err(EffectError::NotGranted(text)) if text
            == "connector 'mailer' is not granted to this job (its manifest's `connectors` must \
                name it and an admin must grant its resource group `connector:mailer`)"
    ));
    assert!(matches!(
        configured::<()>("mailer", Ok::<_, String>(None)),
        Err(EffectError::NotGranted(text)) if text
            == "connector 'mailer' is not configured on this host (`paddock connector set mailer ...`)"
    ));
    assert!(matches!(
        configured::<()>("mailer", Err("db down")),
        Err(EffectError::Invalid(text)) if text == "connector 'mailer' could not be read: db down"
    ));
}

#[test]
fn only_a_succeeded_effect_that_is_no_compensation_may_be_compensated() {
    assert!(matches!(
        compensates_itself("k", "k"),
        Err(EffectError::Invalid(text)) if text == "an effect cannot compensate itself"
    ));
    assert!(compensates_itself("undo", "k").is_ok());
    let invalid = |r: Result<EffectRecord, EffectError>| match r {
        Err(EffectError::Invalid(text)) => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        invalid(compensation_target(
            "k",
            Err::<Option<EffectRecord>, _>("db down")
        )),
        "original effect unreadable: db down"
    );
    assert_eq!(
        invalid(compensation_target("k", Ok::<_, String>(None))),
        "nothing is recorded under key 'k' to compensate"
    );
    let mut undo = recorded("succeeded", "d", 1);
    undo.compensates = Some("earlier".into());
    assert_eq!(
        invalid(compensation_target("k", Ok::<_, String>(Some(undo)))),
        "'k' is itself a compensation; compensations cannot be compensated"
    );
    assert_eq!(
        invalid(compensation_target(
            "k",
            Ok::<_, String>(Some(recorded("unknown", "d", 1)))
        )),
        "'k' is unknown, not succeeded: nothing to compensate yet"
    );
    assert!(compensation_target("k", Ok::<_, String>(Some(recorded("succeeded", "d", 1)))).is_ok());
}

#[test]
fn each_ticket_kind_offers_its_own_resolutions() {
    assert_eq!(
        TicketKind::UnknownOutcome.allowed_actions(),
        ["mark_succeeded", "mark_failed", "resend"]
    );
    assert_eq!(
        TicketKind::EvidenceConflict.allowed_actions(),
        ["mark_succeeded", "mark_failed", "resend"]
    );
    assert_eq!(
        TicketKind::BudgetExhausted.allowed_actions(),
        ["resend", "mark_failed"]
    );
    assert_eq!(TicketKind::KeyConflict.allowed_actions(), ["dismiss"]);
    assert_eq!(TicketKind::KeyConflict.as_str(), "key_conflict");
}
