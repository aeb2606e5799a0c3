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
//! Pure rules are in [`classify`] (digest, answer classes) and [`breaker`]
//! (circuit breaker, rate limit); I/O in [`http`] and [`gateway`].

pub mod breaker;
pub mod classify;
mod gateway;
pub mod http;
pub mod protocol;

pub use breaker::{Admit, Breaker, BreakerConfig, BreakerState, RateLimit};
pub use classify::{Answer, Found, Verdict, classify, params_digest};
pub use gateway::{Caller, EffectGateway, GatewayConfig, ParkSlot, RecoveryGuard, RecoveryReport};
pub use http::HttpConnector;
