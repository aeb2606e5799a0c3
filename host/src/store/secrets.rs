//! Connector credentials (`connector_secrets`, migrations 0012 and 0028):
//! apart from `connectors`, so that no read of a connector carries them,
//! and sealed at rest (`model::envelope`) under the host key in the file
//! [`secret_key`](super::secret_key) keeps: `value` holds the ciphertext,
//! `data_key` the wrapped data key, `key_id` the host key's id. The value is
//! opened only by the effect gateway, for the HTTP client. Commands and the
//! audit log see the header name and the keyed fingerprint.
//!
//! Every statement that writes a secret first takes the table's lock
//! (PostgreSQL; SQLite's write transaction already is one), then reads the
//! key file: a secret set while the host key rotates is sealed under the
//! key the rotation ends with, never under one it drops.

use super::*;
use crate::model::envelope::{Fresh, HostKey, KEY_BYTES, NONCE_BYTES, Sealed};
use crate::model::secret::ConnectorSecret;

/// A stored credential as people may see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow, serde::Deserialize)]
pub struct SecretView {
    pub connector: String,
    pub header: String,
    pub fingerprint: String,
    pub set_by: String,
    pub set_at: i64,
}

/// What a host key rotation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRotation {
    /// The new host key's id.
    pub key_id: String,
    /// Secrets re-sealed under it.
    pub secrets: usize,
}

/// connector, header, value, key_id, data_key
type SecretRow = (String, String, String, Option<String>, Option<String>);

fn fresh() -> Fresh {
    Fresh {
        data_key: rand::random::<[u8; KEY_BYTES]>(),
        value_nonce: rand::random::<[u8; NONCE_BYTES]>(),
        wrap_nonce: rand::random::<[u8; NONCE_BYTES]>(),
    }
}

impl Store {
    /// Point this store at another key file (tests, embedders), and check
    /// and seal its secrets with it as [`Store::open`] does.
    pub async fn with_secret_key(mut self, config: SecretKeyConfig) -> StoreResult<Self> {
        self.secrets = std::sync::Arc::new(secret_key::Keyring::new(config));
        self.secrets_start().await?;
        Ok(self)
    }

    pub fn secret_key_config(&self) -> &SecretKeyConfig {
        &self.secrets.config
    }

