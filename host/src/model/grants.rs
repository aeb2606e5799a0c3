//! What an admin grants a resource group (and so every tenant's jobs in
//! it): WASI capabilities and connectors. A team's manifest may only *ask*
//! for a connector; the group's grants decide, at `job apply` and again at
//! every call.
//!
//! Grants are stored as strings in the group's `grants` (a JSON array), one
//! per capability:
//!
//! | grant              | what the guest gets                                        | without it                                        |
//! |--------------------|------------------------------------------------------------|---------------------------------------------------|
//! | `clocks`           | the real wall and monotonic clocks                         | wall clock frozen at the trigger's scheduled time; monotonic clock counts from the attempt's start |
//! | `random`           | the host's entropy                                         | a stream derived from the trigger id: the same on every attempt, retry and takeover |
//! | `stdio`            | stdout/stderr captured into the job log (under its cap)    | writes succeed and are discarded                  |
//! | `env:NAME=VALUE`   | environment variable `NAME` set to `VALUE`                 | an empty environment                              |
//! | `scratch:SIZE`     | a directory of its own at `/scratch`, at most SIZE bytes (e.g. `scratch:64MiB`), removed after the attempt | no directory at all |
//! | `connector:NAME`   | `effects::invoke` on connector `NAME` (if the manifest asks) | `not-granted`                                   |
//!
//! Never grantable, whatever the grants: sockets, name lookup and
//! `wasi:http` outgoing requests (network goes only through connectors),
//! any directory but the attempt's own scratch, stdin (always empty).

use serde::Serialize;
use std::fmt;

/// One grant, parsed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Grant {
    Clocks,
    Random,
    Stdio,
    Env { name: String, value: String },
    Scratch(u64),
    Connector(String),
}

/// Every form a grant may take, for error messages.
pub const GRANT_FORMS: &str = "clocks, random, stdio, env:NAME=VALUE, scratch:SIZE, connector:NAME";

impl Grant {
    /// Parse one grant; the error names the grant and the forms allowed.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("grant '{text}' {why} (grants are: {GRANT_FORMS})");
        match text {
            "clocks" => return Ok(Grant::Clocks),
            "random" => return Ok(Grant::Random),
            "stdio" => return Ok(Grant::Stdio),
            _ => {}
        }
        if let Some(rest) = text.strip_prefix("env:") {
            let (name, value) = rest
                .split_once('=')
                .ok_or_else(|| bad("needs a value: env:NAME=VALUE"))?;
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(bad("has an invalid variable name (letters, digits and _)"));
            }
            return Ok(Grant::Env {
                name: name.to_string(),
                value: value.to_string(),
            });
        }
        if let Some(size) = text.strip_prefix("scratch:") {
            let bytes = super::units::parse_bytes("size", size)
                .map_err(|e| bad(&format!("has a bad {e}")))?;
            if bytes <= 0 {
                return Err(bad("needs a positive size, e.g. scratch:64MiB"));
            }
            return Ok(Grant::Scratch(bytes as u64));
        }
        if let Some(name) = text.strip_prefix("connector:") {
            if name.is_empty() {
                return Err(bad("names no connector"));
            }
            return Ok(Grant::Connector(name.to_string()));
        }
        if text.starts_with("wasi:") {
            return Err(bad(
                "is a WASI import name; every WASI import links and is denied by default, \
                 grant the capability instead",
            ));
        }
        Err(bad("is not a grant"))
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Clocks => f.write_str("clocks"),
            Grant::Random => f.write_str("random"),
            Grant::Stdio => f.write_str("stdio"),
            Grant::Env { name, value } => write!(f, "env:{name}={value}"),
            Grant::Scratch(bytes) => write!(f, "scratch:{bytes}"),
            Grant::Connector(name) => write!(f, "connector:{name}"),
        }
    }
}

/// A group's grants, parsed: what its guests' WASI context gets and which
/// connectors they may call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    pub clocks: bool,
    pub random: bool,
    pub stdio: bool,
    pub env: Vec<(String, String)>,
    /// The scratch directory's byte cap, if granted.
    pub scratch: Option<u64>,
    pub connectors: Vec<String>,
}

