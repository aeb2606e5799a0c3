//! Time helpers shared by the planes: human durations in manifests
//! (`"90s"`, `"5m"`), and the one representation of an instant the store
//! uses — integer milliseconds since the Unix epoch, UTC.

use chrono::{DateTime, TimeZone, Utc};
use std::time::Duration;

/// A duration written for people: an integer followed by `ms`, `s`, `m`,
/// `h` or `d` (`"250ms"`, `"90s"`, `"1h"`). Several parts may be joined
/// (`"1h30m"`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("duration '{text}': expected a number at '{rest}'"));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("duration '{text}': number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let millis = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => {
                return Err(format!(
                    "duration '{text}': missing unit (ms, s, m, h or d)"
                ));
            }
            other => {
                return Err(format!(
                    "duration '{text}': unknown unit '{other}' (use ms, s, m, h or d)"
                ));
            }
        };
        let part = value
            .checked_mul(millis)
            .ok_or_else(|| format!("duration '{text}': too large"))?;
        total += Duration::from_millis(part);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Milliseconds since the Unix epoch for a UTC instant.
pub fn to_millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// The UTC instant for milliseconds since the Unix epoch.
pub fn from_millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Formats an instant the canonical way, whole seconds:
/// `2027-03-14T07:00:00Z` (plan keys, schedules).
pub fn fmt_instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// RFC 3339 in UTC with a `Z`, millisecond precision only when needed.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    if at.timestamp_subsec_millis() == 0 {
        at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_every_unit_and_compound_forms() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn durations_without_units_or_with_unknown_units_are_refused_by_name() {
        assert!(parse_duration("90").unwrap_err().contains("missing unit"));
        assert!(
            parse_duration("3w")
                .unwrap_err()
                .contains("unknown unit 'w'")
        );
        assert!(parse_duration("").is_err());
        assert!(
            parse_duration("s")
                .unwrap_err()
                .contains("expected a number")
        );
    }

    #[test]
    fn instants_round_trip_through_millis() {
        let at = Utc.with_ymd_and_hms(2027, 3, 14, 7, 0, 0).unwrap();
        assert_eq!(from_millis(to_millis(at)), at);
        assert_eq!(rfc3339(at), "2027-03-14T07:00:00Z");
    }
}
