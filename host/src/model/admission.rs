//! Which tenants a resource group admits: an admin's binding of tenants to
//! groups. A group's grants (connectors and their credentials, env values,
//! scratch space) and its capacity serve only the tenants it admits, so a
//! team cannot name another team's group in its manifest and run with that
//! group's credentials. Checked where a job enters a group (`job apply`,
//! through the registry for the command line and the API alike) and again
//! where an attempt starts (`lease::runner`): a binding taken back stops
//! new attempts, with the reason on the trigger.

/// The entry that admits every tenant (the `default` group's, unless an
/// admin takes it back).
pub const EVERY_TENANT: &str = "*";

/// Whether a group admitting `tenants` admits `tenant`.
pub fn admits<S: AsRef<str>>(tenants: &[S], tenant: &str) -> bool {
    tenants
        .iter()
        .any(|t| t.as_ref() == tenant || t.as_ref() == EVERY_TENANT)
}

/// Why `tenant` may not run in `group`, and what an admin does about it.
pub fn refusal(group: &str, tenant: &str) -> String {
    format!(
        "resource group '{group}' does not admit tenant '{tenant}' \
         (an admin allows it: `paddock group allow {group} --tenant {tenant}`)"
    )
}

/// An entry of a group's tenant list: a tenant name as manifests allow it
/// (1 to 128 letters, digits, `.`, `_`, `-`) or [`EVERY_TENANT`].
pub fn check_entry(entry: &str) -> Result<(), String> {
    let valid = entry == EVERY_TENANT
        || (!entry.is_empty()
            && entry.len() <= 128
            && entry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a tenant: 1 to 128 letters, digits, '.', '_' or '-', or '*' for every tenant",
            entry.escape_debug()
        ))
    }
}

/// A grant as a team sees it: what it gives, without a value an admin set
/// in it (`env:REGION=eu-west` shows as `env:REGION`).
pub fn grant_name(grant: &str) -> String {
    match grant.strip_prefix("env:") {
        Some(var) => format!("env:{}", var.split('=').next().unwrap_or(var)),
        None => grant.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_admits_its_listed_tenants_or_everyone_with_a_star() {
        assert!(admits(&["acme"], "acme"));
        assert!(!admits(&["acme"], "globex"));
        assert!(admits(&["acme", "*"], "globex"));
        assert!(!admits::<&str>(&[], "acme"));
    }

    #[test]
    fn a_tenant_entry_is_a_name_or_the_star() {
        assert!(check_entry("acme-1.eu_west").is_ok());
        assert!(check_entry("*").is_ok());
        for bad in ["", "a/b", "**", "a b", &"x".repeat(129)] {
            assert!(check_entry(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_team_sees_an_env_grant_by_name_only() {
        assert_eq!(grant_name("env:REGION=eu-west"), "env:REGION");
        assert_eq!(grant_name("connector:ledger"), "connector:ledger");
        assert_eq!(grant_name("stdio"), "stdio");
    }

    #[test]
    fn a_refusal_names_the_group_the_tenant_and_the_fix() {
        let why = refusal("bankgrp", "beta");
        assert!(why.contains("'bankgrp'") && why.contains("'beta'"), "{why}");
        assert!(
            why.contains("paddock group allow bankgrp --tenant beta"),
            "{why}"
        );
    }
}
