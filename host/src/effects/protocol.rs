//! The effect protocol's decisions, as pure functions over facts the
//! gateway gathers: no I/O, no clock, no randomness (a jitter draw is passed
//! in). The gateway reads, asks one of these what to do, and does it. The
//! texts these decisions give a guest or an exception ticket are written
//! here too, so a change of wording is a change of this file and its tests.
//!
//! One request, in order (DESIGN §7):
//!
//! 1. [`check_request`], [`check_grant`], [`configured`],
//!    [`compensates_itself`], [`compensation_target`]: refuse a malformed or
//!    unauthorised request before anything is sent.
//! 2. [`Lookup`]: whether the key is read before the first send, and how
//!    many races with another writer of the key are retried.
//! 3. [`next_step`]: from the [`KeyRecord`] under the key, the
//!    [`Connector`], the send budget and the attempt's stop state, a
//!    [`Step`]: replay, key conflict, query first, unknown with a ticket,
//!    refuse, budget exhausted, or send.
//! 4. [`when_refused`]: an open breaker either holds the call briefly or
//!    answers `circuit-open`.
//! 5. [`on_answer`]: what a classified answer records and what the guest
//!    sees ([`Answered`]); a transient answer continues with
//!    [`after_transient`], an unknown one with [`after_unknown`].
//! 6. [`after_query`]: what a query by key settles for an unresolved record
//!    ([`Queried`]).
//!
//! The guest's `effects.query` is [`query_step`] then [`after_query`] or
//! [`found_unrecorded`]; the recovery scanner's is [`recovery_found`] or
//! [`recovery_unqueryable`] ([`Recovered`]). A decision a person must
//! finish is a [`Ticketed`] reply: the ticket to open, and the guest's
//! answer, whose text ends by naming that ticket.

use super::classify::{self, Answer, Found, Verdict};
use crate::model::retry::{RetryPolicy, backoff_ms};
use crate::model::{EffectState, LeaseRef, StopReason};
use crate::sandbox::wit::effects::{EffectError, Outcome, Request};
use crate::store::{ConnectorRecord, EffectOutcome, EffectRecord};
use std::fmt::Display;
use std::time::Duration;

mod recovery;
mod tickets;

pub use recovery::{Recovered, recovery_found, recovery_unqueryable};
use tickets::TicketReply;
pub use tickets::{Reply, TicketKind, TicketRequest, Ticketed};

/// The counters the protocol bumps (`paddock stats`).
pub mod counter {
    /// A recorded outcome answered again instead of sent: read from the
    /// record, found by a query, or replayed by the downstream.
    pub const IDEMPOTENCY_HIT: &str = crate::model::report::IDEMPOTENCY_HITS_COUNTER;
    /// A key presented with other params than it was recorded with, here
    /// or at the downstream.
    pub const KEY_CONFLICT: &str = "effect_key_conflicts";
    /// An effect that may or may not have happened.
    pub const UNKNOWN: &str = "effect_unknown";
    /// A key whose sends used up the plan's budget.
    pub const BUDGET_EXHAUSTED: &str = "effect_budget_exhausted";
    /// A call the open breaker refused.
    pub const CIRCUIT_OPEN: &str = "circuit_open_rejections";
    /// A downstream that refused the attempt's fencing token.
    pub const STALE_TOKEN: &str = "downstream_stale_token_rejections";
}

// ------------------------------------------------------------ the request --

/// A request's key and action are well formed.
pub fn check_request(request: &Request) -> Result<(), EffectError> {
    classify::check_key(&request.idempotency_key).map_err(EffectError::Invalid)?;
    classify::check_action(&request.action).map_err(EffectError::Invalid)
}

/// The job may call `name`: its manifest asks for it and its resource
/// group grants it (`granted` is both, intersected).
pub fn check_grant(granted: &[String], name: &str) -> Result<(), EffectError> {
    if granted.iter().any(|c| c == name) {
        Ok(())
    } else {
        Err(EffectError::NotGranted(format!(
            "connector '{name}' is not granted to this job (its manifest's `connectors` must name it \
             and an admin must grant its resource group `connector:{name}`)"
        )))
    }
}

