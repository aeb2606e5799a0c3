//! The audit log's writer and its evidence outside the database: appends
//! (chained and keyed, inside the caller's transaction), the audit key
//! file, the anchor file, verification and export reads. The rules are
//! pure, in `model::audit`; here are the SQL and the two files.
//!
//! - **The key** ([`AuditConfig::key_file`]): 32 random bytes as hex, read
//!   from a file outside the database, created (mode 0600, atomically, so
//!   racing processes agree) by the first append that needs it. Every
//!   entry written with it carries HMAC-SHA256(key, hash). It is never
//!   printed: errors name the file, not its text.
//! - **The anchor file** ([`AuditConfig::anchor_file`]): one JSON line
//!   (seq, hash, mac) per anchored head, appended with one `write` on an
//!   `O_APPEND` file, so processes can share it. [`Store::audit_anchor`]
//!   checks the tail since the newest anchor before it vouches for a newer
//!   head; the CLI anchors after every command, `paddock serve`
//!   periodically, `paddock audit verify` after a chain verifies.

use super::dialect::now_ms;
use super::{Store, StoreError, StoreResult, Tx};
use crate::model::audit::{self, Anchor, AuditEntry, ChainBreak, MacCheck, Verified};
use crate::model::canonical_json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Where the audit chain's evidence outside the database lives.
///
/// | field | default ([`AuditConfig::from_env`]) |
/// |---|---|
/// | `key_file` | `$PADDOCK_AUDIT_KEY_FILE`, else `$XDG_CONFIG_HOME/paddock/audit.key`, else `$HOME/.config/paddock/audit.key`, else none (entries are written unkeyed, with a warning) |
/// | `anchor_file` | `$PADDOCK_AUDIT_ANCHOR_FILE`, else for a SQLite file `PATH.audit-anchor` beside it, else none (PostgreSQL: set one; `audit verify` says it is missing) |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditConfig {
    pub key_file: Option<PathBuf>,
    pub anchor_file: Option<PathBuf>,
}

impl AuditConfig {
    /// The defaults above, for a store on `url`.
    pub fn from_env(url: &str) -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let key_file = var("PADDOCK_AUDIT_KEY_FILE")
            .map(PathBuf::from)
            .or_else(|| {
                var("XDG_CONFIG_HOME")
                    .map(PathBuf::from)
                    .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
                    .map(|base| base.join("paddock").join("audit.key"))
            });
        let anchor_file = var("PADDOCK_AUDIT_ANCHOR_FILE")
            .map(PathBuf::from)
            .or_else(|| sqlite_file(url).map(|db| suffixed(&db, ".audit-anchor")));
        Self {
            key_file,
            anchor_file,
        }
    }
}

/// The file of a `sqlite://PATH` URL (`None` for memory and PostgreSQL).
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = path.split('?').next().unwrap_or(path);
    (!path.is_empty() && !path.contains(":memory:")).then(|| PathBuf::from(path))
}

pub(super) fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A store's audit configuration and its key, loaded once.
#[derive(Debug, Default)]
pub(super) struct Seal {
    config: AuditConfig,
    key: OnceLock<Option<Key>>,
}

/// The key's bytes; its `Debug` never shows them.
struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Seal {
    pub(super) fn new(config: AuditConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            key: OnceLock::new(),
        })
    }

    /// The key appends use, created on first use. `None` when no key file
    /// is configured, or the default one cannot be created (warned once).
    fn key_for_append(&self) -> StoreResult<Option<&[u8]>> {
        if let Some(key) = self.key.get() {
            return Ok(key.as_ref().map(|k| k.0.as_slice()));
        }
        let loaded = match &self.config.key_file {
            None => None,
            // A key that exists but cannot be read is an error; one that
            // cannot be created (a read-only home) leaves entries unkeyed,
            // which `audit verify` then reports.
            Some(path) if path.exists() => Some(Key(read_key(path)?)),
            Some(path) => match read_or_create_key(path) {
                Ok(key) => Some(Key(key)),
                Err(e) => {
                    tracing::warn!(error = %crate::model::text::Esc(&e), "audit entries are written unkeyed");
                    None
                }
            },
        };
        Ok(self
            .key
            .get_or_init(|| loaded)
            .as_ref()
            .map(|k| k.0.as_slice()))
    }

    /// The key to verify with: read, never created.
    fn key_for_verify(&self) -> StoreResult<Option<Vec<u8>>> {
        match &self.config.key_file {
            Some(path) if path.exists() => read_key(path).map(Some),
            _ => Ok(None),
        }
    }
}

fn audit_error(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::Audit(format!("audit key file {}: {what}", path.display()))
}

