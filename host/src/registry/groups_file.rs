//! `paddock group apply groups.toml`: resource groups declared in a file,
//! with the same fields, defaults and checks as `paddock group set`. Each
//! `[[group]]` is a whole declaration: a field left out takes the flag's
//! default, not the stored value. Unknown fields are refused by name, and
//! every value is checked before anything is stored.
//!
//! ```toml
//! [[group]]
//! name = "logistics"
//! concurrency = 500            # the configured max
//! connector_rate = 50          # calls per second
//! service_time = "2s"
//! db_connections = 60
//! memory_budget = "720MiB"
//! working_set = "18MiB"
//! memory = "64MiB"             # per attempt
//! deadline = "60s"
//! grants = ["clocks", "stdio", "env:REGION=eu-1", "connector:ledger"]
//! max_result = "1MiB"          # size caps: max_params, max_result, max_error,
//! max_checkpoint = "1MiB"      #   max_checkpoint, max_effect_payload,
//! max_log = "64KiB"            #   max_effect_response, max_log
//! aging = "60s"                # fair shares: a waiting tenant gains a slot
//! min_share = 10               # slots guaranteed before other groups' extra
//! recovery_share = 30          # % of capacity for catch-up/backfill/retries
//! ramp_every = "30s"           # the recovery ramp's step (10→25→50→100%)
//!
//! [[tenant]]
//! name = "acme"
//! weight = 2                   # twice the share of a tenant of weight 1
//! max_in_flight = 20           # across groups
//! triggers_per_minute = 600    # manual/API triggers; more wait their turn
//! fuel_per_hour = 50000000000  # guest fuel; over it the tenant's work waits
//! ```

use crate::model::ResourceGroup;
use crate::model::caps::OutputCaps;
use crate::model::group::{CapacityInputs, DEFAULT_AGING_MS, TenantQuota};
use crate::model::shares::GroupShares;
use crate::model::units::{parse_bytes, parse_millis};
use serde::Deserialize;

/// The defaults of `paddock group set`.
pub const DEFAULT_FUEL: i64 = 10_000_000_000;
pub const DEFAULT_MEMORY: &str = "64MiB";
pub const DEFAULT_DEADLINE: &str = "60s";
pub const DEFAULT_CONCURRENCY: i64 = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "group", default)]
    groups: Vec<GroupSpec>,
    #[serde(rename = "tenant", default)]
    tenants: Vec<TenantEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantEntry {
    name: String,
    #[serde(default = "one")]
    weight: i64,
    max_in_flight: Option<i64>,
    triggers_per_minute: Option<i64>,
    fuel_per_hour: Option<i64>,
}

fn one() -> i64 {
    1
}

/// What a groups file declares: groups, and tenants' weights.
pub struct GroupsFile {
    pub groups: Vec<ResourceGroup>,
    pub tenants: Vec<TenantQuota>,
    /// The tenants each group admits, for the groups that list them
    /// (`tenants = [...]`); a group that lists none keeps what it admits.
    pub admits: Vec<(String, Vec<String>)>,
}

/// One group as declared: a `[[group]]` table of a groups file, or the
/// flags of `paddock group set` (`PUT /v1/groups/{name}` takes it as JSON).
/// A field left out takes the flag's default.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub name: String,
    pub fuel: Option<i64>,
    pub memory: Option<String>,
    pub deadline: Option<String>,
    pub concurrency: Option<i64>,
    pub connector_rate: Option<f64>,
    pub service_time: Option<String>,
    pub db_connections: Option<i64>,
    pub memory_budget: Option<String>,
    pub working_set: Option<String>,
    #[serde(default)]
    pub grants: Vec<String>,
    /// The tenants the group admits (`*`: every tenant), replacing what it
    /// admitted; left out, the group keeps its list
    /// ([`crate::model::admission`]).
    pub tenants: Option<Vec<String>>,
    pub aging: Option<String>,
    pub min_share: Option<i64>,
    pub recovery_share: Option<i64>,
    pub ramp_every: Option<String>,
    pub max_params: Option<String>,
    pub max_result: Option<String>,
    pub max_error: Option<String>,
    pub max_checkpoint: Option<String>,
    pub max_effect_payload: Option<String>,
    pub max_effect_response: Option<String>,
    pub max_log: Option<String>,
}