/// A granted connector's row, as the host's lookup found it: missing means
/// not configured here; a failed read refuses the call.
pub fn configured<T>(
    name: &str,
    lookup: Result<Option<T>, impl Display>,
) -> Result<T, EffectError> {
    match lookup {
        Ok(Some(connector)) => Ok(connector),
        Ok(None) => Err(EffectError::NotGranted(format!(
            "connector '{name}' is not configured on this host (`paddock connector set {name} ...`)"
        ))),
        Err(e) => Err(EffectError::Invalid(format!(
            "connector '{name}' could not be read: {e}"
        ))),
    }
}

/// A compensation must name another effect (checked before the original is
/// read).
pub fn compensates_itself(key: &str, original: &str) -> Result<(), EffectError> {
    if original == key {
        Err(EffectError::Invalid(
            "an effect cannot compensate itself".into(),
        ))
    } else {
        Ok(())
    }
}

/// Whether what is recorded under `original` (or why it could not be read)
/// may be compensated: it exists, has succeeded, and is not itself a
/// compensation, so chains stay one link long. Returns the original.
pub fn compensation_target(
    original: &str,
    recorded: Result<Option<EffectRecord>, impl Display>,
) -> Result<EffectRecord, EffectError> {
    let rec = recorded
        .map_err(|e| EffectError::Invalid(format!("original effect unreadable: {e}")))?
        .ok_or_else(|| {
            EffectError::Invalid(format!(
                "nothing is recorded under key '{original}' to compensate"
            ))
        })?;
    if rec.compensates.is_some() {
        return Err(EffectError::Invalid(format!(
            "'{original}' is itself a compensation; compensations cannot be compensated"
        )));
    }
    if rec.state != EffectState::Succeeded {
        return Err(EffectError::Invalid(format!(
            "'{original}' is {}, not succeeded: nothing to compensate yet",
            rec.state
        )));
    }
    Ok(rec)
}

// ------------------------------------------------------------- the lookup --

/// How a request reads its key before sending.
///
/// First sends are the common case: while the breaker is closed the read is
/// skipped and the fenced intent insert finds out (its `ON CONFLICT DO
/// NOTHING` answers "already recorded" as a race, and the key is then read
/// as usual): one round trip fewer on every new effect. With the breaker not
/// closed the key is read first, so a recorded outcome is replayed even
/// while the downstream is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Take the key as new; the intent insert checks.
    Optimistic,
    /// Read the key first.
    Read,
    /// Read it again: another writer recorded it between a read and our
    /// intent. One more race gives up.
    ReadAfterRace,
}

impl Lookup {
    pub fn start(breaker_closed: bool) -> Self {
        if breaker_closed {
            Lookup::Optimistic
        } else {
            Lookup::Read
        }
    }

    /// Whether the key is read before this round.
    pub fn reads(self) -> bool {
        self != Lookup::Optimistic
    }

    /// Another writer recorded `key` before our intent: read again, or give
    /// up after the second race of a read.
    pub fn after_race(self, key: &str) -> Result<Self, EffectError> {
        match self {
            Lookup::Optimistic => Ok(Lookup::Read),
            Lookup::Read => Ok(Lookup::ReadAfterRace),
            Lookup::ReadAfterRace => Err(EffectError::Invalid(format!(
                "key '{key}' is being written concurrently by another attempt"
            ))),
        }
    }
}

// ----------------------------------------------------------- what to do --

/// The connector's properties the protocol depends on. (Whether it compares
/// fencing tokens decides nothing here: a downstream that does answers a
/// stale token with a 409 that [`classify::classify`] calls fenced.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connector<'a> {
    pub name: &'a str,
    /// It answers a query by key, so an unresolved effect can be asked
    /// about instead of handed to a person.
    pub queryable: bool,
    /// It honours `Idempotency-Key`, so its "nothing was committed" can be
    /// trusted when the budget is spent.
    pub idempotent: bool,
}

impl<'a> Connector<'a> {
    pub fn of(record: &'a ConnectorRecord) -> Self {
        Self {
            name: &record.name,
            queryable: record.queryable,
            idempotent: record.idempotent,
        }
    }
}

/// How many times one key may be sent, across all attempts: the plan's
/// `retry.max_attempts` (at least one).
pub fn send_budget(retry: &RetryPolicy) -> i64 {
    retry.max_attempts.max(1) as i64
}