fn read_key(path: &Path) -> StoreResult<Vec<u8>> {
    let text = std::fs::read_to_string(path).map_err(|e| audit_error(path, e))?;
    audit::parse_key(&text).map_err(|e| audit_error(path, e))
}

/// Read the key, or create it: written to a private temporary file, then
/// linked into place, which fails if another process got there first (its
/// key is then the key).
fn read_or_create_key(path: &Path) -> StoreResult<Vec<u8>> {
    if path.exists() {
        return read_key(path);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir).map_err(|e| audit_error(path, e))?;
    let key: [u8; audit::KEY_BYTES] = rand::random();
    let tmp = suffixed(path, &format!(".{}.tmp", std::process::id()));
    write_private(&tmp, format!("{}\n", hex::encode(key)).as_bytes())
        .map_err(|e| audit_error(path, e))?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key.to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(path),
        Err(e) => Err(audit_error(path, e)),
    }
}

pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// What `audit verify` found, with where its evidence came from.
#[derive(Debug)]
pub struct AuditVerdict {
    pub result: Result<Verified, ChainBreak>,
    pub config: AuditConfig,
    /// Whether the key file was found (MACs checked).
    pub keyed: bool,
    /// Anchors read from the anchor file.
    pub anchors: usize,
}

/// seq, at, actor, action, subject, detail, prev_hash, hash, mac
type AuditRow = (
    i64,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
);

fn entry((seq, at, actor, action, subject, detail, prev_hash, hash, mac): AuditRow) -> AuditEntry {
    AuditEntry {
        seq,
        at,
        actor,
        action,
        subject,
        detail,
        prev_hash,
        hash,
        mac,
    }
}

impl Store {
    /// This store with the audit key and anchor file of `config` (by
    /// default [`AuditConfig::from_env`]).
    pub fn with_audit(mut self, config: AuditConfig) -> Self {
        self.audit = Seal::new(config);
        self
    }

    pub fn audit_config(&self) -> &AuditConfig {
        &self.audit.config
    }

