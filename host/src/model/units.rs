//! Sizes and durations as people write them in flags and files (`64MiB`,
//! `2s`), checked: positive, and small enough to compute with. Errors
//! name the field, so a refusal says which value was wrong.

use super::time::parse_duration;

/// `64MiB`, `1GiB`, `512KiB` or plain bytes: a positive size that fits in
/// 63 bits.
pub fn parse_bytes(field: &str, text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("GiB") {
        (n, 1i64 << 30)
    } else if let Some(n) = t.strip_suffix("MiB") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("KiB") {
        (n, 1 << 10)
    } else {
        (t, 1)
    };
    let n: i64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{field}: '{text}' is not a size (use bytes, KiB, MiB or GiB)"))?;
    if n <= 0 {
        return Err(format!("{field}: '{text}' must be positive"));
    }
    n.checked_mul(mult)
        .ok_or_else(|| format!("{field}: '{text}' is too large (at most 8 EiB)"))
}

/// A positive duration (`2s`, `1m30s`, `250ms`) in whole milliseconds
/// that fits in 63 bits.
pub fn parse_millis(field: &str, text: &str) -> Result<i64, String> {
    let d = parse_duration(text).map_err(|e| format!("{field}: {e}"))?;
    match i64::try_from(d.as_millis()) {
        Ok(0) => Err(format!("{field}: '{text}' must be positive")),
        Ok(ms) => Ok(ms),
        Err(_) => Err(format!("{field}: '{text}' is too long")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_binary_suffixes() {
        assert_eq!(parse_bytes("memory", "64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("memory", "1024"), Ok(1024));
        assert_eq!(parse_bytes("memory", " 2 GiB "), Ok(2 << 30));
    }

    #[test]
    fn bad_sizes_and_durations_name_the_field() {
        // This multiplied out of range and panicked before.
        assert_eq!(
            parse_bytes("memory", "9999999999GiB"),
            Err("memory: '9999999999GiB' is too large (at most 8 EiB)".into())
        );
        assert_eq!(
            parse_bytes("working-set", "-5MiB"),
            Err("working-set: '-5MiB' must be positive".into())
        );
        assert_eq!(
            parse_bytes("memory-budget", "0"),
            Err("memory-budget: '0' must be positive".into())
        );
        assert!(
            parse_bytes("memory", "12TiB")
                .unwrap_err()
                .starts_with("memory: '12TiB' is not a size")
        );
        assert_eq!(
            parse_millis("service-time", "0s"),
            Err("service-time: '0s' must be positive".into())
        );
        assert!(
            parse_millis("deadline", "soon")
                .unwrap_err()
                .starts_with("deadline: ")
        );
        assert_eq!(parse_millis("service-time", "2s"), Ok(2_000));
    }
}
