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
        "the component imports '{import}', which resource group '{group}' does not grant; \
         an admin can grant it with `paddock group set {group} --grant {import}`"
    )]
    NotGranted { import: String, group: String },
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
    if let Some(bad) = manifest
        .imports
        .iter()
        .find(|i| !is_host_interface(&i.name))
    {
        return Err(CapabilityError::NotProvided {
            import: bad.name.clone(),
            provided: HOST_INTERFACES
                .iter()
                .map(|i| format!("{i}@{HOST_PACKAGE_VERSION}.x"))
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

/// Refuse a plan whose component imports anything beyond the host's own
/// interfaces that its resource group has not granted.
pub fn check_granted(
    manifest: &CapabilityManifest,
    group: &str,
    grants: &[String],
) -> Result<(), CapabilityError> {
    for import in &manifest.imports {
        if !is_host_interface(&import.name) && !grants.iter().any(|g| g == &import.name) {
            return Err(CapabilityError::NotGranted {
                import: import.name.clone(),
                group: group.to_string(),
            });
        }
    }
    Ok(())
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
    fn an_ungranted_extra_import_names_the_group_and_the_fix() {
        let m = manifest(&["paddock:job/log@0.1.0", "wasi:cli/stdout@0.2.0"]);
        let err = check_granted(&m, "batch", &[]).unwrap_err();
        assert!(err.to_string().contains("group 'batch'"), "{err}");
        assert!(
            err.to_string().contains("--grant wasi:cli/stdout@0.2.0"),
            "{err}"
        );
        assert!(check_granted(&m, "batch", &["wasi:cli/stdout@0.2.0".into()]).is_ok());
    }
}
