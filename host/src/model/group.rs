//! Resource groups: the limits an attempt runs under and the capabilities
//! its components may be granted.

use serde::Serialize;

/// A resource group: the limits its attempts run under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceGroup {
    pub name: String,
    pub fuel_per_attempt: i64,
    pub memory_bytes: i64,
    pub deadline_ms: i64,
    pub max_concurrency: i64,
    /// JSON array of granted imports beyond `paddock:job`.
    pub grants: String,
}

impl ResourceGroup {
    pub fn grant_list(&self) -> Vec<String> {
        serde_json::from_str(&self.grants).unwrap_or_default()
    }
}
