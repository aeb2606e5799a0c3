//! The effect state machine — the one home of an effect record's states,
//! the writes that move it, and which states are final.
//!
//! ```text
//!  (intent written) ──▶ intent ──settle──▶ succeeded | failed      (final)
//!                         ▲  │                 ▲
//!               reintend  │  ├──settle──▶ unknown ──settle / recover──┘
//!     (sent again under   │  │               │  ▲
//!      a newer token)     │  └──settle──▶ retryable
//!                         └──────────────── unknown | retryable
//!                                resolve (a ticket's answer) ──▶ succeeded | failed | retryable
//! ```
//!
//! - **Intend**: an attempt writes the intent before it sends (`sends = 1`).
//! - **Reintend**: an unresolved effect (`intent`, `unknown`, `retryable`)
//!   is sent again under a newer lease: `intent`, `sends + 1`.
//! - **Settle**: an attempt records what the downstream answered (or what a
//!   query by key found): `succeeded`, `failed`, `unknown` (no answer; ask
//!   before sending again) or `retryable` (nothing was applied; send again).
//! - **Recover**: the recovery scanner settles an effect whose attempt is
//!   gone (`intent` or `unknown`, no live lease), by querying the
//!   downstream.
//! - **Resolve**: a person answers an exception ticket about an effect:
//!   mark it succeeded or failed, or ask for it to be sent again
//!   (`retryable`, `sends = 0`).
//!
//! `succeeded` and `failed` are final: no write the host makes on its own
//! starts from them. A person's answer to a ticket is the one write that
//! may restate a final effect (marking a failed effect succeeded after
//! applying it by hand), and it is recorded as the ticket's (`resolved_by`). Store
//! statements spell states only through [`effect_state!`] and
//! [`effect_states!`], so a misspelt state does not compile, and both
//! migrations hold a CHECK constraint on [`EffectState::ALL`].

use std::fmt;
use std::str::FromStr;

/// An effect record's state, as stored in `effects.state`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// Written before the send; the send's outcome is not yet known.
    Intent,
    /// Sent, and no answer came: query the downstream before any resend.
    Unknown,
    /// Nothing was applied downstream: it may be sent again.
    Retryable,
    /// Final: the downstream applied it.
    Succeeded,
    /// Final: the downstream refused it for good.
    Failed,
}

use EffectState::*;

impl EffectState {
    /// Every state, in the order the migrations' CHECK lists them.
    pub const ALL: [EffectState; 5] = [Intent, Unknown, Retryable, Succeeded, Failed];

    /// The name stored in the database and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            Intent => "intent",
            Unknown => "unknown",
            Retryable => "retryable",
            Succeeded => "succeeded",
            Failed => "failed",
        }
    }

    /// Final states: no write starts from them.
    pub const fn is_final(self) -> bool {
        matches!(self, Succeeded | Failed)
    }

    /// States an attempt may still send or settle.
    pub const fn is_unresolved(self) -> bool {
        !self.is_final()
    }

    /// States whose outcome downstream nobody knows yet: an attempt that
    /// is gone left the effect here, and the recovery scanner asks.
    pub const fn is_in_doubt(self) -> bool {
        matches!(self, Intent | Unknown)
    }
}

