//! `paddock group ...` and `paddock tenant ...`: resource groups (their
//! limits, shares and recovery lane) and tenants (weights and quotas).

use super::{Host, millis_arg, parse_bytes, print};
use anyhow::Context;
use clap::Subcommand;
use paddock::api::views::group_view;
use paddock::api::wire::GroupView;
use paddock::model::ResourceGroup;
use paddock::model::group::{CapacityInputs, TenantQuota};
use paddock::model::shares::GroupShares;
use paddock::registry::groups_file::{
    DEFAULT_CONCURRENCY, DEFAULT_DEADLINE, DEFAULT_FUEL, DEFAULT_MEMORY, GroupSpec,
};
use paddock::store::GroupLoad;
use paddock::store::prelude::*;
use std::path::PathBuf;

// Parsed once per process: the size of `Set` costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum GroupCmd {
    /// Create or change a resource group.
    Set {
        name: String,
        /// Fuel per attempt.
        #[arg(long, default_value_t = DEFAULT_FUEL)]
        fuel: i64,
        /// Memory cap per attempt, in bytes (suffixes KiB/MiB/GiB accepted).
        #[arg(long, default_value = DEFAULT_MEMORY)]
        memory: String,
        /// Wall-clock deadline per attempt (e.g. 60s).
        #[arg(long, default_value = DEFAULT_DEADLINE)]
        deadline: String,
        /// Attempts of this group running at once, at most (the configured
        /// max; the effective concurrency may be lower, see `group show`).
        #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
        concurrency: i64,
        /// The downstream connector's stable rate, calls per second.
        #[arg(long)]
        connector_rate: Option<f64>,
        /// The expected service time of one attempt (e.g. 2s); with
        /// --connector-rate it limits the group to rate × service time.
        #[arg(long)]
        service_time: Option<String>,
        /// Database connections reserved for the group (each attempt holds one).
        #[arg(long)]
        db_connections: Option<i64>,
        /// Memory the group's attempts may use together (e.g. 720MiB).
        #[arg(long)]
        memory_budget: Option<String>,
        /// One attempt's working set (e.g. 18MiB); the observed peak replaces it.
        #[arg(long)]
        working_set: Option<String>,
        /// Fair shares between the group's tenants: a tenant kept waiting
        /// this long gains one slot's worth of priority on its equals.
        #[arg(long, default_value = "60s")]
        aging: String,
        /// A capability to grant the group's jobs (repeatable): clocks,
        /// random, stdio, env:NAME=VALUE, connector:NAME. Replaces the
        /// group's grants; `group grant` adds to them.
        #[arg(long = "grant")]
        grants: Vec<String>,
        /// Slots guaranteed to the group: while it runs fewer, its work
        /// goes before other groups' beyond their own minimum.
        #[arg(long, default_value_t = 0)]
        min_share: i64,
        /// The recovery lane's share (catch-up fires, backfills, retries)
        /// of the group's effective concurrency while fresh work waits, in
        /// percent.
        #[arg(long, default_value_t = paddock::model::shares::DEFAULT_RECOVERY_SHARE_PCT)]
        recovery_share: i64,
        /// How long the group must stay healthy before the recovery ramp
        /// steps up (10% → 25% → 50% → 100%); also the least time between
        /// two of its moves.
        #[arg(long, default_value = "30s")]
        ramp_every: String,
        /// Size caps (e.g. 64KiB), each defaulting as `group show` lists:
        /// a plan's or trigger's params, a run's result, its error message,
        /// a checkpoint, an effect's payload and response, the job log.
        #[command(flatten)]
        caps: CapFlags,
    },
    /// Create or change the groups a TOML file declares (`[[group]]` tables
    /// with the flags of `group set` as fields); every value is checked
    /// before any group is stored.
    Apply { file: PathBuf },
    /// Grant capabilities to a group's jobs (audited): clocks, random,
    /// stdio, env:NAME=VALUE, connector:NAME.
    Grant {
        name: String,
        #[arg(required = true)]
        grants: Vec<String>,
    },
    /// Take grants back (audited); running attempts keep what they had,
    /// the next call to a revoked connector gets `not-granted`.
    Revoke {
        name: String,
        #[arg(required = true)]
        grants: Vec<String>,
    },
    /// Admit tenants to a group (audited): only the tenants a group admits
    /// may apply jobs into it and run there ('*' admits every tenant).
    Allow {
        name: String,
        /// A tenant to admit (repeatable).
        #[arg(long = "tenant", required = true)]
        tenants: Vec<String>,
    },
    /// Stop admitting tenants (audited): their jobs' next attempts in the
    /// group fail, saying why, before any guest code runs.
    Disallow {
        name: String,
        #[arg(long = "tenant", required = true)]
        tenants: Vec<String>,
    },
    /// List resource groups.
    List,
    /// Show a group: each input of its effective concurrency, the result,
    /// which input binds, and how many of its attempts run now.
    Show { name: String },
}

