//! Who may do what: API tokens' roles, what each role may do, and to which
//! tenant's data. Pure: the store keeps tokens (hashed), the
//! callers ask [`authorize`] before they act and scope their queries by the
//! [`TenantScope`] it returns.
//!
//! Roles:
//! - **team** — one tenant's own work: push components, apply jobs, run,
//!   pause, resume and cancel its own jobs, read its own triggers,
//!   effects, logs, components and tickets;
//! - **operator** — pause, resume and cancel at the job, type, tenant and
//!   group scopes, approve catch-ups, resolve exception tickets, drain;
//!   reads everything readable;
//! - **admin** — everything: groups, quotas, grants, connectors and their
//!   secrets, tokens, the global pause;
//! - **reviewer** — reads only: everything readable, the capability report
//!   and the audit log; never a write, never a secret (no role reads a
//!   secret's value: commands show fingerprints).
//!
//! The local command line acting directly on the database is the bootstrap
//! admin (whoever can open the database already holds every row); its
//! audit entries name the operating-system account it runs as
//! ([`local_actor`]), and `--actor` only adds a note beside it.
//!
//! Who is a person ([`person`]): a token's name up to its first `.`
//! (`alice.laptop` is alice), the command line's account name. The
//! two-person rule (`model::tickets`) compares persons, never tokens.

use sha2::{Digest, Sha256};
use std::fmt;

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Team,
    Operator,
    Admin,
    Reviewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Team, Role::Operator, Role::Admin, Role::Reviewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Team => "team",
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Reviewer => "reviewer",
        }
    }

    pub fn parse(text: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| {
                format!("unknown role '{text}': expected one of team, operator, admin, reviewer")
            })
    }

    /// A team token belongs to one tenant; the other roles span them all.
    pub fn check_tenant(self, tenant: Option<&str>) -> Result<(), String> {
        match (self, tenant.map(str::trim)) {
            (Role::Team, None) | (Role::Team, Some("")) => {
                Err("a team token needs --tenant: it acts on one tenant's work only".into())
            }
            (Role::Team, Some(_)) | (_, None) => Ok(()),
            (role, Some(t)) => Err(format!(
                "a {role} token spans every tenant; --tenant {t} applies to team tokens only"
            )),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a request does, at the grain roles are granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Read jobs, triggers, effects, logs, components, tickets.
    Read,
    /// Read the capability report and the audit log.
    ReadAudit,
    PushComponent,
    ApplyJob,
    /// A manual run, a retry-now, a run's request key.
    RunJob,
    /// Pause, resume or cancel one job (or a trigger of it).
    ControlJob,
    /// Pause, resume or cancel a job type, a tenant or a group.
    ControlScope,
    /// Close or open the global gate.
    ControlGlobal,
    ApproveCatchUp,
    ResolveTicket,
    Drain,
    /// Groups, quotas, shares, grants, tenants' weights.
    ManageGroups,
    /// Connectors and their secrets.
    ManageConnectors,
    ManageTokens,
}

impl Action {
    pub const ALL: [Action; 14] = [
        Action::Read,
        Action::ReadAudit,
        Action::PushComponent,
        Action::ApplyJob,
        Action::RunJob,
        Action::ControlJob,
        Action::ControlScope,
        Action::ControlGlobal,
        Action::ApproveCatchUp,
        Action::ResolveTicket,
        Action::Drain,
        Action::ManageGroups,
        Action::ManageConnectors,
        Action::ManageTokens,
    ];

    /// As an error message says it ("may not …").
    pub fn describe(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::ReadAudit => "read the audit log and capability report",
            Action::PushComponent => "push components",
            Action::ApplyJob => "apply jobs",
            Action::RunJob => "run jobs",
            Action::ControlJob => "pause, resume or cancel jobs",
            Action::ControlScope => "pause, resume or cancel a type, tenant or group",
            Action::ControlGlobal => "pause or resume everything",
            Action::ApproveCatchUp => "approve catch-ups",
            Action::ResolveTicket => "resolve exception tickets",
            Action::Drain => "drain runners",
            Action::ManageGroups => "manage groups, quotas and grants",
            Action::ManageConnectors => "manage connectors and their secrets",
            Action::ManageTokens => "manage tokens",
        }
    }

    /// Whether the action changes anything.
    pub fn writes(self) -> bool {
        !matches!(self, Action::Read | Action::ReadAudit)
    }
}

