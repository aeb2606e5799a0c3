//! The audit log: append-only, hash-chained, keyed and anchored, covering
//! every registration, grant, refusal and manual action.
//!
//! Invariants:
//! - each entry's `hash` is `sha256(prev_hash || canonical entry)`, and the
//!   first entry's `prev_hash` is [`GENESIS`]; so editing, removing or
//!   reordering any entry breaks every hash after it ([`verify_chain`]);
//! - each entry written with the audit key carries `mac` =
//!   HMAC-SHA256(key, hash) ([`entry_mac`]). The key lives outside the
//!   database, so someone who can rewrite the table cannot recompute a MAC:
//!   an edited, renumbered or appended entry fails [`verify`] at that entry.
//!   Entries written before keying (`mac` NULL) are checked as the hash
//!   chain only, and no unkeyed entry may follow a keyed one;
//! - an *anchor* is an entry's (seq, hash, mac) written somewhere the
//!   database cannot rewrite (an append-only file). A MAC cannot show that
//!   entries were removed from the end, or that a keyless chain was
//!   replaced whole; an anchor can: the anchored entry must still be there
//!   with the same hash and MAC, so a truncated tail or a rewritten chain
//!   fails at the first anchored entry it changed;
//! - the store refuses UPDATE and DELETE on the table (database triggers),
//!   and writes an entry in the same transaction as the fact it records.
//!
//! This file is pure: hashing, MACs and verification. The store appends and
//! keeps the key and the anchor file (`store/audit.rs`).

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Bytes in an audit key ([`parse_key`]).
pub const KEY_BYTES: usize = 32;

/// One audit entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
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
    /// HMAC-SHA256(key, hash), hex; `None` for an entry written unkeyed.
    pub mac: Option<String>,
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

/// An entry's MAC: HMAC-SHA256 under `key` of its hash (which covers its
/// content and, through `prev_hash`, every entry before it).
pub fn entry_mac(key: &[u8], hash: &str) -> String {
    let mut mac = hmac::Hmac::<sha2_mac::Sha256>::new_from_slice(key)
        .expect("HMAC takes a key of any length");
    mac.update(hash.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// An audit key from its file's text: [`KEY_BYTES`] bytes as hex digits
/// (surrounding whitespace ignored). The error names what is wrong, never
/// the text.
pub fn parse_key(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    let bytes = hex::decode(text).map_err(|_| "is not hexadecimal".to_string())?;
    if bytes.len() < KEY_BYTES {
        return Err(format!(
            "holds {} bytes; an audit key is {KEY_BYTES} bytes ({} hex digits)",
            bytes.len(),
            KEY_BYTES * 2
        ));
    }
    Ok(bytes)
}

/// An entry's head as written to the anchor file: one JSON line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub seq: i64,
    pub hash: String,
    pub mac: Option<String>,
}

impl Anchor {
    pub fn of(entry: &AuditEntry) -> Self {
        Self {
            seq: entry.seq,
            hash: entry.hash.clone(),
            mac: entry.mac.clone(),
        }
    }

    /// One line of the anchor file (without the newline).
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("an anchor serializes")
    }

    /// Every anchor in an anchor file's text; the error names the line.
    pub fn parse_all(text: &str) -> Result<Vec<Anchor>, String> {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(n, line)| {
                serde_json::from_str(line)
                    .map_err(|e| format!("line {} is not an anchor ({e})", n + 1))
            })
            .collect()
    }
}

