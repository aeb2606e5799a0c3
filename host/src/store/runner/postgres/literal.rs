//! The claim's simple queries ([`super::claim_on`]): values written into
//! their text, and their rows. A simple query carries several statements
//! in one round trip — `BEGIN` with the candidates, the claim with the
//! check and `COMMIT` — but no bound parameters, so the few values the
//! claim sends are written in here: integers, arrays of integers, and the
//! runner's id as a quoted literal. Its rows come back in the text format,
//! which sqlx decodes by the columns' types as it does binary ones.

use std::fmt::Write;

/// `'{1,2,3}'`: integers as a PostgreSQL array literal (nothing in it
/// needs quoting).
pub(super) fn int_array(out: &mut String, ns: impl Iterator<Item = i64>) {
    out.push_str("'{");
    for (i, n) in ns.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write!(out, "{n}").expect("writing to a String cannot fail");
    }
    out.push_str("}'");
}

/// `n`, or `NULL`.
pub(super) fn maybe_int(n: Option<i64>) -> String {
    n.map_or_else(|| "NULL".to_string(), |n| n.to_string())
}

/// `'it''s'`: a string literal, its quotes doubled — the whole of
/// quoting under `standard_conforming_strings = on`, which every hot
/// session sets (`HOT_SESSION`), so a backslash is just a backslash.
pub(super) fn text(out: &mut String, s: &str) {
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
}

/// Every row a simple query's statements returned, in order, less the
/// rows with no column: the claims' lock's (`lock_groups!` selects no
/// column, so that only the statements a caller reads return rows).
pub(super) async fn rows(
    conn: &mut sqlx::PgConnection,
    text: String,
) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
    use sqlx::Row;
    let mut rows = sqlx::raw_sql(sqlx::AssertSqlSafe(text))
        .fetch_all(&mut *conn)
        .await?;
    rows.retain(|row| !row.is_empty());
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_array_literals() {
        let written = |ns: &[i64]| {
            let mut out = String::new();
            int_array(&mut out, ns.iter().copied());
            out
        };
        assert_eq!(written(&[]), "'{}'");
        assert_eq!(written(&[7]), "'{7}'");
        assert_eq!(written(&[1, -2, 30]), "'{1,-2,30}'");
    }

    #[test]
    fn text_is_quoted_with_its_quotes_doubled() {
        let written = |s: &str| {
            let mut out = String::new();
            text(&mut out, s);
            out
        };
        assert_eq!(written("runner-1"), "'runner-1'");
        assert_eq!(written("o'neil"), "'o''neil'");
        assert_eq!(
            written(r"a\b'); DROP TABLE triggers; --"),
            r"'a\b''); DROP TABLE triggers; --'"
        );
        assert_eq!(maybe_int(None), "NULL");
        assert_eq!(maybe_int(Some(-5)), "-5");
    }
}
