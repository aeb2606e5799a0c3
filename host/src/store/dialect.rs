//! One SQL text, two databases. Every query is written once, in the
//! SQLite spelling the store grew up with, and translated for PostgreSQL
//! the first time it runs (then cached for the life of the process).
//!
//! Why translate instead of keeping two copies: the two stores must stay
//! the *same* store. A second copy of ~100 queries drifts; one text with a
//! small, tested rewrite cannot. What the rewrite covers is deliberately
//! narrow, and everything else must be written portably:
//!
//! - placeholders: `?` and `?N` become `$N` (SQLite numbering rules: a bare
//!   `?` takes one more than the largest number seen so far);
//! - the database clock: [`SQLITE_NOW`] becomes [`POSTGRES_NOW`];
//! - a new trigger's id: [`SQLITE_NEW_TRIGGER_ID`] becomes
//!   [`POSTGRES_NEW_TRIGGER_ID`];
//! - `BEGIN IMMEDIATE` has no PostgreSQL twin; [`Dialect::begin_write`]
//!   says what each database runs instead.
//!
//! Portable means: integers are BIGINT on PostgreSQL and decoded as `i64`;
//! no boolean-valued columns in results (use `CASE ... THEN 1 ELSE 0 END`);
//! `CAST(sum(x) AS BIGINT)`; `CASE` instead of SQLite's two-argument
//! `min`/`max`; `ON CONFLICT ... DO NOTHING` instead of `INSERT OR IGNORE`;
//! a bound `LIMIT` is written `LIMIT CAST(? AS INTEGER)`. SQLite (3.4x+)
//! plans with the value of a bare bound `LIMIT ?` and marks the prepared
//! statement stale whenever that parameter is bound again, so the statement
//! is parsed and planned anew on every run — the claim query spent ~1 ms
//! per call re-preparing itself before this rule (benches/throughput). A
//! `CAST` hides the value from the planner; PostgreSQL accepts both.

use std::collections::HashMap;
use std::sync::RwLock;

/// The SQLite spelling of "now, in ms since the Unix epoch".
pub const SQLITE_NOW: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
/// The same clock on PostgreSQL. `clock_timestamp()`, not `now()`: `now()`
/// is frozen at transaction start, and a lease judged inside a long
/// transaction must still see the real time.
pub const POSTGRES_NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// The database clock as a literal for `concat!` (SQLite spelling; the
/// PostgreSQL store rewrites it).
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}
pub(crate) use now_ms;

/// A new trigger's id in an `INSERT`, its value bound where it stands:
/// on SQLite the id reserved for it (`store/trigger_ids.rs`; NULL takes
/// `AUTOINCREMENT`'s next), on PostgreSQL NULL, and the table's sequence
/// gives it ([`POSTGRES_NEW_TRIGGER_ID`]).
pub const SQLITE_NEW_TRIGGER_ID: &str = "coalesce(?, NULL)";
/// [`SQLITE_NEW_TRIGGER_ID`] on PostgreSQL.
pub const POSTGRES_NEW_TRIGGER_ID: &str =
    "coalesce(?, nextval(pg_get_serial_sequence('triggers', 'id')))";

/// [`SQLITE_NEW_TRIGGER_ID`] as a literal for `concat!`.
macro_rules! new_trigger_id {
    () => {
        "coalesce(?, NULL)"
    };
}
pub(crate) use new_trigger_id;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The text to run for `template` on this database.
    pub fn sql(self, template: &'static str) -> &'static str {
        match self {
            Dialect::Sqlite => template,
            Dialect::Postgres => cached_postgres(template),
        }
    }

    /// Translate a query built at run time (multi-row inserts).
    pub fn sql_owned(self, text: String) -> String {
        match self {
            Dialect::Sqlite => text,
            Dialect::Postgres => to_postgres(&text),
        }
    }

    /// `head VALUES row, row, ... tail` with `rows` copies of `row` (a
    /// parenthesised tuple of `?`s), numbered for this database: one round
    /// trip for a whole chunk of rows.
    pub fn multi_row(self, head: &str, row: &str, rows: usize, tail: &str) -> String {
        let mut sql = String::with_capacity(head.len() + tail.len() + rows * (row.len() + 2) + 8);
        sql.push_str(head);
        sql.push_str(" VALUES ");
        for i in 0..rows {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(row);
        }
        sql.push(' ');
        sql.push_str(tail);
        self.sql_owned(sql)
    }

    /// The statement that opens a transaction which will write rows it has
    /// just read. SQLite: take the write lock up front (`BEGIN IMMEDIATE`),
    /// so two writers never interleave. PostgreSQL: rows are locked where
    /// they are read (`FOR UPDATE SKIP LOCKED` in claims), and the few
    /// read-then-append paths (the audit chain) take a transaction-scoped
    /// advisory lock themselves — see [`Dialect::serialize_appends`].
    pub fn begin_write(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        }
    }

    /// A statement that serialises appends to one chain (the audit log)
    /// across processes, held until the transaction ends; `None` where the
    /// transaction already holds the database's only write lock.
    pub fn serialize_appends(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some("SELECT pg_advisory_xact_lock(7263514)"),
        }
    }
}

