//! A connector stays at its origin, and its credential stays in the request.
//!
//! - [`check_base_url`]: the one rule `connector set` applies (CLI and
//!   API): `http://` or `https://`, and no user info — a password in the
//!   URL would be shown wherever the connector is, so a credential goes in
//!   a secret (`paddock connector secret set`), which is shown only as a
//!   fingerprint.
//! - [`shown_base_url`]: a row stored before that rule, shown with its user
//!   info hidden.
//! - [`redact`] / [`redact_text`]: a downstream that echoes what it was sent
//!   (headers, the URL) would put the credential into an answer the host
//!   stores and hands the guest; every answer and error text is passed
//!   through these with the credential's forms before anything keeps it.
//!
//! Redirects are not followed at all (the HTTP client's policy), so no
//! request, credential or not, reaches another origin; how a 3xx answer is
//! classified is in `effects/classify.rs`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::borrow::Cow;

/// What replaces a credential found in an answer.
pub const REDACTED: &str = "[redacted]";

/// Where a URL's user info is: from after `://` to its last `@`. Read
/// conservatively — a password may hold `/`, `?` and `#`, so any `@`
/// counts (a base URL has no use for one elsewhere: `%40` in a path).
fn userinfo_end(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    url[start..].rfind('@').map(|at| (start, start + at))
}

/// The rule for a connector's base URL, shared by `paddock connector set`
/// and `PUT /v1/connectors/{name}`.
pub fn check_base_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("the base URL must start with http:// or https://".into());
    }
    if userinfo_end(url).is_some() {
        return Err(
            "the base URL must not carry a user or password (user:password@host, or any '@': \
             write it %40 in a path): set the base URL without it and give the \
             credential to `paddock connector secret set NAME --header authorization --from-env VAR`, \
             which is sent as a header and shown only as a fingerprint"
                .into(),
        );
    }
    Ok(())
}

/// A base URL as people may see it: any user info replaced by `***`.
pub fn shown_base_url(url: &str) -> Cow<'_, str> {
    match userinfo_end(url) {
        Some((start, at)) => Cow::Owned(format!("{}***{}", &url[..start], &url[at..])),
        None => Cow::Borrowed(url),
    }
}

