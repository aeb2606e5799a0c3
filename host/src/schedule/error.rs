//! The schedule plane's error type. Every variant is a *permanent* error (bad
//! input in a manifest or a key): none is worth retrying, and each message
//! names the manifest field or cron field at fault.

use super::cron::CronError;

/// Why a schedule spec, cron expression or plan key was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The `cron` field did not parse (names the cron field and token).
    #[error(transparent)]
    Cron(#[from] CronError),
    /// `timezone` is not an IANA zone name known to chrono-tz.
    #[error("schedule field 'timezone' has unknown IANA time zone '{0}'")]
    UnknownTimezone(String),
    /// A duration field did not parse.
    #[error(
        "schedule field '{field}' has bad duration '{value}' (expected a whole number of seconds written like 90s, 5m, 1h30m or 2d)"
    )]
    BadDuration {
        /// Manifest field name.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// A timestamp field did not parse or is out of the supported range.
    #[error("schedule field '{field}' has bad timestamp '{value}': {reason}")]
    BadTimestamp {
        /// Manifest field name.
        field: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The chosen `kind` needs a field that is absent.
    #[error("schedule kind '{kind}' requires field '{field}'")]
    MissingField {
        /// `cron`, `interval`, `at` or `manual`.
        kind: &'static str,
        /// Manifest field name.
        field: &'static str,
    },
    /// A field that belongs to another `kind`.
    #[error("schedule kind '{kind}' does not take field '{field}'")]
    UnexpectedField {
        /// `cron`, `interval`, `at` or `manual`.
        kind: &'static str,
        /// Manifest field name.
        field: &'static str,
    },
    /// A field parsed but its value is not allowed.
    #[error("schedule field '{field}' is invalid: {reason}")]
    Invalid {
        /// Manifest field name.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The schedule is well-formed but has no fire time within its bounds.
    #[error("schedule never fires: {reason}")]
    NeverFires {
        /// Which bound or value makes it empty.
        reason: String,
    },
}
