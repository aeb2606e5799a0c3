//! SQLite storage (sqlx). Every effect request is decided and written in one
//! `BEGIN IMMEDIATE` transaction: SQLite takes the write lock at `BEGIN`, so
//! two concurrent requests cannot both read "highest token = 77" and both
//! pass the fence, nor both insert the same idempotency key.

use std::borrow::Cow;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde::Serialize;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Row, SqlSafeStr};

use crate::protocol::{
    self, Action, Decision, OperationBody, OperationContext, STATUS_APPLIED, STATUS_UNPROCESSABLE,
};

/// Storage failure. The `Display` text is deliberately generic: it may reach
/// an HTTP response, and SQL text or driver messages must not. The source is
/// kept for logs.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage error")]
    Db(#[from] sqlx::Error),
    #[error("storage migration error")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored record is malformed")]
    Corrupt,
}

/// A validated effect request, ready to be decided.
#[derive(Debug, Clone)]
pub struct OperationRequest {
    pub idempotency_key: String,
    pub resource: String,
    pub action: Action,
    pub body: OperationBody,
    pub digest: String,
    pub fencing_token: Option<u64>,
    pub request_id: Option<String>,
}

/// What the transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// A new operation row was committed: `applied` (2xx) or a recorded
    /// business rejection (422).
    Recorded {
        applied: bool,
        status: u16,
        body: String,
    },
    /// The key was already recorded with the same digest; nothing re-applied.
    Replayed { status: u16, body: String },
    /// The key was recorded with a different digest; nothing changed.
    KeyConflict { recorded_digest: String },
    /// The presented token is below the resource's highest; nothing changed.
    Stale { presented: u64, current: u64 },
}

/// A recorded operation, as returned by `GET /v1/operations/{key}`.
#[derive(Debug, Clone, Serialize)]
pub struct OperationRecord {
    /// Commit order: transactions are serialised, so a larger sequence was
    /// committed later.
    pub sequence: i64,
    pub idempotency_key: String,
    pub resource: String,
    pub action: String,
    /// `applied` or `rejected`.
    pub outcome: String,
    pub status: u16,
    pub response: serde_json::Value,
    pub fencing_token: Option<i64>,
    pub params_digest: String,
    pub request_id: Option<String>,
    pub recorded_at: String,
}

/// A resource's state, as returned by `GET /v1/resources/{resource}`.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceState {
    pub resource: String,
    pub balance: i64,
    pub highest_fencing_token: Option<i64>,
    pub operations: i64,
    pub updated_at: String,
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    initial_balance: i64,
}

