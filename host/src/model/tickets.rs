//! The two-person rule: which actions are high-risk, who counts as a
//! different person, and where a second approval may come from.
//!
//! A high-risk action acts on a fact the host could not establish, or
//! restarts everything at once: `resend` may apply an effect whose first
//! send's outcome is unknown a second time (only the downstream's
//! idempotency stands between it and a double charge), `mark_succeeded`
//! records an effect as done on a person's word, so the job moves on as if
//! it had happened, and resuming the global pause lets every held trigger
//! start again. One person proposes such an action; a second, different
//! one approves it before it runs. `mark_failed` and `dismiss` record that
//! nothing is to be done and take one person.
//!
//! "Different" is decided on authenticated identities only
//! ([`crate::model::identity::person`]): two tokens of one person (`alice`,
//! `alice.laptop`) are one person. The local command line cannot be a
//! second person by default: whoever can open the database runs it, and
//! nothing it is told (`--actor`) is checked, so its approval is refused
//! with the way to approve through a token — unless a single-operator
//! install allows it ([`LocalApprovals::Allow`]), which is then audited.

use crate::model::identity::{is_local, person};

/// Whether resolving a ticket with `action` needs a second person.
pub fn high_risk(action: &str) -> bool {
    matches!(action, "resend" | "mark_succeeded")
}

/// Whether the local command line may give a second approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalApprovals {
    /// Refused, naming the token route (the default).
    #[default]
    Refuse,
    /// Allowed, the proposer's own approval included — for an install with
    /// one operator, who could never find a second person. Each such
    /// approval says so in its audit entry.
    Allow,
}

impl LocalApprovals {
    /// The environment variable the command line reads.
    pub const ENV: &'static str = "PADDOCK_LOCAL_APPROVALS";

    /// From the variable's value: unset, empty or `refuse`, or `allow`.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value.map(str::trim) {
            None | Some("") | Some("refuse") => Ok(Self::Refuse),
            Some("allow") => Ok(Self::Allow),
            Some(other) => Err(format!(
                "{}={other:?} is not understood: use allow or refuse",
                Self::ENV
            )),
        }
    }
}

/// Why `approver`'s approval of what `proposer` proposed stands without a
/// second authenticated person — `Some` only for the local command line
/// under [`LocalApprovals::Allow`], recorded in the audit entry — or why
/// it is refused. `token_route` is the command that approves through a
/// token, named in the refusal.
pub fn second_person(
    proposer: &str,
    approver: &str,
    local: LocalApprovals,
    token_route: &str,
) -> Result<Option<String>, String> {
    let same = person(proposer) == person(approver);
    if is_local(approver) {
        return match local {
            LocalApprovals::Refuse => Err(format!(
                "two-person rule: a second approval cannot come from the local command line, \
                 which runs as whoever can open the database ({approver}); approve through the \
                 API with the token of a person other than the proposer ({proposer}): \
                 `{token_route}` (a single-operator install may set {}=allow)",
                LocalApprovals::ENV
            )),
            LocalApprovals::Allow => Ok(Some(format!(
                "approved on the local command line{} ({}=allow)",
                if same { " by the proposer" } else { "" },
                LocalApprovals::ENV
            ))),
        };
    }
    if same {
        return Err(format!(
            "two-person rule: {proposer} proposed this action, so a different person must \
             approve it ({approver} is the same person, '{}': a token named NAME or NAME.LABEL \
             is NAME's)",
            person(approver)
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "paddock --server URL --token T exceptions approve 7";

    fn refused(proposer: &str, approver: &str) -> bool {
        second_person(proposer, approver, LocalApprovals::Refuse, ROUTE).is_err()
    }

    #[test]
    fn resend_and_mark_succeeded_need_two_people() {
        assert!(high_risk("resend"));
        assert!(high_risk("mark_succeeded"));
        assert!(!high_risk("mark_failed"));
        assert!(!high_risk("dismiss"));
    }

    #[test]
    fn two_tokens_of_one_person_are_one_person() {
        assert!(refused("token:alice", "token:alice"));
        assert!(refused("token:alice", "token:alice.laptop"));
        assert!(refused("token:alice.ci", "token:Alice.phone"));
        assert!(refused("local:alice", "token:alice"));
        assert!(refused("local:alice (note: bob)", "token:alice"));
        assert!(!refused("token:alice", "token:bob"));
        assert!(!refused("local:alice (note: bob)", "token:bob.laptop"));
        assert!(!refused("token:ops-1", "token:ops-2"));
    }

    #[test]
    fn the_local_command_line_is_never_a_second_person_unless_allowed() {
        for approver in ["local:bob", "local:root (note: token:bob)"] {
            let why =
                second_person("token:alice", approver, LocalApprovals::Refuse, ROUTE).unwrap_err();
            assert!(why.contains(ROUTE), "{why}");
            assert!(why.contains("PADDOCK_LOCAL_APPROVALS=allow"), "{why}");
        }
        let waived =
            second_person("local:root", "local:root", LocalApprovals::Allow, ROUTE).unwrap();
        assert_eq!(
            waived.as_deref(),
            Some(
                "approved on the local command line by the proposer (PADDOCK_LOCAL_APPROVALS=allow)"
            )
        );
        // A token's approval is judged the same under either setting.
        assert!(second_person("local:root", "token:root", LocalApprovals::Allow, ROUTE).is_err());
        assert_eq!(
            second_person("local:root", "token:bob", LocalApprovals::Allow, ROUTE),
            Ok(None)
        );
    }

    #[test]
    fn the_setting_is_allow_or_refuse() {
        assert_eq!(LocalApprovals::parse(None), Ok(LocalApprovals::Refuse));
        assert_eq!(
            LocalApprovals::parse(Some("refuse")),
            Ok(LocalApprovals::Refuse)
        );
        assert_eq!(
            LocalApprovals::parse(Some(" allow ")),
            Ok(LocalApprovals::Allow)
        );
        assert!(
            LocalApprovals::parse(Some("yes"))
                .unwrap_err()
                .contains("allow or refuse")
        );
    }
}
