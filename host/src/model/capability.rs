//! Capability manifests: what a component imports and exports (read from
//! the binary at upload by the sandbox), stored with it, and shown to
//! security reviewers — and the two checks made against them.
//!
//! Invariants:
//! - a component is accepted only if every import is something this host
//!   provides ([`HOST_INTERFACES`]); anything else is refused at upload with
//!   the import's name;
//! - a plan version is accepted only if every import beyond the core
//!   `paddock:job` interfaces is granted by its resource group.

use serde::{Deserialize, Serialize};

/// The interfaces every job may import: the host provides them all.
pub const HOST_INTERFACES: &[&str] = &[
    "paddock:job/types",
    "paddock:job/context",
    "paddock:job/checkpoint",
    "paddock:job/effects",
    "paddock:job/log",
];

/// The WIT package version the host implements; imports must be 0.1.x.
pub const HOST_PACKAGE_VERSION: &str = "0.1";

/// The interface families a guest may import: each links (deny by default).
pub const WASI_FAMILIES: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
];

/// Imports linked as traps: never granted (network goes only through
/// connectors), but present in some toolchains' output (componentize-js
/// imports `wasi:http` unless built with `-d http`).
pub const DENIED_FAMILIES: &[&str] = &["wasi:http/"];

/// The WASI package version the host links; imports must be 0.2.x.
pub const WASI_VERSION: &str = "0.2";

fn in_families(import: &str, families: &[&str]) -> bool {
    let (path, version) = import.split_once('@').unwrap_or((import, ""));
    families.iter().any(|f| path.starts_with(f))
        && (version == WASI_VERSION || version.starts_with(&format!("{WASI_VERSION}.")))
}

/// Whether `import` is a WASI 0.2 interface the host links.
pub fn is_linked_wasi(import: &str) -> bool {
    in_families(import, WASI_FAMILIES)
}

/// Whether `import` is one linked as a trap (never granted).
pub fn is_denied_wasi(import: &str) -> bool {
    in_families(import, DENIED_FAMILIES)
}

/// Every import and export of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityManifest {
    pub imports: Vec<Capability>,
    pub exports: Vec<Capability>,
}

/// One import or export: its name, its kind and, for an interface, the
/// functions in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    pub name: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
}

/// Why a component or a plan's capabilities were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    #[error(
        "the component imports '{import}', which this host does not provide \
         (it provides {provided}); rebuild the component against the paddock:job@0.1.0 WIT package"
    )]
    NotProvided { import: String, provided: String },
    #[error(
        "the component does not export a `run` function (it must target the world paddock:job/job@0.1.0)"
    )]
    NoRun,
    #[error(
        "resource group '{group}' does not grant what this job needs:{}",
        missing.iter().map(|g| format!("\n  {g}: an admin grants it with `paddock group grant {group} {g}`")).collect::<String>()
    )]
    NotGranted { group: String, missing: Vec<String> },
}

/// Whether `import` is one of the host's own interfaces (any 0.1.x).
pub fn is_host_interface(import: &str) -> bool {
    let (path, version) = import.split_once('@').unwrap_or((import, ""));
    HOST_INTERFACES.contains(&path)
        && (version == HOST_PACKAGE_VERSION
            || version.starts_with(&format!("{HOST_PACKAGE_VERSION}.")))
}

