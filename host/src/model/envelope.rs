//! Connector secrets at rest: envelope encryption and keyed fingerprints,
//! pure (the randomness and the key file come from the store).
//!
//! - **The host key**: 32 bytes kept outside the database, named by a short
//!   random id. Two keys are derived from it with HMAC-SHA256 under fixed
//!   labels: the *sealing key* and the *fingerprint key*, so neither use
//!   can be turned against the other.
//! - **A sealed secret**: the value encrypted with XChaCha20-Poly1305 under
//!   its own random *data key*; the data key encrypted (wrapped) under the
//!   sealing key. Rotating the host key re-wraps the data keys only. Each
//!   ciphertext is bound (associated data) to its connector and header, and
//!   the wrapped key to the host key's id and the connector, so a row
//!   copied onto another connector, or a header swapped, fails to open.
//! - **A fingerprint**: `hmac:` and 16 hex digits of HMAC-SHA256 under the
//!   fingerprint key. Without the host key a reader of the database cannot
//!   test a guessed secret against it; two hosts with different keys show
//!   different fingerprints for the same secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::Mac;

/// Bytes in a host key and in a data key.
pub const KEY_BYTES: usize = 32;
/// Bytes in an XChaCha20-Poly1305 nonce.
pub const NONCE_BYTES: usize = 24;

/// The host key: its id (stored with every secret sealed under it) and its
/// bytes. `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct HostKey {
    pub id: String,
    bytes: [u8; KEY_BYTES],
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostKey({}, ..)", self.id)
    }
}

/// The randomness one sealing needs, drawn by the caller.
#[derive(Clone, Copy)]
pub struct Fresh {
    pub data_key: [u8; KEY_BYTES],
    pub value_nonce: [u8; NONCE_BYTES],
    pub wrap_nonce: [u8; NONCE_BYTES],
}

/// A secret as stored: the value's ciphertext and the wrapped data key, each
/// base64 (nonce then ciphertext), and the id of the host key that wraps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub value: String,
    pub data_key: String,
    pub key_id: String,
}

impl HostKey {
    pub fn new(id: &str, bytes: [u8; KEY_BYTES]) -> Result<Self, String> {
        if id.is_empty() || id.len() > 32 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(format!(
                "'{id}' is not a key id (1 to 32 letters and digits)"
            ));
        }
        Ok(Self {
            id: id.to_string(),
            bytes,
        })
    }

    fn derived(&self, label: &str) -> [u8; KEY_BYTES] {
        hmac_sha256(&self.bytes, label.as_bytes())
    }

    /// The keyed fingerprint of a secret's value.
    pub fn fingerprint(&self, value: &str) -> String {
        let mac = hmac_sha256(
            &self.derived("paddock connector secret fingerprint v1"),
            value.as_bytes(),
        );
        format!("hmac:{}", &hex::encode(mac)[..16])
    }

    fn sealer(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.derived("paddock connector secret seal v1").into())
    }

    /// Seal `value`, `connector`'s credential sent in `header`.
    pub fn seal(&self, connector: &str, header: &str, value: &str, fresh: Fresh) -> Sealed {
        let value = encrypt(
            &XChaCha20Poly1305::new(&fresh.data_key.into()),
            fresh.value_nonce,
            value.as_bytes(),
            &value_aad(connector, header),
        );
        let data_key = encrypt(
            &self.sealer(),
            fresh.wrap_nonce,
            &fresh.data_key,
            &wrap_aad(&self.id, connector),
        );
        Sealed {
            value,
            data_key,
            key_id: self.id.clone(),
        }
    }

    /// The data key of a secret sealed under this key.
    fn unwrap_data_key(&self, connector: &str, sealed: &Sealed) -> Result<[u8; KEY_BYTES], String> {
        if sealed.key_id != self.id {
            return Err(format!(
                "sealed under host key '{}', not '{}'",
                sealed.key_id, self.id
            ));
        }
        let key = decrypt(
            &self.sealer(),
            &sealed.data_key,
            &wrap_aad(&self.id, connector),
        )
        .map_err(|e| format!("data key: {e}"))?;
        key.try_into()
            .map_err(|_| "data key: wrong length".to_string())
    }

    /// The value of a secret sealed under this key.
    pub fn open(&self, connector: &str, header: &str, sealed: &Sealed) -> Result<String, String> {
        let data_key = self.unwrap_data_key(connector, sealed)?;
        let value = decrypt(
            &XChaCha20Poly1305::new(&data_key.into()),
            &sealed.value,
            &value_aad(connector, header),
        )
        .map_err(|e| format!("value: {e}"))?;
        String::from_utf8(value).map_err(|_| "value: not UTF-8".to_string())
    }

    /// The same secret with its data key wrapped under `next` instead: the
    /// value's ciphertext is unchanged.
    pub fn rewrap(
        &self,
        next: &HostKey,
        connector: &str,
        sealed: &Sealed,
        wrap_nonce: [u8; NONCE_BYTES],
    ) -> Result<Sealed, String> {
        let data_key = self.unwrap_data_key(connector, sealed)?;
        Ok(Sealed {
            value: sealed.value.clone(),
            data_key: encrypt(
                &next.sealer(),
                wrap_nonce,
                &data_key,
                &wrap_aad(&next.id, connector),
            ),
            key_id: next.id.clone(),
        })
    }
}

fn value_aad(connector: &str, header: &str) -> Vec<u8> {
    format!("paddock connector secret\0{connector}\0{header}").into_bytes()
}

