//! Exception tickets' two-person rule: which resolutions are high-risk,
//! and who counts as a different person.
//!
//! A high-risk action acts on a downstream fact the host could not
//! establish: `resend` may apply an effect whose first send's outcome is
//! unknown a second time (only the downstream's idempotency stands between
//! it and a double charge), and `mark_succeeded` records an effect as done
//! on a person's word, so the job moves on as if it had happened. One
//! operator proposes such an action; a second, different one approves it
//! before it runs. `mark_failed` and `dismiss` record that nothing is to
//! be done and take one person.

/// Whether resolving a ticket with `action` needs a second operator.
pub fn high_risk(action: &str) -> bool {
    matches!(action, "resend" | "mark_succeeded")
}

/// The person behind an actor: `local:alice` (the CLI on the database)
/// and `token:alice` (an API token) are both alice. Actors without a
/// prefix are taken whole.
pub fn person(actor: &str) -> &str {
    match actor.split_once(':') {
        Some(("local" | "token", name)) => name,
        _ => actor,
    }
}

/// Why `approver` may not approve what `proposer` proposed, if they may not.
pub fn approval_refused(proposer: &str, approver: &str) -> Option<String> {
    (person(proposer)
        .trim()
        .eq_ignore_ascii_case(person(approver).trim()))
    .then(|| {
        format!(
            "two-person rule: {proposer} proposed this action, so a different operator \
             must approve it (approver: {approver})"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resend_and_mark_succeeded_need_two_people() {
        assert!(high_risk("resend"));
        assert!(high_risk("mark_succeeded"));
        assert!(!high_risk("mark_failed"));
        assert!(!high_risk("dismiss"));
    }

    #[test]
    fn the_same_name_through_the_cli_or_a_token_is_one_person() {
        assert!(approval_refused("local:alice", "token:alice").is_some());
        assert!(approval_refused("local:alice", "local:Alice").is_some());
        assert!(approval_refused("local:alice", "local:bob").is_none());
        assert!(approval_refused("token:ops-1", "token:ops-2").is_none());
        // A colon inside a name is part of it.
        assert_eq!(person("local:a:b"), "a:b");
        assert_eq!(person("ticket:7"), "ticket:7");
    }
}
