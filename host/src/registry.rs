//! The registry: components, jobs, immutable plan versions and resource
//! groups — what admins and teams register, and what security reviewers
//! audit.
//!
//! Invariants:
//! - components are content-addressed by sha256 and immutable; pushing the
//!   same bytes again is an idempotent hit;
//! - a component is stored only after it compiled, type-checked against the
//!   host's WIT, and imports nothing the host does not provide;
//! - plan versions are immutable; see [`manifest`] for what re-applying
//!   means. Every registration and every refusal is in the audit log.

pub mod groups_file;
pub mod manifest;
pub mod report;

use crate::model::capability::{self, CapabilityManifest};
use crate::model::group::{Capacity, TenantQuota};
use crate::model::plan::sha256_hex;
use crate::model::{ApplyOutcome, ResourceGroup};
use crate::sandbox::{Sandbox, SandboxError};
use crate::schedule::{Kind, ScheduleSpec};
use crate::store::{ControlStore, Store, StoreError, capacity_now};
use manifest::{JobManifest, ManifestError};
use std::path::Path;
use std::sync::Arc;

/// Why a registration was refused. Each message is whole (it includes its
/// cause's text) and no variant returns a `source()`; see the rule where the
/// binary prints errors (`src/bin/paddock/main.rs`).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The sandbox refused the component (not wasm, a core module, invalid,
    /// imports the host does not provide).
    #[error("component refused: {0}")]
    Component(SandboxError),
    #[error(transparent)]
    Capability(#[from] capability::CapabilityError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read '{path}': {error}")]
    Io { path: String, error: std::io::Error },
    #[error("unknown resource group '{0}'; create it with `paddock group set {0} ...`")]
    UnknownGroup(String),
    #[error("no component sha256:{0} has been pushed")]
    UnknownComponent(String),
    #[error("resource group '{name}': {problem}")]
    BadGroup { name: String, problem: String },
    #[error("{0}")]
    GroupsFile(String),
    #[error("tenant '{name}': {problem}")]
    BadTenant { name: String, problem: String },
    /// The job's group does not admit the job's tenant.
    #[error("{}", crate::model::admission::refusal(group, tenant))]
    NotAdmitted { group: String, tenant: String },
}

// By hand, not `#[from]`: the message already shows the sandbox's text,
// so the sandbox error must not also be the `source()`.
impl From<SandboxError> for RegistryError {
    fn from(error: SandboxError) -> Self {
        Self::Component(error)
    }
}

/// What a push did.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub digest: String,
    pub created: bool,
    pub manifest: CapabilityManifest,
}

/// The admin-side operations, over the store and the sandbox (which checks
/// components).
#[derive(Clone)]
pub struct Registry {
    store: Arc<dyn ControlStore>,
    sandbox: Arc<Sandbox>,
}

impl Registry {
    pub fn new(store: Store, sandbox: Arc<Sandbox>) -> Self {
        Self {
            store: Arc::new(store),
            sandbox,
        }
    }

    /// The instance pool of this process's sandbox (`paddock group show`'s
    /// "as it would be in this process").
    pub fn instance_pool(&self) -> i64 {
        i64::from(self.sandbox.config().max_instances)
    }

    /// Check and store a component. Nothing is stored if any check fails.
    pub async fn component_push(&self, bytes: &[u8], actor: &str) -> Result<Pushed, RegistryError> {
        let digest = sha256_hex(bytes);
        if let Some(existing) = self.store.component_get(&digest).await? {
            // Same bytes, same verdict: still record the idempotent hit.
            self.store
                .component_put(&digest, bytes, &existing.manifest, actor)
                .await?;
            let manifest = serde_json::from_str(&existing.manifest)
                .map_err(|e| StoreError::Conflict(format!("stored manifest unreadable: {e}")))?;
            return Ok(Pushed {
                digest,
                created: false,
                manifest,
            });
        }
        let (_, manifest) = match self.sandbox.inspect(bytes) {
            Ok(checked) => checked,
            Err(error) => {
                self.store
                    .audit_record(
                        actor,
                        "component.rejected",
                        &format!("sha256:{digest}"),
                        serde_json::json!({ "reason": error.to_string() }),
                    )
                    .await?;
                return Err(error.into());
            }
        };
        let json = serde_json::to_string(&manifest).expect("manifest serialises");
        let created = self
            .store
            .component_put(&digest, bytes, &json, actor)
            .await?;
        Ok(Pushed {
            digest,
            created,
            manifest,
        })
    }

    pub async fn component_push_file(
        &self,
        path: &Path,
        actor: &str,
    ) -> Result<Pushed, RegistryError> {
        let bytes = std::fs::read(path).map_err(|error| RegistryError::Io {
            path: path.display().to_string(),
            error,
        })?;
        self.component_push(&bytes, actor).await
    }

