//! Gates: pause, resume and cancel at five scopes — one job, a job type (the
//! `type` label of its plan), a tenant, a resource group, or everything.
//!
//! A **gate** is a persisted fact (`gates` table, migration 0018): who
//! closed which scope, why and when, and who reopened it. While a gate is
//! closed, nothing new starts in its scope: its queued triggers are
//! `paused`, its running ones are asked to pause at their next safe point
//! (`pause-requested`, after which they end `paused` from their last
//! checkpoint), a manual run is refused and a scheduled fire is created
//! `paused`. A trigger stays paused while **any** closed gate covers it.
//!
//! This module holds the pure parts: the scope ([`GateScope`]), the
//! reports of what a pause, resume or cancel changed, and how a late
//! scheduled fire held by a gate is judged at resume ([`judge_late_fires`],
//! the job's misfire policy as `schedule::misfire` applies it at a scan).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a gate covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum GateScope {
    /// One job, by id.
    Job(String),
    /// Every job whose plan carries this `type` label.
    Type(String),
    /// Every job of a tenant.
    Tenant(String),
    /// Every job of a resource group.
    Group(String),
    /// Everything. Lease cleanup, effect recovery and the audit log keep
    /// running: a gate stops work from starting, not the host.
    Global,
}

/// The stored kinds, in the order `paddock gates` lists them.
pub const GATE_KINDS: [&str; 5] = ["global", "group", "tenant", "type", "job"];

impl GateScope {
    /// A scope from its stored kind and value, checked: every kind but
    /// `global` names something, and `global` names nothing.
    pub fn parse(kind: &str, value: &str) -> Result<Self, String> {
        let named = |make: fn(String) -> GateScope| {
            let value = value.trim();
            if value.is_empty() {
                Err(format!("a {kind} gate needs a {kind} name"))
            } else if value.chars().any(char::is_control) {
                Err(format!("{kind} name {value:?} has a control character"))
            } else {
                Ok(make(value.to_string()))
            }
        };
        match kind {
            "job" => named(GateScope::Job),
            "type" => named(GateScope::Type),
            "tenant" => named(GateScope::Tenant),
            "group" => named(GateScope::Group),
            "global" if value.is_empty() => Ok(GateScope::Global),
            "global" => Err(format!("a global gate names nothing (got {value:?})")),
            other => Err(format!(
                "unknown gate scope '{other}' (use job, type, tenant, group or global)"
            )),
        }
    }

    /// The stored kind.
    pub fn kind(&self) -> &'static str {
        match self {
            GateScope::Job(_) => "job",
            GateScope::Type(_) => "type",
            GateScope::Tenant(_) => "tenant",
            GateScope::Group(_) => "group",
            GateScope::Global => "global",
        }
    }

    /// The stored value (`""` for the global gate).
    pub fn value(&self) -> &str {
        match self {
            GateScope::Job(v) | GateScope::Type(v) | GateScope::Tenant(v) | GateScope::Group(v) => {
                v
            }
            GateScope::Global => "",
        }
    }

    /// The audit entry's subject: `job:J`, `type:T`, ..., `global`.
    pub fn subject(&self) -> String {
        match self {
            GateScope::Global => "global".into(),
            other => format!("{}:{}", other.kind(), other.value()),
        }
    }

    /// Whether reopening this scope takes two people (the two-person rule,
    /// `model::tickets`): only the global gate, whose resume lets every
    /// held trigger start at once.
    pub fn resume_needs_two_people(&self) -> bool {
        matches!(self, GateScope::Global)
    }

    /// Whether this scope covers a trigger of `job` (of `job_type`, if its
    /// plan has one) owned by `tenant` in `group`.
    pub fn covers(&self, job: &str, job_type: Option<&str>, tenant: &str, group: &str) -> bool {
        match self {
            GateScope::Job(j) => j == job,
            GateScope::Type(t) => job_type == Some(t.as_str()),
            GateScope::Tenant(t) => t == tenant,
            GateScope::Group(g) => g == group,
            GateScope::Global => true,
        }
    }
}

impl fmt::Display for GateScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateScope::Global => f.write_str("global"),
            other => write!(f, "{} '{}'", other.kind(), other.value()),
        }
    }
}