impl fmt::Display for EffectState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A state name that is not one of [`EffectState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an effect state")]
pub struct UnknownEffectState(pub String);

impl FromStr for EffectState {
    type Err = UnknownEffectState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EffectState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownEffectState(s.to_string()))
    }
}

impl TryFrom<String> for EffectState {
    type Error = UnknownEffectState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// Lets tests and reports compare with a state's stored name.
impl PartialEq<&str> for EffectState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for EffectState {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// Every write that changes an effect's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectTransition {
    Intend,
    Reintend,
    Settle,
    Recover,
    Resolve,
}

impl EffectTransition {
    pub const ALL: [EffectTransition; 5] = [
        EffectTransition::Intend,
        EffectTransition::Reintend,
        EffectTransition::Settle,
        EffectTransition::Recover,
        EffectTransition::Resolve,
    ];

    /// Whether the host makes this write on its own (every write but a
    /// person's answer to a ticket).
    pub const fn is_automatic(self) -> bool {
        !matches!(self, EffectTransition::Resolve)
    }

    /// The states this write starts from (none: it creates the row).
    pub const fn from(self) -> &'static [EffectState] {
        match self {
            EffectTransition::Intend => &[],
            EffectTransition::Reintend | EffectTransition::Settle => &[Intent, Unknown, Retryable],
            EffectTransition::Recover => &[Intent, Unknown],
            EffectTransition::Resolve => &EffectState::ALL,
        }
    }

    /// The states this write may end in.
    pub const fn to(self) -> &'static [EffectState] {
        match self {
            EffectTransition::Intend | EffectTransition::Reintend => &[Intent],
            EffectTransition::Settle | EffectTransition::Recover => {
                &[Succeeded, Failed, Unknown, Retryable]
            }
            EffectTransition::Resolve => &[Succeeded, Failed, Retryable],
        }
    }

    pub fn allows(self, from: EffectState, to: EffectState) -> bool {
        self.from().contains(&from) && self.to().contains(&to)
    }
}

/// An effect state as a quoted SQL literal, checked at compile time:
/// `effect_state!(intent)` is `"'intent'"`.
#[macro_export]
macro_rules! effect_state {
    (intent) => {
        "'intent'"
    };
    (unknown) => {
        "'unknown'"
    };
    (retryable) => {
        "'retryable'"
    };
    (succeeded) => {
        "'succeeded'"
    };
    (failed) => {
        "'failed'"
    };
}

/// A parenthesised SQL list of effect states for `IN`, each checked by
/// [`effect_state!`]: `effect_states!(intent, unknown)` is
/// `"('intent', 'unknown')"`.
#[macro_export]
macro_rules! effect_states {
    ($first:ident $(, $rest:ident)*) => {
        concat!("(", $crate::effect_state!($first) $(, ", ", $crate::effect_state!($rest))*, ")")
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_states_are_never_rewritten_by_the_host_and_every_state_is_entered() {
        for t in EffectTransition::ALL
            .into_iter()
            .filter(|t| t.is_automatic())
        {
            for from in t.from() {
                assert!(!from.is_final(), "{t:?} starts from final {from}");
            }
        }
        for state in EffectState::ALL {
            assert!(
                EffectTransition::ALL
                    .iter()
                    .any(|t| t.to().contains(&state)),
                "{state} is never entered"
            );
            if !state.is_final() {
                assert!(
                    EffectTransition::ALL.iter().any(|t| t.is_automatic()
                        && t.from().contains(&state)
                        && t.to().iter().any(|to| to.is_final())),
                    "{state} cannot end"
                );
            }
        }
    }

    #[test]
    fn names_round_trip_and_the_macros_spell_them() {
        for state in EffectState::ALL {
            assert_eq!(state.as_str().parse::<EffectState>(), Ok(state));
        }
        assert!("pending".parse::<EffectState>().is_err());
        assert_eq!(crate::effect_state!(retryable), "'retryable'");
        assert_eq!(
            crate::effect_states!(intent, unknown, retryable),
            "('intent', 'unknown', 'retryable')"
        );
        assert_eq!(crate::effect_states!(succeeded), "('succeeded')");
    }

    #[test]
    fn only_an_attempt_or_a_person_sends_again() {
        assert!(EffectTransition::Reintend.allows(Retryable, Intent));
        assert!(!EffectTransition::Recover.allows(Retryable, Succeeded));
        assert!(EffectTransition::Resolve.allows(Unknown, Retryable));
        assert!(!EffectTransition::Settle.allows(Succeeded, Failed));
    }
}
