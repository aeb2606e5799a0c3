//! Where a trigger came from: its schedule, a person's manual run, or a
//! backfill over a past window. The origin decides what applies to it —
//! only scheduled fires are judged by the overlap policy and the misfire
//! policy at resume, only manual runs take a request key and spend the
//! tenant's manual quota — so it is a type, not a string. Store statements
//! spell it only through [`trigger_origin!`].

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TriggerOrigin {
    /// A fire time of the job's schedule, created by the scanner.
    Schedule,
    /// A run a person or a client asked for (`paddock run`, the API).
    Manual,
    /// A fire time of a past window, created by `paddock backfill`.
    Backfill,
}

impl TriggerOrigin {
    pub const ALL: [TriggerOrigin; 3] = [
        TriggerOrigin::Schedule,
        TriggerOrigin::Manual,
        TriggerOrigin::Backfill,
    ];

    /// The name stored in `triggers.origin` and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            TriggerOrigin::Schedule => "schedule",
            TriggerOrigin::Manual => "manual",
            TriggerOrigin::Backfill => "backfill",
        }
    }
}

impl fmt::Display for TriggerOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A name that is not one of [`TriggerOrigin::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a trigger origin")]
pub struct UnknownOrigin(pub String);

impl FromStr for TriggerOrigin {
    type Err = UnknownOrigin;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TriggerOrigin::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownOrigin(s.to_string()))
    }
}

impl TryFrom<String> for TriggerOrigin {
    type Error = UnknownOrigin;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// Lets tests and reports compare with an origin's stored name.
impl PartialEq<&str> for TriggerOrigin {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A trigger origin as a quoted SQL literal, checked at compile time:
/// `trigger_origin!(schedule)` is `"'schedule'"`.
#[macro_export]
macro_rules! trigger_origin {
    (schedule) => {
        "'schedule'"
    };
    (manual) => {
        "'manual'"
    };
    (backfill) => {
        "'backfill'"
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_macro_spells_them() {
        for origin in TriggerOrigin::ALL {
            assert_eq!(origin.as_str().parse::<TriggerOrigin>(), Ok(origin));
        }
        assert!("event".parse::<TriggerOrigin>().is_err());
        assert_eq!(crate::trigger_origin!(backfill), "'backfill'");
        assert_eq!(
            serde_json::to_string(&TriggerOrigin::Schedule).unwrap(),
            "\"schedule\""
        );
    }
}
