//! The host key that seals connector secrets (`model::envelope`), kept in a
//! file outside the database like the audit key: one `ID HEX` line per key,
//! the current key last, mode 0600. Created by the first secret that needs
//! it (atomically, so racing processes agree); rewritten only by key
//! rotation, by writing a private temporary file and renaming it over the
//! old one. Errors name the file and `PADDOCK_SECRET_KEY_FILE`, never the
//! key.

use super::audit::{create_private_dir, suffixed, write_private};
use super::{StoreError, StoreResult};
use crate::model::envelope::{self, HostKey, KEY_BYTES};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The environment variable naming the key file.
pub const KEY_FILE_VAR: &str = "PADDOCK_SECRET_KEY_FILE";

/// Where the secret key lives.
///
/// | field | default ([`SecretKeyConfig::from_env`]) |
/// |---|---|
/// | `key_file` | `$PADDOCK_SECRET_KEY_FILE`, else `$XDG_CONFIG_HOME/paddock/secret.key`, else `$HOME/.config/paddock/secret.key`, else none (no secret can be set) |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretKeyConfig {
    pub key_file: Option<PathBuf>,
}

impl SecretKeyConfig {
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let key_file = var(KEY_FILE_VAR).map(PathBuf::from).or_else(|| {
            var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
                .map(|base| base.join("paddock").join("secret.key"))
        });
        Self { key_file }
    }
}

/// A store's key file and the keys read from it (reread when a secret names
/// a key not yet seen: another process rotated).
#[derive(Debug)]
pub(super) struct Keyring {
    pub(super) config: SecretKeyConfig,
    cache: Mutex<Vec<HostKey>>,
}

fn key_error(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::SecretKey(format!(
        "secret key file {} ({KEY_FILE_VAR}): {what}",
        path.display()
    ))
}

/// A new key with a random id.
pub(super) fn new_key() -> HostKey {
    let id = hex::encode(rand::random::<[u8; 4]>());
    let bytes: [u8; KEY_BYTES] = rand::random();
    HostKey::new(&id, bytes).expect("hex is a key id")
}

impl Keyring {
    pub(super) fn new(config: SecretKeyConfig) -> Self {
        Self {
            config,
            cache: Mutex::new(Vec::new()),
        }
    }

    fn path(&self) -> StoreResult<&Path> {
        self.config.key_file.as_deref().ok_or_else(|| {
            StoreError::SecretKey(format!(
                "no secret key file: set {KEY_FILE_VAR} (or HOME) to keep the key that seals \
                 connector secrets"
            ))
        })
    }

    /// Every key in the file, oldest first; `None` when it does not exist.
    pub(super) fn read(&self) -> StoreResult<Option<Vec<HostKey>>> {
        let path = self.path()?;
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(key_error(path, e)),
        };
        let keys = envelope::parse_keys(&text).map_err(|e| key_error(path, e))?;
        *self.cache.lock().expect("keyring lock") = keys.clone();
        Ok(Some(keys))
    }

    /// The key new secrets are sealed under, the file created if missing.
    pub(super) fn current(&self) -> StoreResult<HostKey> {
        if let Some(keys) = self.read()? {
            return Ok(keys.last().expect("a parsed key file has a key").clone());
        }
        let path = self.path()?;
        let key = new_key();
        create_private_dir(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| key_error(path, e))?;
        let tmp = suffixed(path, &format!(".{}.tmp", std::process::id()));
        write_private(&tmp, envelope::format_keys(&[key.clone()]).as_bytes())
            .map_err(|e| key_error(path, e))?;
        // Linking fails if another process created the file first: its key
        // is then the key.
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self.current(),
            Err(e) => Err(key_error(path, e)),
        }
    }

    /// The key with this id: from memory, else from the file, else an
    /// error saying the file does not hold it.
    pub(super) fn find(&self, id: &str) -> StoreResult<HostKey> {
        let cached = |cache: &[HostKey]| cache.iter().find(|k| k.id == id).cloned();
        if let Some(key) = cached(&self.cache.lock().expect("keyring lock")) {
            return Ok(key);
        }
        let path = self.path()?;
        let keys = self.read()?.ok_or_else(|| {
            key_error(
                path,
                format!(
                    "does not exist, and connector secrets are sealed under host key '{id}': \
                     point {KEY_FILE_VAR} at the key file they were sealed with"
                ),
            )
        })?;
        cached(&keys).ok_or_else(|| {
            key_error(
                path,
                format!(
                    "does not hold host key '{id}', which connector secrets are sealed under: \
                     point {KEY_FILE_VAR} at the key file they were sealed with"
                ),
            )
        })
    }

    /// Replace the file's keys (the last is current).
    pub(super) fn write(&self, keys: &[HostKey]) -> StoreResult<()> {
        let path = self.path()?;
        create_private_dir(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| key_error(path, e))?;
        let tmp = suffixed(path, &format!(".{}.tmp", std::process::id()));
        write_private(&tmp, envelope::format_keys(keys).as_bytes())
            .map_err(|e| key_error(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            key_error(path, e)
        })?;
        *self.cache.lock().expect("keyring lock") = keys.to_vec();
        Ok(())
    }
}
