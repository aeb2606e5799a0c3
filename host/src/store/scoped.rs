//! Reads scoped by tenant, page by page (the HTTP API). A team
//! token's [`TenantScope::Only`] goes into each statement's `WHERE`, so a
//! foreign tenant's row is never read, not read and then dropped; every
//! other caller passes [`TenantScope::Every`]. A row another tenant owns is
//! answered as not found, the same as a row that does not exist.
//!
//! Pages are keyset pages: `before` / `after` is the last key of the
//! previous page, in the order each list is shown (triggers, effects and
//! tickets newest first by id; jobs by id; components by push time).

use super::columns::{effect_columns, exception_columns, trigger_columns};
use super::*;
use crate::model::audit::AuditEntry;
use crate::model::identity::TenantScope;
use crate::model::plan::JobName;
use crate::model::text::Esc;

/// The tenant a scope binds (`NULL`: every tenant).
fn bound(scope: &TenantScope) -> Option<String> {
    match scope {
        TenantScope::Every => None,
        TenantScope::Only(tenant) => Some(tenant.clone()),
    }
}

/// Whether a component (`c`) is visible to tenant `?1`: pushed by it, or
/// used by one of its jobs' plan versions.
macro_rules! component_visible {
    () => {
        "(?1 IS NULL \
          OR EXISTS (SELECT 1 FROM component_tenants o WHERE o.digest = c.digest AND o.tenant = ?1) \
          OR EXISTS (SELECT 1 FROM plan_versions p \
                     WHERE p.component_digest = c.digest AND p.tenant = ?1))"
    };
}

/// A component's columns as tenant `?1` sees them: who pushed it and when
/// is its own tenant's push (`component_tenants`), never another tenant's
/// token name; a component its tenant only uses was pushed by "another
/// tenant". Every tenant's callers see the first push.
macro_rules! component_columns_for {
    () => {
        "c.digest, c.size_bytes, c.manifest, \
         CASE WHEN ?1 IS NULL THEN c.pushed_by ELSE coalesce((SELECT o.pushed_by \
           FROM component_tenants o WHERE o.digest = c.digest AND o.tenant = ?1), \
           'another tenant') END AS pushed_by, \
         CASE WHEN ?1 IS NULL THEN c.pushed_at ELSE coalesce((SELECT o.pushed_at \
           FROM component_tenants o WHERE o.digest = c.digest AND o.tenant = ?1), \
           c.pushed_at) END AS pushed_at"
    };
}