fn wrap_aad(key_id: &str, connector: &str) -> Vec<u8> {
    format!("paddock data key\0{key_id}\0{connector}").into_bytes()
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = hmac::Hmac::<sha2_mac::Sha256>::new_from_slice(key)
        .expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

fn encrypt(cipher: &XChaCha20Poly1305, nonce: [u8; NONCE_BYTES], msg: &[u8], aad: &[u8]) -> String {
    let ciphertext = cipher
        .encrypt(&XNonce::from(nonce), Payload { msg, aad })
        .expect("XChaCha20-Poly1305 encrypts any message this size");
    let mut out = nonce.to_vec();
    out.extend_from_slice(&ciphertext);
    B64.encode(out)
}

fn decrypt(cipher: &XChaCha20Poly1305, stored: &str, aad: &[u8]) -> Result<Vec<u8>, String> {
    let bytes = B64
        .decode(stored)
        .map_err(|_| "not base64 (edited?)".to_string())?;
    if bytes.len() < NONCE_BYTES {
        return Err("too short (edited?)".into());
    }
    let (nonce, msg) = bytes.split_at(NONCE_BYTES);
    let nonce: [u8; NONCE_BYTES] = nonce.try_into().expect("split at the nonce's length");
    cipher
        .decrypt(&XNonce::from(nonce), Payload { msg, aad })
        .map_err(|_| "does not open under the host key (wrong key, or edited)".to_string())
}

/// The text of a key file: one `ID HEX` line per key, the current key last.
pub fn format_keys(keys: &[HostKey]) -> String {
    keys.iter()
        .map(|k| format!("{} {}\n", k.id, hex::encode(k.bytes)))
        .collect()
}

/// A key file's keys, oldest first (the last is current). Blank lines and
/// `#` comments are skipped. The error names the line, never its text.
pub fn parse_keys(text: &str) -> Result<Vec<HostKey>, String> {
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: expected 'ID HEX' with 64 hex digits", n + 1);
        let (id, hex_key) = line.split_once(' ').ok_or_else(bad)?;
        let bytes: [u8; KEY_BYTES] = hex::decode(hex_key.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(bad)?;
        keys.push(HostKey::new(id, bytes).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    if keys.is_empty() {
        return Err("no key in the file".into());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, byte: u8) -> HostKey {
        HostKey::new(id, [byte; KEY_BYTES]).unwrap()
    }

    fn fresh(n: u8) -> Fresh {
        Fresh {
            data_key: [n; KEY_BYTES],
            value_nonce: [n.wrapping_add(1); NONCE_BYTES],
            wrap_nonce: [n.wrapping_add(2); NONCE_BYTES],
        }
    }

    #[test]
    fn a_sealed_secret_opens_only_under_its_key_connector_and_header() {
        let k = key("k1", 7);
        let sealed = k.seal("ledger", "authorization", "Bearer s3cret", fresh(1));
        assert!(!sealed.value.contains("s3cret") && !sealed.data_key.contains("s3cret"));
        assert_eq!(
            k.open("ledger", "authorization", &sealed).unwrap(),
            "Bearer s3cret"
        );
        assert!(k.open("bank", "authorization", &sealed).is_err());
        assert!(k.open("ledger", "x-api-key", &sealed).is_err());
        let impostor = key("k1", 8);
        assert!(
            impostor
                .open("ledger", "authorization", &sealed)
                .unwrap_err()
                .contains("does not open")
        );
        let other = key("k2", 7);
        assert!(other.open("ledger", "authorization", &sealed).is_err());
    }

    #[test]
    fn a_rewrapped_secret_opens_under_the_next_key_only() {
        let (old, next) = (key("k1", 7), key("k2", 9));
        let sealed = old.seal("ledger", "authorization", "Bearer s3cret", fresh(1));
        let moved = old
            .rewrap(&next, "ledger", &sealed, [5; NONCE_BYTES])
            .unwrap();
        assert_eq!(moved.value, sealed.value);
        assert_eq!(moved.key_id, "k2");
        assert_eq!(
            next.open("ledger", "authorization", &moved).unwrap(),
            "Bearer s3cret"
        );
        assert!(old.open("ledger", "authorization", &moved).is_err());
    }

    #[test]
    fn fingerprints_depend_on_the_host_key() {
        let (a, b) = (key("a", 1), key("b", 2));
        assert_eq!(a.fingerprint("v"), a.fingerprint("v"));
        assert_ne!(a.fingerprint("v"), b.fingerprint("v"));
        assert_ne!(a.fingerprint("v"), a.fingerprint("w"));
        assert!(a.fingerprint("v").starts_with("hmac:"));
        assert_eq!(a.fingerprint("v").len(), "hmac:".len() + 16);
    }

    #[test]
    fn a_key_file_round_trips_and_bad_lines_are_named_without_their_text() {
        let keys = vec![key("k1", 1), key("k2", 2)];
        assert_eq!(parse_keys(&format_keys(&keys)).unwrap(), keys);
        let err = parse_keys("k1 abcd\n").unwrap_err();
        assert!(err.contains("line 1") && !err.contains("abcd"), "{err}");
        assert!(parse_keys("# nothing\n").unwrap_err().contains("no key"));
        assert!(format!("{:?}", keys[0]).starts_with("HostKey(k1"));
        assert!(!format!("{:?}", keys[0]).contains("0101"));
    }
}
