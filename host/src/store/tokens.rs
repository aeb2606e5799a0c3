//! API tokens (`api_tokens`, migration 0014): created, listed, revoked by
//! an admin, each change audited with the token's fingerprint — never its
//! text, which is shown once, to its creator — and looked up by the hash of
//! a presented token ([`Store::token_authenticate`]). Who may do what with
//! a token is [`crate::model::identity`]'s.

use super::*;
use crate::model::identity::{
    Principal, Role, check_token_name, check_token_text, new_token_text, token_fingerprint,
    token_hash,
};

/// A token to create.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
    pub tenant: Option<String>,
    /// How long it is valid, from now (database clock).
    pub valid_for_ms: i64,
}

/// A token just created: its text is here and nowhere else.
#[derive(Debug)]
pub struct IssuedToken {
    pub name: String,
    pub text: String,
    pub fingerprint: String,
    pub expires_at: i64,
}

/// A stored token as people may see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow, serde::Deserialize)]
pub struct TokenView {
    pub name: String,
    pub fingerprint: String,
    pub role: String,
    pub tenant: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_by: Option<String>,
    pub revoked_at: Option<i64>,
}

/// Why a presented token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Malformed(String),
    #[error("unknown token")]
    Unknown,
    #[error("token '{0}' was revoked")]
    Revoked(String),
    #[error("token '{0}' expired")]
    Expired(String),
}

/// The longest a token may be valid: a year (a token that never expires
/// outlives the person who made it).
pub const MAX_TOKEN_VALIDITY_MS: i64 = 366 * 24 * 3_600_000;

impl Store {
    /// Create a token, audited as `token.create` (fingerprint, role,
    /// tenant, expiry). A name in use — revoked or not — is refused.
    pub async fn token_create(&self, new: &NewToken, actor: &str) -> StoreResult<IssuedToken> {
        check_token_name(&new.name).map_err(StoreError::Conflict)?;
        new.role
            .check_tenant(new.tenant.as_deref())
            .map_err(StoreError::Conflict)?;
        if !(1..=MAX_TOKEN_VALIDITY_MS).contains(&new.valid_for_ms) {
            return Err(StoreError::Conflict(format!(
                "a token is valid for 1 ms to 366 days, not {} ms",
                new.valid_for_ms
            )));
        }
        let text = new_token_text();
        let fingerprint = token_fingerprint(&text);
        let now = self.now_ms().await?;
        let expires_at = now + new.valid_for_ms;
        let (mut tx, _turn) = self.begin_write().await?;
        let taken: Option<String> =
            sqlx::query_scalar(self.sql("SELECT name FROM api_tokens WHERE name = ?"))
                .bind(&new.name)
                .fetch_optional(&mut *tx)
                .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "a token named '{}' exists (names are never reused, so audit entries keep their meaning)",
                new.name
            )));
        }
        sqlx::query(self.sql(
            "INSERT INTO api_tokens (name, token_hash, fingerprint, role, tenant, created_by, \
             created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&new.name)
        .bind(token_hash(&text))
        .bind(&fingerprint)
        .bind(new.role.as_str())
        .bind(&new.tenant)
        .bind(actor)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({
            "role": new.role.as_str(), "tenant": new.tenant,
            "fingerprint": fingerprint, "expires_at": expires_at,
        });
        self.audit_append(&mut tx, actor, "token.create", &new.name, detail)
            .await?;
        tx.commit().await?;
        Ok(IssuedToken {
            name: new.name.clone(),
            text,
            fingerprint,
            expires_at,
        })
    }

    /// Revoke a token, audited as `token.revoke`. Revoking a revoked token
    /// changes nothing and says so (`Ok(false)`).
    pub async fn token_revoke(&self, name: &str, actor: &str) -> StoreResult<bool> {
        let now = self.now_ms().await?;
        let (mut tx, _turn) = self.begin_write().await?;
        let row: Option<(String, Option<i64>)> = sqlx::query_as(
            self.sql("SELECT fingerprint, revoked_at FROM api_tokens WHERE name = ?"),
        )
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((fingerprint, revoked_at)) = row else {
            return Err(StoreError::NotFound(format!("token '{name}'")));
        };
        if revoked_at.is_some() {
            return Ok(false);
        }
        sqlx::query(self.sql(
            "UPDATE api_tokens SET revoked_by = ?, revoked_at = ? \
             WHERE name = ? AND revoked_at IS NULL",
        ))
        .bind(actor)
        .bind(now)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "fingerprint": fingerprint });
        self.audit_append(&mut tx, actor, "token.revoke", name, detail)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Every token, newest first, without its text or hash.
    pub async fn tokens_list(&self) -> StoreResult<Vec<TokenView>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT name, fingerprint, role, tenant, created_by, created_at, expires_at, \
             revoked_by, revoked_at FROM api_tokens ORDER BY created_at DESC, name",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Who presents `text`: its token's principal, if the token exists,
    /// is not revoked and has not expired (database clock).
    pub async fn token_authenticate(
        &self,
        text: &str,
    ) -> StoreResult<Result<Principal, AuthError>> {
        if let Err(e) = check_token_text(text) {
            return Ok(Err(AuthError::Malformed(e)));
        }
        let now = self.now_ms().await?;
        let row: Option<TokenView> = sqlx::query_as(self.sql(
            "SELECT name, fingerprint, role, tenant, created_by, created_at, expires_at, \
             revoked_by, revoked_at FROM api_tokens WHERE token_hash = ?",
        ))
        .bind(token_hash(text))
        .fetch_optional(&self.pool)
        .await?;
        let Some(token) = row else {
            return Ok(Err(AuthError::Unknown));
        };
        if token.revoked_at.is_some() {
            return Ok(Err(AuthError::Revoked(token.name)));
        }
        if token.expires_at <= now {
            return Ok(Err(AuthError::Expired(token.name)));
        }
        let role = Role::parse(&token.role).map_err(StoreError::Conflict)?;
        Ok(Ok(Principal {
            name: token.name,
            role,
            tenant: token.tenant,
        }))
    }
}
