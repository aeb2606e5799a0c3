//! Plans and their identities: the immutable plan spec and its digest
//! (sha256 over canonical JSON), what re-applying content means
//! ([`decide_apply`]), the plan key that names a trigger, and the shard a
//! job's schedule lives in.
//!
//! Invariants:
//! - the digest of a plan is sha256 over its canonical JSON (object keys
//!   sorted, no insignificant whitespace), so the same content always has
//!   the same digest whatever order the manifest wrote it in;
//! - re-applying the latest content is an idempotent hit; an explicit
//!   version number is never reused for different content;
//! - a plan key is `job_id @ scheduled_at @ v<version> [# partition]` with
//!   `scheduled_at` in UTC RFC 3339, seconds precision, `Z` suffix
//!   (`nightly@2027-03-14T07:00:00Z@v3#eu`); [`PlanKey::parse`] inverts
//!   [`plan_key`] for every job id that does not itself contain
//!   `@<timestamp>@v<digits>`;
//! - a job id is a name inside its tenant: the same id in two tenants is
//!   two jobs. [`JobName`] is how a person names one: `JOB`, or
//!   `TENANT/JOB` when the id alone would be ambiguous (neither a tenant
//!   nor a job id may contain `/`);
//! - [`shard_of`] is FNV-1a 64 of the job id's UTF-8 bytes modulo the shard
//!   count: stable across Rust releases, platforms and processes (pinned by
//!   tests), unlike `std`'s `DefaultHasher`.

use super::retry::RetryPolicy;
use super::time::{fmt_instant, from_millis};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// The immutable content of a plan version. Its canonical JSON is what the
/// digest covers; the job id and version number are not part of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    pub tenant: String,
    pub component: String,
    pub resource_group: String,
    pub priority: i32,
    pub params: Value,
    pub retry: RetryPolicy,
    pub connectors: Vec<String>,
    /// WASI capabilities the job asks for (`clocks`, `random`, `stdio`,
    /// `scratch`, `env:NAME`); it gets those its group grants. Left out of
    /// the digest when empty, so plans made before it keep their digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// The job's type: a label a gate can pause by (`paddock pause --type
    /// T`). Left out of the digest when absent, so plans made before it
    /// keep their digests.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    /// The canonical schedule spec (all defaults filled in); the schedule
    /// plane reads it (`ScheduleSpec::of_plan`).
    pub schedule: Value,
}

impl PlanSpec {
    pub fn canonical(&self) -> String {
        canonical_json(&serde_json::to_value(self).expect("plan spec serialises"))
    }

    pub fn digest(&self) -> String {
        sha256_hex(self.canonical().as_bytes())
    }
}

/// JSON with object keys sorted and no whitespace: the form digests cover.
pub fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// sha256 hex of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What applying a manifest means, given the job's existing versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyDecision {
    /// The content is already stored as this version: an idempotent hit.
    Existing { version: u32 },
    /// Store a new version with this number.
    Create { version: u32 },
    /// An explicit version number already holds other content.
    VersionConflict { version: u32, stored_digest: String },
    /// An explicit version number that is neither stored nor latest + 1.
    NotNext { requested: u32, latest: u32 },
}

/// Decide what applying content with `digest` (and maybe an explicit
/// version) does. `versions` holds (version, digest) of every stored
/// version of the job.
pub fn decide_apply(
    versions: &[(u32, String)],
    requested: Option<u32>,
    digest: &str,
) -> ApplyDecision {
    let latest = versions.iter().map(|(v, _)| *v).max();
    let stored = |v: u32| versions.iter().find(|(n, _)| *n == v).map(|(_, d)| d);
    match requested {
        Some(v) => match stored(v) {
            Some(d) if d == digest => ApplyDecision::Existing { version: v },
            Some(d) => ApplyDecision::VersionConflict {
                version: v,
                stored_digest: d.clone(),
            },
            None if v == latest.unwrap_or(0) + 1 => ApplyDecision::Create { version: v },
            None => ApplyDecision::NotNext {
                requested: v,
                latest: latest.unwrap_or(0),
            },
        },
        None => match latest {
            Some(l) if stored(l).is_some_and(|d| d == digest) => {
                ApplyDecision::Existing { version: l }
            }
            Some(l) => ApplyDecision::Create { version: l + 1 },
            None => ApplyDecision::Create { version: 1 },
        },
    }
}

/// What applying a plan did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ApplyOutcome {
    Created { version: u32, digest: String },
    Unchanged { version: u32, digest: String },
}

impl ApplyOutcome {
    pub fn version(&self) -> u32 {
        match self {
            ApplyOutcome::Created { version, .. } | ApplyOutcome::Unchanged { version, .. } => {
                *version
            }
        }
    }
}

