//! The audit log: append-only and hash-chained, covering every registration,
//! grant, rejection and (later) pause, cancel and manual action.
//!
//! Invariants:
//! - each entry's `hash` is `sha256(prev_hash || canonical entry)`, and the
//!   first entry's `prev_hash` is [`GENESIS`]; so editing, removing or
//!   reordering any entry breaks every hash after it ([`verify_chain`]);
//! - the store refuses UPDATE and DELETE on the table (database triggers),
//!   and writes an entry in the same transaction as the fact it records.
//!
//! This file is pure: hashing and verification. The store appends.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One audit entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub subject: String,
    /// Canonical JSON (sorted keys).
    pub detail: String,
    pub prev_hash: String,
    pub hash: String,
}

/// The hash of an entry given the previous entry's hash.
pub fn entry_hash(
    prev_hash: &str,
    seq: i64,
    at: i64,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &str,
) -> String {
    // Length-prefix every field so no two different entries can serialise to
    // the same byte string.
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    for field in [
        &seq.to_string(),
        &at.to_string(),
        actor,
        action,
        subject,
        detail,
    ] {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Where a chain first breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("audit entry {seq}: prev_hash does not match the previous entry's hash")]
    BrokenLink { seq: i64 },
    #[error("audit entry {seq}: hash does not match its content (edited?)")]
    BadHash { seq: i64 },
    #[error("audit entry {seq}: sequence gap after {previous}")]
    Gap { seq: i64, previous: i64 },
}

/// Check a whole chain, oldest first. Returns the number of entries checked.
pub fn verify_chain(entries: &[AuditEntry]) -> Result<usize, ChainBreak> {
    let mut prev = GENESIS.to_string();
    let mut prev_seq: Option<i64> = None;
    for e in entries {
        if let Some(p) = prev_seq
            && e.seq != p + 1
        {
            return Err(ChainBreak::Gap {
                seq: e.seq,
                previous: p,
            });
        }
        if e.prev_hash != prev {
            return Err(ChainBreak::BrokenLink { seq: e.seq });
        }
        let expected = entry_hash(
            &e.prev_hash,
            e.seq,
            e.at,
            &e.actor,
            &e.action,
            &e.subject,
            &e.detail,
        );
        if e.hash != expected {
            return Err(ChainBreak::BadHash { seq: e.seq });
        }
        prev = e.hash.clone();
        prev_seq = Some(e.seq);
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<AuditEntry> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let detail = format!("{{\"n\":{seq}}}");
                let hash = entry_hash(&prev, seq, 1000 + seq, "ops", "job.apply", "job", &detail);
                let e = AuditEntry {
                    seq,
                    at: 1000 + seq,
                    actor: "ops".into(),
                    action: "job.apply".into(),
                    subject: "job".into(),
                    detail,
                    prev_hash: prev.clone(),
                    hash: hash.clone(),
                };
                prev = hash;
                e
            })
            .collect()
    }

    #[test]
    fn an_untouched_chain_verifies() {
        assert_eq!(verify_chain(&chain(5)), Ok(5));
    }

    #[test]
    fn editing_an_entry_breaks_the_chain_at_that_entry() {
        let mut c = chain(5);
        c[2].actor = "mallory".into();
        assert_eq!(verify_chain(&c), Err(ChainBreak::BadHash { seq: 3 }));
    }

    #[test]
    fn removing_an_entry_is_detected() {
        let mut c = chain(5);
        c.remove(1);
        assert_eq!(
            verify_chain(&c),
            Err(ChainBreak::Gap {
                seq: 3,
                previous: 1
            })
        );
    }
}
