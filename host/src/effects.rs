//! The side-effect gateway: the host side of `paddock:job/effects`.
//!
//! Guests never touch external systems; they ask the host, which decides,
//! records, fences and audits. For `effects.invoke` the gateway, in order:
//! checks the connector is granted and configured; looks the key up (same
//! params digest → the recorded outcome, `replayed`; different digest →
//! `key-conflict` and an exception ticket, nothing sent; recorded but
//! unresolved → **query the downstream by key first**); takes the
//! connector's circuit breaker, rate limit and permit; writes the intent
//! with the attempt's fencing token in the same statement (stale → refused);
//! sends with `Idempotency-Key`, `Fencing-Token` and `X-Request-Id`; records
//! `succeeded | failed | unknown | retryable` fenced the same way.
//!
//! Invariants:
//! - an effect is sent only after its intent is durably written under a
//!   current fencing token, and its outcome is recorded only under one;
//! - a timeout or lost answer is `unknown`, never `failed`; an unknown is
//!   resolved by key (query) before anything is sent again; an effect that
//!   cannot be decided becomes an exception ticket;
//! - the sends of one key, across all attempts, stay within the plan's
//!   `retry.max_attempts` (`effects.sends`);
//! - a downstream refusing the token (409) closes the attempt's commit gate;
//! - a compensation is a new effect with its own key referencing a
//!   succeeded original; it never rewrites the original and cannot itself
//!   be compensated.
//!
//! # The protocol, in one place
//!
//! Every decision is a pure function in [`protocol`]; the gateway only
//! gathers its inputs and does what it returns:
//!
//! | question | decision | answers |
//! |---|---|---|
//! | read the key before the first send? another writer raced us? | [`protocol::Lookup`] | optimistic, read, read after race, give up |
//! | what is recorded under the key? | [`protocol::KeyRecord`] | unrecorded, other params, settled, unresolved, resendable |
//! | what next, given that, the [`protocol::Connector`], the budget and the stop state? | [`protocol::next_step`] → [`protocol::Step`] | replay, key conflict, query first, unknown (unqueryable), refuse, budget exhausted, send |
//! | the breaker refused the call | [`protocol::when_refused`] → [`protocol::Refused`] | wait, refuse `circuit-open` |
//! | what does the downstream's answer become? | [`classify::classify`] → [`protocol::on_answer`] → [`protocol::Answered`] | settled, key conflict, fenced, transient, unknown |
//! | after a transient answer | [`protocol::after_transient`] → [`protocol::Resend`] | back off and send again, budget exhausted |
//! | after an unknown answer | [`protocol::after_unknown`] → [`protocol::Reply`] | query next attempt, ticket |
//! | the budget is spent | [`protocol::budget_exhausted`] | the job's failure (idempotent), a ticket (not) |
//! | what did a query by key settle? | [`protocol::after_query`] → [`protocol::Queried`] | recorded, not found, evidence conflict, undecided |
//! | the guest's `effects.query` | [`protocol::query_step`] → [`protocol::QueryStep`] | from the record, query first, unqueryable, ask downstream |
//! | the recovery scanner | [`protocol::recovery_found`] → [`protocol::Recovered`] | succeeded, failed, not found, ticket, undecided |
//!
//! Pure rules are in [`protocol`] (the decisions above and every text the
//! guest or a ticket sees), [`classify`] (digest, answer classes) and
//! [`breaker`] (circuit breaker, rate limit); I/O in [`http`] and the
//! gateway (its connector cache, one send, tickets, the recovery scanner).
//! What a person does by hand (recover now, compensate) is [`operator`].

pub mod breaker;
pub mod classify;
mod gateway;
pub mod http;
pub mod operator;
pub mod protocol;

pub use breaker::{Admit, Breaker, BreakerConfig, BreakerPhase, BreakerState, RateLimit};
pub use classify::{Answer, Found, Verdict, classify, params_digest};
pub use gateway::{Caller, EffectGateway, GatewayConfig, ParkSlot, RecoveryGuard, RecoveryReport};
pub use http::HttpConnector;