    /// At open: every sealed secret's host key must be in the key file (the
    /// host refuses to start otherwise), and secrets stored in plain text
    /// (before migration 0028) are sealed, all in one transaction, once.
    pub(super) async fn secrets_start(&self) -> StoreResult<()> {
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT connector, key_id FROM connector_secrets")
                .fetch_all(&self.pool)
                .await?;
        let mut ids: Vec<&str> = rows.iter().filter_map(|r| r.1.as_deref()).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.secrets.find(id)?;
        }
        if rows.iter().any(|r| r.1.is_none()) {
            self.secrets_seal_plain().await?;
        }
        Ok(())
    }

    async fn lock_secrets(&self, tx: &mut Tx) -> StoreResult<()> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("LOCK TABLE connector_secrets IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    async fn secret_rows(&self, tx: &mut Tx, plain_only: bool) -> StoreResult<Vec<SecretRow>> {
        Ok(sqlx::query_as(if plain_only {
            "SELECT connector, header, value, key_id, data_key FROM connector_secrets \
             WHERE key_id IS NULL ORDER BY connector"
        } else {
            "SELECT connector, header, value, key_id, data_key FROM connector_secrets \
             ORDER BY connector"
        })
        .fetch_all(&mut **tx)
        .await?)
    }

    async fn secret_store_sealed(
        &self,
        tx: &mut Tx,
        connector: &str,
        sealed: &Sealed,
        fingerprint: &str,
    ) -> StoreResult<()> {
        sqlx::query(self.sql(
            "UPDATE connector_secrets SET value = ?, data_key = ?, key_id = ?, fingerprint = ? \
             WHERE connector = ?",
        ))
        .bind(&sealed.value)
        .bind(&sealed.data_key)
        .bind(&sealed.key_id)
        .bind(fingerprint)
        .bind(connector)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Seal every plain-text secret under the current host key (created if
    /// missing), audited by connector and keyed fingerprint.
    async fn secrets_seal_plain(&self) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        self.lock_secrets(&mut tx).await?;
        let rows = self.secret_rows(&mut tx, true).await?;
        if rows.is_empty() {
            return Ok(()); // another process sealed them first
        }
        let key = self.secrets.current()?;
        if self.dialect == Dialect::Sqlite {
            // The plain text's old bytes are zeroed as its cells are
            // rewritten, not left in free space for a copy of the file.
            sqlx::query("PRAGMA secure_delete = ON")
                .execute(&mut *tx)
                .await?;
        }
        let mut sealed_list = Vec::new();
        for (connector, header, value, _, _) in rows {
            let sealed = key.seal(&connector, &header, &value, fresh());
            let fingerprint = key.fingerprint(&value);
            self.secret_store_sealed(&mut tx, &connector, &sealed, &fingerprint)
                .await?;
            sealed_list.push(serde_json::json!({ "connector": connector,
                "fingerprint": fingerprint }));
        }
        let detail = serde_json::json!({ "key_id": key.id, "secrets": sealed_list });
        self.audit_append(
            &mut tx,
            "paddock",
            "connector.secret.seal",
            "connectors",
            detail,
        )
        .await?;
        tx.commit().await?;
        if self.dialect == Dialect::Sqlite {
            // Past transactions' pages in the write-ahead log may still
            // hold the plain text: copy them into the file and empty the
            // log (best effort: a reader still open keeps the log).
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// A secret's value, opened with its row's host key. A row still in
    /// plain text (written by a host older than sealing, after this one
    /// started) is used as it is; the next start seals it.
    pub(super) async fn secret_get(&self, connector: &str) -> StoreResult<Option<ConnectorSecret>> {
        let row: Option<(String, String, Option<String>, Option<String>)> =
            sqlx::query_as(self.sql(
                "SELECT header, value, key_id, data_key FROM connector_secrets WHERE connector = ?",
            ))
            .bind(connector)
            .fetch_optional(&self.pool)
            .await?;
        let Some((header, value, key_id, data_key)) = row else {
            return Ok(None);
        };
        let (Some(key_id), Some(data_key)) = (key_id, data_key) else {
            return Ok(Some(ConnectorSecret::stored(header, value)));
        };
        let sealed = Sealed {
            value,
            data_key,
            key_id,
        };
        let opened = self
            .secrets
            .find(&sealed.key_id)?
            .open(connector, &header, &sealed)
            .map_err(|e| StoreError::SecretKey(format!("connector '{connector}' secret: {e}")))?;
        Ok(Some(ConnectorSecret::stored(header, opened)))
    }

    pub(super) async fn secrets_list(&self) -> StoreResult<Vec<SecretView>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT connector, header, fingerprint, set_by, set_at FROM connector_secrets \
             ORDER BY connector",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Set, rotate (`Some`) or clear (`None`) a connector's credential,
    /// sealed under the current host key and audited with its keyed
    /// fingerprint only. Returns the fingerprint set.
    pub(super) async fn secret_set(
        &self,
        connector: &str,
        secret: Option<&ConnectorSecret>,
        actor: &str,
    ) -> StoreResult<Option<String>> {
        if self.connector_get(connector).await?.is_none() {
            return Err(StoreError::NotFound(format!("connector '{connector}'")));
        }
        let now = self.now_ms().await?;
        let (mut tx, _turn) = self.begin_write().await?;
        self.lock_secrets(&mut tx).await?;
        let previous: Option<String> = sqlx::query_scalar(
            self.sql("SELECT fingerprint FROM connector_secrets WHERE connector = ?"),
        )
        .bind(connector)
        .fetch_optional(&mut *tx)
        .await?;
        let (action, detail, fingerprint) = match secret {
            Some(secret) => {
                let key = self.secrets.current()?;
                let sealed = key.seal(connector, &secret.header, secret.expose(), fresh());
                let fingerprint = key.fingerprint(secret.expose());
                sqlx::query(self.sql(
                    "INSERT INTO connector_secrets (connector, header, value, fingerprint, set_by, \
                     set_at, key_id, data_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                     ON CONFLICT (connector) DO UPDATE SET header = excluded.header, \
                     value = excluded.value, fingerprint = excluded.fingerprint, \
                     set_by = excluded.set_by, set_at = excluded.set_at, \
                     key_id = excluded.key_id, data_key = excluded.data_key",
                ))
                .bind(connector)
                .bind(&secret.header)
                .bind(&sealed.value)
                .bind(&fingerprint)
                .bind(actor)
                .bind(now)
                .bind(&sealed.key_id)
                .bind(&sealed.data_key)
                .execute(&mut *tx)
                .await?;
                (
                    if previous.is_some() {
                        "connector.secret.rotate"
                    } else {
                        "connector.secret.set"
                    },
                    serde_json::json!({ "header": secret.header, "fingerprint": fingerprint,
                        "previous": previous }),
                    Some(fingerprint),
                )
            }
            None => {
                sqlx::query(self.sql("DELETE FROM connector_secrets WHERE connector = ?"))
                    .bind(connector)
                    .execute(&mut *tx)
                    .await?;
                (
                    "connector.secret.clear",
                    serde_json::json!({ "previous": previous }),
                    None,
                )
            }
        };
        self.audit_append(&mut tx, actor, action, connector, detail)
            .await?;
        tx.commit().await?;
        Ok(fingerprint)
    }

    /// Rotate the host key: a new key is added to the key file, every
    /// secret's data key is re-wrapped under it (and its fingerprint keyed
    /// anew) in one transaction, audited, and only then are the old keys
    /// dropped from the file. Interrupted anywhere, every secret still opens:
    /// the file holds the old and the new key until the commit.
    pub async fn secrets_rotate_key(&self, actor: &str) -> StoreResult<KeyRotation> {
        let (mut tx, _turn) = self.begin_write().await?;
        self.lock_secrets(&mut tx).await?;
        let rows = self.secret_rows(&mut tx, false).await?;
        let mut keys = match self.secrets.read()? {
            Some(keys) => keys,
            None => vec![self.secrets.current()?],
        };
        let previous: Vec<String> = keys.iter().map(|k| k.id.clone()).collect();
        let next = secret_key::new_key();
        keys.push(next.clone());
        self.secrets.write(&keys)?;
        let mut moved = Vec::new();
        for (connector, header, value, key_id, data_key) in rows {
            let (sealed, plain) = match (key_id, data_key) {
                (Some(key_id), Some(data_key)) => {
                    let old: HostKey = self.secrets.find(&key_id)?;
                    let sealed = Sealed {
                        value,
                        data_key,
                        key_id,
                    };
                    let err = |e| StoreError::SecretKey(format!("connector '{connector}': {e}"));
                    let plain = old.open(&connector, &header, &sealed).map_err(err)?;
                    let wrap_nonce = rand::random::<[u8; NONCE_BYTES]>();
                    let rewrapped = old
                        .rewrap(&next, &connector, &sealed, wrap_nonce)
                        .map_err(err)?;
                    (rewrapped, plain)
                }
                _ => (next.seal(&connector, &header, &value, fresh()), value),
            };
            let fingerprint = next.fingerprint(&plain);
            self.secret_store_sealed(&mut tx, &connector, &sealed, &fingerprint)
                .await?;
            moved.push(serde_json::json!({ "connector": connector, "fingerprint": fingerprint }));
        }
        let count = moved.len();
        let detail = serde_json::json!({ "from": previous, "key_id": next.id, "secrets": moved });
        self.audit_append(
            &mut tx,
            actor,
            "connector.secret.rotate-key",
            "connectors",
            detail,
        )
        .await?;
        tx.commit().await?;
        self.secrets.write(std::slice::from_ref(&next))?;
        Ok(KeyRotation {
            key_id: next.id,
            secrets: count,
        })
    }
}
