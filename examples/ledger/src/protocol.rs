//! Pure protocol logic: header/body validation, the params digest, the
//! fencing/idempotency decision and the business rules. No I/O here, so every
//! rule can be unit-tested without a database or a socket.

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Largest amount one operation may move; keeps balances far from `i64` limits.
pub const MAX_AMOUNT: u64 = 1_000_000_000_000;
/// Longest accepted `Idempotency-Key`.
pub const MAX_KEY_LEN: usize = 255;
/// Longest accepted `X-Request-Id` (longer ones are rejected, not truncated).
pub const MAX_REQUEST_ID_LEN: usize = 200;
/// Longest accepted resource name.
pub const MAX_RESOURCE_LEN: usize = 64;

/// The four business actions. `reserve` and `charge` debit the resource's
/// balance; `release` and `refund` credit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Reserve,
    Release,
    Charge,
    Refund,
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, ProtocolError> {
        match s {
            "reserve" => Ok(Self::Reserve),
            "release" => Ok(Self::Release),
            "charge" => Ok(Self::Charge),
            "refund" => Ok(Self::Refund),
            _ => Err(ProtocolError::UnknownAction),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserve => "reserve",
            Self::Release => "release",
            Self::Charge => "charge",
            Self::Refund => "refund",
        }
    }

    pub fn is_debit(self) -> bool {
        matches!(self, Self::Reserve | Self::Charge)
    }
}

/// A request that failed validation. Never recorded, never applied: the
/// client sent something the ledger cannot interpret (HTTP 400/404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("missing Idempotency-Key header")]
    MissingIdempotencyKey,
    #[error("Idempotency-Key must be 1..=255 visible ASCII characters")]
    InvalidIdempotencyKey,
    #[error("Fencing-Token must be an unsigned integer no larger than 2^63-1")]
    InvalidFencingToken,
    #[error("X-Request-Id must be at most 200 visible ASCII characters")]
    InvalidRequestId,
    #[error("resource names are 1..=64 characters of [A-Za-z0-9._-]")]
    InvalidResource,
    #[error("unknown action; expected reserve, release, charge or refund")]
    UnknownAction,
    #[error("body must be a JSON object with a positive integer \"amount\" (at most 10^12)")]
    InvalidBody,
}

impl ProtocolError {
    /// Stable machine-readable code used in the `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "missing_idempotency_key",
            Self::InvalidIdempotencyKey => "invalid_idempotency_key",
            Self::InvalidFencingToken => "invalid_fencing_token",
            Self::InvalidRequestId => "invalid_request_id",
            Self::InvalidResource => "invalid_resource",
            Self::UnknownAction => "unknown_action",
            Self::InvalidBody => "invalid_body",
        }
    }

    /// HTTP status for this validation failure.
    pub fn status(&self) -> u16 {
        match self {
            Self::UnknownAction => 404,
            _ => 400,
        }
    }
}

fn visible_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

pub fn validate_idempotency_key(raw: Option<&str>) -> Result<String, ProtocolError> {
    let key = raw.ok_or(ProtocolError::MissingIdempotencyKey)?;
    if key.is_empty() || key.len() > MAX_KEY_LEN || !visible_ascii(key) {
        return Err(ProtocolError::InvalidIdempotencyKey);
    }
    Ok(key.to_owned())
}

/// Parses `Fencing-Token`. Tokens are stored as SQLite `INTEGER` (i64), so the
/// accepted range is `0..=i64::MAX`.
pub fn parse_fencing_token(raw: Option<&str>) -> Result<Option<u64>, ProtocolError> {
    match raw {
        None => Ok(None),
        Some(s) => {
            let t: u64 = s
                .trim()
                .parse()
                .map_err(|_| ProtocolError::InvalidFencingToken)?;
            if t > i64::MAX as u64 {
                return Err(ProtocolError::InvalidFencingToken);
            }
            Ok(Some(t))
        }
    }
}

pub fn validate_request_id(raw: Option<&str>) -> Result<Option<String>, ProtocolError> {
    match raw {
        None => Ok(None),
        Some(s) if s.len() <= MAX_REQUEST_ID_LEN && visible_ascii(s) => Ok(Some(s.to_owned())),
        Some(_) => Err(ProtocolError::InvalidRequestId),
    }
}

pub fn validate_resource(name: &str) -> Result<(), ProtocolError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_RESOURCE_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ProtocolError::InvalidResource)
    }
}

/// A parsed operation body: the canonical JSON (object keys sorted, no
/// whitespace) and the amount it moves.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationBody {
    pub canonical: String,
    pub amount: u64,
}

