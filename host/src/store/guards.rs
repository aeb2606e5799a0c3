//! The store's state guards checked against the state machine
//! ([`crate::model::state`]): every statement that changes a trigger's
//! state writes exactly a target of its [`Transition`] and guards on
//! exactly its sources, and both migrations' CHECK constraints hold exactly
//! [`TriggerState::ALL`]. (Statements spell states through
//! `trigger_state!`, so a misspelt state does not compile; these tests
//! catch a right spelling in the wrong place.)

use super::control::{APPROVE, CANCEL_UNSTARTED};
use super::dialect::Dialect;
use super::gates::holds::HOLD_FIRES;
use super::gates::{
    ASK_RUNNING, CANCEL_QUEUED, PAUSE_QUEUED, RESUME_PARKED, RESUME_PAUSED, RESUME_SKIPPED, scoped,
};
use super::held::{HOLD_QUEUED, RESOLVE_HELD, TICKET_HOLDS};
use super::runner::{
    CHECKPOINT_SAVE, CLAIM_FRESH, CLAIM_RETRIES, CLAIM_ROW, CLAIM_UPDATE, FINISH_MOVE,
    FINISH_TRIGGER, RELEASE_TRIGGER, RENEW,
};
use crate::model::gates::GateScope;
use crate::model::{Transition, TriggerState};
use std::collections::BTreeSet;

/// The quoted names in `text` right after `key` (`state = 'x'` or
/// `state IN ('x', 'y')`), with or without a table prefix.
fn quoted_after(text: &str, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let preceded = &rest[..at];
        let after = &rest[at + key.len()..];
        // `state` must be a whole word (not `..._state`).
        let whole = preceded
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if whole {
            let list = if let Some(case) = after.strip_prefix(" = CASE WHEN ") {
                // `state = CASE WHEN … THEN 'x' ELSE 'y' END`: the written
                // states are the branches' literals (the condition's are not).
                let case = &case[..case.find(" END").expect("closed CASE")];
                found.extend(
                    case.split(" THEN ")
                        .skip(1)
                        .flat_map(|branch| branch.split(" ELSE "))
                        .filter_map(|b| b.trim().strip_prefix('\''))
                        .map(|b| b[..b.find('\'').expect("closed literal")].to_string()),
                );
                ""
            } else if let Some(list) = after.strip_prefix(" IN (") {
                &list[..list.find(')').expect("closed IN list")]
            } else if let Some(one) = after.strip_prefix(" = '") {
                &one[..one.find('\'').expect("closed literal")]
            } else {
                ""
            };
            found.extend(
                list.split(',')
                    .map(|s| s.trim().trim_matches('\'').to_string())
                    .filter(|s| !s.is_empty() && !s.starts_with('?')),
            );
        }
        rest = after;
    }
    found
}

/// (states written, states guarded) of one statement: the `SET state`
/// literal, and every other `state` literal after its first `WHERE`.
fn states_of(sql: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    // The ticket test's own `WHERE` and `state` are the ticket's.
    let sql = sql.replace(TICKET_HOLDS, "ticket_holds");
    let (head, tail) = sql.split_once(" WHERE ").unwrap_or((&sql, ""));
    let written = quoted_after(head, "SET state").into_iter().collect();
    let guarded = quoted_after(tail, "state").into_iter().collect();
    (written, guarded)
}

fn names(states: &[TriggerState]) -> BTreeSet<String> {
    states.iter().map(|s| s.as_str().to_string()).collect()
}

/// How a statement guards the states it moves a trigger from.
#[derive(Clone, Copy, PartialEq)]
enum Guard {
    /// On exactly the sources of its transitions.
    Exact,
    /// A claim lane (PostgreSQL): one or more of the sources; the lanes
    /// together cover them all (checked below).
    Lane,
    /// No state in its own `WHERE`: it writes only rows its statement's
    /// lanes selected by state and locked (PostgreSQL's claim update).
    LockedByLanes,
}