/// `--max-*`: the group's size caps.
#[derive(clap::Args)]
pub struct CapFlags {
    #[arg(long)]
    max_params: Option<String>,
    #[arg(long)]
    max_result: Option<String>,
    #[arg(long)]
    max_error: Option<String>,
    #[arg(long)]
    max_checkpoint: Option<String>,
    #[arg(long)]
    max_effect_payload: Option<String>,
    #[arg(long)]
    max_effect_response: Option<String>,
    #[arg(long)]
    max_log: Option<String>,
}

impl CapFlags {
    /// Into a group's declaration (`--server`: `PUT /v1/groups/{name}`).
    pub fn fill(self, spec: &mut GroupSpec) {
        spec.max_params = self.max_params;
        spec.max_result = self.max_result;
        spec.max_error = self.max_error;
        spec.max_checkpoint = self.max_checkpoint;
        spec.max_effect_payload = self.max_effect_payload;
        spec.max_effect_response = self.max_effect_response;
        spec.max_log = self.max_log;
    }

    fn caps(&self) -> anyhow::Result<paddock::model::caps::OutputCaps> {
        paddock::registry::groups_file::output_caps([
            self.max_params.as_deref(),
            self.max_result.as_deref(),
            self.max_error.as_deref(),
            self.max_checkpoint.as_deref(),
            self.max_effect_payload.as_deref(),
            self.max_effect_response.as_deref(),
            self.max_log.as_deref(),
        ])
        .map_err(anyhow::Error::msg)
    }
}

#[derive(Subcommand)]
pub enum TenantCmd {
    /// Set a tenant's weight: inside each group, tenants share the room by
    /// weight (a tenant never set weighs 1).
    Set {
        name: String,
        /// Its weight in each group's fair shares.
        #[arg(long, default_value_t = 1)]
        weight: i64,
        /// Attempts of the tenant running at once, across groups (a claim
        /// takes no more; its triggers wait, the reason shown by `trigger show`).
        #[arg(long)]
        max_in_flight: Option<i64>,
        /// Manual/API triggers the tenant may create per minute; one over
        /// it is created but waits (its due time moves to when the minute
        /// admits it).
        #[arg(long)]
        triggers_per_minute: Option<i64>,
        /// Guest fuel the tenant may burn per hour across its attempts; over
        /// it, its triggers wait until the last hour's usage falls below.
        #[arg(long)]
        fuel_per_hour: Option<i64>,
    },
    /// List the tenants whose weight or quota was set.
    List,
}

/// `group grant` / `group revoke`: the change, then what the group grants.
async fn grant(
    host: &Host,
    name: &str,
    add: &[String],
    remove: &[String],
    actor: &str,
) -> anyhow::Result<()> {
    let now = host.registry.group_grant(name, add, remove, actor).await?;
    print_grants(name, &now);
    Ok(())
}

/// What a group grants after `group grant` / `group revoke`.
pub fn print_grants(name: &str, now: &[String]) {
    let now = if now.is_empty() {
        "nothing".to_string()
    } else {
        now.join(", ")
    };
    println!("group {0} grants: {1}", name, now);
}

/// `group show`, from the database or `GET /v1/groups/{name}`.
pub fn print_group(v: &GroupView) {
    let load = GroupLoad {
        effective_concurrency: v.effective_concurrency,
        effective_binding: v.effective_binding.clone(),
        running: v.running,
    };
    print::group_show(&v.group, &v.observed, &load, v.pool);
    print::group_shares(&v.group, &load, &v.ramp, v.held.as_deref(), v.holds);
    println!(
        "  process high-water holds so far: {} (db pool), {} (guest memory)",
        v.held_pool, v.held_memory
    );
}