/// What is recorded under the presented key, as this request sees it.
#[derive(Debug, Clone, Copy)]
pub enum KeyRecord<'r> {
    /// Nothing (or not read: see [`Lookup`]); a send inserts the intent.
    Unrecorded,
    /// Recorded with another params digest: the key names another fact.
    OtherParams(&'r EffectRecord),
    /// Succeeded or failed: that is the answer from now on.
    Settled(&'r EffectRecord),
    /// Sent (`intent`) or answered without a verdict (`unknown`): it may
    /// have happened, so the downstream is asked before anything is sent.
    Unresolved(&'r EffectRecord),
    /// Nothing was committed downstream (`retryable`, a transient answer,
    /// or a query that found nothing): the same key may be sent again.
    Resendable { sends: i64 },
}

impl<'r> KeyRecord<'r> {
    pub fn of(record: Option<&'r EffectRecord>, presented_digest: &str) -> Self {
        let Some(rec) = record else {
            return KeyRecord::Unrecorded;
        };
        if rec.params_digest != presented_digest {
            return KeyRecord::OtherParams(rec);
        }
        match rec.state {
            EffectState::Succeeded | EffectState::Failed => KeyRecord::Settled(rec),
            EffectState::Intent | EffectState::Unknown => KeyRecord::Unresolved(rec),
            EffectState::Retryable => KeyRecord::Resendable { sends: rec.sends },
        }
    }
}

/// What the gateway does next for one request.
#[derive(Debug)]
pub enum Step<'r> {
    /// Answer the recorded outcome again; nothing is sent.
    Replay(Outcome),
    /// Refuse with `key-conflict` and a ticket ([`key_conflict`]); nothing
    /// is sent.
    KeyConflict(&'r EffectRecord),
    /// Ask the downstream by key first ([`after_query`]).
    QueryFirst(&'r EffectRecord),
    /// It may have happened and the connector cannot be asked: `unknown`,
    /// with a ticket ([`unqueryable`]).
    UnknownUnqueryable(&'r EffectRecord),
    /// The attempt is being interrupted: `lease-lost`, nothing is sent.
    Refuse,
    /// Every send the plan allows is spent ([`budget_exhausted`]).
    BudgetExhausted(Spent),
    /// Write the intent under the lease (a new row, or the recorded one
    /// again) and send.
    Send { rewrite_intent: bool },
}

/// The next step for a request, given what is recorded under its key, the
/// connector, the key's send budget, and the attempt's interrupting stop
/// reason if any. A recorded answer or an unresolved record is dealt with
/// even while the attempt stops: only a send is refused.
pub fn next_step<'r>(
    record: KeyRecord<'r>,
    connector: Connector<'_>,
    budget: i64,
    interrupted: Option<StopReason>,
) -> Step<'r> {
    let sends = match record {
        KeyRecord::OtherParams(rec) => return Step::KeyConflict(rec),
        KeyRecord::Settled(rec) => return Step::Replay(replay(rec)),
        KeyRecord::Unresolved(rec) if connector.queryable => return Step::QueryFirst(rec),
        KeyRecord::Unresolved(rec) => return Step::UnknownUnqueryable(rec),
        KeyRecord::Unrecorded => 0,
        KeyRecord::Resendable { sends } => sends,
    };
    if interrupted.is_some() {
        Step::Refuse
    } else if sends >= budget {
        Step::BudgetExhausted(Spent {
            sends,
            budget,
            last: None,
        })
    } else {
        Step::Send {
            rewrite_intent: !matches!(record, KeyRecord::Unrecorded),
        }
    }
}

/// The recorded outcome of a settled effect, as the guest sees it again.
pub fn replay(record: &EffectRecord) -> Outcome {
    match record.state {
        EffectState::Succeeded => Outcome::Replayed(record.response.clone().unwrap_or_default()),
        _ => Outcome::Failed(record.error.clone().unwrap_or_else(|| "failed".into())),
    }
}

/// What a call refused by the open breaker does.
#[derive(Debug)]
pub enum Refused {
    /// Wait this long, sending nothing, then ask the breaker again.
    Wait(Duration),
    /// Answer `circuit-open` now; the attempt notes the breaker's wait so
    /// the runner can park the trigger without spending an attempt.
    Refuse(EffectError),
}

/// A call may wait inline for the breaker while its waits add up to at most
/// `max_park` (off by default: a waiting call holds a runner slot); each
/// wait is the breaker's `retry_after_ms` held to 5..=100 ms.
pub fn when_refused(
    connector: Connector<'_>,
    retry_after_ms: u64,
    parked: Duration,
    max_park: Duration,
) -> Refused {
    let wait = Duration::from_millis(retry_after_ms.clamp(5, 100));
    if parked + wait <= max_park {
        Refused::Wait(wait)
    } else {
        Refused::Refuse(EffectError::CircuitOpen(format!(
            "connector '{}' is open; retry after {retry_after_ms} ms",
            connector.name
        )))
    }
}

// ------------------------------------------------------------ an answer --

/// What a classified answer becomes: what to record under the lease, and
/// what follows.
#[derive(Debug)]
pub enum Answered {
    /// Record `outcome`, bump `counter` if any, and answer the guest.
    Settled {
        outcome: EffectOutcome,
        counter: Option<&'static str>,
        reply: Result<Outcome, EffectError>,
    },
    /// The downstream holds the key under other params: record the failure,
    /// count a key conflict, refuse with a ticket.
    KeyConflict {
        outcome: EffectOutcome,
        reply: Ticketed,
    },
    /// The downstream refused this attempt's token: stop the attempt and
    /// answer `lease-lost`. Recording is best effort: under a stale token
    /// the store refuses (and counts) it too.
    Fenced { outcome: EffectOutcome, why: String },
    /// Nothing was committed: record `retryable`, then [`after_transient`].
    Transient { outcome: EffectOutcome, why: String },
    /// It may have happened: record `unknown`, count it, then
    /// [`after_unknown`] with the sends as recorded.
    Unknown { outcome: EffectOutcome, why: String },
}

/// What one answer to a send of `key` becomes (see [`Answered`]).
pub fn on_answer(key: &str, answer: &Answer, verdict: Verdict) -> Answered {
    let (status, body) = match answer {
        Answer::Status { status, body, .. } => (Some(*status as i64), Some(body.clone())),
        _ => (None, None),
    };
    let record = |state: EffectState, error: Option<String>| EffectOutcome {
        state,
        response: body.clone(),
        error,
        last_status: status,
        resolved_by: "gateway",
    };
    match verdict {
        Verdict::Succeeded { replayed } => {
            let body = body.clone().unwrap_or_default();
            Answered::Settled {
                outcome: record(EffectState::Succeeded, None),
                counter: replayed.then_some(counter::IDEMPOTENCY_HIT),
                reply: Ok(if replayed {
                    Outcome::Replayed(body)
                } else {
                    Outcome::Done(body)
                }),
            }
        }
        Verdict::Failed(why) => Answered::Settled {
            outcome: record(EffectState::Failed, Some(why.clone())),
            counter: None,
            reply: Ok(Outcome::Failed(why)),
        },
        Verdict::Invalid(why) => Answered::Settled {
            outcome: record(EffectState::Failed, Some(why.clone())),
            counter: None,
            reply: Err(EffectError::Invalid(why)),
        },
        Verdict::KeyConflict(why) => Answered::KeyConflict {
            outcome: record(EffectState::Failed, Some(why.clone())),
            reply: Ticketed::new(
                TicketKind::KeyConflict,
                format!("{key}#downstream"),
                serde_json::json!({ "downstream": why }),
                TicketReply::KeyConflict(format!(
                    "the downstream holds '{key}' with other params: {why}; "
                )),
            ),
        },
        Verdict::Fenced(why) => Answered::Fenced {
            outcome: record(EffectState::Retryable, Some(why.clone())),
            why,
        },
        Verdict::Transient(why) => Answered::Transient {
            outcome: record(EffectState::Retryable, Some(why.clone())),
            why,
        },
        Verdict::Unknown(why) => Answered::Unknown {
            outcome: record(EffectState::Unknown, Some(why.clone())),
            why,
        },
    }
}

/// What follows a recorded transient answer.
#[derive(Debug)]
pub enum Resend {
    /// Send again after [`inline_backoff`].
    AfterBackoff,
    /// That was the last send the budget allows.
    Exhausted(Spent),
}

/// After a transient answer to send number `sends`: again, within the
/// budget.
pub fn after_transient(why: String, sends: i64, budget: i64) -> Resend {
    if sends >= budget {
        Resend::Exhausted(Spent {
            sends,
            budget,
            last: Some(why),
        })
    } else {
        Resend::AfterBackoff
    }
}

/// The wait before sending a key again inside one `invoke`: the plan's
/// backoff after `sends` sends, jittered by `unit` (in `[0, 1)`), and never
/// more than `cap` (longer waits belong to the trigger's `retry_wait`).
pub fn inline_backoff(retry: &RetryPolicy, sends: i64, unit: f64, cap: Duration) -> Duration {
    Duration::from_millis(backoff_ms(retry, sends as u32, unit).min(cap.as_millis() as u64))
}

/// After an unknown answer to `key` was recorded (`sends` as recorded): the
/// next attempt queries by key, unless the connector cannot be queried or
/// no send is left; then a person decides.
pub fn after_unknown(
    key: &str,
    why: String,
    sends: i64,
    budget: i64,
    connector: Connector<'_>,
) -> Reply {
    if !connector.queryable || sends >= budget {
        Reply::Ticketed(Ticketed::new(
            TicketKind::UnknownOutcome,
            key.to_string(),
            serde_json::json!({ "answer": why }),
            TicketReply::Unknown(format!("{why}; ")),
        ))
    } else {
        Reply::Now(Ok(Outcome::Unknown(format!(
            "{why}; the next attempt queries '{key}' before resending"
        ))))
    }
}

/// A key's send budget is spent: how many sends, of how many, and the last
/// transient answer when that send was the last one allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    pub sends: i64,
    pub budget: i64,
    pub last: Option<String>,
}

/// A spent budget. For an idempotent downstream its "nothing was committed"
/// can be trusted and the failure is the job's to handle. A downstream that
/// does not honour idempotency keys may have half-applied any of those
/// sends, so a person decides: a ticket carries the effect and every
/// attempt.
pub fn budget_exhausted(key: &str, spent: Spent, connector: Connector<'_>) -> Reply {
    let Spent {
        sends,
        budget,
        last,
    } = spent;
    let why = match last {
        None => format!("'{key}' was sent {sends} times (budget {budget}); nothing was committed"),
        Some(last) => format!(
            "'{key}' failed {sends} times (budget {budget}), last: {last}; nothing was committed"
        ),
    };
    if connector.idempotent {
        return Reply::Now(Err(EffectError::BudgetExhausted(why)));
    }
    Reply::Ticketed(Ticketed::new(
        TicketKind::BudgetExhausted,
        key.to_string(),
        serde_json::json!({
            "why": why,
            "connector": connector.name,
            "idempotent": false,
        }),
        TicketReply::BudgetExhausted(format!(
            "{why}; connector '{}' does not honour idempotency keys, so a person decides: ",
            connector.name
        )),
    ))
}

// ----------------------------------------------------------- a question --

/// What a query by key settled for an unresolved record.
#[derive(Debug)]
pub enum Queried {
    /// The downstream holds an answer: record it, count an idempotency hit,
    /// and replay what was recorded.
    Recorded(EffectOutcome),
    /// It never happened there: safe to send under the same key.
    NotFound,
    /// The downstream's record under our key is for another operation.
    EvidenceConflict(Ticketed),
    /// The query failed: still unknown (counted); a person decides once no
    /// send is left.
    Undecided(Reply),
}

/// What a query by key found for `record`, an unresolved effect that a new
/// request (or `effects.query`) came upon.
pub fn after_query(record: &EffectRecord, found: Found, budget: i64) -> Queried {
    let key = &record.idempotency_key;
    match found {
        Found::Recorded {
            record: evidence, ..
        } if !classify::evidence_matches(&record.action, &evidence) => {
            Queried::EvidenceConflict(Ticketed::new(
                TicketKind::EvidenceConflict,
                key.clone(),
                serde_json::json!({ "downstream_record": evidence }),
                TicketReply::Unknown(format!(
                    "the downstream's record for '{key}' is for another operation; "
                )),
            ))
        }
        Found::Recorded { status, body, .. } => {
            Queried::Recorded(downstream_record(status, body, "query"))
        }
        Found::NotFound => Queried::NotFound,
        Found::Undecided(why) if record.sends >= budget => {
            Queried::Undecided(Reply::Ticketed(Ticketed::new(
                TicketKind::UnknownOutcome,
                key.clone(),
                serde_json::json!({ "query": why }),
                TicketReply::Unknown(format!(
                    "'{key}' is still unknown after {} sends ({why}); ",
                    record.sends
                )),
            )))
        }
        Found::Undecided(why) => Queried::Undecided(Reply::Now(Ok(Outcome::Unknown(format!(
            "'{key}' is unknown and the query failed: {why}"
        ))))),
    }
}

/// An unresolved effect on a connector that cannot be queried by key.
pub fn unqueryable(record: &EffectRecord, connector: Connector<'_>) -> Ticketed {
    let key = &record.idempotency_key;
    Ticketed::new(
        TicketKind::UnknownOutcome,
        key.clone(),
        serde_json::json!({ "why": "connector cannot be queried by key" }),
        TicketReply::Unknown(format!(
            "'{key}' may have happened and connector '{}' cannot be queried; ",
            connector.name
        )),
    )
}

/// A key presented with other params than it was recorded with: nothing is
/// sent, and a person sees both digests and who presented the new one.
pub fn key_conflict(record: &EffectRecord, presented_digest: &str, lease: &LeaseRef) -> Ticketed {
    let key = &record.idempotency_key;
    Ticketed::new(
        TicketKind::KeyConflict,
        format!("{key}#{presented_digest}"),
        serde_json::json!({
            "presented_digest": presented_digest,
            "presented_by_attempt": lease.attempt_id,
            "presented_token": lease.fencing_token,
        }),
        TicketReply::KeyConflict(format!(
            "key '{key}' was recorded with other params (digest {}, presented {presented_digest}); \
             nothing was sent; ",
            record.params_digest
        )),
    )
}

/// What `effects.query` does with what is recorded under its key.
#[derive(Debug)]
pub enum QueryStep<'r> {
    /// The record answers (or nothing is known).
    Answer(Result<Option<Outcome>, EffectError>),
    /// Unresolved: ask the downstream ([`after_query`]); if it never
    /// happened there, record that ([`not_found_by_query`]).
    QueryFirst(&'r EffectRecord),
    /// Unresolved and the connector cannot be asked ([`unqueryable`]).
    Unqueryable(&'r EffectRecord),
    /// Nothing recorded here: ask the downstream ([`found_unrecorded`]).
    AskDownstream,
}

/// The guest asks what became of `key` on `connector`, without sending.
pub fn query_step<'r>(
    key: &str,
    connector: Connector<'_>,
    record: Option<&'r EffectRecord>,
) -> QueryStep<'r> {
    match record {
        Some(rec) if rec.connector != connector.name => {
            QueryStep::Answer(Err(EffectError::Invalid(format!(
                "'{key}' was recorded for connector '{}'",
                rec.connector
            ))))
        }
        Some(rec) if rec.state.is_final() => QueryStep::Answer(Ok(Some(replay(rec)))),
        Some(rec) if rec.state == EffectState::Retryable => QueryStep::Answer(Ok(None)),
        Some(rec) if connector.queryable => QueryStep::QueryFirst(rec),
        Some(rec) => QueryStep::Unqueryable(rec),
        None if connector.queryable => QueryStep::AskDownstream,
        None => QueryStep::Answer(Ok(None)),
    }
}

