//! # paddock-ledger — the reference downstream
//!
//! A small, real HTTP service that Paddock's tests and demo use as "the
//! outside world": an inventory/payments ledger that honours
//! `Idempotency-Key` and `Fencing-Token`, answers "what happened to key K?",
//! and misbehaves on command.
//!
//! ## Model
//!
//! Each resource (`RES-900`, names `[A-Za-z0-9._-]{1,64}`) has a `balance`
//! (non-negative integer) and the highest fencing token it has seen. A
//! resource is created on first touch with the opening balance (default 100,
//! `--initial-balance`), or explicitly with `PUT /admin/resources/{resource}`.
//! `reserve` and `charge` debit the balance; `release` and `refund` credit it.
//! A debit beyond zero is a permanent business failure.
//!
//! ## Effect requests: `POST /v1/{resource}/{action}`
//!
//! Body: a JSON object with `"amount"`: integer `1..=10^12`; other fields are
//! allowed and are part of the digest. Headers:
//!
//! | header | | |
//! |---|---|---|
//! | `Idempotency-Key` | required | 1..=255 visible ASCII characters |
//! | `Fencing-Token` | optional | integer `0..=2^63-1`; enforced when present |
//! | `X-Request-Id` | optional | recorded with the operation |
//!
//! The params digest is the hex SHA-256 of `"{resource}\n{action}\n{body}"`,
//! with the body re-serialised canonically (keys sorted, no whitespace).
//!
//! Everything below happens in **one** SQLite `BEGIN IMMEDIATE` transaction,
//! in this order:
//!
//! 1. **Fence.** If `Fencing-Token` is below the resource's highest token:
//!    `409 {"error":"stale_fencing_token","presented":n,"current":m}`,
//!    nothing changes, `stale_token_rejections` is counted. This is checked
//!    *before* the idempotency record, so a fenced-off writer never gets a
//!    success answer, not even a replay.
//! 2. **Idempotency record.** Same key, same digest: the recorded status and
//!    body are returned verbatim with `Idempotent-Replayed: true`; nothing is
//!    re-applied. Same key, different digest:
//!    `422 {"error":"key_conflict",...}`, nothing changes.
//! 3. **Apply.** The presented token becomes the resource's highest (tokens
//!    only rise; a replay raises it too), the business rule runs and the
//!    outcome is recorded under the key:
//!    `200 {"outcome":"applied",...}` or
//!    `422 {"error":"insufficient_balance","outcome":"rejected",...}`.
//!    A recorded rejection is replayed like a success.
//!
//! Invalid requests (missing/bad headers, bad body) get `400` and an unknown
//! action `404`, with `{"error": code, "message": ...}`; they are never
//! recorded. Storage failures are `500 {"error":"internal"}` (no SQL text).
//!
//! Every effect response carries `Ledger-Outcome`: `applied`, `rejected`,
//! `replayed`, `key_conflict`, `stale_fencing_token`, `invalid`,
//! `injected_error` or `internal_error`.
//!
//! ## Queries
//!
//! * `GET /v1/operations/{idempotency_key}` — `200` with the recorded
//!   operation (`outcome`, `status`, `response`, `fencing_token`,
//!   `params_digest`, `request_id`, ...) or `404 {"error":"not_found"}`.
//!   Percent-encode keys that contain reserved URL characters.
//! * `GET /v1/resources/{resource}` — `balance`, `highest_fencing_token`,
//!   `operations`; `404` if never touched.
//! * `GET /v1/stats` — counters: `requests_received`, `applied`,
//!   `business_rejections`, `replayed`, `key_conflicts`,
//!   `stale_token_rejections`, `invalid_requests`, `internal_errors`, and
//!   `injected_faults` by kind.
//!
//! ## Fault injection (in memory; see [`faults`])
//!
//! * `POST /admin/faults` adds a rule, e.g.
//!   `{"latency_ms":500,"error_rate":0.5,"error_status":503,
//!   "drop_response_after_commit":3,"delay_response_ms":2000,
//!   "count":2,"scope":{"resource":"RES-900"}}`; `GET` lists, `DELETE`
//!   clears all rules and releases all holds.
//! * `POST /admin/hold {"hold_key":"K","fencing_token":77}` parks requests
//!   with that key (and token, if given) just before the transaction;
//!   `GET /admin/holds` shows how many are waiting;
//!   `POST /admin/release {"hold_key":"K"}` (or `{}` for all) lets them go.
//!
//! Faults and holds apply only to effect requests that passed validation.

#![forbid(unsafe_code)]

pub mod faults;
mod http;
pub mod protocol;
mod server;
pub mod store;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;

pub use http::{OUTCOME_HEADER, REPLAYED_HEADER};

/// Opening balance of a resource created on first touch.
pub const DEFAULT_INITIAL_BALANCE: i64 = 100;

/// Service configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub db_path: PathBuf,
    pub initial_balance: i64,
}

impl Config {
    pub fn new(db_path: impl Into<PathBuf>) -> Self {
        Self {
            db_path: db_path.into(),
            initial_balance: DEFAULT_INITIAL_BALANCE,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("could not open the ledger database")]
    Store(#[from] store::StoreError),
    #[error("opening balance must not be negative")]
    NegativeBalance,
}

/// An opened ledger (database migrated), ready to serve.
#[derive(Debug)]
pub struct Ledger {
    state: Arc<http::AppState>,
}

impl Ledger {
    pub async fn open(config: Config) -> Result<Self, LedgerError> {
        if config.initial_balance < 0 {
            return Err(LedgerError::NegativeBalance);
        }
        let store = store::Store::open(&config.db_path, config.initial_balance).await?;
        Ok(Self {
            state: Arc::new(http::AppState {
                store,
                faults: faults::Faults::default(),
                stats: http::Stats::default(),
                auth: Default::default(),
            }),
        })
    }

    /// Serves until `shutdown` resolves, then stops accepting, releases any
    /// held requests, waits up to 5 s for in-flight requests and closes the
    /// database.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()> + Send) {
        server::run(listener, self.state, shutdown).await;
    }
}

/// Opens the database at `db_path` (created if missing) and serves on
/// `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    db_path: impl AsRef<Path>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), LedgerError> {
    serve_with(listener, Config::new(db_path.as_ref()), shutdown).await
}

/// [`serve`] with a full [`Config`].
pub async fn serve_with(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), LedgerError> {
    Ledger::open(config).await?.serve(listener, shutdown).await;
    Ok(())
}