/// Whether a reason was given: every gate change says why.
pub fn check_reason(reason: &str) -> Result<(), String> {
    if reason.trim().is_empty() {
        Err("a pause, resume or cancel needs a reason (--reason \"...\")".into())
    } else {
        Ok(())
    }
}

/// What a pause changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseReport {
    pub scope: GateScope,
    /// False: the scope's gate was already closed (nothing changed).
    pub closed: bool,
    /// Running triggers asked to pause at their next safe point.
    pub running_asked: u64,
    /// Queued triggers (`pending`, `retry_wait`) moved to `paused`.
    pub queued_paused: u64,
}

/// What a resume changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResumeReport {
    /// False: the scope had no closed gate, or the resume was only
    /// proposed (nothing changed).
    pub reopened: bool,
    /// Set when this resume was recorded as a proposal that waits for a
    /// different person's resume ([`GateScope::resume_needs_two_people`]):
    /// the proposer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<String>,
    /// Paused triggers due again.
    pub resumed: u64,
    /// Late scheduled fires parked for approval or skipped by their job's
    /// misfire policy (of those the gate held).
    pub parked: u64,
    pub skipped: u64,
    /// Paused or still-running triggers another closed gate keeps held.
    pub still_held: u64,
    /// Running triggers whose pause request was withdrawn.
    pub running_unasked: u64,
}

/// What a cancel at a scope changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CancelReport {
    /// Triggers that had not started (or were paused), now `cancelled`.
    pub cancelled: u64,
    /// Running triggers asked to stop: each ends `cancelled` at its next
    /// safe point — unless it succeeds first, and then its success stands.
    pub stop_requested: u64,
    /// Triggers of the scope that had already finished: a cancel never
    /// rewrites them.
    pub already_final: u64,
}

/// A job's misfire policy as a resume applies it (the fields of its
/// schedule spec that `schedule::spec` writes: `misfire`,
/// `misfire_threshold`, `catchup_window`, `max_catchup`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MisfireRule {
    /// `skip`, `latest`, `all` or `manual`.
    pub policy: String,
    pub threshold_ms: i64,
    pub catchup_window_ms: i64,
    pub max_catchup: usize,
}

impl Default for MisfireRule {
    /// `schedule::spec`'s defaults.
    fn default() -> Self {
        Self {
            policy: "skip".into(),
            threshold_ms: 60_000,
            catchup_window_ms: 3_600_000,
            max_catchup: 100,
        }
    }
}

impl MisfireRule {
    /// From a stored schedule spec (JSON); a field missing or unreadable
    /// keeps its default.
    pub fn from_spec(spec: &str) -> Self {
        let d = Self::default();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(spec) else {
            return d;
        };
        let span = |key: &str, default: i64| {
            v.get(key)
                .and_then(|s| s.as_str())
                .and_then(|s| super::time::parse_duration(s).ok())
                .map_or(default, |d| d.as_millis() as i64)
        };
        Self {
            policy: v
                .get("misfire")
                .and_then(|p| p.as_str())
                .filter(|p| ["skip", "latest", "all", "manual"].contains(p))
                .map_or(d.policy, str::to_string),
            threshold_ms: span("misfire_threshold", d.threshold_ms),
            catchup_window_ms: span("catchup_window", d.catchup_window_ms),
            max_catchup: v
                .get("max_catchup")
                .and_then(|n| n.as_u64())
                .map_or(d.max_catchup, |n| n as usize),
        }
    }
}

/// What a resume does with one held fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateFire {
    /// Due again (on time, or a catch-up fire).
    Fire,
    /// Parked for approval (`manual`).
    Park,
    /// Not run (`skipped`, `misfire_skip`).
    Skip,
}