pub fn parse_body(bytes: &[u8]) -> Result<OperationBody, ProtocolError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| ProtocolError::InvalidBody)?;
    let obj = value.as_object().ok_or(ProtocolError::InvalidBody)?;
    let amount = obj
        .get("amount")
        .and_then(Value::as_u64)
        .filter(|a| (1..=MAX_AMOUNT).contains(a))
        .ok_or(ProtocolError::InvalidBody)?;
    // serde_json's default map is ordered by key, so re-serialising gives a
    // canonical form: `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` digest alike.
    let canonical = serde_json::to_string(&value).map_err(|_| ProtocolError::InvalidBody)?;
    Ok(OperationBody { canonical, amount })
}

/// The params digest: lowercase hex SHA-256 of
/// `"{resource}\n{action}\n{canonical JSON body}"`. Including the resource and
/// action means the same key reused for a different operation with an
/// identical body is a key conflict, not a replay.
pub fn params_digest(resource: &str, action: Action, canonical_body: &str) -> String {
    let mut h = Sha256::new();
    h.update(resource.as_bytes());
    h.update(b"\n");
    h.update(action.as_str().as_bytes());
    h.update(b"\n");
    h.update(canonical_body.as_bytes());
    hex::encode(h.finalize())
}

/// What the ledger does with a well-formed request, decided inside the
/// storage transaction from the state it read there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `Fencing-Token` is lower than the highest token this resource has seen:
    /// refuse, change nothing. Checked *before* the idempotency record, so a
    /// fenced-off writer never receives a success answer, not even a replay.
    Stale { presented: u64, current: u64 },
    /// The key was recorded with a different digest: refuse, change nothing.
    KeyConflict { recorded_digest: String },
    /// Same key, same digest: return the recorded response, apply nothing
    /// (the presented token, if higher, still becomes the resource's highest).
    Replay,
    /// New key: raise the resource's token (if presented) and apply.
    Apply,
}

/// The decision order is: fencing, then idempotency record, then apply.
pub fn decide(
    presented_token: Option<u64>,
    highest_token: Option<u64>,
    recorded_digest: Option<&str>,
    digest: &str,
) -> Decision {
    if let (Some(presented), Some(current)) = (presented_token, highest_token)
        && presented < current
    {
        return Decision::Stale { presented, current };
    }
    match recorded_digest {
        Some(d) if d == digest => Decision::Replay,
        Some(d) => Decision::KeyConflict {
            recorded_digest: d.to_owned(),
        },
        None => Decision::Apply,
    }
}

/// The token to store as the resource's highest after a request that passed
/// the fencing check.
pub fn raised_token(presented: Option<u64>, highest: Option<u64>) -> Option<u64> {
    match (presented, highest) {
        (Some(p), Some(h)) => Some(p.max(h)),
        (p, h) => p.or(h),
    }
}

/// A permanent business failure (recorded under the key, replayed as such).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusinessRejection {
    InsufficientBalance { balance: i64 },
    BalanceOverflow { balance: i64 },
}

impl BusinessRejection {
    pub fn code(&self) -> &'static str {
        match self {
            Self::InsufficientBalance { .. } => "insufficient_balance",
            Self::BalanceOverflow { .. } => "balance_overflow",
        }
    }
}

/// Applies `action` to `balance`, returning the new balance.
pub fn apply_business(action: Action, amount: u64, balance: i64) -> Result<i64, BusinessRejection> {
    // `amount <= MAX_AMOUNT`, which fits in i64.
    let amount = amount as i64;
    if action.is_debit() {
        if balance < amount {
            return Err(BusinessRejection::InsufficientBalance { balance });
        }
        Ok(balance - amount)
    } else {
        balance
            .checked_add(amount)
            .ok_or(BusinessRejection::BalanceOverflow { balance })
    }
}

/// Everything needed to build a recorded response body.
#[derive(Debug, Clone)]
pub struct OperationContext<'a> {
    pub idempotency_key: &'a str,
    pub resource: &'a str,
    pub action: Action,
    pub amount: u64,
    pub fencing_token: Option<u64>,
    pub request_id: Option<&'a str>,
    pub at: &'a str,
}

/// HTTP status of an applied operation.
pub const STATUS_APPLIED: u16 = 200;
/// HTTP status of a business rejection (and of a key conflict).
pub const STATUS_UNPROCESSABLE: u16 = 422;
/// HTTP status of a stale fencing token.
pub const STATUS_STALE: u16 = 409;

pub fn applied_body(ctx: &OperationContext<'_>, before: i64, after: i64) -> Value {
    json!({
        "outcome": "applied",
        "idempotency_key": ctx.idempotency_key,
        "resource": ctx.resource,
        "action": ctx.action,
        "amount": ctx.amount,
        "balance_before": before,
        "balance_after": after,
        "fencing_token": ctx.fencing_token,
        "request_id": ctx.request_id,
        "applied_at": ctx.at,
    })
}

