//! `paddock audit capabilities`: for each stored component, who pushed it
//! and when, what it imports (each judged against the grants of every
//! group that runs it, [`crate::model::review::verdict`]), what it exports,
//! the jobs and versions that use it, and the connectors it can reach
//! (granted to the group, configured, carrying a credential or not).

use crate::model::capability::CapabilityManifest;
use crate::model::review::{Verdict, verdict};
use crate::model::time::{from_millis, rfc3339};
use crate::store::prelude::*;
use crate::store::{Store, StoreError, StoreResult};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ComponentReport {
    pub digest: String,
    pub size_bytes: i64,
    pub pushed_by: String,
    pub pushed_at: String,
    pub imports: Vec<ImportReport>,
    pub exports: Vec<String>,
    pub used_by: Vec<Use>,
    pub connectors: Vec<Reach>,
}

/// One import, judged in each group that runs the component.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ImportReport {
    pub name: String,
    pub functions: Vec<String>,
    /// By group name.
    pub in_groups: BTreeMap<String, Verdict>,
}

/// A plan version that runs the component.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Use {
    pub job: String,
    pub tenant: String,
    pub version: i64,
    pub group: String,
    pub latest: bool,
}

/// A connector a job of the component asks for, in its group.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Reach {
    pub connector: String,
    pub job: String,
    /// The job's tenant: job ids are names inside a tenant.
    pub tenant: String,
    pub group: String,
    pub granted: bool,
    pub configured: bool,
    /// `header (sha256:…)`, never the value.
    pub secret: Option<String>,
}

/// The report, component by component in digest order.
pub async fn capabilities(store: &Store) -> StoreResult<Vec<ComponentReport>> {
    let secrets = store.connector_secrets().await?;
    let connectors = store.connectors_list().await?;
    let mut versions = Vec::new();
    for job in store.jobs_list().await? {
        for plan in store.plan_versions(&job.tenant, &job.job_id).await? {
            versions.push((job.clone(), plan));
        }
    }
    let mut groups = BTreeMap::new();
    for (_, plan) in &versions {
        if !groups.contains_key(&plan.resource_group)
            && let Some(group) = store.group_get(&plan.resource_group).await?
        {
            groups.insert(plan.resource_group.clone(), group.granted());
        }
    }
    let mut reports = Vec::new();
    for component in store.components_list().await? {
        let manifest: CapabilityManifest = serde_json::from_str(&component.manifest)
            .map_err(|e| StoreError::Conflict(format!("stored manifest unreadable: {e}")))?;
        let runs: Vec<_> = versions
            .iter()
            .filter(|(_, plan)| plan.component_digest == component.digest)
            .collect();
        let used_by: Vec<Use> = runs
            .iter()
            .map(|(job, plan)| Use {
                job: job.job_id.clone(),
                tenant: job.tenant.clone(),
                version: plan.version,
                group: plan.resource_group.clone(),
                latest: plan.version == job.latest_version,
            })
            .collect();
        let imports = manifest
            .imports
            .iter()
            .map(|import| ImportReport {
                name: import.name.clone(),
                functions: import.functions.clone(),
                in_groups: used_by
                    .iter()
                    .filter_map(|u| {
                        let grants = groups.get(&u.group)?;
                        Some((u.group.clone(), verdict(&import.name, grants)))
                    })
                    .collect(),
            })
            .collect();
        let mut reach = Vec::new();
        for (job, plan) in &runs {
            let spec: crate::model::PlanSpec = serde_json::from_str(&plan.spec)
                .map_err(|e| StoreError::Conflict(format!("stored plan unreadable: {e}")))?;
            for name in &spec.connectors {
                if reach.iter().any(|r: &Reach| {
                    &r.connector == name
                        && r.group == plan.resource_group
                        && r.job == job.job_id
                        && r.tenant == job.tenant
                }) {
                    continue;
                }
                reach.push(Reach {
                    connector: name.clone(),
                    job: job.job_id.clone(),
                    tenant: job.tenant.clone(),
                    group: plan.resource_group.clone(),
                    granted: groups
                        .get(&plan.resource_group)
                        .is_some_and(|g| g.connectors.contains(name)),
                    configured: connectors.iter().any(|c| &c.name == name),
                    secret: secrets
                        .iter()
                        .find(|s| &s.connector == name)
                        .map(|s| format!("{} ({})", s.header, s.fingerprint)),
                });
            }
        }
        reports.push(ComponentReport {
            digest: component.digest,
            size_bytes: component.size_bytes,
            pushed_by: component.pushed_by,
            pushed_at: rfc3339(from_millis(component.pushed_at)),
            imports,
            exports: manifest.exports.iter().map(|e| e.name.clone()).collect(),
            used_by,
            connectors: reach,
        });
    }
    Ok(reports)
}

/// What one tenant's jobs may be granted: every group that admits it, with
/// the group's grants (`paddock audit capabilities --by tenant`).
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct TenantGrants {
    pub tenant: String,
    pub groups: Vec<TenantGroup>,
}

/// A group as one tenant may use it.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct TenantGroup {
    pub group: String,
    /// Admitted by name, or by the group's `*` (every tenant).
    pub admitted: String,
    /// Every grant, as the admin wrote it.
    pub grants: Vec<String>,
    /// Each granted connector's credential, as `header (fingerprint)`, or
    /// `None` when it carries none.
    pub credentials: BTreeMap<String, Option<String>>,
}

/// The grants each tenant's jobs may get, tenant by tenant: the tenants
/// with jobs, quotas or a group that names them, and `*` for what any
/// tenant may get.
pub async fn tenant_grants(store: &Store) -> StoreResult<Vec<TenantGrants>> {
    use crate::model::admission::{EVERY_TENANT, admits};
    let secrets = store.connector_secrets().await?;
    let mut admitted = Vec::new();
    let mut tenants = std::collections::BTreeSet::from([EVERY_TENANT.to_string()]);
    for group in store.groups_list().await? {
        let names = store.group_tenants(&group.name).await?;
        tenants.extend(names.iter().cloned());
        admitted.push((group, names));
    }
    tenants.extend(store.jobs_list().await?.into_iter().map(|j| j.tenant));
    tenants.extend(store.tenants_list().await?.into_iter().map(|t| t.tenant));
    let report = tenants
        .into_iter()
        .map(|tenant| {
            let groups = admitted
                .iter()
                .filter(|(_, names)| admits(names, &tenant))
                .map(|(group, names)| {
                    let granted = group.granted();
                    TenantGroup {
                        group: group.name.clone(),
                        admitted: if names.contains(&tenant) {
                            "by name".into()
                        } else {
                            "as every tenant (*)".into()
                        },
                        grants: group.grant_list(),
                        credentials: granted
                            .connectors
                            .iter()
                            .map(|c| {
                                let secret = secrets.iter().find(|s| &s.connector == c);
                                let shown =
                                    secret.map(|s| format!("{} ({})", s.header, s.fingerprint));
                                (c.clone(), shown)
                            })
                            .collect(),
                    }
                })
                .collect();
            TenantGrants { tenant, groups }
        })
        .collect();
    Ok(report)
}