    /// Apply a job manifest read from `path` (component paths in it are
    /// relative to the manifest's folder).
    pub async fn job_apply_file(
        &self,
        path: &Path,
        actor: &str,
    ) -> Result<(String, ApplyOutcome), RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|error| RegistryError::Io {
            path: path.display().to_string(),
            error,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        self.job_apply(&text, base, actor).await
    }

    /// Apply a job manifest: parse, resolve the component, check its
    /// capabilities against the group's grants, then store or hit.
    pub async fn job_apply(
        &self,
        text: &str,
        base: &Path,
        actor: &str,
    ) -> Result<(String, ApplyOutcome), RegistryError> {
        let manifest = JobManifest::parse(text)?;
        let digest = match manifest.component.strip_prefix("sha256:") {
            Some(d) => d.to_string(),
            None => {
                self.component_push_file(&base.join(&manifest.component), actor)
                    .await?
                    .digest
            }
        };
        self.store
            .component_get(&digest)
            .await?
            .ok_or_else(|| RegistryError::UnknownComponent(digest.clone()))?;
        let group = self
            .store
            .group_get(&manifest.resource_group)
            .await?
            .ok_or_else(|| RegistryError::UnknownGroup(manifest.resource_group.clone()))?;
        let admitted = self.store.group_tenants(&group.name).await?;
        let checked = if crate::model::admission::admits(&admitted, &manifest.tenant) {
            capability::check_granted(
                &manifest.connectors,
                &manifest.capabilities,
                &group.name,
                &group.granted(),
            )
            .map_err(RegistryError::from)
        } else {
            Err(RegistryError::NotAdmitted {
                group: group.name.clone(),
                tenant: manifest.tenant.clone(),
            })
        };
        if let Err(error) = checked {
            self.store
                .audit_record(
                    actor,
                    "plan.rejected",
                    &crate::model::plan::JobName::qualified(&manifest.tenant, &manifest.id),
                    serde_json::json!({ "reason": error.to_string() }),
                )
                .await?;
            return Err(error);
        }
        let spec = manifest.to_spec(&digest)?;
        crate::model::caps::OutputCaps::check(
            "the manifest's [params]",
            spec.params.to_string().len(),
            group.caps.params,
        )
        .map_err(|problem| {
            RegistryError::Manifest(ManifestError::Field {
                field: "params".into(),
                problem: format!(
                    "{problem} (group '{}'; `paddock group set {} --max-params SIZE` raises it)",
                    group.name, group.name
                ),
            })
        })?;
        let schedule = ScheduleSpec::of_plan(&spec).map_err(StoreError::Conflict)?;
        let schedule_json =
            (schedule.trigger.kind() != Kind::Manual).then(|| schedule.canonical_json());
        let outcome = self
            .store
            .plan_apply(
                &manifest.id,
                &spec,
                schedule_json.as_deref(),
                manifest.version,
                actor,
            )
            .await?;
        Ok((manifest.id, outcome))
    }

    /// Create or change a resource group, refusing limits the sandbox
    /// cannot honour. Returns the effective concurrency it now runs under.
    pub async fn group_put(
        &self,
        group: ResourceGroup,
        actor: &str,
    ) -> Result<Capacity, RegistryError> {
        self.group_check(&group)?;
        self.group_store(&group, actor).await
    }

    /// `paddock group grant` / `group revoke`: add and remove grants
    /// ([`crate::model::grants`]), each checked, stored and audited with
    /// the rest of the group. Returns the grants now in force.
    pub async fn group_grant(
        &self,
        name: &str,
        add: &[String],
        remove: &[String],
        actor: &str,
    ) -> Result<Vec<String>, RegistryError> {
        let mut group = self
            .store
            .group_get(name)
            .await?
            .ok_or_else(|| RegistryError::UnknownGroup(name.to_string()))?;
        for grant in add {
            crate::model::grants::Grant::parse(grant).map_err(|problem| {
                RegistryError::BadGroup {
                    name: name.to_string(),
                    problem,
                }
            })?;
        }
        let mut grants = group.grant_list();
        grants.retain(|g| !remove.contains(g));
        for grant in add {
            if !grants.contains(grant) {
                grants.push(grant.clone());
            }
        }
        grants.sort();
        group.grants = serde_json::to_string(&grants).expect("strings serialize");
        self.group_put(group, actor).await?;
        Ok(grants)
    }