/// Every state-changing statement (or, on PostgreSQL, part of one), with
/// the transitions it makes and how it guards them.
fn statements() -> Vec<(&'static str, &'static str, Vec<Transition>, Guard)> {
    use Guard::*;
    let job = GateScope::Job("j".into());
    let gate =
        |t: &str| -> &'static str { Box::leak(scoped(Dialect::Sqlite, t, &job).into_boxed_str()) };
    vec![
        (
            "pause queued",
            gate(PAUSE_QUEUED),
            vec![Transition::Pause],
            Exact,
        ),
        (
            "hold a scan's fires",
            HOLD_FIRES,
            vec![Transition::Pause],
            Lane,
        ),
        (
            "resume",
            gate(RESUME_PAUSED),
            vec![Transition::Resume],
            Exact,
        ),
        (
            "resume parked",
            RESUME_PARKED,
            vec![Transition::Resume],
            Exact,
        ),
        (
            "resume skipped",
            RESUME_SKIPPED,
            vec![Transition::Resume],
            Exact,
        ),
        (
            "cancel at a scope",
            gate(CANCEL_QUEUED),
            vec![Transition::CancelUnstarted],
            Exact,
        ),
        (
            "claim (SQLite)",
            CLAIM_ROW,
            vec![Transition::Claim, Transition::TakeOver],
            Exact,
        ),
        (
            "claim retries lane (PostgreSQL)",
            CLAIM_RETRIES,
            vec![Transition::Claim],
            Lane,
        ),
        (
            "claim fresh lane (PostgreSQL)",
            CLAIM_FRESH,
            vec![Transition::Claim, Transition::TakeOver],
            Lane,
        ),
        (
            "claim update (PostgreSQL)",
            CLAIM_UPDATE,
            vec![Transition::Claim, Transition::TakeOver],
            LockedByLanes,
        ),
        (
            "finish (SQLite)",
            FINISH_TRIGGER,
            vec![Transition::Finish],
            Exact,
        ),
        (
            "finish (PostgreSQL)",
            FINISH_MOVE,
            vec![Transition::Finish],
            Exact,
        ),
        ("release", RELEASE_TRIGGER, vec![Transition::Release], Exact),
        ("approve", APPROVE, vec![Transition::Approve], Exact),
        (
            "a ticket holds a queued trigger",
            HOLD_QUEUED,
            vec![Transition::Hold],
            Exact,
        ),
        (
            "a resolution moves a held trigger on",
            RESOLVE_HELD,
            vec![Transition::Resolve],
            Exact,
        ),
        (
            "cancel unstarted",
            CANCEL_UNSTARTED,
            vec![Transition::CancelUnstarted],
            Exact,
        ),
    ]
}

#[test]
fn every_state_change_writes_a_target_and_guards_on_the_sources_of_its_transition() {
    for (name, sql, transitions, guard) in statements() {
        let (written, guarded) = states_of(sql);
        let targets: BTreeSet<String> = transitions.iter().flat_map(|t| names(t.to())).collect();
        let sources: BTreeSet<String> = transitions.iter().flat_map(|t| names(t.from())).collect();
        assert!(
            written.is_subset(&targets),
            "{name} writes {written:?}, its transitions allow {targets:?}\n{sql}"
        );
        match guard {
            Guard::Exact => {
                assert_eq!(guarded, sources, "{name} guards on the wrong states\n{sql}")
            }
            Guard::Lane => assert!(
                !guarded.is_empty() && guarded.is_subset(&sources),
                "{name} guards on {guarded:?}, its transitions start from {sources:?}\n{sql}"
            ),
            Guard::LockedByLanes => {
                assert!(guarded.is_empty(), "{name}\n{sql}");
                assert!(
                    sql.contains("WHERE triggers.id = ANY(ARRAY(SELECT id FROM chosen))"),
                    "{name} must write only the rows its lanes chose\n{sql}"
                );
            }
        }
    }
}

