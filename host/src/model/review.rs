//! What a security reviewer reads: for each import of a component, whether
//! a group's grants let it do anything ([`verdict`]), and what a new
//! component version adds or drops ([`diff`]). Pure; the registry
//! assembles the report (`registry/report.rs`).

use super::capability::{CapabilityManifest, is_denied_wasi, is_host_interface};
use super::grants::Grants;
use serde::Serialize;
use std::collections::BTreeSet;

/// One import under one group's grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Verdict {
    /// The import gives the guest something real.
    pub granted: bool,
    /// In a reviewer's words: what it gives, or what it gives instead.
    pub why: String,
}

fn verdict_of(granted: bool, why: impl Into<String>) -> Verdict {
    Verdict {
        granted,
        why: why.into(),
    }
}

/// What `import` gives a guest whose group grants `grants`.
pub fn verdict(import: &str, grants: &Grants) -> Verdict {
    let path = import.split_once('@').map_or(import, |(p, _)| p);
    if is_host_interface(import) {
        return match path {
            "paddock:job/effects" if grants.connectors.is_empty() => verdict_of(
                false,
                "host interface; no connector granted (calls get not-granted)",
            ),
            "paddock:job/effects" => verdict_of(
                true,
                format!(
                    "host interface; connectors granted: {}",
                    grants.connectors.join(", ")
                ),
            ),
            _ => verdict_of(true, "host interface (always)"),
        };
    }
    if is_denied_wasi(import) {
        return verdict_of(
            false,
            "never granted: calling it ends the attempt as not_granted",
        );
    }
    let family = path.split('/').next().unwrap_or(path);
    match (family, path) {
        ("wasi:sockets", _) => verdict_of(false, "never granted: TCP, UDP and name lookup refused"),
        ("wasi:filesystem", _) => verdict_of(false, "never granted: no directory is preopened"),
        ("wasi:clocks", _) if grants.clocks => verdict_of(true, "granted: clocks"),
        ("wasi:clocks", _) => verdict_of(
            false,
            "denied: wall clock frozen at the scheduled time, monotonic from the attempt's start",
        ),
        ("wasi:random", _) if grants.random => verdict_of(true, "granted: random"),
        ("wasi:random", _) => verdict_of(false, "denied: a stream fixed by the trigger id"),
        (_, "wasi:cli/stdout" | "wasi:cli/stderr") if grants.stdio => {
            verdict_of(true, "granted: stdio (into the job log, under its cap)")
        }
        (_, "wasi:cli/stdout" | "wasi:cli/stderr") => verdict_of(false, "denied: output discarded"),
        (_, "wasi:cli/environment") if !grants.env.is_empty() => verdict_of(
            true,
            format!(
                "granted: env {}",
                grants
                    .env
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (_, "wasi:cli/environment") => verdict_of(false, "denied: an empty environment"),
        (_, "wasi:cli/stdin") => verdict_of(false, "never granted: stdin is empty"),
        _ => verdict_of(
            false,
            "linked, inert (streams, exit, terminals: no capability)",
        ),
    }
}

/// What changed between two components' capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ManifestDiff {
    pub imports_added: Vec<String>,
    pub imports_removed: Vec<String>,
    /// Interfaces imported by both whose functions differ: `name`, then
    /// `+f` / `-f` per function.
    pub imports_changed: Vec<(String, Vec<String>)>,
    pub exports_added: Vec<String>,
    pub exports_removed: Vec<String>,
}

impl ManifestDiff {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What `new` adds or drops relative to `old`.
pub fn diff(old: &CapabilityManifest, new: &CapabilityManifest) -> ManifestDiff {
    let names = |caps: &[super::capability::Capability]| -> BTreeSet<String> {
        caps.iter().map(|c| c.name.clone()).collect()
    };
    let (old_imports, new_imports) = (names(&old.imports), names(&new.imports));
    let (old_exports, new_exports) = (names(&old.exports), names(&new.exports));
    let imports_changed = old
        .imports
        .iter()
        .filter_map(|o| {
            let n = new.imports.iter().find(|n| n.name == o.name)?;
            let before: BTreeSet<&String> = o.functions.iter().collect();
            let after: BTreeSet<&String> = n.functions.iter().collect();
            let changes: Vec<String> = after
                .difference(&before)
                .map(|f| format!("+{f}"))
                .chain(before.difference(&after).map(|f| format!("-{f}")))
                .collect();
            (!changes.is_empty()).then(|| (o.name.clone(), changes))
        })
        .collect();
    ManifestDiff {
        imports_added: new_imports.difference(&old_imports).cloned().collect(),
        imports_removed: old_imports.difference(&new_imports).cloned().collect(),
        imports_changed,
        exports_added: new_exports.difference(&old_exports).cloned().collect(),
        exports_removed: old_exports.difference(&new_exports).cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::capability::Capability;
    use super::*;

    fn cap(name: &str, functions: &[&str]) -> Capability {
        Capability {
            name: name.into(),
            kind: "interface".into(),
            functions: functions.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn each_family_is_judged_against_the_grants() {
        let none = Grants::default();
        let all = Grants::parse(&["clocks", "random", "stdio", "env:A=1", "connector:l"]).unwrap();
        for (import, without, with) in [
            ("wasi:clocks/wall-clock@0.2.9", false, true),
            ("wasi:random/random@0.2.9", false, true),
            ("wasi:cli/stdout@0.2.9", false, true),
            ("wasi:cli/environment@0.2.9", false, true),
            ("paddock:job/effects@0.1.0", false, true),
            ("paddock:job/log@0.1.0", true, true),
            ("wasi:sockets/tcp@0.2.9", false, false),
            ("wasi:filesystem/preopens@0.2.9", false, false),
            ("wasi:http/outgoing-handler@0.2.0", false, false),
            ("wasi:io/poll@0.2.9", false, false),
        ] {
            assert_eq!(verdict(import, &none).granted, without, "{import}");
            assert_eq!(verdict(import, &all).granted, with, "{import}");
        }
        assert!(
            verdict("wasi:cli/environment@0.2.9", &all)
                .why
                .contains("env A")
        );
        assert!(
            verdict("paddock:job/effects@0.1.0", &all)
                .why
                .contains("connectors granted: l")
        );
    }

    #[test]
    fn a_diff_names_what_was_added_and_dropped() {
        let old = CapabilityManifest {
            imports: vec![
                cap("paddock:job/log@0.1.0", &["log"]),
                cap("wasi:io/poll@0.2.9", &["poll"]),
            ],
            exports: vec![cap("run", &[])],
        };
        let new = CapabilityManifest {
            imports: vec![
                cap("paddock:job/log@0.1.0", &["log", "flush"]),
                cap("wasi:sockets/tcp@0.2.9", &[]),
            ],
            exports: vec![cap("run", &[]), cap("exports", &["init"])],
        };
        let d = diff(&old, &new);
        assert_eq!(d.imports_added, vec!["wasi:sockets/tcp@0.2.9"]);
        assert_eq!(d.imports_removed, vec!["wasi:io/poll@0.2.9"]);
        assert_eq!(
            d.imports_changed,
            vec![(
                "paddock:job/log@0.1.0".to_string(),
                vec!["+flush".to_string()]
            )]
        );
        assert_eq!(d.exports_added, vec!["exports"]);
        assert!(diff(&old, &old).is_empty());
    }
}
