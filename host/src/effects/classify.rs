//! Pure rules of the effect protocol: the params digest, what a downstream's
//! answer means, and what a recorded effect means for a new request. No I/O.

use sha2::{Digest, Sha256};

/// The params digest of a request: hex SHA-256 of
/// `connector \n action \n compensates \n payload`. The same key with another
/// digest is a key conflict.
pub fn params_digest(
    connector: &str,
    action: &str,
    compensates: Option<&str>,
    payload: &[u8],
) -> String {
    let mut h = Sha256::new();
    h.update(connector.as_bytes());
    h.update(b"\n");
    h.update(action.as_bytes());
    h.update(b"\n");
    h.update(compensates.unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(payload);
    hex::encode(h.finalize())
}

/// What the connector saw, before interpretation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP status and body arrived.
    Status {
        status: u16,
        /// `Idempotent-Replayed: true` was set.
        replayed: bool,
        body: Vec<u8>,
    },
    /// The request never reached the downstream (connect refused, DNS...).
    NotSent(String),
    /// The request was (or may have been) sent and no answer arrived:
    /// timeout, reset, closed connection, unreadable body.
    Lost(String),
}

/// The error class an answer falls in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Applied (now, or earlier under this key if `replayed`).
    Succeeded { replayed: bool },
    /// Refused for good by the downstream's business rules; recorded there
    /// and replayed to later callers.
    Failed(String),
    /// The downstream says this key was used with other params.
    KeyConflict(String),
    /// The request is malformed; nothing was recorded downstream.
    Invalid(String),
    /// The downstream refused this attempt's fencing token.
    Fenced(String),
    /// Nothing was committed; the same key may be sent again later.
    Transient(String),
    /// It may or may not have happened: query by key before anything else.
    Unknown(String),
}

impl Verdict {
    /// Whether the circuit breaker counts this as the downstream failing.
    pub fn is_breaker_failure(&self) -> bool {
        matches!(self, Verdict::Transient(_) | Verdict::Unknown(_))
    }
}

fn error_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()?
        .get("error")?
        .as_str()
        .map(str::to_string)
}

fn brief(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.chars().take(300).collect()
}

/// Why a redirect answer is refused, and the fix.
pub const NO_REDIRECTS: &str = "the downstream redirects, and connectors do not follow redirects \
     (a credential never goes to another origin): set the connector's base URL to the final origin \
     (`paddock connector set NAME --base-url URL`)";

/// Classify an answer. The rules (reference ledger's table, generalised):
///
/// | answer | verdict |
/// |---|---|
/// | 2xx | succeeded (replayed if `Idempotent-Replayed: true`) |
/// | 409 `stale_fencing_token` | fenced |
/// | 422 `key_conflict` | key conflict |
/// | 400, 404, 405, 413, 414, 415 | invalid |
/// | 408, 425, 429, 5xx | transient (nothing committed) |
/// | 301, 302, 307, 308 (and any other 3xx) | invalid: redirects are not followed, the request was not applied here ([`NO_REDIRECTS`]) |
/// | 303 See Other | **unknown**: after a POST it may mean "done, see there" |
/// | any other 4xx (422 `insufficient_balance`, ...) | failed (permanent) |
/// | no connection made | transient |
/// | sent, no answer (timeout, reset) | **unknown**, never failed |
pub fn classify(answer: &Answer) -> Verdict {
    match answer {
        Answer::NotSent(why) => Verdict::Transient(format!("not sent: {why}")),
        Answer::Lost(why) => Verdict::Unknown(format!("no answer: {why}")),
        Answer::Status {
            status,
            replayed,
            body,
        } => {
            let code = error_code(body);
            match *status {
                200..=299 => Verdict::Succeeded {
                    replayed: *replayed,
                },
                409 if code.as_deref() == Some("stale_fencing_token") => {
                    Verdict::Fenced(brief(body))
                }
                422 if code.as_deref() == Some("key_conflict") => Verdict::KeyConflict(brief(body)),
                400 | 404 | 405 | 413 | 414 | 415 => {
                    Verdict::Invalid(format!("{status}: {}", brief(body)))
                }
                // "Done, the result is elsewhere" after a POST: it may have
                // been applied, so it is settled by a query at this origin.
                303 => Verdict::Unknown(format!("303 See Other: {NO_REDIRECTS}")),
                // Moved, or "repeat it there": not applied here, and never
                // sent there. A permanent failure until the base URL changes.
                300..=399 => Verdict::Invalid(format!("{status}: {NO_REDIRECTS}")),
                408 | 425 | 429 | 500..=599 => {
                    Verdict::Transient(format!("{status}: {}", brief(body)))
                }
                _ => Verdict::Failed(format!("{status}: {}", brief(body))),
            }
        }
    }
}

/// What a query by key found at the downstream.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A record: the status and body it was answered with, and the whole
    /// record as evidence.
    Recorded {
        status: u16,
        body: Vec<u8>,
        record: serde_json::Value,
    },
    /// No record: it never happened; safe to send with the same key.
    NotFound,
    /// The query itself failed: still unknown.
    Undecided(String),
}

/// Whether a downstream record found by key describes the operation this
/// host recorded: when the record names a `resource` and an `action` (the
/// reference ledger's do), `{resource}/{action}` must be our action.
/// Records without them are taken at their word.
pub fn evidence_matches(our_action: &str, record: &serde_json::Value) -> bool {
    match (
        record.get("resource").and_then(|v| v.as_str()),
        record.get("action").and_then(|v| v.as_str()),
    ) {
        (Some(resource), Some(action)) => format!("{resource}/{action}") == our_action,
        _ => true,
    }
}

