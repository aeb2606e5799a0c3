//! Connector credentials: a header the host adds to every call to one
//! connector (`Authorization: Bearer …`, `X-Api-Key: …`), set by an admin,
//! stored apart from the connector's record, sealed at rest
//! (`model::envelope`), and shown only as a keyed fingerprint — by every
//! command, log line and audit entry. Guests never see it: the host injects
//! it into the outgoing request.

use std::fmt;

/// One connector's credential. `Debug` and `Display` print the header name,
/// never the value (the fingerprint needs the host key: the store adds it).
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectorSecret {
    /// The header it travels in, lower case (`authorization`, `x-api-key`).
    pub header: String,
    value: String,
}

impl ConnectorSecret {
    /// A bearer token: `Authorization: Bearer <token>`.
    pub fn bearer(token: &str) -> Result<Self, String> {
        Self::header("authorization", &format!("Bearer {}", token.trim()))
    }

    /// Any header; the name and the value are checked.
    pub fn header(name: &str, value: &str) -> Result<Self, String> {
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim_end_matches(['\r', '\n']).to_string();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(format!(
                "'{name}' is not a header name (letters, digits and -)"
            ));
        }
        if value.is_empty() || value == "Bearer " {
            return Err("the secret is empty".into());
        }
        if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err("the secret contains control characters".into());
        }
        Ok(Self {
            header: name,
            value,
        })
    }

    /// What the host sends. Only the HTTP client calls this.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// Read back from the store.
    pub fn stored(header: String, value: String) -> Self {
        Self { header, value }
    }
}

impl fmt::Debug for ConnectorSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnectorSecret({}: ***)", self.header)
    }
}

impl fmt::Display for ConnectorSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "header {}", self.header)
    }
}

/// A database URL as it may be printed: the password in its user info
/// (`postgres://app:PW@host/db`) and a `password=` query parameter
/// replaced by `***`. Errors and log lines name the database by this.
pub fn redacted_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let start = scheme_end + 3;
        let authority_end = out[start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..authority_end].rfind('@')
            && let Some(colon) = out[start..start + at].find(':')
        {
            out.replace_range(start + colon + 1..start + at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => pair.to_string(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_database_url_is_printed_without_its_password() {
        assert_eq!(
            redacted_url("postgres://app:s3cret@db:5432/paddock?sslmode=require"),
            "postgres://app:***@db:5432/paddock?sslmode=require"
        );
        assert_eq!(
            redacted_url("postgres://db/p?user=app&password=s3cret&x=1"),
            "postgres://db/p?user=app&password=***&x=1"
        );
        // Nothing to hide: unchanged (a user without a password, SQLite).
        assert_eq!(redacted_url("postgres://app@db/p"), "postgres://app@db/p");
        assert_eq!(
            redacted_url("sqlite:///var/lib/p.db?mode=rwc"),
            "sqlite:///var/lib/p.db?mode=rwc"
        );
    }

    use super::*;

    #[test]
    fn nothing_but_the_client_sees_the_value() {
        let s = ConnectorSecret::bearer("s3cr3t-token\n").unwrap();
        assert_eq!(s.expose(), "Bearer s3cr3t-token");
        for shown in [format!("{s:?}"), s.to_string()] {
            assert!(!shown.contains("s3cr3t"), "{shown}");
            assert!(shown.contains("authorization"), "{shown}");
        }
    }

    #[test]
    fn bad_headers_and_values_are_named() {
        assert!(
            ConnectorSecret::header("x api", "v")
                .unwrap_err()
                .contains("not a header name")
        );
        assert!(ConnectorSecret::bearer("  ").unwrap_err().contains("empty"));
        assert!(
            ConnectorSecret::header("x-api-key", "a\u{1}b")
                .unwrap_err()
                .contains("control")
        );
        assert_eq!(
            ConnectorSecret::header("X-Api-Key", "v").unwrap().header,
            "x-api-key"
        );
    }
}
