//! Connector credentials (`connector_secrets`, migration 0012): apart from
//! `connectors`, so that no read of a connector carries them; the value is
//! read only by the effect gateway, for the HTTP client. Commands and the
//! audit log see the header name and the fingerprint.

use super::*;
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

impl Store {
    pub(super) async fn secret_get(&self, connector: &str) -> StoreResult<Option<ConnectorSecret>> {
        let row: Option<(String, String)> = sqlx::query_as(
            self.sql("SELECT header, value FROM connector_secrets WHERE connector = ?"),
        )
        .bind(connector)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(header, value)| ConnectorSecret::stored(header, value)))
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
    /// audited with its fingerprint only.
    pub(super) async fn secret_set(
        &self,
        connector: &str,
        secret: Option<&ConnectorSecret>,
        actor: &str,
    ) -> StoreResult<()> {
        if self.connector_get(connector).await?.is_none() {
            return Err(StoreError::NotFound(format!("connector '{connector}'")));
        }
        let now = self.now_ms().await?;
        let (mut tx, _turn) = self.begin_write().await?;
        let previous: Option<String> = sqlx::query_scalar(
            self.sql("SELECT fingerprint FROM connector_secrets WHERE connector = ?"),
        )
        .bind(connector)
        .fetch_optional(&mut *tx)
        .await?;
        let (action, detail) = match secret {
            Some(secret) => {
                sqlx::query(self.sql(
                    "INSERT INTO connector_secrets (connector, header, value, fingerprint, set_by, \
                     set_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (connector) DO UPDATE SET \
                     header = excluded.header, value = excluded.value, \
                     fingerprint = excluded.fingerprint, set_by = excluded.set_by, \
                     set_at = excluded.set_at",
                ))
                .bind(connector)
                .bind(&secret.header)
                .bind(secret.expose())
                .bind(secret.fingerprint())
                .bind(actor)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                (
                    if previous.is_some() {
                        "connector.secret.rotate"
                    } else {
                        "connector.secret.set"
                    },
                    serde_json::json!({ "header": secret.header, "fingerprint": secret.fingerprint(),
                        "previous": previous }),
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
                )
            }
        };
        self.audit_append(&mut tx, actor, action, connector, detail)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