/// Which characters an action may use: it becomes a path under the
/// connector's base URL, so it can never escape it.
pub fn check_action(action: &str) -> Result<(), String> {
    let ok = !action.is_empty()
        && action.len() <= 200
        && action
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !action.starts_with('/')
        && !action
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "action '{action}' must be path segments of [A-Za-z0-9._-] separated by '/'"
        ))
    }
}

/// Which characters a key may use (the reference ledger's rule: 1..=255
/// visible ASCII characters).
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        Err("idempotency-key must be 1..=255 visible ASCII characters".into())
    } else {
        Ok(())
    }
}

/// The most a downstream key may be: what common downstreams accept as an
/// `Idempotency-Key` (the reference ledger, payment APIs).
pub const MAX_DOWNSTREAM_KEY: usize = 255;

/// What the host sends as `Idempotency-Key` for `tenant`'s effect `key`,
/// and asks the downstream by: `tenant/key`. Tenant names hold no `/`, so
/// two tenants' equal keys are two operations at a downstream they share,
/// and a downstream's deduplication can never hand one tenant another's
/// answer. A qualified key longer than [`MAX_DOWNSTREAM_KEY`] sends the
/// key's SHA-256 instead (`tenant/sha256:HEX`): still one per key, and
/// within the limit for any tenant name.
pub fn downstream_key(tenant: &str, key: &str) -> String {
    let qualified = format!("{tenant}/{key}");
    if qualified.len() <= MAX_DOWNSTREAM_KEY {
        return qualified;
    }
    format!(
        "{tenant}/sha256:{}",
        hex::encode(Sha256::digest(key.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_of_two_tenants_are_two_downstream_keys() {
        assert_eq!(
            downstream_key("alpha", "order-1/charge"),
            "alpha/order-1/charge"
        );
        assert_ne!(
            downstream_key("alpha", "order-1/charge"),
            downstream_key("beta", "order-1/charge")
        );
    }

    #[test]
    fn a_long_key_is_sent_as_its_digest_within_the_limit() {
        let long = "k".repeat(255);
        let sent = downstream_key("a-tenant", &long);
        assert!(sent.len() <= MAX_DOWNSTREAM_KEY, "{sent}");
        assert!(sent.starts_with("a-tenant/sha256:"), "{sent}");
        assert_ne!(sent, downstream_key("a-tenant", &"k".repeat(254)));
        assert_ne!(sent, downstream_key("b-tenant", &long));
    }

    fn status(status: u16, body: &str) -> Answer {
        Answer::Status {
            status,
            replayed: false,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_lost_answer_is_unknown_never_failed() {
        assert!(matches!(
            classify(&Answer::Lost("timed out".into())),
            Verdict::Unknown(_)
        ));
        assert!(matches!(
            classify(&Answer::NotSent("refused".into())),
            Verdict::Transient(_)
        ));
    }

    #[test]
    fn the_reference_ledgers_answers_are_classified_by_its_table() {
        assert_eq!(
            classify(&status(200, r#"{"outcome":"applied"}"#)),
            Verdict::Succeeded { replayed: false }
        );
        assert!(matches!(
            classify(&status(409, r#"{"error":"stale_fencing_token"}"#)),
            Verdict::Fenced(_)
        ));
        assert!(matches!(
            classify(&status(422, r#"{"error":"key_conflict"}"#)),
            Verdict::KeyConflict(_)
        ));
        assert!(matches!(
            classify(&status(
                422,
                r#"{"error":"insufficient_balance","outcome":"rejected"}"#
            )),
            Verdict::Failed(_)
        ));
        assert!(matches!(
            classify(&status(404, r#"{"error":"unknown_action"}"#)),
            Verdict::Invalid(_)
        ));
        assert!(matches!(
            classify(&status(503, r#"{"error":"injected_fault"}"#)),
            Verdict::Transient(_)
        ));
    }

    #[test]
    fn a_redirect_is_refused_naming_the_fix_and_see_other_is_unknown() {
        for code in [301, 302, 307, 308] {
            match classify(&status(code, "")) {
                Verdict::Invalid(why) => assert!(why.contains("--base-url"), "{why}"),
                other => panic!("{code}: {other:?}"),
            }
        }
        assert!(matches!(classify(&status(303, "")), Verdict::Unknown(_)));
    }

    #[test]
    fn the_digest_covers_connector_action_compensation_and_payload() {
        let d = params_digest("c", "a", None, b"p");
        assert_eq!(d, params_digest("c", "a", None, b"p"));
        assert_ne!(d, params_digest("c", "a", None, b"q"));
        assert_ne!(d, params_digest("c", "b", None, b"p"));
        assert_ne!(d, params_digest("c", "a", Some("k"), b"p"));
    }

    #[test]
    fn a_downstream_record_for_another_operation_is_an_evidence_conflict() {
        let record = serde_json::json!({"resource": "RES-1", "action": "reserve"});
        assert!(evidence_matches("RES-1/reserve", &record));
        assert!(!evidence_matches("RES-2/reserve", &record));
        assert!(evidence_matches(
            "anything",
            &serde_json::json!({"status": 200})
        ));
    }

    #[test]
    fn actions_cannot_escape_the_connectors_base_url() {
        assert!(check_action("RES-900/release").is_ok());
        for bad in ["", "/abs", "a/../b", "a//b", "a?x=1", "http://x"] {
            assert!(check_action(bad).is_err(), "{bad}");
        }
    }
}
