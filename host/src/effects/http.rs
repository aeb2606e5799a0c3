//! The `http` connector (reqwest): one POST per send, one GET per query.
//!
//! - send: `POST {base_url}/{action}` with the payload as the body and the
//!   headers `Idempotency-Key`, `Fencing-Token` (the attempt's token, always
//!   sent; only a downstream with `compares_tokens` enforces it) and
//!   `X-Request-Id`;
//! - query: `GET {base_url}/operations/{key}` → `200 {"status", "response"}`
//!   (the recorded answer) or `404` (never happened).
//!
//! A connect error means nothing was sent; any other failure after the
//! request left (timeout, reset, unreadable body) is [`Answer::Lost`]:
//! unknown, never failed.
//!
//! A connector stays at its origin: redirects are never followed (a 3xx is
//! an answer, classified in `classify.rs`), so neither the request nor its
//! credential reaches another host. Every answer body and error text is
//! redacted of the connector's credential ([`crate::model::origin`]) here,
//! before the gateway, the guest, a ticket or a log can keep it.

use super::classify::{Answer, Found};
use crate::model::origin;
use crate::model::secret::ConnectorSecret;
use crate::store::ConnectorRecord;
use std::time::Duration;

#[derive(Clone)]
pub struct HttpConnector {
    client: reqwest::Client,
}

impl Default for HttpConnector {
    fn default() -> Self {
        Self::new()
    }
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where a call goes: the connector's row, its credential if any, and
/// the most of an answer's body the host reads.
#[derive(Clone, Copy)]
pub struct Endpoint<'a> {
    pub record: &'a ConnectorRecord,
    pub secret: Option<&'a ConnectorSecret>,
    /// Over it, the answer is lost (an unknown outcome), never stored:
    /// the calling group's `effect_response` cap, or [`MAX_BODY`].
    pub max_body: usize,
}

impl Endpoint<'_> {
    /// Every form of the credential this call carries (see
    /// [`origin::credentials`]).
    fn credentials(&self) -> Vec<String> {
        origin::credentials(&self.record.base_url, self.secret.map(|s| s.expose()))
    }
}

/// The connector's credential on the request, marked sensitive (reqwest
/// and hyper never print a sensitive header's value).
fn with_secret(
    request: reqwest::RequestBuilder,
    secret: Option<&ConnectorSecret>,
) -> reqwest::RequestBuilder {
    let Some(secret) = secret else {
        return request;
    };
    match reqwest::header::HeaderValue::from_str(secret.expose()) {
        Ok(mut value) => {
            value.set_sensitive(true);
            request.header(secret.header.as_str(), value)
        }
        // Checked when set (`ConnectorSecret::header`); a value that still
        // does not fit a header is left off and the downstream refuses.
        Err(_) => request,
    }
}

/// The most of a response body the host reads when no group's cap applies
/// (the recovery scanner's queries): the largest cap any group may set. A
/// downstream that sends more cannot make the host hold it; the answer is
/// lost (an unknown outcome, settled by query or a ticket), never stored.
pub const MAX_BODY: usize = crate::model::caps::MAX_CAP as usize;

async fn bounded_body(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() > max => {
                return Err(format!(
                    "body over the {max}-byte cap on effect responses, not read"
                ));
            }
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("body lost: {}", describe(&e))),
        }
    }
}

/// An error's text with its causes, without the URL (which may carry a
/// stored row's user info).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), &origin::shown_base_url(url.as_str()));
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(" <- ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl HttpConnector {
    pub fn new() -> Self {
        Self {
            client: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(30))
                // Never to another origin, with or without the credential.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("reqwest client with default TLS config"),
        }
    }

    fn url(c: &ConnectorRecord, path: &str) -> String {
        format!("{}/{}", c.base_url.trim_end_matches('/'), path)
    }

    pub async fn send(
        &self,
        endpoint: Endpoint<'_>,
        action: &str,
        key: &str,
        token: i64,
        request_id: &str,
        payload: &[u8],
    ) -> Answer {
        let credentials = endpoint.credentials();
        match self
            .send_raw(endpoint, action, key, token, request_id, payload)
            .await
        {
            Answer::Status {
                status,
                replayed,
                body,
            } => Answer::Status {
                status,
                replayed,
                body: origin::redact(&body, &credentials).into_owned(),
            },
            Answer::NotSent(why) => Answer::NotSent(origin::redact_text(&why, &credentials)),
            Answer::Lost(why) => Answer::Lost(origin::redact_text(&why, &credentials)),
        }
    }

    async fn send_raw(
        &self,
        Endpoint {
            record: c,
            secret,
            max_body,
        }: Endpoint<'_>,
        action: &str,
        key: &str,
        token: i64,
        request_id: &str,
        payload: &[u8],
    ) -> Answer {
        let sent = with_secret(self.client.post(Self::url(c, action)), secret)
            .timeout(Duration::from_millis(c.timeout_ms as u64))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .header("fencing-token", token.to_string())
            .header("x-request-id", request_id)
            .body(payload.to_vec())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Answer::NotSent(describe(&e)),
            Err(e) => return Answer::Lost(describe(&e)),
        };
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        match bounded_body(response, max_body).await {
            Ok(body) => Answer::Status {
                status,
                replayed,
                body,
            },
            Err(why) => Answer::Lost(format!("status {status}, {why}")),
        }
    }

    pub async fn query(&self, endpoint: Endpoint<'_>, key: &str) -> Found {
        let credentials = endpoint.credentials();
        match self.query_raw(endpoint, key, &credentials).await {
            Found::Undecided(why) => Found::Undecided(origin::redact_text(&why, &credentials)),
            found => found,
        }
    }

    /// The body is redacted before it is read as a record, so the record
    /// kept as ticket evidence is redacted too.
    async fn query_raw(
        &self,
        Endpoint {
            record: c,
            secret,
            max_body,
        }: Endpoint<'_>,
        key: &str,
        credentials: &[String],
    ) -> Found {
        let url = Self::url(c, &format!("operations/{}", encode_segment(key)));
        let response = match with_secret(self.client.get(url), secret)
            .timeout(Duration::from_millis(c.timeout_ms as u64))
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return Found::Undecided(describe(&e)),
        };
        match response.status().as_u16() {
            404 => Found::NotFound,
            200 => match bounded_body(response, max_body.saturating_mul(2).max(64 << 10))
                .await
                .and_then(|b| {
                    serde_json::from_slice::<serde_json::Value>(&origin::redact(&b, credentials))
                        .map_err(|e| e.to_string())
                }) {
                Ok(record) => {
                    let status = record.get("status").and_then(|s| s.as_u64()).unwrap_or(0);
                    if status == 0 {
                        return Found::Undecided(format!("query answer has no status: {record}"));
                    }
                    let body = match record.get("response") {
                        Some(serde_json::Value::String(s)) => s.clone().into_bytes(),
                        Some(v) => v.to_string().into_bytes(),
                        None => Vec::new(),
                    };
                    Found::Recorded {
                        status: status as u16,
                        body,
                        record,
                    }
                }
                Err(e) => Found::Undecided(format!("query answer unreadable: {e}")),
            },
            redirect @ 300..=399 => Found::Undecided(format!(
                "query answered {redirect}: {}",
                super::classify::NO_REDIRECTS
            )),
            other => Found::Undecided(format!("query answered {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_percent_encoded_in_query_paths() {
        assert_eq!(
            super::encode_segment("order-17/reserve v1"),
            "order-17%2Freserve%20v1"
        );
    }
}
