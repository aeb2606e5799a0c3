//! The side-effect gateway: the host side of `paddock:job/effects`.
//!
//! Guests never touch external systems; they ask the host, which decides,
//! records, fences and audits. This version grants no connectors yet, so
//! every request is answered `not-granted` naming the connector — the
//! protocol (idempotency keys, params digests, fenced intents, unknown
//! outcomes) lands with the connector configuration.

use crate::sandbox::wit::effects::{EffectError, Outcome, Request};

/// Answer an effect request for a job granted `granted` connectors.
pub fn invoke(granted: &[String], request: &Request) -> Result<Outcome, EffectError> {
    if request.idempotency_key.trim().is_empty() {
        return Err(EffectError::Invalid(
            "idempotency-key must not be empty".into(),
        ));
    }
    if !granted.iter().any(|c| c == &request.connector) {
        return Err(EffectError::NotGranted(format!(
            "connector '{}' is not granted to this job (add it to the manifest's `connectors`)",
            request.connector
        )));
    }
    Err(EffectError::NotGranted(format!(
        "connector '{}' is not configured on this host",
        request.connector
    )))
}

/// Answer an effect query.
pub fn query(granted: &[String], connector: &str) -> Result<Option<Outcome>, EffectError> {
    if !granted.iter().any(|c| c == connector) {
        return Err(EffectError::NotGranted(format!(
            "connector '{connector}' is not granted to this job"
        )));
    }
    Ok(None)
}