/// A group just set: what claims enforce now.
pub fn print_set(name: &str, effective: i64, binding: &str) {
    println!(
        "group {0} set: effective concurrency {1} (bound by {2})",
        name, effective, binding
    );
}

/// `paddock group ...`
pub async fn group(host: &Host, cmd: GroupCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        GroupCmd::Set {
            name,
            fuel,
            memory,
            deadline,
            concurrency,
            connector_rate,
            service_time,
            db_connections,
            memory_budget,
            working_set,
            aging,
            grants,
            min_share,
            recovery_share,
            ramp_every,
            caps,
        } => {
            let bytes = |field: &str, text: Option<String>| {
                text.map(|t| parse_bytes(field, &t)).transpose()
            };
            let group = ResourceGroup {
                name: name.clone(),
                fuel_per_attempt: fuel,
                memory_bytes: parse_bytes("memory", &memory)?,
                deadline_ms: millis_arg("deadline", &deadline)?,
                max_concurrency: concurrency,
                grants: serde_json::to_string(&grants)?,
                caps: caps.caps()?,
                capacity: CapacityInputs {
                    connector_rate_per_s: connector_rate,
                    service_time_ms: service_time
                        .map(|t| millis_arg("service-time", &t))
                        .transpose()?,
                    db_connections,
                    memory_budget_bytes: bytes("memory-budget", memory_budget)?,
                    working_set_bytes: bytes("working-set", working_set)?,
                },
                aging_ms: millis_arg("aging", &aging)?,
                shares: GroupShares {
                    min_share,
                    recovery_share_pct: recovery_share,
                    ramp_every_ms: millis_arg("ramp-every", &ramp_every)?,
                },
            };
            let capacity = host.registry.group_put(group, actor).await?;
            print_set(&name, capacity.effective, capacity.binding);
        }
        GroupCmd::Grant { name, grants } => grant(host, &name, &grants, &[], actor).await?,
        GroupCmd::Revoke { name, grants } => grant(host, &name, &[], &grants, actor).await?,
        GroupCmd::Allow { name, tenants } => {
            let now = host
                .registry
                .group_tenants(&name, &tenants, &[], actor)
                .await?;
            print_tenants_of(&name, &now);
        }
        GroupCmd::Disallow { name, tenants } => {
            let now = host
                .registry
                .group_tenants(&name, &[], &tenants, actor)
                .await?;
            print_tenants_of(&name, &now);
        }
        GroupCmd::Apply { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read '{}'", file.display()))?;
            let (applied, tenants) = host.registry.groups_apply(&text, actor).await?;
            print::tenants(&tenants);
            for (name, capacity) in applied {
                print_set(&name, capacity.effective, capacity.binding);
            }
        }
        GroupCmd::Show { name } => {
            let pool = i64::from(host.sandbox.config().max_instances);
            let Some(view) = group_view(&host.store, &name, pool).await? else {
                anyhow::bail!("no resource group named '{name}'");
            };
            print_group(&view);
        }
        GroupCmd::List => print::groups(&host.store.groups_list().await?),
    }
    Ok(())
}

/// The tenants a group admits now, after `group allow` / `disallow`.
pub fn print_tenants_of(group: &str, tenants: &[String]) {
    if tenants.is_empty() {
        println!(
            "group {0} admits no tenant (`paddock group allow {0} --tenant T`)",
            group
        );
    } else {
        println!("group {0} admits: {1}", group, tenants.join(", "));
    }
}

/// `paddock tenant ...`
pub async fn tenant(host: &Host, cmd: TenantCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        TenantCmd::Set {
            name,
            weight,
            max_in_flight,
            triggers_per_minute,
            fuel_per_hour,
        } => {
            let tenant = TenantQuota {
                tenant: name,
                weight,
                max_in_flight,
                triggers_per_minute,
                fuel_per_hour,
            };
            host.registry.tenant_put(&tenant, actor).await?;
            print::tenants(&[tenant]);
        }
        TenantCmd::List => print::tenants(&host.store.tenants_list().await?),
    }
    Ok(())
}
