//! Who the local command line is: the operating-system account it runs as
//! (its effective uid), never what it is told. `--actor` (or
//! `PADDOCK_ACTOR`) only adds a note beside that identity
//! (`local:root (note: bob)`; see `paddock::model::identity`), and a
//! second person's approval from here is refused unless the install says
//! otherwise (`PADDOCK_LOCAL_APPROVALS=allow`, see
//! `paddock::model::tickets::LocalApprovals`).

use paddock::model::identity::local_actor;
use paddock::model::tickets::LocalApprovals;

/// The audit log's name for this process: `local:USER`, with `note`
/// beside it.
pub fn actor(note: Option<&str>) -> String {
    local_actor(&account(), note)
}

/// Whether this command line may give a second person's approval.
pub fn approvals() -> anyhow::Result<LocalApprovals> {
    let value = std::env::var(LocalApprovals::ENV).ok();
    LocalApprovals::parse(value.as_deref()).map_err(anyhow::Error::msg)
}

/// The effective uid's account name, or `uid=N` when it has none (or one
/// with characters an identity may not hold: an identity has no spaces,
/// so a note beside it cannot be mistaken for part of it).
#[cfg(unix)]
fn account() -> String {
    let uid = uzers::get_effective_uid();
    uzers::get_user_by_uid(uid)
        .and_then(|user| user.name().to_str().map(str::to_string))
        .filter(|name| plain(name))
        .unwrap_or_else(|| format!("uid={uid}"))
}

/// Elsewhere, the login name the environment gives (no uid to read).
#[cfg(not(unix))]
fn account() -> String {
    std::env::var("USERNAME")
        .ok()
        .filter(|name| plain(name))
        .unwrap_or_else(|| "unknown".into())
}

fn plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'$' | b'@'))
}
