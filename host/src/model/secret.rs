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

/// Database URLs are redacted in `dburl.rs`; named here too for the
/// callers that have always found it here.
pub use super::dburl::redacted_url;

#[cfg(test)]
mod tests {
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