/// Size caps from optional byte sizes ("64KiB"), in the order of
/// [`OutputCaps::named`]; a size not given takes its default.
pub fn output_caps(sizes: [Option<&str>; 7]) -> Result<OutputCaps, String> {
    let mut caps = OutputCaps::default();
    let fields = [
        &mut caps.params,
        &mut caps.result,
        &mut caps.error,
        &mut caps.checkpoint,
        &mut caps.effect_payload,
        &mut caps.effect_response,
        &mut caps.log,
    ];
    let names = OutputCaps::default().named();
    for ((field, size), (name, _)) in fields.into_iter().zip(sizes).zip(names) {
        if let Some(size) = size {
            *field = parse_bytes(&format!("max-{name}"), size)? as u64;
        }
    }
    match caps.problem() {
        Some(problem) => Err(problem),
        None => Ok(caps),
    }
}

/// The groups and tenants a file declares, in file order; an error names
/// the group and the field (`group 'logistics': memory_budget: '0' must be
/// positive`).
pub fn parse(text: &str) -> Result<GroupsFile, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        format!(
            "groups file is not valid: {}",
            e.to_string().trim_end().replace('\n', " | ")
        )
    })?;
    if file.groups.is_empty() && file.tenants.is_empty() {
        return Err("groups file declares no [[group]] and no [[tenant]]".into());
    }
    let mut seen = std::collections::HashSet::new();
    let mut admits = Vec::new();
    let groups = file
        .groups
        .into_iter()
        .map(|e| {
            if !seen.insert(e.name.clone()) {
                return Err(format!("group '{}' is declared twice", e.name));
            }
            let name = e.name.clone();
            if let Some(tenants) = &e.tenants {
                admitted(tenants).map_err(|problem| format!("group '{name}': {problem}"))?;
                admits.push((name.clone(), tenants.clone()));
            }
            group_of(e).map_err(|problem| format!("group '{name}': {problem}"))
        })
        .collect::<Result<_, _>>()?;
    let mut seen = std::collections::HashSet::new();
    let tenants = file
        .tenants
        .into_iter()
        .map(|t| {
            if !seen.insert(t.name.clone()) {
                return Err(format!("tenant '{}' is declared twice", t.name));
            }
            Ok(TenantQuota {
                tenant: t.name,
                weight: t.weight,
                max_in_flight: t.max_in_flight,
                triggers_per_minute: t.triggers_per_minute,
                fuel_per_hour: t.fuel_per_hour,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(GroupsFile {
        groups,
        tenants,
        admits,
    })
}

/// A group's `tenants` list, each entry checked; an error names the field.
pub fn admitted(tenants: &[String]) -> Result<(), String> {
    for tenant in tenants {
        crate::model::admission::check_entry(tenant).map_err(|e| format!("tenants: {e}"))?;
    }
    Ok(())
}

/// The group `e` declares, every value checked; an error names the field.
pub fn group_of(e: GroupSpec) -> Result<ResourceGroup, String> {
    let bytes =
        |field: &str, text: Option<String>| text.map(|t| parse_bytes(field, &t)).transpose();
    let grants = serde_json::to_string(&e.grants).map_err(|err| format!("grants: {err}"))?;
    Ok(ResourceGroup {
        fuel_per_attempt: e.fuel.unwrap_or(DEFAULT_FUEL),
        memory_bytes: parse_bytes("memory", e.memory.as_deref().unwrap_or(DEFAULT_MEMORY))?,
        deadline_ms: parse_millis(
            "deadline",
            e.deadline.as_deref().unwrap_or(DEFAULT_DEADLINE),
        )?,
        max_concurrency: e.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        grants,
        caps: output_caps([
            e.max_params.as_deref(),
            e.max_result.as_deref(),
            e.max_error.as_deref(),
            e.max_checkpoint.as_deref(),
            e.max_effect_payload.as_deref(),
            e.max_effect_response.as_deref(),
            e.max_log.as_deref(),
        ])?,
        capacity: CapacityInputs {
            connector_rate_per_s: e.connector_rate,
            service_time_ms: e
                .service_time
                .map(|t| parse_millis("service_time", &t))
                .transpose()?,
            db_connections: e.db_connections,
            memory_budget_bytes: bytes("memory_budget", e.memory_budget)?,
            working_set_bytes: bytes("working_set", e.working_set)?,
        },
        aging_ms: e
            .aging
            .map(|t| parse_millis("aging", &t))
            .transpose()?
            .unwrap_or(DEFAULT_AGING_MS),
        shares: GroupShares {
            min_share: e.min_share.unwrap_or(0),
            recovery_share_pct: e
                .recovery_share
                .unwrap_or(GroupShares::default().recovery_share_pct),
            ramp_every_ms: e
                .ramp_every
                .map(|t| parse_millis("ramp_every", &t))
                .transpose()?
                .unwrap_or(GroupShares::default().ramp_every_ms),
        },
        name: e.name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logistics_group_parses_with_defaults_for_the_rest() {
        let groups = parse(
            "[[group]]\nname = \"logistics\"\nconcurrency = 500\nconnector_rate = 50\n\
             service_time = \"2s\"\ndb_connections = 60\nmemory_budget = \"720MiB\"\n\
             working_set = \"18MiB\"\n[[group]]\nname = \"small\"\naging = \"2m\"\n\
             [[tenant]]\nname = \"acme\"\nweight = 3\n",
        )
        .unwrap();
        assert_eq!(groups.tenants, vec![TenantQuota::weighted("acme", 3)]);
        let groups = groups.groups;
        assert_eq!(groups.len(), 2);
        assert_eq!(
            (groups[0].aging_ms, groups[1].aging_ms),
            (DEFAULT_AGING_MS, 120_000)
        );
        let g = &groups[0];
        assert_eq!(g.max_concurrency, 500);
        assert_eq!(g.capacity.memory_budget_bytes, Some(720 << 20));
        assert_eq!(g.capacity.service_time_ms, Some(2_000));
        assert_eq!(groups[1].memory_bytes, 64 << 20);
        assert_eq!(groups[1].max_concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(groups[1].shares, GroupShares::default());
    }

    #[test]
    fn shares_and_tenant_quotas_parse() {
        let file = parse(
            "[[group]]\nname = \"g\"\nmin_share = 4\nrecovery_share = 20\nramp_every = \"1m\"\n\
             [[tenant]]\nname = \"acme\"\ntriggers_per_minute = 600\nfuel_per_hour = 5000\n",
        )
        .unwrap();
        assert_eq!(
            file.groups[0].shares,
            GroupShares {
                min_share: 4,
                recovery_share_pct: 20,
                ramp_every_ms: 60_000,
            }
        );
        let t = &file.tenants[0];
        assert_eq!(
            (t.triggers_per_minute, t.fuel_per_hour),
            (Some(600), Some(5000))
        );
        assert_eq!(
            parse("[[group]]\nname = \"g\"\nramp_every = \"soon\"\n")
                .err()
                .unwrap(),
            "group 'g': ramp_every: duration 'soon': expected a number at 'soon'"
        );
    }

    #[test]
    fn bad_values_name_the_group_and_the_field() {
        let err = |text: &str| parse(text).err().unwrap();
        assert_eq!(
            err("[[group]]\nname = \"g\"\nmemory = \"9999999999GiB\"\n"),
            "group 'g': memory: '9999999999GiB' is too large (at most 8 EiB)"
        );
        assert_eq!(
            err("[[group]]\nname = \"g\"\nworking_set = \"0\"\n"),
            "group 'g': working_set: '0' must be positive"
        );
        assert!(
            err("[[group]]\nname = \"g\"\nmemroy = \"1MiB\"\n").contains("unknown field `memroy`")
        );
        assert!(
            err("[[group]]\nname = \"g\"\nconcurrency = -1e3\n")
                .starts_with("groups file is not valid")
        );
        assert_eq!(
            err("[[group]]\nname = \"g\"\n[[group]]\nname = \"g\"\n"),
            "group 'g' is declared twice"
        );
        assert_eq!(
            err(""),
            "groups file declares no [[group]] and no [[tenant]]"
        );
        assert!(err("[[tenant]]\nname = \"a\"\nwieght = 2\n").contains("unknown field `wieght`"));
    }
}