fn cached_postgres(template: &'static str) -> &'static str {
    static CACHE: RwLock<Option<HashMap<&'static str, &'static str>>> = RwLock::new(None);
    if let Some(hit) = CACHE
        .read()
        .expect("sql cache poisoned")
        .as_ref()
        .and_then(|m| m.get(template))
    {
        return hit;
    }
    // Leaked on purpose: one string per distinct query text, bounded by
    // the number of queries in the source.
    let translated: &'static str = Box::leak(to_postgres(template).into_boxed_str());
    CACHE
        .write()
        .expect("sql cache poisoned")
        .get_or_insert_with(HashMap::new)
        .entry(template)
        .or_insert(translated)
}

/// Rewrite SQLite-spelled SQL for PostgreSQL (see the module comment for
/// what is covered). Placeholders inside string literals are left alone.
pub fn to_postgres(sql: &str) -> String {
    let sql = sql
        .replace(SQLITE_NOW, POSTGRES_NOW)
        .replace(SQLITE_NEW_TRIGGER_ID, POSTGRES_NEW_TRIGGER_ID);
    let mut out = String::with_capacity(sql.len() + 16);
    let mut highest = 0u32;
    let mut in_string = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_string = !in_string;
                out.push(c);
            }
            '?' if !in_string => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = if digits.is_empty() {
                    highest + 1
                } else {
                    digits.parse().expect("digits")
                };
                highest = highest.max(n);
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_placeholders_are_numbered_in_order() {
        assert_eq!(
            to_postgres("INSERT INTO t (a, b) VALUES (?, ?)"),
            "INSERT INTO t (a, b) VALUES ($1, $2)"
        );
    }

    #[test]
    fn numbered_and_bare_placeholders_follow_sqlite_rules() {
        // SQLite gives a bare `?` one more than the largest number so far.
        assert_eq!(
            to_postgres("a = ?2 AND b = ?1 AND c = ? AND d = ?10"),
            "a = $2 AND b = $1 AND c = $3 AND d = $10"
        );
    }

    #[test]
    fn the_clock_is_rewritten_and_string_literals_are_left_alone() {
        let sql = concat!("SELECT '?', ", now_ms!(), " FROM t WHERE x = ?");
        assert_eq!(
            to_postgres(sql),
            format!("SELECT '?', {POSTGRES_NOW} FROM t WHERE x = $1")
        );
    }

    #[test]
    fn a_new_trigger_id_takes_the_sequence_on_postgres() {
        let sql = concat!(
            "INSERT INTO triggers (id, a) VALUES (",
            new_trigger_id!(),
            ", ?)"
        );
        assert_eq!(
            to_postgres(sql),
            "INSERT INTO triggers (id, a) VALUES \
             (coalesce($1, nextval(pg_get_serial_sequence('triggers', 'id'))), $2)"
        );
    }

    #[test]
    fn multi_row_inserts_number_every_row() {
        assert_eq!(
            Dialect::Postgres.multi_row(
                "INSERT INTO t (a, b)",
                "(?, 'x', ?)",
                2,
                "ON CONFLICT DO NOTHING"
            ),
            "INSERT INTO t (a, b) VALUES ($1, 'x', $2), ($3, 'x', $4) ON CONFLICT DO NOTHING"
        );
    }

    #[test]
    fn translations_are_cached_and_sqlite_is_untouched() {
        let q = "SELECT ?1";
        assert_eq!(Dialect::Sqlite.sql(q), q);
        let a = Dialect::Postgres.sql(q);
        let b = Dialect::Postgres.sql(q);
        assert_eq!(a, "SELECT $1");
        assert!(std::ptr::eq(a, b));
    }
}