/// Whether `role` may do `action` at all (the tenant is checked apart).
pub fn allowed(role: Role, action: Action) -> bool {
    use Action::*;
    match role {
        Role::Admin => true,
        Role::Reviewer => matches!(action, Read | ReadAudit),
        Role::Operator => matches!(
            action,
            Read | ReadAudit | ControlJob | ControlScope | ApproveCatchUp | ResolveTicket | Drain
        ),
        Role::Team => matches!(
            action,
            Read | PushComponent | ApplyJob | RunJob | ControlJob
        ),
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Principal {
    /// The token's name.
    pub name: String,
    pub role: Role,
    /// A team token's tenant.
    pub tenant: Option<String>,
}

impl Principal {
    /// How audit entries name the caller: `token:NAME`.
    pub fn actor(&self) -> String {
        format!("token:{}", self.name)
    }

    /// The person the token was made for ([`person`]).
    pub fn person(&self) -> String {
        person(&self.actor())
    }
}

/// Which tenants' rows a permitted action may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantScope {
    Every,
    Only(String),
}

impl TenantScope {
    pub fn admits(&self, tenant: &str) -> bool {
        match self {
            TenantScope::Every => true,
            TenantScope::Only(t) => t == tenant,
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("token '{name}' ({role}) may not {what}")]
    Role {
        name: String,
        role: Role,
        what: &'static str,
    },
    #[error("token '{name}' (team, tenant '{own}') may not act on tenant '{other}'")]
    Tenant {
        name: String,
        own: String,
        other: String,
    },
}

/// May `who` do `action` on `tenant`'s rows (`None`: not tied to one
/// tenant, e.g. a list)? Returns the tenants the caller's queries must be
/// scoped to.
pub fn authorize(
    who: &Principal,
    action: Action,
    tenant: Option<&str>,
) -> Result<TenantScope, Denied> {
    if !allowed(who.role, action) {
        return Err(Denied::Role {
            name: who.name.clone(),
            role: who.role,
            what: action.describe(),
        });
    }
    match (&who.tenant, tenant) {
        (Some(own), Some(other)) if own != other => Err(Denied::Tenant {
            name: who.name.clone(),
            own: own.clone(),
            other: other.to_string(),
        }),
        (Some(own), _) => Ok(TenantScope::Only(own.clone())),
        (None, _) => Ok(TenantScope::Every),
    }
}

/// How the local command line (the bootstrap admin) is named in the audit
/// log: `local:USER`, where USER is the operating-system account the
/// command runs as — an identity the login system vouched for, which no
/// flag can change. `note` is what `--actor` (or `PADDOCK_ACTOR`) said:
/// kept beside the identity as `local:USER (note: TEXT)`, never as it.
pub fn local_actor(user: &str, note: Option<&str>) -> String {
    match note.map(clean_note).filter(|n| !n.is_empty()) {
        Some(note) => format!("local:{user}{NOTE_OPEN}{note})"),
        None => format!("local:{user}"),
    }
}

/// Where an actor's note begins. An identity never holds a space (token
/// names and the account names [`local_actor`] is given have none), so the
/// first occurrence is the note's.
const NOTE_OPEN: &str = " (note: ";

/// The longest note kept, in characters.
pub const NOTE_MAX: usize = 100;

/// A note as it is kept: trimmed, cut to [`NOTE_MAX`] characters, control
/// characters escaped (so a note cannot forge a line in any output).
fn clean_note(note: &str) -> String {
    note.trim()
        .chars()
        .take(NOTE_MAX)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// An actor split into its identity and its note, if it has one:
/// `local:root (note: bob)` is `("local:root", Some("bob"))`.
pub fn split_note(actor: &str) -> (&str, Option<&str>) {
    match actor.split_once(NOTE_OPEN) {
        Some((identity, note)) => (identity, Some(note.strip_suffix(')').unwrap_or(note))),
        None => (actor, None),
    }
}

/// The person behind an actor — what the two-person rule compares:
/// - `local:USER` (the command line, whatever its note says): USER;
/// - `token:NAME`: NAME up to its first `.` — a token is named
///   `PERSON` or `PERSON.LABEL`, so `alice`, `alice.laptop` and
///   `alice.ci` are one person however many tokens she holds;
/// - anything else (`paddock`, `ticket:7`): the actor whole.
///
/// The same person through the command line and a token (`local:alice`,
/// `token:alice`) is one person. Compared without regard to case.
pub fn person(actor: &str) -> String {
    let (identity, _) = split_note(actor);
    let name = match identity.split_once(':') {
        Some(("local", user)) => user,
        Some(("token", name)) => name.split('.').next().unwrap_or(name),
        _ => identity,
    };
    name.trim().to_lowercase()
}

/// Whether an actor is the local command line (no token behind it).
pub fn is_local(actor: &str) -> bool {
    actor.starts_with("local:")
}

/// The prefix every Paddock token starts with (so scanners can spot a
/// leaked one).
pub const TOKEN_PREFIX: &str = "pdk_";

/// A new token's text: the prefix and 32 random bytes in hex.
pub fn new_token_text() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// What the store keeps of a token: SHA-256 of its text. A token has 256
/// random bits, so a fast hash is enough (no password stretching needed)
/// and the lookup is by this hash.
pub fn token_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// What commands and the audit log show of a token: the first 12 hex
/// digits of its hash.
pub fn token_fingerprint(text: &str) -> String {
    token_hash(text)[..12].to_string()
}

/// Whether `text` looks like a token at all (checked before any lookup,
/// so a malformed header gets a clear answer).
pub fn check_token_text(text: &str) -> Result<(), String> {
    let body = text
        .strip_prefix(TOKEN_PREFIX)
        .ok_or_else(|| format!("not a Paddock token: it must start with '{TOKEN_PREFIX}'"))?;
    if body.len() != 64 || !body.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("not a Paddock token: expected 64 hex digits after the prefix".into());
    }
    Ok(())
}

/// A token's name: what people type to list and revoke it, and whose
/// person it is: `PERSON` or `PERSON.LABEL` ([`person`]).
pub fn check_token_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad token name '{name}': 1-64 characters of letters, digits, '-', '_' or '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;

    fn who(role: Role, tenant: Option<&str>) -> Principal {
        Principal {
            name: "t".into(),
            role,
            tenant: tenant.map(str::to_string),
        }
    }

    /// The role matrix, row by row: what each role may do. A change to
    /// [`allowed`] that widens or narrows a role fails here by name.
    #[test]
    fn role_matrix() {
        let matrix: [(Role, &[Action]); 4] = [
            (
                Role::Team,
                &[Read, PushComponent, ApplyJob, RunJob, ControlJob],
            ),
            (
                Role::Operator,
                &[
                    Read,
                    ReadAudit,
                    ControlJob,
                    ControlScope,
                    ApproveCatchUp,
                    ResolveTicket,
                    Drain,
                ],
            ),
            (Role::Admin, &Action::ALL),
            (Role::Reviewer, &[Read, ReadAudit]),
        ];
        for (role, may) in matrix {
            for action in Action::ALL {
                assert_eq!(
                    allowed(role, action),
                    may.contains(&action),
                    "{role} × {action:?}"
                );
            }
        }
    }

    #[test]
    fn reviewers_never_write_and_only_admins_manage() {
        for action in Action::ALL.into_iter().filter(|a| a.writes()) {
            assert!(!allowed(Role::Reviewer, action), "{action:?}");
        }
        for action in [ManageGroups, ManageConnectors, ManageTokens, ControlGlobal] {
            for role in [Role::Team, Role::Operator, Role::Reviewer] {
                assert!(!allowed(role, action), "{role} × {action:?}");
            }
        }
    }

    #[test]
    fn a_team_token_is_held_to_its_tenant() {
        let team = who(Role::Team, Some("acme"));
        assert_eq!(
            authorize(&team, Read, None),
            Ok(TenantScope::Only("acme".into()))
        );
        assert_eq!(
            authorize(&team, ControlJob, Some("acme")),
            Ok(TenantScope::Only("acme".into()))
        );
        let err = authorize(&team, Read, Some("globex")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "token 't' (team, tenant 'acme') may not act on tenant 'globex'"
        );
        let err = authorize(&team, ManageConnectors, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "token 't' (team) may not manage connectors and their secrets"
        );
        assert_eq!(
            authorize(&who(Role::Operator, None), Read, Some("globex")),
            Ok(TenantScope::Every)
        );
        assert!(TenantScope::Only("acme".into()).admits("acme"));
        assert!(!TenantScope::Only("acme".into()).admits("globex"));
    }

    #[test]
    fn tenants_belong_to_team_tokens_only() {
        assert!(Role::Team.check_tenant(None).is_err());
        assert!(Role::Team.check_tenant(Some("acme")).is_ok());
        assert!(Role::Admin.check_tenant(None).is_ok());
        assert!(
            Role::Reviewer
                .check_tenant(Some("acme"))
                .unwrap_err()
                .contains("team tokens only")
        );
        assert!(
            Role::parse("root")
                .unwrap_err()
                .contains("unknown role 'root'")
        );
    }

    #[test]
    fn tokens_are_random_checked_and_kept_as_hashes() {
        let a = new_token_text();
        let b = new_token_text();
        assert_ne!(a, b);
        assert!(check_token_text(&a).is_ok());
        assert!(check_token_text("bearer xyz").is_err());
        assert!(check_token_text("pdk_123").is_err());
        assert_eq!(token_hash(&a).len(), 64);
        assert_ne!(token_hash(&a), a);
        assert!(token_hash(&a).starts_with(&token_fingerprint(&a)));
        assert!(check_token_name("ci-bot.prod_1").is_ok());
        assert!(check_token_name("no spaces").is_err());
        assert!(check_token_name("").is_err());
    }

    #[test]
    fn an_actor_note_sits_beside_the_identity_never_in_it() {
        assert_eq!(local_actor("root", None), "local:root");
        assert_eq!(local_actor("root", Some("  ")), "local:root");
        let actor = local_actor("root", Some("token:alice"));
        assert_eq!(actor, "local:root (note: token:alice)");
        assert_eq!(split_note(&actor), ("local:root", Some("token:alice")));
        assert_eq!(person(&actor), "root");
        assert_eq!(split_note("token:ops"), ("token:ops", None));
        // A note cannot forge a line, nor grow without bound.
        let forged = local_actor("root", Some("bob\nlocal:alice approved"));
        assert!(!forged.contains('\n'), "{forged}");
        assert_eq!(split_note(&forged).0, "local:root");
        let long = local_actor("root", Some(&"x".repeat(500)));
        assert_eq!(split_note(&long).1.unwrap().len(), NOTE_MAX);
    }

    #[test]
    fn a_person_is_an_account_or_a_token_name_before_its_first_dot() {
        assert_eq!(person("local:alice"), "alice");
        assert_eq!(person("token:alice"), "alice");
        assert_eq!(person("token:Alice.laptop"), "alice");
        assert_eq!(person("token:ops-1"), "ops-1");
        assert_eq!(person("ticket:7"), "ticket:7");
        assert_eq!(person("paddock"), "paddock");
        let laptop = Principal {
            name: "alice.laptop".into(),
            role: Role::Operator,
            tenant: None,
        };
        assert_eq!(laptop.person(), "alice");
        assert!(is_local("local:root"));
        assert!(!is_local("token:local"));
    }
}