/// The credentials a call to `base_url` with the header value `secret`
/// carries, in every form this host sends them: the header value, its
/// credential without the scheme word (`Bearer`, `Basic`), and a password
/// in the base URL's user info (as written, percent-decoded, and as the
/// `Basic` header the HTTP client makes of it).
pub fn credentials(base_url: &str, secret: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(value) = secret {
        out.push(value.to_string());
        if let Some((_, credential)) = value.split_once(' ') {
            out.push(credential.trim().to_string());
        }
    }
    if let Some((start, at)) = userinfo_end(base_url) {
        let info = &base_url[start..at];
        if let Some((user, password)) = info.split_once(':') {
            let decoded = percent_decode(password);
            out.push(password.to_string());
            out.push(STANDARD.encode(format!("{}:{decoded}", percent_decode(user))));
            out.push(decoded);
        }
    }
    out.retain(|s| !s.is_empty());
    out.sort();
    out.dedup();
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Each credential in the forms an echo may take: as sent, escaped in a
/// JSON string, and percent-encoded.
fn forms(credentials: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for c in credentials {
        out.push(c.clone());
        let json = serde_json::to_string(c).expect("a string serializes");
        out.push(json[1..json.len() - 1].to_string());
        let encoded: String = c
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        out.push(encoded);
    }
    // Longest first, so a credential inside another is not left in pieces.
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out.dedup();
    out
}

fn replace_all(haystack: &[u8], needle: &[u8]) -> Option<Vec<u8>> {
    let first = haystack.windows(needle.len()).position(|w| w == needle)?;
    let mut out = haystack[..first].to_vec();
    let mut rest = &haystack[first..];
    while !rest.is_empty() {
        if rest.starts_with(needle) {
            out.extend_from_slice(REDACTED.as_bytes());
            rest = &rest[needle.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    Some(out)
}

fn redact_bytes(body: &[u8], forms: &[String]) -> Option<Vec<u8>> {
    let mut changed: Option<Vec<u8>> = None;
    for form in forms {
        let current = changed.as_deref().unwrap_or(body);
        if let Some(next) = replace_all(current, form.as_bytes()) {
            changed = Some(next);
        }
    }
    changed
}

/// A JSON value with every credential in its strings, keys and numbers
/// replaced: what a JSON answer becomes when replacing bytes would break it
/// (a credential that is all digits, echoed as a number).
fn redact_value(value: serde_json::Value, forms: &[String]) -> serde_json::Value {
    use serde_json::Value;
    let text = |s: String| match redact_bytes(s.as_bytes(), forms) {
        Some(b) => String::from_utf8_lossy(&b).into_owned(),
        None => s,
    };
    match value {
        Value::String(s) => Value::String(text(s)),
        Value::Number(n) if redact_bytes(n.to_string().as_bytes(), forms).is_some() => {
            Value::String(text(n.to_string()))
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| redact_value(v, forms)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (text(k), redact_value(v, forms)))
                .collect(),
        ),
        other => other,
    }
}

/// `body` with every form of every credential replaced by [`REDACTED`];
/// borrowed when there was nothing to replace. A JSON body stays JSON.
pub fn redact<'a>(body: &'a [u8], credentials: &[String]) -> Cow<'a, [u8]> {
    if credentials.is_empty() {
        return Cow::Borrowed(body);
    }
    let forms = forms(credentials);
    let Some(replaced) = redact_bytes(body, &forms) else {
        return Cow::Borrowed(body);
    };
    let was_json = serde_json::from_slice::<serde_json::Value>(body);
    match was_json {
        Ok(value) if serde_json::from_slice::<serde_json::Value>(&replaced).is_err() => {
            let value = redact_value(value, &forms);
            let text = serde_json::to_vec(&value).expect("a value serializes");
            // A credential spread over the JSON's structure itself: bytes.
            Cow::Owned(redact_bytes(&text, &forms).unwrap_or(text))
        }
        _ => Cow::Owned(replaced),
    }
}

/// [`redact`] over text (error messages).
pub fn redact_text(text: &str, credentials: &[String]) -> String {
    String::from_utf8_lossy(&redact(text.as_bytes(), credentials)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_with_user_info_is_refused_naming_the_secret_command() {
        for url in [
            "https://user:pw@ledger.example/v1",
            "https://user@ledger.example/v1",
            "http://u:p/ss@ledger.example/v1",
            "http://u:p?@ledger.example/v1",
        ] {
            let err = check_base_url(url).unwrap_err();
            assert!(err.contains("paddock connector secret set"), "{url}: {err}");
            assert!(!err.contains("pw"), "{err}");
        }
        assert!(check_base_url("https://ledger.example:8443/v1?x=a@b").is_err());
        check_base_url("https://ledger.example:8443/v1/%40me").unwrap();
        check_base_url("http://127.0.0.1:9/v1").unwrap();
        assert!(check_base_url("ftp://ledger.example").is_err());
    }

    #[test]
    fn a_stored_user_info_is_shown_hidden() {
        assert_eq!(
            shown_base_url("https://user:p/w@ledger.example/v1"),
            "https://***@ledger.example/v1"
        );
        assert_eq!(
            shown_base_url("https://ledger.example/v1"),
            "https://ledger.example/v1"
        );
    }

    #[test]
    fn every_form_of_a_credential_is_redacted_and_json_stays_json() {
        let creds = credentials(
            "https://app:p%40ss@ledger.example/v1",
            Some("Bearer tok\"en/42"),
        );
        let body = br#"{"headers":{"authorization":"Bearer tok\"en/42","x":"tok%22en%2F42"},"pw":"p@ss","basic":"YXBwOnBAc3M="}"#;
        let out = redact(body, &creds);
        let text = std::str::from_utf8(&out).unwrap();
        for leaked in ["tok", "p@ss", "p%40ss", "YXBwOnBAc3M="] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        serde_json::from_slice::<serde_json::Value>(&out).unwrap();
        // A credential of digits echoed as a number: still JSON, still gone.
        let creds = credentials("https://x/v1", Some("12345678"));
        let out = redact(br#"{"key":12345678,"n":1}"#, &creds);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["key"], REDACTED);
        assert_eq!(value["n"], 1);
        // Nothing to hide: the same bytes, not copied.
        assert!(matches!(redact(b"{\"ok\":1}", &creds), Cow::Borrowed(_)));
        assert_eq!(
            redact_text(
                "refused: Bearer abc",
                &credentials("http://x", Some("Bearer abc"))
            ),
            "refused: [redacted]"
        );
    }
}
