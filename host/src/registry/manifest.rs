//! Job manifests (TOML) and the immutable plan spec they become.
//!
//! Pure: parsing and validation; the spec, its digest and what re-applying
//! it means are the domain's ([`crate::model::plan`]).

use crate::model::plan::PlanSpec;
use crate::model::retry::RetryPolicy;
use crate::model::time::parse_duration;
use crate::schedule::ScheduleSpec;
use serde::Deserialize;
use serde_json::Value;

/// A job manifest as written by a team (`paddock job apply FILE.toml`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobManifest {
    /// Unique across the host; letters, digits, `.`, `_`, `-`.
    pub id: String,
    pub tenant: String,
    /// `sha256:<hex>` of a pushed component, or a path to a component file
    /// (relative to the manifest), which is pushed first.
    pub component: String,
    #[serde(default = "default_group")]
    pub resource_group: String,
    /// An explicit version number: applying it again with other content is
    /// refused. Without it, changed content becomes latest + 1.
    pub version: Option<u32>,
    /// Lower runs first among due triggers.
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub params: toml::Table,
    #[serde(default)]
    pub retry: RetryManifest,
    /// Connectors this job's effects may use (an admin must grant each to
    /// the group).
    #[serde(default)]
    pub connectors: Vec<String>,
    /// WASI capabilities the job needs: `clocks`, `random`, `stdio`,
    /// `scratch`, `env:NAME` (an admin must grant each to the group).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The job's type: a label gates pause by (`paddock pause --type T`);
    /// letters, digits, `.`, `_`, `-`.
    #[serde(default, rename = "type")]
    pub job_type: Option<String>,
    /// The schedule (cron, interval, at, manual). Absent means manual-only.
    #[serde(default)]
    pub schedule: Option<toml::Table>,
}

fn default_group() -> String {
    "default".into()
}

/// The retry budget as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryManifest {
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_backoff")]
    pub backoff: String,
    #[serde(default = "default_backoff_max")]
    pub backoff_max: String,
    #[serde(default = "default_true")]
    pub jitter: bool,
    /// Stop retrying once the trigger is this old (from its scheduled
    /// time): late work past this point is not worth doing. Default: none.
    #[serde(default)]
    pub max_age: Option<String>,
    /// Stop retrying once this long has passed since the first attempt
    /// started (the total time budget). Default: none.
    #[serde(default)]
    pub max_elapsed: Option<String>,
}

fn default_max_attempts() -> u32 {
    3
}
fn default_backoff() -> String {
    "1s".into()
}
fn default_backoff_max() -> String {
    "5m".into()
}
fn default_true() -> bool {
    true
}

impl Default for RetryManifest {
    fn default() -> Self {
        Self {
            max_attempts: default_max_attempts(),
            backoff: default_backoff(),
            backoff_max: default_backoff_max(),
            jitter: true,
            max_age: None,
            max_elapsed: None,
        }
    }
}

/// A manifest that cannot become a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest is not valid TOML: {0}")]
    Syntax(String),
    #[error("manifest field '{field}': {problem}")]
    Field { field: String, problem: String },
}

fn field_error(field: &str, problem: impl Into<String>) -> ManifestError {
    ManifestError::Field {
        field: field.into(),
        problem: problem.into(),
    }
}

impl JobManifest {
    /// Parse TOML text. Unknown fields are refused by name.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let manifest: Self = toml::from_str(text)
            .map_err(|e| ManifestError::Syntax(e.to_string().trim_end().replace('\n', " | ")))?;
        check_name("id", &manifest.id)?;
        check_name("tenant", &manifest.tenant)?;
        check_name("resource_group", &manifest.resource_group)?;
        if let Some(job_type) = &manifest.job_type {
            check_name("type", job_type)?;
        }
        if manifest.version == Some(0) {
            return Err(field_error("version", "versions start at 1"));
        }
        crate::model::bounds::MAX_ATTEMPTS
            .check(i64::from(manifest.retry.max_attempts))
            .map_err(|e| field_error("retry.max_attempts", bound_reason(&e)))?;
        for c in &manifest.connectors {
            check_name("connectors", c)?;
        }
        for need in &manifest.capabilities {
            crate::model::grants::Grants::check_need(need)
                .map_err(|e| field_error("capabilities", e))?;
        }
        Ok(manifest)
    }

    /// The plan spec, given the digest the `component` field resolved to.
    pub fn to_spec(&self, component_digest: &str) -> Result<PlanSpec, ManifestError> {
        let backoff =
            parse_duration(&self.retry.backoff).map_err(|e| field_error("retry.backoff", e))?;
        let backoff_max = parse_duration(&self.retry.backoff_max)
            .map_err(|e| field_error("retry.backoff_max", e))?;
        use crate::model::bounds::{BACKOFF, BACKOFF_MAX, MAX_AGE, MAX_ELAPSED};
        let within = |bound: &crate::model::bounds::Bound, ms: u64| {
            bound
                .check_u64(ms)
                .map_err(|e| field_error(bound.field, bound_reason(&e)))
        };
        within(&BACKOFF, ms_of(backoff))?;
        within(&BACKOFF_MAX, ms_of(backoff_max))?;
        if backoff_max < backoff {
            return Err(field_error(
                "retry.backoff_max",
                "must not be shorter than retry.backoff",
            ));
        }
        let optional = |field: &str, text: &Option<String>| -> Result<Option<u64>, ManifestError> {
            text.as_deref()
                .map(|t| parse_duration(t).map(ms_of))
                .transpose()
                .map_err(|e| field_error(field, e))
        };
        let max_age_ms = optional("retry.max_age", &self.retry.max_age)?;
        let max_elapsed_ms = optional("retry.max_elapsed", &self.retry.max_elapsed)?;
        if let Some(ms) = max_age_ms {
            within(&MAX_AGE, ms)?;
        }
        if let Some(ms) = max_elapsed_ms {
            within(&MAX_ELAPSED, ms)?;
        }
        let params =
            serde_json::to_value(&self.params).map_err(|e| field_error("params", e.to_string()))?;
        let schedule_spec: ScheduleSpec = match &self.schedule {
            None => ScheduleSpec::default(),
            Some(table) => table
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| field_error("schedule", e.message().to_string()))?,
        };
        let schedule: Value = serde_json::from_str(&schedule_spec.canonical_json())
            .map_err(|e| field_error("schedule", e.to_string()))?;
        let mut connectors = self.connectors.clone();
        connectors.sort();
        connectors.dedup();
        let mut capabilities = self.capabilities.clone();
        capabilities.sort();
        capabilities.dedup();
        Ok(PlanSpec {
            tenant: self.tenant.clone(),
            component: component_digest.to_string(),
            resource_group: self.resource_group.clone(),
            priority: self.priority,
            params,
            retry: RetryPolicy {
                max_attempts: self.retry.max_attempts,
                backoff_ms: backoff.as_millis() as u64,
                backoff_max_ms: backoff_max.as_millis() as u64,
                jitter: self.retry.jitter,
                max_age_ms,
                max_elapsed_ms,
            },
            connectors,
            capabilities,
            job_type: self.job_type.clone(),
            schedule,
        })
    }
}