fn migrator() -> Migrator {
    Migrator::with_migrations(vec![Migration::new(
        1,
        Cow::Borrowed("init"),
        MigrationType::Simple,
        include_str!("../migrations/0001_init.sql").into_sql_str(),
        false,
    )])
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl Store {
    /// Opens (creating if needed) the SQLite file and runs migrations.
    pub async fn open(path: &Path, initial_balance: i64) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(15));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await?;
        migrator().run(&pool).await?;
        Ok(Self {
            pool,
            initial_balance,
        })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Decides and, where the decision allows, applies one effect request —
    /// all inside one `BEGIN IMMEDIATE` transaction.
    pub async fn execute(&self, req: &OperationRequest) -> Result<Executed, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let at = now();

        // Resources spring into existence on first touch with the configured
        // opening balance. Rolled back with everything else on a refusal.
        sqlx::query(
            "INSERT INTO resources (name, balance, highest_fencing_token, created_at, updated_at) \
             VALUES (?, ?, NULL, ?, ?) ON CONFLICT (name) DO NOTHING",
        )
        .bind(&req.resource)
        .bind(self.initial_balance)
        .bind(&at)
        .bind(&at)
        .execute(&mut *tx)
        .await?;

        let row =
            sqlx::query("SELECT balance, highest_fencing_token FROM resources WHERE name = ?")
                .bind(&req.resource)
                .fetch_one(&mut *tx)
                .await?;
        let balance: i64 = row.try_get("balance")?;
        let highest = to_token(row.try_get("highest_fencing_token")?)?;

        let existing = sqlx::query(
            "SELECT params_digest, status, response_body FROM operations WHERE idempotency_key = ?",
        )
        .bind(&req.idempotency_key)
        .fetch_optional(&mut *tx)
        .await?;
        let recorded_digest: Option<String> = match &existing {
            Some(r) => Some(r.try_get("params_digest")?),
            None => None,
        };

        let decision = protocol::decide(
            req.fencing_token,
            highest,
            recorded_digest.as_deref(),
            &req.digest,
        );
        let raised = protocol::raised_token(req.fencing_token, highest);

        match decision {
            Decision::Stale { presented, current } => {
                tx.rollback().await?;
                Ok(Executed::Stale { presented, current })
            }
            Decision::KeyConflict { recorded_digest } => {
                tx.rollback().await?;
                Ok(Executed::KeyConflict { recorded_digest })
            }
            Decision::Replay => {
                let r = existing.ok_or(StoreError::Corrupt)?;
                let status = to_status(r.try_get("status")?)?;
                let body: String = r.try_get("response_body")?;
                if raised != highest {
                    sqlx::query(
                        "UPDATE resources SET highest_fencing_token = ?, updated_at = ? WHERE name = ?",
                    )
                    .bind(raised.map(|t| t as i64))
                    .bind(&at)
                    .bind(&req.resource)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(Executed::Replayed { status, body })
            }
            Decision::Apply => {
                let ctx = OperationContext {
                    idempotency_key: &req.idempotency_key,
                    resource: &req.resource,
                    action: req.action,
                    amount: req.body.amount,
                    fencing_token: req.fencing_token,
                    request_id: req.request_id.as_deref(),
                    at: &at,
                };
                let (applied, status, body, new_balance) =
                    match protocol::apply_business(req.action, req.body.amount, balance) {
                        Ok(after) => (
                            true,
                            STATUS_APPLIED,
                            protocol::applied_body(&ctx, balance, after),
                            after,
                        ),
                        Err(why) => (
                            false,
                            STATUS_UNPROCESSABLE,
                            protocol::rejected_body(&ctx, &why),
                            balance,
                        ),
                    };
                let body = body.to_string();
                sqlx::query(
                    "UPDATE resources SET balance = ?, highest_fencing_token = ?, updated_at = ? \
                     WHERE name = ?",
                )
                .bind(new_balance)
                .bind(raised.map(|t| t as i64))
                .bind(&at)
                .bind(&req.resource)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO operations (idempotency_key, resource, action, params_digest, \
                     request_body, outcome, status, response_body, fencing_token, request_id, \
                     recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(&req.idempotency_key)
                .bind(&req.resource)
                .bind(req.action.as_str())
                .bind(&req.digest)
                .bind(&req.body.canonical)
                .bind(if applied { "applied" } else { "rejected" })
                .bind(i64::from(status))
                .bind(&body)
                .bind(req.fencing_token.map(|t| t as i64))
                .bind(&req.request_id)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Executed::Recorded {
                    applied,
                    status,
                    body,
                })
            }
        }
    }

    /// "What happened to key K?"
    pub async fn operation(&self, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        let Some(r) = sqlx::query(
            "SELECT id, idempotency_key, resource, action, outcome, status, response_body, \
             fencing_token, params_digest, request_id, recorded_at \
             FROM operations WHERE idempotency_key = ?",
        )
        .bind(key)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let response_text: String = r.try_get("response_body")?;
        Ok(Some(OperationRecord {
            sequence: r.try_get("id")?,
            idempotency_key: r.try_get("idempotency_key")?,
            resource: r.try_get("resource")?,
            action: r.try_get("action")?,
            outcome: r.try_get("outcome")?,
            status: to_status(r.try_get("status")?)?,
            response: serde_json::from_str(&response_text).map_err(|_| StoreError::Corrupt)?,
            fencing_token: r.try_get("fencing_token")?,
            params_digest: r.try_get("params_digest")?,
            request_id: r.try_get("request_id")?,
            recorded_at: r.try_get("recorded_at")?,
        }))
    }

    pub async fn resource(&self, name: &str) -> Result<Option<ResourceState>, StoreError> {
        let Some(r) = sqlx::query(
            "SELECT name, balance, highest_fencing_token, updated_at, \
             (SELECT COUNT(*) FROM operations o WHERE o.resource = r.name) AS operations \
             FROM resources r WHERE name = ?",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(ResourceState {
            resource: r.try_get("name")?,
            balance: r.try_get("balance")?,
            highest_fencing_token: r.try_get("highest_fencing_token")?,
            operations: r.try_get("operations")?,
            updated_at: r.try_get("updated_at")?,
        }))
    }

    /// Admin: sets (creating if needed) a resource's balance. Leaves its
    /// fencing token alone.
    pub async fn set_balance(&self, name: &str, balance: i64) -> Result<(), StoreError> {
        let at = now();
        sqlx::query(
            "INSERT INTO resources (name, balance, highest_fencing_token, created_at, updated_at) \
             VALUES (?, ?, NULL, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET balance = excluded.balance, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(balance)
        .bind(&at)
        .bind(&at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

fn to_token(v: Option<i64>) -> Result<Option<u64>, StoreError> {
    v.map(|t| u64::try_from(t).map_err(|_| StoreError::Corrupt))
        .transpose()
}

fn to_status(v: i64) -> Result<u16, StoreError> {
    u16::try_from(v).map_err(|_| StoreError::Corrupt)
}
