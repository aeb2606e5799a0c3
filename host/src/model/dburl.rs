//! A database URL as it may be printed, in every form the store accepts:
//!
//! - URL form, `postgres://user:PASSWORD@host/db`: the password may hold
//!   any character, `/`, `?`, `@` and `#` included (percent-encoded or not),
//!   so the user info is read as everything up to the *last* `@` before the
//!   host — over-hiding a query's `@` is better than printing a password;
//! - query parameters, `?password=…` (any key containing `password`,
//!   `sslpassword` too);
//! - the libpq key=value form, `host=… password=… dbname=…`, values bare or
//!   single-quoted with `\'` escapes;
//! - SQLite URLs carry no credential and are printed as they are (a path
//!   may hold `@` and `:`).
//!
//! Errors and log lines name the database only by [`redacted_url`].

/// What a hidden password is shown as.
const HIDDEN: &str = "***";

fn is_password_key(key: &str) -> bool {
    key.trim().to_ascii_lowercase().contains("password")
}

/// `url` with every password replaced by `***`.
pub fn redacted_url(url: &str) -> String {
    let trimmed = url.trim_start();
    if trimmed.starts_with("sqlite:") {
        return url.to_string();
    }
    match url.find("://") {
        Some(scheme_end)
            if url[..scheme_end]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            url_form(url, scheme_end + 3)
        }
        _ if url.contains('=') => key_value_form(url),
        _ => url.to_string(),
    }
}

fn url_form(url: &str, start: usize) -> String {
    let mut out = url[..start].to_string();
    let mut rest = &url[start..];
    let mut in_query = false;
    // The user info ends at the last '@': a password may hold '/', '?', '#'.
    // An '@' in the query makes this hide more than the password, never less.
    if let Some(at) = rest.rfind('@')
        && let Some(colon) = rest[..at].find(':')
    {
        out.push_str(&rest[..colon + 1]);
        out.push_str(HIDDEN);
        out.push('@');
        in_query = rest[..at].contains('?');
        rest = &rest[at + 1..];
    }
    let (head, query) = match rest.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None if in_query => ("", Some(rest)),
        None => (rest, None),
    };
    out.push_str(head);
    if let Some(query) = query {
        if !in_query || !head.is_empty() {
            out.push('?');
        }
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if is_password_key(k) => format!("{k}={HIDDEN}"),
                _ => pair.to_string(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    out
}

/// The libpq form: `key = value` pairs separated by white space, a value
/// bare or in single quotes (`\'` and `\\` escaped). A value that cannot be
/// read to its end (an unclosed quote) hides everything after its key.
fn key_value_form(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let Some(eq) = rest.find('=') else {
            out.push_str(rest);
            return out;
        };
        let key = &rest[..eq];
        out.push_str(key);
        out.push('=');
        let after = &rest[eq + 1..];
        let value_start = after.len() - after.trim_start().len();
        out.push_str(&after[..value_start]);
        let value = &after[value_start..];
        let end = if let Some(quoted) = value.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let close = !escaped && c == '\'';
                escaped = !escaped && c == '\\';
                close
            });
            match close {
                Some((i, _)) => i + 2,
                None => {
                    if is_password_key(key) {
                        out.push_str(HIDDEN);
                    } else {
                        out.push_str(value);
                    }
                    return out;
                }
            }
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        if is_password_key(key) {
            out.push_str(HIDDEN);
        } else {
            out.push_str(&value[..end]);
        }
        rest = &value[end..];
        if rest.is_empty() {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redacted_url;

    /// Every form the store accepts, with a password that must not survive.
    pub const FORMS: &[(&str, &str)] = &[
        (
            "postgres://app:s3cret@db:5432/paddock?sslmode=require",
            "postgres://app:***@db:5432/paddock?sslmode=require",
        ),
        (
            "postgres://app:s3/c?r#et@db:5432/paddock?sslmode=require",
            "postgres://app:***@db:5432/paddock?sslmode=require",
        ),
        (
            "postgresql://app:s3%2Fc%3Fr%40et@db/paddock",
            "postgresql://app:***@db/paddock",
        ),
        (
            "postgres://app:s3@cr@et@db/paddock",
            "postgres://app:***@db/paddock",
        ),
        (
            "postgres://db/p?user=app&password=s3cret&x=1",
            "postgres://db/p?user=app&password=***&x=1",
        ),
        (
            "postgres://db/p?sslpassword=s3cret&Password=s3cret",
            "postgres://db/p?sslpassword=***&Password=***",
        ),
        (
            "host=db port=5432 user=app password=s3cret dbname=paddock",
            "host=db port=5432 user=app password=*** dbname=paddock",
        ),
        (
            "host=db password = 's3 \\' cret' dbname=paddock",
            "host=db password = *** dbname=paddock",
        ),
        ("host=db password='s3cret", "host=db password=***"),
        (
            "postgres://db/p?user=a@b&password=s3cret",
            "postgres://db/p?user=a@b&password=***",
        ),
        (
            "postgres://db:5432/p?user=a@b&password=s3cret",
            "postgres://db:***@b&password=***",
        ),
    ];

    #[test]
    fn a_database_url_is_printed_without_its_password_in_every_form() {
        for (url, shown) in FORMS {
            assert_eq!(&redacted_url(url), shown, "{url}");
            assert!(!redacted_url(url).contains("s3"), "{url}");
        }
    }

    #[test]
    fn urls_without_a_password_are_unchanged() {
        for url in [
            "postgres://app@db/p",
            "postgres://db:5432/p?sslmode=require",
            "sqlite:///var/lib/p.db?mode=rwc",
            "sqlite://./a@b:c.db",
            "sqlite::memory:",
            "host=db user=app dbname=paddock",
        ] {
            assert_eq!(redacted_url(url), url);
        }
    }
}