pub fn rejected_body(ctx: &OperationContext<'_>, why: &BusinessRejection) -> Value {
    let balance = match why {
        BusinessRejection::InsufficientBalance { balance }
        | BusinessRejection::BalanceOverflow { balance } => *balance,
    };
    json!({
        "error": why.code(),
        "outcome": "rejected",
        "idempotency_key": ctx.idempotency_key,
        "resource": ctx.resource,
        "action": ctx.action,
        "amount": ctx.amount,
        "balance": balance,
        "fencing_token": ctx.fencing_token,
        "request_id": ctx.request_id,
        "rejected_at": ctx.at,
    })
}

pub fn stale_body(resource: &str, presented: u64, current: u64) -> Value {
    json!({
        "error": "stale_fencing_token",
        "resource": resource,
        "presented": presented,
        "current": current,
    })
}

pub fn key_conflict_body(key: &str, recorded: &str, presented: &str) -> Value {
    json!({
        "error": "key_conflict",
        "idempotency_key": key,
        "recorded_digest": recorded,
        "presented_digest": presented,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_key_order_and_whitespace_but_not_resource_or_action() {
        let a = parse_body(br#"{"amount":5,"memo":"x"}"#).unwrap();
        let b = parse_body(br#"{ "memo": "x", "amount": 5 }"#).unwrap();
        assert_eq!(a.canonical, b.canonical);
        let d = params_digest("RES-1", Action::Reserve, &a.canonical);
        assert_eq!(d, params_digest("RES-1", Action::Reserve, &b.canonical));
        assert_ne!(d, params_digest("RES-2", Action::Reserve, &a.canonical));
        assert_ne!(d, params_digest("RES-1", Action::Charge, &a.canonical));
        assert_eq!(d.len(), 64);
    }

    #[test]
    fn bodies_without_a_positive_amount_are_invalid() {
        for b in [
            &br#"{}"#[..],
            br#"{"amount":0}"#,
            br#"{"amount":-1}"#,
            br#"{"amount":1.5}"#,
            br#"[1]"#,
            br#"nope"#,
            br#"{"amount":1000000000001}"#,
        ] {
            assert_eq!(parse_body(b), Err(ProtocolError::InvalidBody), "{b:?}");
        }
    }

    #[test]
    fn a_lower_token_is_stale_even_when_the_key_was_recorded() {
        assert_eq!(
            decide(Some(77), Some(78), Some("d"), "d"),
            Decision::Stale {
                presented: 77,
                current: 78
            }
        );
    }

    #[test]
    fn an_equal_or_higher_token_or_no_token_passes_the_fence() {
        assert_eq!(decide(Some(78), Some(78), None, "d"), Decision::Apply);
        assert_eq!(decide(Some(79), Some(78), Some("d"), "d"), Decision::Replay);
        assert_eq!(decide(None, Some(78), None, "d"), Decision::Apply);
        assert_eq!(decide(Some(1), None, None, "d"), Decision::Apply);
    }

    #[test]
    fn same_key_with_a_different_digest_is_a_conflict() {
        assert_eq!(
            decide(None, None, Some("a"), "b"),
            Decision::KeyConflict {
                recorded_digest: "a".into()
            }
        );
    }

    #[test]
    fn the_highest_token_only_ever_rises() {
        assert_eq!(raised_token(Some(5), Some(7)), Some(7));
        assert_eq!(raised_token(Some(9), Some(7)), Some(9));
        assert_eq!(raised_token(None, Some(7)), Some(7));
        assert_eq!(raised_token(Some(3), None), Some(3));
        assert_eq!(raised_token(None, None), None);
    }

    #[test]
    fn debits_cannot_go_below_zero_and_credits_add() {
        assert_eq!(apply_business(Action::Reserve, 5, 5), Ok(0));
        assert_eq!(
            apply_business(Action::Charge, 6, 5),
            Err(BusinessRejection::InsufficientBalance { balance: 5 })
        );
        assert_eq!(apply_business(Action::Release, 5, 5), Ok(10));
        assert_eq!(apply_business(Action::Refund, 1, 0), Ok(1));
        assert!(apply_business(Action::Refund, 1, i64::MAX).is_err());
    }

    #[test]
    fn headers_are_validated() {
        assert_eq!(
            validate_idempotency_key(None),
            Err(ProtocolError::MissingIdempotencyKey)
        );
        assert!(validate_idempotency_key(Some("has space")).is_err());
        assert!(validate_idempotency_key(Some("")).is_err());
        assert_eq!(validate_idempotency_key(Some("k-1")).unwrap(), "k-1");
        assert_eq!(parse_fencing_token(Some("77")), Ok(Some(77)));
        assert!(parse_fencing_token(Some("-1")).is_err());
        assert!(parse_fencing_token(Some("9223372036854775808")).is_err());
        assert!(validate_resource("RES-900").is_ok());
        assert!(validate_resource("a/b").is_err());
        assert_eq!(Action::parse("refund"), Ok(Action::Refund));
        assert_eq!(Action::parse("steal"), Err(ProtocolError::UnknownAction));
    }
}
