//! A PostgreSQL database a benchmark creates for its run, one fresh schema
//! per measured run, dropped at the end.

use super::with_database;
use sqlx::Connection;

/// A PostgreSQL database created for this run (dropped by `drop`), with one
/// fresh schema per measured run.
pub struct Pg {
    admin: String,
    name: String,
    url: String,
}

impl Pg {
    pub async fn create(admin: &str, tag: &str) -> Pg {
        let name = format!(
            "pb_{tag}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        );
        let mut conn = sqlx::PgConnection::connect(admin)
            .await
            .unwrap_or_else(|e| panic!("PADDOCK_BENCH_DATABASE_URL={admin} is unreachable: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.ok();
        Pg {
            admin: admin.into(),
            url: with_database(admin, &name),
            name,
        }
    }

    /// A new schema, selected through `search_path` so every process given
    /// the URL sees the same tables.
    pub async fn schema(&self, schema: &str) -> String {
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA r_{schema}")))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.ok();
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options[search_path]=r_{schema}", self.url)
    }

    pub async fn drop(self) {
        let mut conn = sqlx::PgConnection::connect(&self.admin).await.unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut conn)
        .await;
    }
}