/// What `effects.query` records when the downstream never saw the key.
pub fn not_found_by_query() -> EffectOutcome {
    EffectOutcome {
        state: EffectState::Retryable,
        response: None,
        error: Some("not found at the downstream".into()),
        last_status: Some(404),
        resolved_by: "query",
    }
}

/// What the downstream knows of a key this host never recorded.
pub fn found_unrecorded(found: Found) -> Option<Outcome> {
    match found {
        Found::Recorded { status, body, .. } if (200..300).contains(&status) => {
            Some(Outcome::Replayed(body))
        }
        Found::Recorded { status, body, .. } => {
            Some(Outcome::Failed(format!("{status}: {}", body_text(&body))))
        }
        Found::NotFound => None,
        Found::Undecided(why) => Some(Outcome::Unknown(why)),
    }
}

/// A downstream's record found by key, as this host records it: 2xx is
/// succeeded, anything else failed with its status and body.
fn downstream_record(status: u16, body: Vec<u8>, resolved_by: &'static str) -> EffectOutcome {
    let ok = (200..300).contains(&status);
    EffectOutcome {
        state: if ok {
            EffectState::Succeeded
        } else {
            EffectState::Failed
        },
        error: (!ok).then(|| format!("{status}: {}", body_text(&body))),
        response: Some(body),
        last_status: Some(status as i64),
        resolved_by,
    }
}

/// A response body as text (lossy).
pub fn body_text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

#[cfg(test)]
mod tests;