/// Refuse a component that imports anything the host cannot provide or
/// that does not export `run`.
pub fn check_host_provides(manifest: &CapabilityManifest) -> Result<(), CapabilityError> {
    if let Some(bad) = manifest.imports.iter().find(|i| {
        !is_host_interface(&i.name) && !is_linked_wasi(&i.name) && !is_denied_wasi(&i.name)
    }) {
        return Err(CapabilityError::NotProvided {
            import: bad.name.clone(),
            provided: HOST_INTERFACES
                .iter()
                .map(|i| format!("{i}@{HOST_PACKAGE_VERSION}.x"))
                .chain(
                    WASI_FAMILIES
                        .iter()
                        .chain(DENIED_FAMILIES)
                        .map(|f| format!("{f}*@{WASI_VERSION}.x")),
                )
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if !manifest
        .exports
        .iter()
        .any(|e| e.name == "run" && e.kind == "function")
    {
        return Err(CapabilityError::NoRun);
    }
    Ok(())
}

/// Refuse a plan that asks for a capability or a connector its resource
/// group does not grant, naming every missing grant.
pub fn check_granted(
    asked_connectors: &[String],
    asked_capabilities: &[String],
    group: &str,
    grants: &super::grants::Grants,
) -> Result<(), CapabilityError> {
    let missing: Vec<String> = grants
        .missing_needs(asked_capabilities)
        .into_iter()
        .chain(
            grants
                .missing_connectors(asked_connectors)
                .into_iter()
                .map(|c| super::grants::Grant::Connector(c.to_string()).to_string()),
        )
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CapabilityError::NotGranted {
            group: group.to_string(),
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(imports: &[&str]) -> CapabilityManifest {
        CapabilityManifest {
            imports: imports
                .iter()
                .map(|n| Capability {
                    name: n.to_string(),
                    kind: "interface".into(),
                    functions: vec![],
                })
                .collect(),
            exports: vec![Capability {
                name: "run".into(),
                kind: "function".into(),
                functions: vec![],
            }],
        }
    }

    #[test]
    fn host_interfaces_match_any_patch_of_the_package_version() {
        assert!(is_host_interface("paddock:job/context@0.1.0"));
        assert!(is_host_interface("paddock:job/effects@0.1.3"));
        assert!(!is_host_interface("paddock:job/effects@0.2.0"));
        assert!(!is_host_interface("paddock:job/context"));
        assert!(!is_host_interface("acme:net/sockets@0.1.0"));
    }

    #[test]
    fn wasi_imports_are_recognised_by_family_and_version() {
        assert!(is_linked_wasi("wasi:io/poll@0.2.9"));
        assert!(is_linked_wasi("wasi:sockets/tcp@0.2.0"));
        assert!(is_linked_wasi("wasi:cli/environment@0.2.12"));
        assert!(!is_linked_wasi("wasi:io/poll@0.3.0"));
        assert!(!is_linked_wasi("wasi:http/outgoing-handler@0.2.0"));
        assert!(is_denied_wasi("wasi:http/outgoing-handler@0.2.0"));
        assert!(is_denied_wasi("wasi:http/types@0.2.10"));
        assert!(!is_denied_wasi("wasi:io/poll@0.2.9"));
        assert!(
            check_host_provides(&manifest(&["wasi:io/poll@0.2.9", "wasi:http/types@0.2.10"]))
                .is_ok()
        );
    }

    #[test]
    fn an_import_the_host_does_not_provide_is_refused_by_name() {
        let err = check_host_provides(&manifest(&[
            "paddock:job/log@0.1.0",
            "acme:net/sockets@0.1.0",
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains("'acme:net/sockets@0.1.0'"),
            "{err}"
        );
    }

    #[test]
    fn each_missing_connector_grant_is_one_line_with_its_command() {
        let grants = super::super::grants::Grants::parse(&["connector:ledger"]).unwrap();
        let asked = vec!["ledger".to_string(), "mail".into(), "sms".into()];
        let err = check_granted(&asked, &[], "batch", &grants)
            .unwrap_err()
            .to_string();
        assert_eq!(err.lines().count(), 3, "{err}");
        assert!(err.contains("group 'batch'"), "{err}");
        assert!(
            err.contains(
                "connector:mail: an admin grants it with `paddock group grant batch connector:mail`"
            ),
            "{err}"
        );
        assert!(
            err.contains("`paddock group grant batch connector:sms`"),
            "{err}"
        );
        assert!(check_granted(&asked[..1], &[], "batch", &grants).is_ok());
        let err = check_granted(&[], &["stdio".into()], "batch", &grants).unwrap_err();
        assert!(
            err.to_string()
                .contains("`paddock group grant batch stdio`"),
            "{err}"
        );
    }
}