/// Formats a plan key: `job@2027-03-14T07:00:00Z@v3#p`. Sub-second parts of
/// `scheduled_at` are dropped (schedules only produce whole seconds).
pub fn plan_key(
    job_id: &str,
    scheduled_at: DateTime<Utc>,
    version: u32,
    partition: Option<&str>,
) -> String {
    let mut key = format!("{job_id}@{}@v{version}", fmt_instant(scheduled_at));
    if let Some(p) = partition {
        key.push('#');
        key.push_str(p);
    }
    key
}

/// [`plan_key`] for an instant in ms, as stored.
pub fn plan_key_ms(
    job_id: &str,
    scheduled_at_ms: i64,
    version: u32,
    partition: Option<&str>,
) -> String {
    plan_key(job_id, from_millis(scheduled_at_ms), version, partition)
}

/// A parsed plan key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanKey {
    /// Job id.
    pub job_id: String,
    /// Scheduled instant (whole seconds, UTC).
    pub scheduled_at: DateTime<Utc>,
    /// Plan version.
    pub version: u32,
    /// Optional partition.
    pub partition: Option<String>,
}

/// A string that is not a plan key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad plan key '{key}': {reason}")]
pub struct BadPlanKey {
    /// The key as given.
    pub key: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl PlanKey {
    /// Parses `job@YYYY-MM-DDTHH:MM:SSZ@vN[#partition]`: the job id ends at
    /// the first `@` that is followed by a valid timestamp and `@v<digits>`;
    /// the partition is everything after the `#` that follows the version.
    pub fn parse(key: &str) -> Result<PlanKey, BadPlanKey> {
        let bad = |reason| BadPlanKey {
            key: key.to_string(),
            reason,
        };
        const TS_LEN: usize = "2027-03-14T07:00:00Z".len();
        for (at, _) in key.match_indices('@') {
            let rest = &key[at + 1..];
            let (Some(ts), Some(tail)) = (rest.get(..TS_LEN), rest.get(TS_LEN..)) else {
                continue;
            };
            let Some(tail) = tail.strip_prefix("@v") else {
                continue;
            };
            if !ts.ends_with('Z') {
                continue;
            }
            let Ok(scheduled_at) = DateTime::parse_from_rfc3339(ts) else {
                continue;
            };
            let (digits, partition) = match tail.split_once('#') {
                Some((d, p)) => (d, Some(p.to_string())),
                None => (tail, None),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let version = digits.parse().map_err(|_| bad("version is not a u32"))?;
            if at == 0 {
                return Err(bad("empty job id"));
            }
            return Ok(PlanKey {
                job_id: key[..at].to_string(),
                scheduled_at: scheduled_at.with_timezone(&Utc),
                version,
                partition,
            });
        }
        Err(bad("expected job@YYYY-MM-DDTHH:MM:SSZ@vN[#partition]"))
    }
}

impl fmt::Display for PlanKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&plan_key(
            &self.job_id,
            self.scheduled_at,
            self.version,
            self.partition.as_deref(),
        ))
    }
}

impl FromStr for PlanKey {
    type Err = BadPlanKey;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlanKey::parse(s)
    }
}

/// A job as a person names it: `JOB`, or `TENANT/JOB`. Job ids are names
/// inside a tenant, so the qualified form is the one name that is never
/// ambiguous; the bare id is enough wherever the caller's tenant is known
/// (a team token) or only one tenant uses it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JobName {
    /// The tenant, when the name carried one.
    pub tenant: Option<String>,
    /// The job id.
    pub job: String,
}

impl JobName {
    /// `TENANT/JOB` or `JOB`. Neither part may be empty; a name with two
    /// `/` is refused rather than guessed at.
    pub fn parse(name: &str) -> Result<JobName, String> {
        let bad = || {
            format!(
                "'{}' is not a job name: use JOB or TENANT/JOB",
                name.escape_debug()
            )
        };
        match name.split_once('/') {
            None if !name.is_empty() => Ok(JobName {
                tenant: None,
                job: name.to_string(),
            }),
            Some((tenant, job)) if !tenant.is_empty() && !job.is_empty() && !job.contains('/') => {
                Ok(JobName {
                    tenant: Some(tenant.to_string()),
                    job: job.to_string(),
                })
            }
            _ => Err(bad()),
        }
    }

    /// The qualified name of `job` in `tenant`.
    pub fn qualified(tenant: &str, job: &str) -> String {
        format!("{tenant}/{job}")
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tenant {
            Some(tenant) => write!(f, "{tenant}/{}", self.job),
            None => f.write_str(&self.job),
        }
    }
}