impl Store {
    /// Triggers newest first, with ids below `before`.
    pub async fn triggers_page_for(
        &self,
        scope: &TenantScope,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<TriggerRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE (?1 IS NULL OR tenant = ?1) AND id < ?2 \
             ORDER BY id DESC LIMIT CAST(?3 AS INTEGER)"
        )))
        .bind(bound(scope))
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One trigger, if the scope admits its tenant.
    pub async fn trigger_get_for(
        &self,
        scope: &TenantScope,
        id: i64,
    ) -> StoreResult<TriggerRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)"
        )))
        .bind(id)
        .bind(bound(scope))
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger {id}")))
    }

    /// Jobs by id and tenant, after `after` (a job's qualified name,
    /// `tenant/job`, as the previous page ended).
    pub async fn jobs_page_for(
        &self,
        scope: &TenantScope,
        after: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<JobRecord>> {
        let (after_tenant, after_job) = match after.map(JobName::parse) {
            Some(Ok(JobName { tenant, job })) => (tenant.unwrap_or_default(), job),
            Some(Err(why)) => return Err(StoreError::OutOfBounds(why)),
            None => (String::new(), String::new()),
        };
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, tenant, latest_version, created_at FROM jobs \
             WHERE (?1 IS NULL OR tenant = ?1) \
               AND (job_id > ?2 OR (job_id = ?2 AND tenant > ?3)) \
             ORDER BY job_id, tenant LIMIT CAST(?4 AS INTEGER)",
        ))
        .bind(bound(scope))
        .bind(after_job)
        .bind(after_tenant)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The job a person names (`JOB` or `TENANT/JOB`), if the scope admits
    /// its tenant. A team's bare name is its own tenant's job; a bare name
    /// several tenants use is refused with the qualified names to choose
    /// from (only a caller who sees every tenant can meet that). A job of
    /// another tenant is answered as not found, the same as no job.
    pub async fn job_get_for(&self, scope: &TenantScope, name: &str) -> StoreResult<JobRecord> {
        let name = JobName::parse(name).map_err(StoreError::OutOfBounds)?;
        let not_found = || StoreError::NotFound(format!("job '{}'", Esc(&name.to_string())));
        let tenant = match (bound(scope), name.tenant.clone()) {
            (Some(mine), Some(named)) if mine != named => return Err(not_found()),
            (mine, named) => named.or(mine),
        };
        if let Some(tenant) = tenant {
            return self
                .job_get(&tenant, &name.job)
                .await?
                .ok_or_else(not_found);
        }
        let mut found = self.jobs_named(&name.job).await?;
        match found.len() {
            0 => Err(not_found()),
            1 => Ok(found.remove(0)),
            _ => Err(StoreError::Conflict(format!(
                "job '{}' exists in {} tenants; name one: {}",
                Esc(&name.job),
                found.len(),
                found
                    .iter()
                    .map(JobRecord::qualified)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Components in push order, after `(pushed_at, digest)`.
    pub async fn components_page_for(
        &self,
        scope: &TenantScope,
        after: Option<(i64, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<ComponentRecord>> {
        let (at, digest) = after.unwrap_or((i64::MIN, ""));
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            component_columns_for!(),
            " FROM components c WHERE ",
            component_visible!(),
            " AND (pushed_at > ?2 OR (pushed_at = ?2 AND digest > ?3)) \
             ORDER BY pushed_at, digest LIMIT CAST(?4 AS INTEGER)"
        )))
        .bind(bound(scope))
        .bind(at)
        .bind(digest)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One component, if the scope's tenant may see it.
    pub async fn component_get_for(
        &self,
        scope: &TenantScope,
        digest: &str,
    ) -> StoreResult<ComponentRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            component_columns_for!(),
            " FROM components c WHERE ",
            component_visible!(),
            " AND digest = ?2"
        )))
        .bind(bound(scope))
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("component sha256:{digest}")))
    }

    /// Record that `tenant` pushed the component `digest` (a team token's
    /// push), by `actor`; pushing it again changes nothing.
    pub async fn component_owner_add(
        &self,
        digest: &str,
        tenant: &str,
        actor: &str,
    ) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO component_tenants (digest, tenant, pushed_by, pushed_at) VALUES (?, ?, ?, ",
            super::dialect::now_ms!(),
            ") ON CONFLICT (digest, tenant) DO NOTHING"
        )))
        .bind(digest)
        .bind(tenant)
        .bind(actor)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Effects newest first, with ids below `before`, of the scope's
    /// tenants' triggers.
    pub async fn effects_page_for(
        &self,
        scope: &TenantScope,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<EffectRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE (?1 IS NULL OR tenant = ?1) AND id < ?2 \
             ORDER BY id DESC LIMIT CAST(?3 AS INTEGER)"
        )))
        .bind(bound(scope))
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Exception tickets newest first, with ids below `before`, optionally
    /// in one state. A team token sees the tickets of its own triggers (a
    /// ticket about no trigger is nobody's tenant's).
    pub async fn exceptions_page_for(
        &self,
        scope: &TenantScope,
        state: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<ExceptionRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR state = ?2) \
             AND id < ?3 ORDER BY id DESC LIMIT CAST(?4 AS INTEGER)"
        )))
        .bind(bound(scope))
        .bind(state)
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One ticket, if the scope admits its trigger's tenant.
    pub async fn exception_get_for(
        &self,
        scope: &TenantScope,
        id: i64,
    ) -> StoreResult<ExceptionRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            exception_columns!(),
            " FROM exceptions WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)"
        )))
        .bind(id)
        .bind(bound(scope))
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("exception {id}")))
    }

    /// One effect by its idempotency key in `tenant`'s namespace, if the
    /// scope admits that tenant. A team's scope names its tenant itself
    /// (`tenant`, if given, must be the same); a caller of every tenant may
    /// leave it out while only one tenant has the key, and is asked to name
    /// one when several do.
    pub async fn effect_get_for(
        &self,
        scope: &TenantScope,
        tenant: Option<&str>,
        key: &str,
    ) -> StoreResult<EffectRecord> {
        let not_found = || StoreError::NotFound(format!("effect '{key}'"));
        let tenant = match (bound(scope), tenant) {
            (Some(own), Some(asked)) if own != asked => return Err(not_found()),
            (Some(own), _) => Some(own),
            (None, asked) => asked.map(str::to_string),
        };
        let mut found: Vec<EffectRecord> = sqlx::query_as(self.sql(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE idempotency_key = ?1 AND (?2 IS NULL OR tenant = ?2) \
             ORDER BY tenant LIMIT 2"
        )))
        .bind(key)
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        match found.len() {
            0 => Err(not_found()),
            1 => Ok(found.remove(0)),
            _ => Err(StoreError::Conflict(format!(
                "effect key '{key}' is recorded in more than one tenant: name the tenant \
                 (`--tenant T`, or `?tenant=T` in the API)"
            ))),
        }
    }

    /// The components the scope may see whose digest starts with `prefix`
    /// (hex digits), at most `limit` (`component diff` by prefix).
    pub async fn components_by_prefix_for(
        &self,
        scope: &TenantScope,
        prefix: &str,
        limit: i64,
    ) -> StoreResult<Vec<ComponentRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            component_columns_for!(),
            " FROM components c WHERE ",
            component_visible!(),
            " AND substr(digest, 1, length(?2)) = ?2 ORDER BY digest LIMIT CAST(?3 AS INTEGER)"
        )))
        .bind(bound(scope))
        .bind(prefix)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Skipped fire times newest first, optionally of one job, of the
    /// scope's tenants' jobs.
    pub async fn skipped_list_for(
        &self,
        scope: &TenantScope,
        job: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<SkippedFire>> {
        // A filter naming no job the scope sees lists nothing (a list is
        // never "not found").
        let job = match job.map(|name| self.job_get_for(scope, name)) {
            Some(found) => match found.await {
                Ok(job) => Some(job),
                Err(StoreError::NotFound(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e),
            },
            None => None,
        };
        Ok(sqlx::query_as(self.sql(
            "SELECT tenant, job_id, plan_version, scheduled_at, reason FROM skipped_fires \
             WHERE (?1 IS NULL OR (tenant = ?1 AND job_id = ?2)) AND (?3 IS NULL OR tenant = ?3) \
             ORDER BY scheduled_at DESC LIMIT CAST(?4 AS INTEGER)",
        ))
        .bind(job.as_ref().map(|j| j.tenant.clone()))
        .bind(job.as_ref().map(|j| j.job_id.clone()))
        .bind(bound(scope))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Skipped fire times by reason, of the scope's tenants' jobs.
    pub async fn skipped_counts_for(&self, scope: &TenantScope) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT reason, count(*) FROM skipped_fires WHERE (?1 IS NULL OR tenant = ?1) \
             GROUP BY reason ORDER BY reason",
        ))
        .bind(bound(scope))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Audit entries in chain order after `after_seq` (not tenant data:
    /// reviewers, operators and admins read it whole).
    pub async fn audit_page(&self, after_seq: i64, limit: usize) -> StoreResult<Vec<AuditEntry>> {
        let mut entries = self.audit_from_seq(after_seq.saturating_add(1)).await?;
        entries.truncate(limit);
        Ok(entries)
    }
}