impl Grants {
    /// Parse every grant; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(grants: &[S]) -> Result<Self, String> {
        let mut out = Grants::default();
        for text in grants {
            match Grant::parse(text.as_ref())? {
                Grant::Clocks => out.clocks = true,
                Grant::Random => out.random = true,
                Grant::Stdio => out.stdio = true,
                Grant::Env { name, value } => {
                    out.env.retain(|(n, _)| n != &name);
                    out.env.push((name, value));
                }
                Grant::Scratch(bytes) => out.scratch = Some(bytes),
                Grant::Connector(name) => {
                    if !out.connectors.contains(&name) {
                        out.connectors.push(name)
                    }
                }
            }
        }
        Ok(out)
    }

    /// Parse what is stored, skipping what no longer parses (a grant
    /// written by an older version): a skipped grant grants nothing.
    pub fn lenient<S: AsRef<str>>(grants: &[S]) -> Self {
        let valid: Vec<&str> = grants
            .iter()
            .map(AsRef::as_ref)
            .filter(|g| Grant::parse(g).is_ok())
            .collect();
        Self::parse(&valid).unwrap_or_default()
    }

    /// Check a capability a manifest asks for (`clocks`, `random`, `stdio`,
    /// `scratch`, `env:NAME`).
    pub fn check_need(need: &str) -> Result<(), String> {
        match need {
            "clocks" | "random" | "stdio" | "scratch" => Ok(()),
            _ => match need.strip_prefix("env:") {
                Some(name) if !name.is_empty() && !name.contains('=') => Ok(()),
                _ => Err(format!(
                    "'{need}' is not a capability (clocks, random, stdio, scratch, env:NAME)"
                )),
            },
        }
    }

    /// The grants missing for what a manifest asks for, each as the grant
    /// an admin would give (`env:NAME=VALUE`, `scratch:SIZE` for the forms
    /// with a value), in the manifest's order.
    pub fn missing_needs(&self, needs: &[String]) -> Vec<String> {
        needs
            .iter()
            .filter(|need| !self.gives(need))
            .map(|need| match need.as_str() {
                "scratch" => "scratch:SIZE".to_string(),
                env if env.starts_with("env:") => format!("{env}=VALUE"),
                other => other.to_string(),
            })
            .collect()
    }

    fn gives(&self, need: &str) -> bool {
        match need {
            "clocks" => self.clocks,
            "random" => self.random,
            "stdio" => self.stdio,
            "scratch" => self.scratch.is_some(),
            env => env
                .strip_prefix("env:")
                .is_some_and(|name| self.env.iter().any(|(n, _)| n == name)),
        }
    }

    /// What an attempt gets: these grants, narrowed to what its manifest
    /// asks for (least privilege: a grant the job did not ask for is not
    /// given to it). Connectors are narrowed the same way by the runner.
    pub fn narrowed_to(&self, needs: &[String]) -> Self {
        let asked = |n: &str| needs.iter().any(|x| x == n);
        Self {
            clocks: self.clocks && asked("clocks"),
            random: self.random && asked("random"),
            stdio: self.stdio && asked("stdio"),
            env: self
                .env
                .iter()
                .filter(|(name, _)| asked(&format!("env:{name}")))
                .cloned()
                .collect(),
            scratch: self.scratch.filter(|_| asked("scratch")),
            connectors: self.connectors.clone(),
        }
    }

    /// The connectors a manifest asks for that these grants do not give,
    /// in the manifest's order.
    pub fn missing_connectors<'a>(&self, asked: &'a [String]) -> Vec<&'a str> {
        asked
            .iter()
            .filter(|c| !self.connectors.contains(c))
            .map(String::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_are_checked_reported_as_grants_and_narrow_what_an_attempt_gets() {
        assert!(Grants::check_need("env:REGION").is_ok());
        assert!(
            Grants::check_need("sockets")
                .unwrap_err()
                .contains("not a capability")
        );
        assert!(Grants::check_need("env:A=1").is_err());
        let g = Grants::parse(&["clocks", "stdio", "env:A=1", "env:B=2", "scratch:1MiB"]).unwrap();
        let needs: Vec<String> = ["clocks", "random", "env:A", "env:C", "scratch"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(g.missing_needs(&needs), vec!["random", "env:C=VALUE"]);
        let narrowed = g.narrowed_to(&needs);
        assert!(narrowed.clocks && !narrowed.stdio && !narrowed.random);
        assert_eq!(narrowed.env, vec![("A".to_string(), "1".to_string())]);
        assert_eq!(narrowed.scratch, Some(1 << 20));
    }

    #[test]
    fn every_form_parses_and_prints_back() {
        for text in [
            "clocks",
            "random",
            "stdio",
            "env:REGION=eu-1",
            "env:EMPTY=",
            "scratch:1048576",
            "connector:ledger",
        ] {
            assert_eq!(Grant::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn a_bad_grant_is_named_with_the_forms_allowed() {
        for (text, why) in [
            ("sockets", "is not a grant"),
            ("env:REGION", "needs a value"),
            ("env:1X=a", "invalid variable name"),
            ("connector:", "names no connector"),
            ("scratch:0", "must be positive"),
            ("scratch:lots", "is not a size"),
            (
                "wasi:clocks/wall-clock@0.2.6",
                "grant the capability instead",
            ),
        ] {
            let err = Grant::parse(text).unwrap_err();
            assert!(err.contains(&format!("'{text}'")), "{err}");
            assert!(err.contains(why), "{err}");
            assert!(err.contains(GRANT_FORMS), "{err}");
        }
    }

    #[test]
    fn grants_fold_into_one_set_and_report_missing_connectors() {
        let g = Grants::parse(&[
            "clocks",
            "env:A=1",
            "env:A=2",
            "connector:ledger",
            "connector:ledger",
        ])
        .unwrap();
        assert!(g.clocks && !g.random && !g.stdio);
        assert_eq!(g.env, vec![("A".to_string(), "2".to_string())]);
        assert_eq!(g.connectors, vec!["ledger".to_string()]);
        let asked = vec!["mail".to_string(), "ledger".to_string(), "sms".to_string()];
        assert_eq!(g.missing_connectors(&asked), vec!["mail", "sms"]);
        assert!(Grants::lenient(&["wasi:x", "stdio"]).stdio);
    }
}