/// FNV-1a, 64 bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The logical shard of a job: `fnv1a64(job_id) % shard_count`. A
/// `shard_count` of 0 is treated as 1 (everything in shard 0).
pub fn shard_of(job_id: &str, shard_count: u32) -> u32 {
    (fnv1a64(job_id.as_bytes()) % u64::from(shard_count.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_bare_or_qualified_and_nothing_else() {
        assert_eq!(
            JobName::parse("nightly").unwrap(),
            JobName {
                tenant: None,
                job: "nightly".into()
            }
        );
        let q = JobName::parse("acme/nightly").unwrap();
        assert_eq!(
            (q.tenant.as_deref(), q.job.as_str()),
            (Some("acme"), "nightly")
        );
        assert_eq!(q.to_string(), "acme/nightly");
        for bad in ["", "/", "acme/", "/nightly", "a/b/c"] {
            assert!(JobName::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn reapplying_the_latest_content_is_an_idempotent_hit() {
        let v = vec![(1, "d1".to_string()), (2, "d2".to_string())];
        assert_eq!(
            decide_apply(&v, None, "d2"),
            ApplyDecision::Existing { version: 2 }
        );
        assert_eq!(
            decide_apply(&v, None, "d3"),
            ApplyDecision::Create { version: 3 }
        );
        // Going back to older content is a new version, not a rewrite.
        assert_eq!(
            decide_apply(&v, None, "d1"),
            ApplyDecision::Create { version: 3 }
        );
        assert_eq!(
            decide_apply(&[], None, "d1"),
            ApplyDecision::Create { version: 1 }
        );
    }

    #[test]
    fn an_explicit_version_is_never_reused_for_other_content() {
        let v = vec![(1, "d1".to_string())];
        assert_eq!(
            decide_apply(&v, Some(1), "d1"),
            ApplyDecision::Existing { version: 1 }
        );
        assert_eq!(
            decide_apply(&v, Some(1), "dx"),
            ApplyDecision::VersionConflict {
                version: 1,
                stored_digest: "d1".into()
            }
        );
        assert_eq!(
            decide_apply(&v, Some(2), "dx"),
            ApplyDecision::Create { version: 2 }
        );
        assert_eq!(
            decide_apply(&v, Some(5), "dx"),
            ApplyDecision::NotNext {
                requested: 5,
                latest: 1
            }
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = serde_json::json!({"b": 1, "a": {"d": [ {"z": 0, "y": 1} ], "c": null}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"d":[{"y":1,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn plan_key_has_the_documented_format() {
        let at = t("2027-03-14T07:00:00Z");
        assert_eq!(
            plan_key("job", at, 3, Some("p")),
            "job@2027-03-14T07:00:00Z@v3#p"
        );
        assert_eq!(plan_key("job", at, 3, None), "job@2027-03-14T07:00:00Z@v3");
        assert_eq!(
            plan_key("job", t("2027-03-14T07:00:00.999Z"), 3, None),
            "job@2027-03-14T07:00:00Z@v3"
        );
        // 2027-03-14T07:00:00Z in ms, as stored.
        assert_eq!(
            plan_key_ms("report", 1_805_007_600_000, 3, Some("eu")),
            "report@2027-03-14T07:00:00Z@v3#eu"
        );
    }

    #[test]
    fn plan_key_parses_back_including_awkward_parts() {
        let at = t("2027-03-14T07:00:00Z");
        for (job, part) in [
            ("job", Some("p")),
            ("job", None),
            ("team@corp/job", Some("eu#west@2")),
            ("a", Some("")),
        ] {
            let key = plan_key(job, at, 42, part);
            let parsed = PlanKey::parse(&key).unwrap();
            assert_eq!(parsed.job_id, job);
            assert_eq!(parsed.scheduled_at, at);
            assert_eq!(parsed.version, 42);
            assert_eq!(parsed.partition.as_deref(), part);
            assert_eq!(parsed.to_string(), key);
        }
    }

    #[test]
    fn malformed_plan_keys_are_rejected() {
        for bad in [
            "",
            "job",
            "job@2027-03-14T07:00:00Z",
            "job@2027-03-14T07:00:00Z@3",
            "job@2027-03-14T07:00:00Z@v",
            "job@2027-03-14T07:00:00+00:00@v3",
            "job@2027-13-14T07:00:00Z@v3",
            "@2027-03-14T07:00:00Z@v3",
            "job@2027-03-14T07:00:00Z@v99999999999",
        ] {
            assert!(PlanKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_of_is_pinned_so_it_can_never_change_silently() {
        // Values computed independently (Python FNV-1a 64).
        assert_eq!(shard_of("nightly-report", 16), 11);
        assert_eq!(shard_of("nightly-report", 1024), 939);
        assert_eq!(shard_of("billing/invoice-sweep", 16), 13);
        assert_eq!(shard_of("billing/invoice-sweep", 1024), 525);
        assert_eq!(shard_of("job-42", 16), 5);
        assert_eq!(shard_of("job-42", 7), 5);
        assert_eq!(shard_of("tenant-a/etl", 1024), 163);
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("anything", 0), 0);
    }
}