/// A duration's whole milliseconds; one past 64 bits reads as the largest
/// (every bound refuses it).
fn ms_of(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A bound's refusal without its leading field name (the manifest's error
/// names the field already): `must be at most 100, not 1000`.
fn bound_reason(refusal: &str) -> String {
    match refusal.split_once(" must ") {
        Some((_, rest)) => format!("must {rest}"),
        None => refusal.to_string(),
    }
}

/// Names that appear inside plan keys must not contain their separators.
/// A tenant name as manifests allow it (letters, digits, `.`, `_`, `-`).
pub fn check_tenant(tenant: &str) -> Result<(), ManifestError> {
    check_name("tenant", tenant)
}

fn check_name(field: &str, value: &str) -> Result<(), ManifestError> {
    if value.is_empty() || value.len() > 128 {
        return Err(field_error(field, "must be 1 to 128 characters"));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(field_error(
            field,
            format!("'{value}' contains '{bad}'; use letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        id = "nightly-report"
        tenant = "acme"
        component = "sha256:abc"
        [params]
        name = "x"
        depth = 3
        [retry]
        max_attempts = 5
        backoff = "2s"
    "#;

    #[test]
    fn a_good_manifest_parses_with_defaults_filled_in() {
        let m = JobManifest::parse(GOOD).unwrap();
        assert_eq!(m.resource_group, "default");
        let spec = m.to_spec("abc").unwrap();
        assert_eq!(spec.retry.backoff_ms, 2000);
        assert_eq!(spec.retry.backoff_max_ms, 300_000);
        assert_eq!(
            ScheduleSpec::of_plan(&spec).unwrap().trigger.kind(),
            crate::schedule::Kind::Manual
        );
    }

    #[test]
    fn a_bad_schedule_names_the_cron_field_and_token() {
        let text = format!(
            "{GOOD}\n[schedule]\nkind = \"cron\"\ncron = \"0 0 25 * * *\"\ntimezone = \"UTC\"\n"
        );
        let err = JobManifest::parse(&text)
            .unwrap()
            .to_spec("abc")
            .unwrap_err();
        assert!(
            err.to_string().contains("'hour'") && err.to_string().contains("'25'"),
            "{err}"
        );
        let text = format!(
            "{GOOD}\n[schedule]\nkind = \"cron\"\ncron = \"0 0 0 30 2 *\"\ntimezone = \"UTC\"\n"
        );
        let err = JobManifest::parse(&text)
            .unwrap()
            .to_spec("abc")
            .unwrap_err();
        assert!(err.to_string().contains("never fires"), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let err = JobManifest::parse(&format!("{GOOD}\n[extra]\nx = 1")).unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
        let err = JobManifest::parse("id = \"a\"\ntenant = \"t\"\ncomponent = \"c\"\ncolour = 1")
            .unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn malformed_toml_is_a_syntax_error() {
        let err = JobManifest::parse("id = \"unterminated").unwrap_err();
        assert!(matches!(err, ManifestError::Syntax(_)), "{err}");
    }

    #[test]
    fn names_that_would_break_plan_keys_are_refused() {
        let err = JobManifest::parse(&GOOD.replace("nightly-report", "a@b")).unwrap_err();
        assert!(err.to_string().contains("'@'"), "{err}");
    }

    #[test]
    fn the_digest_ignores_the_order_fields_were_written_in() {
        let a = JobManifest::parse(GOOD).unwrap().to_spec("abc").unwrap();
        let reordered = GOOD.replace(
            "name = \"x\"\n        depth = 3",
            "depth = 3\n        name = \"x\"",
        );
        let b = JobManifest::parse(&reordered)
            .unwrap()
            .to_spec("abc")
            .unwrap();
        assert_eq!(a.digest(), b.digest());
        let c = JobManifest::parse(&GOOD.replace("depth = 3", "depth = 4"))
            .unwrap()
            .to_spec("abc")
            .unwrap();
        assert_ne!(a.digest(), c.digest());
    }
}