    /// `paddock group allow` / `group disallow`: admit tenants to a group
    /// and stop admitting others ([`crate::model::admission`]), each
    /// change audited. Returns the tenants the group admits now. Jobs
    /// already applied in the group stop at their next attempt when their
    /// tenant is no longer admitted.
    pub async fn group_tenants(
        &self,
        name: &str,
        allow: &[String],
        disallow: &[String],
        actor: &str,
    ) -> Result<Vec<String>, RegistryError> {
        for tenant in allow.iter().chain(disallow) {
            crate::model::admission::check_entry(tenant).map_err(|problem| {
                RegistryError::BadGroup {
                    name: name.to_string(),
                    problem,
                }
            })?;
        }
        if self.store.group_get(name).await?.is_none() {
            return Err(RegistryError::UnknownGroup(name.to_string()));
        }
        for tenant in disallow {
            self.store
                .group_tenant_set(name, tenant, false, actor)
                .await?;
        }
        for tenant in allow {
            self.store
                .group_tenant_set(name, tenant, true, actor)
                .await?;
        }
        Ok(self.store.group_tenants(name).await?)
    }

    /// Store a checked group with the effective concurrency claims enforce
    /// from now on ([`capacity_now`]: its inputs and what its recent
    /// attempts measured).
    async fn group_store(
        &self,
        group: &ResourceGroup,
        actor: &str,
    ) -> Result<Capacity, RegistryError> {
        let (_, capacity) = capacity_now(&*self.store, group).await?;
        self.store.group_put(group, &capacity, actor).await?;
        Ok(capacity)
    }

    /// Set a tenant's weight in its groups' fair shares and its quota
    /// (`paddock tenant set`), audited.
    pub async fn tenant_put(&self, tenant: &TenantQuota, actor: &str) -> Result<(), RegistryError> {
        tenant_check(tenant)?;
        self.store.tenant_put(tenant, actor).await?;
        Ok(())
    }

    /// `paddock group apply`: every group a file declares
    /// ([`groups_file`]), each checked before any is stored, each stored
    /// and audited as [`Registry::group_put`] does.
    pub async fn groups_apply(
        &self,
        text: &str,
        actor: &str,
    ) -> Result<(Vec<(String, Capacity)>, Vec<TenantQuota>), RegistryError> {
        let file = groups_file::parse(text).map_err(RegistryError::GroupsFile)?;
        for group in &file.groups {
            self.group_check(group)?;
        }
        for tenant in &file.tenants {
            tenant_check(tenant)?;
        }
        for tenant in &file.tenants {
            self.store.tenant_put(tenant, actor).await?;
        }
        let mut applied = Vec::with_capacity(file.groups.len());
        for group in &file.groups {
            applied.push((group.name.clone(), self.group_store(group, actor).await?));
        }
        for (group, tenants) in &file.admits {
            self.store
                .group_tenants_replace(group, tenants, actor)
                .await?;
        }
        Ok((applied, file.tenants))
    }

    /// The checks of [`Registry::group_put`], each naming its field.
    fn group_check(&self, group: &ResourceGroup) -> Result<(), RegistryError> {
        let bad = |problem: String| RegistryError::BadGroup {
            name: group.name.clone(),
            problem,
        };
        let ceiling = self.sandbox.config().memory_ceiling_bytes;
        if group.memory_bytes <= 0 || group.memory_bytes as u64 > ceiling {
            return Err(bad(format!(
                "memory must be between 1 byte and the host's ceiling of {ceiling} bytes"
            )));
        }
        use crate::model::bounds::{AGING, Bound, CONCURRENCY, DEADLINE, FUEL};
        if let Some(problem) = Bound::first_problem([
            (&FUEL, Some(group.fuel_per_attempt)),
            (&DEADLINE, Some(group.deadline_ms)),
            (&CONCURRENCY, Some(group.max_concurrency)),
            (&AGING, Some(group.aging_ms)),
        ]) {
            return Err(bad(problem));
        }
        match serde_json::from_str::<Vec<String>>(&group.grants) {
            Ok(grants) => {
                crate::model::grants::Grants::parse(&grants).map_err(bad)?;
            }
            Err(_) => return Err(bad("grants must be a JSON array of strings".into())),
        }
        if let Some(problem) = group.capacity.problem() {
            return Err(bad(problem));
        }
        if let Some(problem) = group.shares.problem(group.max_concurrency) {
            return Err(bad(problem));
        }
        Ok(())
    }
}

/// A tenant's name, weight and quota, each checked by name.
fn tenant_check(tenant: &TenantQuota) -> Result<(), RegistryError> {
    let bad = |problem: String| RegistryError::BadTenant {
        name: tenant.tenant.clone(),
        problem,
    };
    manifest::check_tenant(&tenant.tenant).map_err(|e| bad(e.to_string()))?;
    match tenant.problem() {
        Some(problem) => Err(bad(problem)),
        None => Ok(()),
    }
}