    /// Append an entry inside `tx`, chained to the last one and keyed.
    /// The entry's actor is the identity alone; a note the actor carries
    /// (`local:root (note: bob)`, from `--actor`) goes into the detail as
    /// `actor_note`, so no typed text ever stands where an identity does.
    pub(super) async fn audit_append(
        &self,
        tx: &mut Tx,
        actor: &str,
        action: &str,
        subject: &str,
        mut detail: serde_json::Value,
    ) -> StoreResult<()> {
        let (actor, note) = crate::model::identity::split_note(actor);
        if let Some(note) = note {
            match detail.as_object_mut() {
                Some(fields) => {
                    fields.insert("actor_note".into(), note.into());
                }
                None => detail = serde_json::json!({ "detail": detail, "actor_note": note }),
            }
        }
        let key = self.audit.key_for_append()?;
        // Read-then-append: on PostgreSQL two processes could read the same
        // last entry; the lock makes them take turns (SQLite's write lock
        // already does).
        if let Some(lock) = self.dialect.serialize_appends() {
            sqlx::query(lock).execute(&mut **tx).await?;
        }
        let last: Option<(i64, String)> =
            sqlx::query_as(self.sql("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"))
                .fetch_optional(&mut **tx)
                .await?;
        let (seq, prev) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, audit::GENESIS.to_string()),
        };
        let at: i64 = sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
            .fetch_one(&mut **tx)
            .await?;
        let detail = canonical_json(&detail);
        let hash = audit::entry_hash(&prev, seq, at, actor, action, subject, &detail);
        let mac = key.map(|k| audit::entry_mac(k, &hash));
        sqlx::query(self.sql(
            "INSERT INTO audit_log (seq, at, actor, action, subject, detail, prev_hash, hash, mac) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(seq)
        .bind(at)
        .bind(actor)
        .bind(action)
        .bind(subject)
        .bind(&detail)
        .bind(&prev)
        .bind(&hash)
        .bind(mac)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Entries oldest first: all of them (`from_seq` 0), or from a seq on.
    pub(super) async fn audit_from_seq(&self, from_seq: i64) -> StoreResult<Vec<AuditEntry>> {
        let rows: Vec<AuditRow> = sqlx::query_as(self.sql(
            "SELECT seq, at, actor, action, subject, detail, prev_hash, hash, mac \
             FROM audit_log WHERE seq >= ? ORDER BY seq",
        ))
        .bind(from_seq)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(entry).collect())
    }

    /// Entries written at or after `since_ms` (database clock), oldest
    /// first: what `paddock audit export --since` writes.
    pub async fn audit_since(&self, since_ms: i64) -> StoreResult<Vec<AuditEntry>> {
        let rows: Vec<AuditRow> = sqlx::query_as(self.sql(
            "SELECT seq, at, actor, action, subject, detail, prev_hash, hash, mac \
             FROM audit_log WHERE at >= ? ORDER BY seq",
        ))
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(entry).collect())
    }

    /// The anchors written so far (none without an anchor file).
    pub fn audit_anchors(&self) -> StoreResult<Vec<Anchor>> {
        let Some(path) = &self.audit.config.anchor_file else {
            return Ok(Vec::new());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(anchor_error(path, e)),
        };
        Anchor::parse_all(&text).map_err(|e| anchor_error(path, e))
    }

    /// Verify the whole chain against the key and the anchors; when it
    /// holds, anchor its head.
    pub async fn audit_verify(&self) -> StoreResult<AuditVerdict> {
        let key = self.audit.key_for_verify()?;
        let anchors = self.audit_anchors()?;
        let entries = self.audit_from_seq(0).await?;
        let macs = key.as_deref().map_or(MacCheck::NoKey, MacCheck::Key);
        let result = audit::verify(&entries, macs, &anchors);
        if let Ok(Verified {
            head: Some(head), ..
        }) = &result
        {
            self.anchor_write(&anchors, head)?;
        }
        Ok(AuditVerdict {
            result,
            config: self.audit.config.clone(),
            keyed: key.is_some(),
            anchors: anchors.len(),
        })
    }

    /// Anchor the chain's head, after checking every entry since the newest
    /// anchor (the whole chain if there is none). Returns the head
    /// anchored (`None`: no anchor file, or nothing new), or where the
    /// chain breaks — then nothing is written.
    pub async fn audit_anchor(&self) -> StoreResult<Result<Option<Anchor>, ChainBreak>> {
        if self.audit.config.anchor_file.is_none() {
            return Ok(Ok(None));
        }
        let key = self.audit.key_for_verify()?;
        let macs = key.as_deref().map_or(MacCheck::NoKey, MacCheck::Key);
        let anchors = self.audit_anchors()?;
        let newest = anchors.iter().max_by_key(|a| a.seq);
        let entries = self.audit_from_seq(newest.map_or(0, |a| a.seq)).await?;
        let checked = match newest {
            Some(anchor) => audit::verify_from(anchor, &entries, macs),
            None => audit::verify(&entries, macs, &[]),
        };
        let head = match checked {
            Ok(v) => v.head,
            // Name the first bad entry of the whole chain, not of the tail.
            Err(_) => {
                let all = self.audit_from_seq(0).await?;
                return Ok(audit::verify(&all, macs, &anchors).map(|_| None));
            }
        };
        match head {
            Some(head) if newest.is_none_or(|a| a.seq < head.seq) => {
                self.anchor_write(&anchors, &head)?;
                Ok(Ok(Some(head)))
            }
            _ => Ok(Ok(None)),
        }
    }

    /// Append `head` to the anchor file unless it is already there.
    fn anchor_write(&self, anchors: &[Anchor], head: &Anchor) -> StoreResult<()> {
        let Some(path) = &self.audit.config.anchor_file else {
            return Ok(());
        };
        if anchors.iter().any(|a| a == head) {
            return Ok(());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| anchor_error(path, e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| anchor_error(path, e))?;
        // One write per line: appends from several processes do not mix.
        file.write_all(format!("{}\n", head.line()).as_bytes())
            .map_err(|e| anchor_error(path, e))
    }
}

fn anchor_error(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::Audit(format!("audit anchor file {}: {what}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_anchor_file_defaults_beside_a_sqlite_file_and_nowhere_else() {
        assert_eq!(
            sqlite_file("sqlite:///var/lib/p.db?mode=rwc"),
            Some(PathBuf::from("/var/lib/p.db"))
        );
        assert_eq!(
            sqlite_file("sqlite://paddock.db"),
            Some(PathBuf::from("paddock.db"))
        );
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://u@h/db"), None);
        assert_eq!(
            suffixed(Path::new("a/p.db"), ".audit-anchor"),
            PathBuf::from("a/p.db.audit-anchor")
        );
    }

    #[test]
    fn a_key_is_created_private_once_and_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/audit.key");
        let key = read_or_create_key(&path).unwrap();
        assert_eq!(key.len(), audit::KEY_BYTES);
        assert_eq!(read_or_create_key(&path).unwrap(), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not a key").unwrap();
        let err = read_or_create_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("is not hexadecimal") && !err.contains("not a key"),
            "{err}"
        );
        assert_eq!(format!("{:?}", Key(key)), "Key(..)");
    }
}