/// Judge a job's scheduled fires that a gate held and that never started
/// (`scheduled_at` in ms), at resume time `now`, by its misfire policy —
/// the same table as `schedule::misfire::classify_misfires`: on-time fires
/// (late by at most the threshold) fire; missed ones are skipped (`skip`),
/// only the newest fires (`latest`), those inside the catch-up window fire
/// (`all`), or all are parked (`manual`); more catch-up fires than
/// `max_catchup` are parked instead. One decision per input, in order.
pub fn judge_late_fires(times: &[i64], now: i64, rule: &MisfireRule) -> Vec<LateFire> {
    let missed_before = now.saturating_sub(rule.threshold_ms);
    let catchup_from = now.saturating_sub(rule.catchup_window_ms);
    let latest_missed = times.iter().copied().filter(|t| *t < missed_before).max();
    // `None`: a catch-up fire, decided once they are counted.
    let first: Vec<Option<LateFire>> = times
        .iter()
        .map(|&t| {
            if t >= missed_before {
                return Some(LateFire::Fire);
            }
            match rule.policy.as_str() {
                "latest" if Some(t) == latest_missed => None,
                "all" if t >= catchup_from => None,
                "manual" => Some(LateFire::Park),
                _ => Some(LateFire::Skip),
            }
        })
        .collect();
    let catchup = first.iter().filter(|d| d.is_none()).count();
    let catchup_as = if catchup > rule.max_catchup {
        LateFire::Park
    } else {
        LateFire::Fire
    };
    first.into_iter().map(|d| d.unwrap_or(catchup_as)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_bad_ones_are_refused_with_the_reason() {
        for scope in [
            GateScope::Job("j".into()),
            GateScope::Type("etl".into()),
            GateScope::Tenant("t1".into()),
            GateScope::Group("g".into()),
            GateScope::Global,
        ] {
            assert_eq!(GateScope::parse(scope.kind(), scope.value()), Ok(scope));
        }
        assert!(
            GateScope::parse("job", " ")
                .unwrap_err()
                .contains("job name")
        );
        assert!(
            GateScope::parse("global", "x")
                .unwrap_err()
                .contains("names nothing")
        );
        assert!(
            GateScope::parse("team", "x")
                .unwrap_err()
                .contains("unknown gate scope")
        );
        assert!(check_reason("  ").is_err());
    }

    #[test]
    fn a_scope_covers_what_it_names() {
        let t = |s: &GateScope| s.covers("j", Some("etl"), "t1", "g");
        assert!(t(&GateScope::Global));
        assert!(t(&GateScope::Job("j".into())) && !t(&GateScope::Job("k".into())));
        assert!(t(&GateScope::Type("etl".into())) && !t(&GateScope::Type("x".into())));
        assert!(!GateScope::Type("etl".into()).covers("j", None, "t1", "g"));
        assert!(t(&GateScope::Tenant("t1".into())) && !t(&GateScope::Tenant("t2".into())));
        assert!(t(&GateScope::Group("g".into())) && !t(&GateScope::Group("h".into())));
    }

    #[test]
    fn late_fires_follow_the_misfire_policy() {
        use LateFire::*;
        let now = 10_000_000;
        // Two missed (an hour and two minutes ago), one on time.
        let times = [now - 3_600_000, now - 120_000, now - 1_000];
        let rule = |policy: &str| MisfireRule {
            policy: policy.into(),
            ..MisfireRule::default()
        };
        assert_eq!(
            judge_late_fires(&times, now, &rule("skip")),
            [Skip, Skip, Fire]
        );
        assert_eq!(
            judge_late_fires(&times, now, &rule("latest")),
            [Skip, Fire, Fire]
        );
        assert_eq!(
            judge_late_fires(&times, now, &rule("all")),
            [Fire, Fire, Fire]
        );
        assert_eq!(
            judge_late_fires(&times, now, &rule("manual")),
            [Park, Park, Fire]
        );
        let flood = MisfireRule {
            max_catchup: 1,
            ..rule("all")
        };
        assert_eq!(judge_late_fires(&times, now, &flood), [Park, Park, Fire]);
    }

    #[test]
    fn the_rule_is_read_from_a_stored_schedule_spec() {
        let spec = r#"{"kind":"cron","misfire":"all","misfire_threshold":"1m","catchup_window":"2h","max_catchup":7}"#;
        assert_eq!(
            MisfireRule::from_spec(spec),
            MisfireRule {
                policy: "all".into(),
                threshold_ms: 60_000,
                catchup_window_ms: 7_200_000,
                max_catchup: 7
            }
        );
        assert_eq!(MisfireRule::from_spec("not json"), MisfireRule::default());
    }
}