/// Where a chain first breaks: every variant names the first bad entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("audit entry {seq}: prev_hash does not match the previous entry's hash")]
    BrokenLink { seq: i64 },
    #[error("audit entry {seq}: hash does not match its content (edited?)")]
    BadHash { seq: i64 },
    #[error("audit entry {seq}: sequence gap after {previous} (entries deleted?)")]
    Gap { seq: i64, previous: i64 },
    #[error("audit entry 1: missing, the log starts at entry {first} (entries deleted?)")]
    MissingStart { first: i64 },
    #[error("audit entry {seq}: MAC does not match (edited, renumbered or forged without the key)")]
    BadMac { seq: i64 },
    #[error(
        "audit entry {seq}: no MAC after keyed entry {keyed} (written or rewritten without the key)"
    )]
    Unkeyed { seq: i64, keyed: i64 },
    #[error(
        "audit entry {seq}: differs from its anchor (the chain was rewritten at or before entry {seq})"
    )]
    Rewritten { seq: i64 },
    #[error(
        "audit entry {first_missing}: missing, the log ends at entry {last} but entry {anchored} \
         was anchored (tail truncated)"
    )]
    Truncated {
        first_missing: i64,
        last: i64,
        anchored: i64,
    },
    #[error(
        "audit entry {seq}: carries a MAC but no audit key was found to check it \
         (set PADDOCK_AUDIT_KEY_FILE to the key file)"
    )]
    NoKey { seq: i64 },
}

impl ChainBreak {
    /// The first entry the evidence convicts.
    pub fn seq(&self) -> i64 {
        match *self {
            Self::BrokenLink { seq }
            | Self::BadHash { seq }
            | Self::Gap { seq, .. }
            | Self::BadMac { seq }
            | Self::Unkeyed { seq, .. }
            | Self::Rewritten { seq }
            | Self::NoKey { seq } => seq,
            Self::MissingStart { .. } => 1,
            Self::Truncated { first_missing, .. } => first_missing,
        }
    }
}

/// What [`verify`] checks an entry's MAC with.
#[derive(Debug, Clone, Copy)]
pub enum MacCheck<'a> {
    /// The hash chain only (MACs are not looked at).
    Skip,
    /// Every MAC present must be this key's; no unkeyed entry may follow a
    /// keyed one.
    Key(&'a [u8]),
    /// No key is available: a keyed entry is [`ChainBreak::NoKey`].
    NoKey,
}

/// What a verified chain showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub entries: usize,
    /// The first keyed entry (`None`: no entry is keyed); entries before it
    /// were written before keying and are checked as the hash chain only.
    pub keyed_from: Option<i64>,
    /// Anchored entries found and matched.
    pub anchors_matched: usize,
    /// The newest anchored entry.
    pub anchored_to: Option<i64>,
    /// The last entry, to anchor next.
    pub head: Option<Anchor>,
}

/// Check the hash chain alone, oldest first. Returns the number of entries
/// checked. ([`verify`] adds the MACs and the anchors.)
pub fn verify_chain(entries: &[AuditEntry]) -> Result<usize, ChainBreak> {
    verify(entries, MacCheck::Skip, &[]).map(|v| v.entries)
}

/// Check a whole chain, oldest first, against its MACs and anchors. The
/// error is the first bad entry in sequence order.
pub fn verify(
    entries: &[AuditEntry],
    macs: MacCheck<'_>,
    anchors: &[Anchor],
) -> Result<Verified, ChainBreak> {
    let mut walk = Walk::new(macs, anchors);
    if let Some(first) = entries.first()
        && first.seq != 1
    {
        return Err(ChainBreak::MissingStart { first: first.seq });
    }
    for e in entries {
        walk.step(e)?;
    }
    walk.finish()
}

/// Check the entries from an anchored one on (`entries[0]` must be
/// `anchor`'s entry): what a writer does before it anchors a newer head,
/// so it never vouches for a tail someone changed since the last anchor.
pub fn verify_from(
    anchor: &Anchor,
    entries: &[AuditEntry],
    macs: MacCheck<'_>,
) -> Result<Verified, ChainBreak> {
    let anchors = std::slice::from_ref(anchor);
    let mut walk = Walk::new(macs, anchors);
    match entries.first() {
        Some(first) if first.seq == anchor.seq => {
            walk.prev = (first.seq - 1, first.prev_hash.clone());
        }
        Some(first) => {
            return Err(ChainBreak::Gap {
                seq: first.seq,
                previous: anchor.seq - 1,
            });
        }
        None => {
            return Err(ChainBreak::Truncated {
                first_missing: anchor.seq,
                last: anchor.seq - 1,
                anchored: anchor.seq,
            });
        }
    }
    for e in entries {
        walk.step(e)?;
    }
    walk.finish()
}