#[test]
fn the_claim_lanes_together_cover_every_claimable_state() {
    let (_, retries) = states_of(CLAIM_RETRIES);
    let (_, fresh) = states_of(CLAIM_FRESH);
    let covered: BTreeSet<String> = retries.union(&fresh).cloned().collect();
    let claimable = names(Transition::Claim.from())
        .union(&names(Transition::TakeOver.from()))
        .cloned()
        .collect();
    assert_eq!(covered, claimable);
    assert_eq!(states_of(CLAIM_ROW).1, claimable, "SQLite's claim");
}

#[test]
fn writes_under_a_trigger_lease_guard_on_running_only() {
    let ask = scoped(Dialect::Sqlite, ASK_RUNNING, &GateScope::Job("j".into()));
    for (name, sql) in [
        ("heartbeat", RENEW),
        ("checkpoint", CHECKPOINT_SAVE),
        ("ask to pause", ask.as_str()),
    ] {
        let (written, guarded) = states_of(sql);
        assert!(written.is_empty(), "{name} must not change the state");
        assert_eq!(guarded, names(&[TriggerState::Running]), "{name}\n{sql}");
    }
}

#[test]
fn both_migrations_check_exactly_the_state_machines_states() {
    for (database, migration) in [
        (
            "sqlite",
            include_str!("../../../migrations/sqlite/0018_gates.sql"),
        ),
        (
            "postgres",
            include_str!("../../../migrations/postgres/0018_gates.sql"),
        ),
    ] {
        assert_eq!(
            checked_names(migration, database),
            names(&TriggerState::ALL),
            "{database}"
        );
    }
}

#[test]
fn both_migrations_check_exactly_the_effect_states() {
    use crate::model::EffectState;
    for (database, migration) in [
        (
            "sqlite",
            include_str!("../../../migrations/sqlite/0038_effect_state_check.sql"),
        ),
        (
            "postgres",
            include_str!("../../../migrations/postgres/0038_effect_state_check.sql"),
        ),
    ] {
        let machine: BTreeSet<String> = EffectState::ALL.iter().map(|s| s.to_string()).collect();
        assert_eq!(checked_names(migration, database), machine, "{database}");
    }
}

/// The quoted names in the first `CHECK (…)` of `migration`.
fn checked_names(migration: &str, database: &str) -> BTreeSet<String> {
    let check = migration
        .split_once("CHECK (")
        .map(|(_, rest)| &rest[..closing_paren(rest)])
        .unwrap_or_else(|| panic!("{database}: no CHECK in the migration"));
    check
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The index of the `)` that closes a parenthesis opened just before `text`.
fn closing_paren(text: &str) -> usize {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unclosed CHECK")
}

#[test]
fn a_gate_pause_lands_paused_whatever_ends_the_attempt() {
    for (name, sql) in [
        ("release", RELEASE_TRIGGER),
        ("finish (SQLite)", FINISH_TRIGGER),
    ] {
        let (written, _) = states_of(sql);
        assert!(written.contains("paused"), "{name}: {written:?}\n{sql}");
        assert!(sql.contains("pause_requested = 1"), "{name}\n{sql}");
    }
    assert!(FINISH_MOVE.contains("triggers.pause_requested = 1 THEN 'paused'"));
}

#[test]
fn only_an_open_ticket_holds_a_trigger_in_manual() {
    let held = format!("{TICKET_HOLDS} THEN 'manual'");
    for (name, sql) in [
        ("finish (SQLite)", FINISH_TRIGGER),
        ("finish (PostgreSQL)", FINISH_MOVE),
    ] {
        assert!(sql.contains(&held), "{name}\n{sql}");
        assert!(states_of(sql).0.contains("manual"), "{name}");
    }
    for (name, sql) in [("approve", APPROVE), ("resolve", RESOLVE_HELD)] {
        assert!(
            sql.contains(&format!("NOT {TICKET_HOLDS}")),
            "{name}\n{sql}"
        );
    }
}

#[test]
fn the_guard_reader_reads_guards() {
    let (written, guarded) = states_of(
        "UPDATE triggers SET state = 'pending', x = 1 WHERE t.state IN ('a', 'b') AND error_state = 'z'",
    );
    assert_eq!(written, ["pending".to_string()].into());
    assert_eq!(guarded, ["a".to_string(), "b".to_string()].into());
}