/// The state of one pass over a chain.
struct Walk<'a> {
    macs: MacCheck<'a>,
    anchors: HashMap<i64, Vec<&'a Anchor>>,
    newest_anchor: Option<i64>,
    /// The previous entry's (seq, hash).
    prev: (i64, String),
    /// The first keyed entry, or an anchored keyed one: no unkeyed entry
    /// may follow it.
    keyed: Option<i64>,
    done: Verified,
}

impl<'a> Walk<'a> {
    fn new(macs: MacCheck<'a>, anchors: &'a [Anchor]) -> Self {
        let mut by_seq: HashMap<i64, Vec<&Anchor>> = HashMap::new();
        for a in anchors {
            by_seq.entry(a.seq).or_default().push(a);
        }
        Self {
            macs,
            anchors: by_seq,
            newest_anchor: anchors.iter().map(|a| a.seq).max(),
            prev: (0, GENESIS.to_string()),
            keyed: None,
            done: Verified::default(),
        }
    }

    fn step(&mut self, e: &AuditEntry) -> Result<(), ChainBreak> {
        let (prev_seq, prev_hash) = &self.prev;
        if e.seq != prev_seq + 1 {
            return Err(ChainBreak::Gap {
                seq: e.seq,
                previous: *prev_seq,
            });
        }
        if &e.prev_hash != prev_hash {
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
        self.check_mac(e)?;
        if let Some(anchored) = self.anchors.get(&e.seq) {
            if anchored.iter().any(|a| a.hash != e.hash || a.mac != e.mac) {
                return Err(ChainBreak::Rewritten { seq: e.seq });
            }
            self.done.anchors_matched += 1;
            self.done.anchored_to = Some(e.seq);
            if e.mac.is_some() {
                self.keyed.get_or_insert(e.seq);
            }
        }
        self.prev = (e.seq, e.hash.clone());
        self.done.entries += 1;
        self.done.head = Some(Anchor::of(e));
        Ok(())
    }

    fn check_mac(&mut self, e: &AuditEntry) -> Result<(), ChainBreak> {
        match (self.macs, &e.mac) {
            (MacCheck::Skip, _) => return Ok(()),
            (MacCheck::NoKey, Some(_)) => return Err(ChainBreak::NoKey { seq: e.seq }),
            (MacCheck::Key(key), Some(mac)) => {
                if *mac != entry_mac(key, &e.hash) {
                    return Err(ChainBreak::BadMac { seq: e.seq });
                }
                self.keyed.get_or_insert(e.seq);
                self.done.keyed_from.get_or_insert(e.seq);
            }
            (_, None) => {
                if let Some(keyed) = self.keyed {
                    return Err(ChainBreak::Unkeyed { seq: e.seq, keyed });
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Verified, ChainBreak> {
        let last = self.prev.0;
        match self.newest_anchor {
            Some(anchored) if anchored > last => Err(ChainBreak::Truncated {
                first_missing: last + 1,
                last,
                anchored,
            }),
            _ => Ok(self.done),
        }
    }
}

/// One entry as a JSON line for a SIEM: the stored fields, the instant as
/// RFC 3339 and as milliseconds, `detail` as JSON rather than text.
pub fn export_line(e: &AuditEntry) -> String {
    let detail: serde_json::Value =
        serde_json::from_str(&e.detail).unwrap_or_else(|_| e.detail.clone().into());
    serde_json::json!({
        "seq": e.seq,
        "time": super::time::rfc3339(super::time::from_millis(e.at)),
        "at_ms": e.at,
        "actor": e.actor,
        "action": e.action,
        "subject": e.subject,
        "detail": detail,
        "prev_hash": e.prev_hash,
        "hash": e.hash,
        "mac": e.mac,
    })
    .to_string()
}

#[cfg(test)]
mod tests;
