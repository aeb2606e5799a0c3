//! People's writes ([`ControlStore`]): registrations (components, plan
//! versions and the schedules they register), resource groups and
//! connectors, manual triggers, approvals and cancels, exception-ticket
//! resolutions — each committed with its audit entry in one transaction.

use super::columns::connector_columns;
use super::dialect::{new_trigger_id, now_ms};
use super::state_log::{Created, StateChange};
use super::*;
use crate::model::caps::OutputCaps;
use crate::model::group::{Capacity, TenantQuota};
use crate::model::identity::TenantScope;
use crate::model::plan::{ApplyDecision, JobName, decide_apply};
use crate::model::{
    ApplyOutcome, PlanSpec, ResourceGroup, TriggerOrigin, canonical_json, plan_key_ms, shard_of,
};
use crate::trigger_state;
use async_trait::async_trait;
use sha2::{Digest, Sha256};

mod statements;
pub(super) use statements::{APPROVE, CANCEL_UNSTARTED};

#[async_trait]
impl ControlStore for Store {
    /// Append one audit entry on its own (for decisions that store nothing
    /// else, such as a refused registration).
    async fn audit_record(
        &self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: serde_json::Value,
    ) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        self.audit_append(&mut tx, actor, action, subject, detail)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Create or replace a group's limits, audited, with the effective
    /// concurrency claims enforce from now on.
    async fn group_put(
        &self,
        group: &ResourceGroup,
        capacity: &Capacity,
        actor: &str,
    ) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        let inputs = &group.capacity;
        sqlx::query(self.sql(concat!(
            "INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms, \
             max_concurrency, grants, connector_rate_per_s, service_time_ms, db_connections, \
             memory_budget_bytes, working_set_bytes, effective_concurrency, effective_binding, \
             aging_ms, min_share, recovery_share_pct, ramp_every_ms, output_caps, created_at, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?, NULLIF(?, 0), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (name) DO UPDATE SET fuel_per_attempt = excluded.fuel_per_attempt, \
             memory_bytes = excluded.memory_bytes, deadline_ms = excluded.deadline_ms, \
             max_concurrency = excluded.max_concurrency, grants = excluded.grants, \
             connector_rate_per_s = excluded.connector_rate_per_s, \
             service_time_ms = excluded.service_time_ms, db_connections = excluded.db_connections, \
             memory_budget_bytes = excluded.memory_budget_bytes, \
             working_set_bytes = excluded.working_set_bytes, \
             effective_concurrency = excluded.effective_concurrency, \
             effective_binding = excluded.effective_binding, aging_ms = excluded.aging_ms, \
             min_share = excluded.min_share, recovery_share_pct = excluded.recovery_share_pct, \
             ramp_every_ms = excluded.ramp_every_ms, output_caps = excluded.output_caps, \
             updated_at = excluded.updated_at"
        )))
        .bind(&group.name)
        .bind(group.fuel_per_attempt)
        .bind(group.memory_bytes)
        .bind(group.deadline_ms)
        .bind(group.max_concurrency)
        .bind(&group.grants)
        // Never bound as a NULL: on PostgreSQL a statement first prepared
        // with this parameter NULL keeps a type that a later rate's
        // binary value does not fit. 0 is no rate (the column's CHECK
        // refuses 0 itself).
        .bind(inputs.connector_rate_per_s.unwrap_or(0.0))
        .bind(inputs.service_time_ms)
        .bind(inputs.db_connections)
        .bind(inputs.memory_budget_bytes)
        .bind(inputs.working_set_bytes)
        .bind(capacity.effective)
        .bind(capacity.binding)
        .bind(group.aging_ms)
        .bind(group.shares.min_share)
        .bind(group.shares.recovery_share_pct)
        .bind(group.shares.ramp_every_ms)
        .bind(serde_json::to_string(&group.caps).expect("caps serialize"))
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "group.put",
            &group.name,
            serde_json::json!({ "group": group, "effective_concurrency": capacity.effective,
                "binding": capacity.binding }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Set a tenant's weight in fair shares, audited.
    async fn group_tenant_set(
        &self,
        group: &str,
        tenant: &str,
        allow: bool,
        actor: &str,
    ) -> StoreResult<bool> {
        self.set_group_tenant(group, tenant, allow, actor).await
    }

    async fn group_tenants_replace(
        &self,
        group: &str,
        tenants: &[String],
        actor: &str,
    ) -> StoreResult<()> {
        self.replace_group_tenants(group, tenants, actor).await
    }

    async fn tenant_put(&self, tenant: &TenantQuota, actor: &str) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO tenants (tenant, weight, max_in_flight, triggers_per_minute, \
             fuel_per_hour, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight, \
             max_in_flight = excluded.max_in_flight, \
             triggers_per_minute = excluded.triggers_per_minute, \
             fuel_per_hour = excluded.fuel_per_hour, updated_at = excluded.updated_at"
        )))
        .bind(&tenant.tenant)
        .bind(tenant.weight)
        .bind(tenant.max_in_flight)
        .bind(tenant.triggers_per_minute)
        .bind(tenant.fuel_per_hour)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "tenant.put",
            &tenant.tenant,
            serde_json::to_value(tenant).unwrap_or_default(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Store a checked component. Returns whether it was new (false: the
    /// same bytes were pushed before — an idempotent hit).
    async fn component_put(
        &self,
        digest: &str,
        bytes: &[u8],
        manifest_json: &str,
        actor: &str,
    ) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let inserted = sqlx::query(self.sql(concat!(
            "INSERT INTO components (digest, size_bytes, bytes, manifest, pushed_by, pushed_at) \
             VALUES (?, ?, ?, ?, ?, ",
            now_ms!(),
            ") ON CONFLICT (digest) DO NOTHING"
        )))
        .bind(digest)
        .bind(bytes.len() as i64)
        .bind(bytes)
        .bind(manifest_json)
        .bind(actor)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            let manifest: serde_json::Value =
                serde_json::from_str(manifest_json).unwrap_or_default();
            self.audit_append(
                &mut tx,
                actor,
                "component.push",
                &format!("sha256:{digest}"),
                serde_json::json!({ "size_bytes": bytes.len(), "manifest": manifest }),
            )
            .await?;
        } else {
            self.counter_add_in(&mut *tx, "component_idempotent_hits", 1)
                .await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// Apply a plan for `job_id`: an idempotent hit, a new version, or a
    /// refusal (audited) — decided and written in one transaction.
    async fn plan_apply(
        &self,
        job_id: &str,
        spec: &PlanSpec,
        schedule: Option<&str>,
        requested_version: Option<u32>,
        actor: &str,
    ) -> StoreResult<ApplyOutcome> {
        let digest = spec.digest();
        let (mut tx, _turn) = self.begin_write().await?;
        // The job is the tenant's own: another tenant's job of the same id
        // is another job, neither seen nor touched here.
        let versions: Vec<(i64, String)> = sqlx::query_as(
            self.sql("SELECT version, digest FROM plan_versions WHERE tenant = ? AND job_id = ?"),
        )
        .bind(&spec.tenant)
        .bind(job_id)
        .fetch_all(&mut *tx)
        .await?;
        let versions: Vec<(u32, String)> =
            versions.into_iter().map(|(v, d)| (v as u32, d)).collect();
        // Audited under the job's qualified name: its id alone is not it.
        let subject = JobName::qualified(&spec.tenant, job_id);
        let outcome = match decide_apply(&versions, requested_version, &digest) {
            ApplyDecision::Existing { version } => {
                self.counter_add_in(&mut *tx, "plan_idempotent_hits", 1)
                    .await?;
                ApplyOutcome::Unchanged { version, digest }
            }
            ApplyDecision::Create { version } => {
                let new = NewVersion {
                    job_id,
                    version,
                    spec,
                    digest: &digest,
                    schedule,
                    actor,
                };
                self.insert_version(&mut tx, &new).await?;
                ApplyOutcome::Created { version, digest }
            }
            ApplyDecision::VersionConflict {
                version,
                stored_digest,
            } => {
                let detail = serde_json::json!({
                    "reason": "version_conflict", "version": version,
                    "stored_digest": stored_digest, "submitted_digest": digest,
                });
                let why = format!(
                    "job '{job_id}' version {version} already exists with different content \
                     (stored digest {stored_digest}, submitted {digest}); omit `version` or use a new number"
                );
                return Err(self.refuse_plan(tx, actor, &subject, detail, why).await);
            }
            ApplyDecision::NotNext { requested, latest } => {
                let detail = serde_json::json!({ "reason": "not_next", "requested": requested, "latest": latest });
                let why = format!(
                    "job '{job_id}': version {requested} is not the next version (latest is {latest})"
                );
                return Err(self.refuse_plan(tx, actor, &subject, detail, why).await);
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// Create a trigger, or return the existing one with the same plan key
    /// (`false`). The plan key is `job@scheduled_at@vN[#partition]`.
    async fn trigger_create(&self, new: &NewTrigger) -> StoreResult<(TriggerRecord, bool)> {
        let job = self.job_get_for(&TenantScope::Every, &new.job_id).await?;
        let version = new
            .plan_version
            .map(i64::from)
            .unwrap_or(job.latest_version);
        let plan = self.plan_get(&job.tenant, &job.job_id, version).await?;
        let spec: PlanSpec = serde_json::from_str(&plan.spec)
            .map_err(|e| StoreError::Conflict(format!("stored plan is unreadable: {e}")))?;
        let params = self
            .trigger_params(&new.params, &plan.resource_group)
            .await?;
        let scheduled_at = match new.scheduled_at {
            Some(at) => at,
            None => self.now_ms().await?,
        };
        let plan_key = plan_key_ms(
            &job.job_id,
            scheduled_at,
            version as u32,
            new.partition_key.as_deref(),
        );
        // The tenant's per-minute quota is read and applied in the
        // insert's transaction, its row locked on PostgreSQL, so creators
        // racing for the same minute queue up instead of all getting in.
        let (mut tx, _turn) = self.begin_write().await?;
        if let (Some(request_key), TriggerOrigin::Manual) = (&new.request_key, new.origin)
            && let Some(key) = self.existing_request(&mut tx, &job, request_key).await?
        {
            tx.commit().await?;
            return Ok((self.trigger_by_key(&job.tenant, &key).await?, false));
        }
        self.refuse_if_gated(
            &mut tx,
            &job.job_id,
            version,
            &job.tenant,
            &plan.resource_group,
        )
        .await?;
        let quota_due_at = if new.origin == TriggerOrigin::Manual {
            self.manual_due_at(&mut tx, &job.tenant, scheduled_at)
                .await?
        } else {
            None
        };
        let next_run_at = quota_due_at.unwrap_or(scheduled_at);
        let id = self.one_trigger_id(&mut tx, &job.tenant).await?;
        let inserted = sqlx::query(self.sql(concat!(
            "INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group, \
             origin, scheduled_at, partition_key, request_key, params, state, priority, \
             next_run_at, quota_due_at, created_at, updated_at) VALUES (",
            new_trigger_id!(),
            ", ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            trigger_state!(pending),
            ", ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (tenant, plan_key) DO NOTHING"
        )))
        .bind(id)
        .bind(&plan_key)
        .bind(&job.job_id)
        .bind(version)
        .bind(&job.tenant)
        .bind(&plan.resource_group)
        .bind(new.origin.as_str())
        .bind(scheduled_at)
        .bind(&new.partition_key)
        .bind(
            new.request_key
                .as_ref()
                .filter(|_| new.origin == TriggerOrigin::Manual),
        )
        .bind(&params)
        .bind(spec.priority as i64)
        .bind(next_run_at)
        .bind(quota_due_at)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            self.announce_due(&mut *tx, next_run_at).await?;
        }
        if inserted && new.origin == TriggerOrigin::Manual {
            self.audit_manual_run(&mut tx, new, (&job.tenant, &plan_key), version, &params)
                .await?;
        }
        tx.commit().await?;
        let record = self.trigger_by_key(&job.tenant, &plan_key).await?;
        if inserted {
            let actor = new.requested_by.as_deref().unwrap_or("unattributed");
            Created::of(&record, actor).log();
        }
        Ok((record, inserted))
    }

    /// Approve a parked (`manual`) trigger: it becomes pending, audited.
    async fn trigger_approve(&self, id: i64, actor: &str, reason: &str) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        self.refuse_approval_if_gated(&mut tx, id).await?;
        let Some(plan_key) = sqlx::query_scalar::<_, String>(self.sql(APPROVE))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            if let Some(ticket) = self.tickets_holding(id).await?.first() {
                return Err(StoreError::Conflict(format!(
                    "trigger {id} is held by exception {0} ({1}): resolve it with \
                     `paddock exceptions resolve {0}`",
                    ticket.id, ticket.kind
                )));
            }
            return Err(StoreError::Conflict(format!(
                "trigger {id} is not waiting for approval"
            )));
        };
        self.audit_append(
            &mut tx,
            actor,
            "trigger.approve",
            &id.to_string(),
            serde_json::json!({ "reason": reason }),
        )
        .await?;
        tx.commit().await?;
        let approved = StateChange {
            cause: "approve",
            state: TriggerState::Pending.as_str(),
            actor,
        };
        approved.log(&[(id, plan_key)]);
        Ok(())
    }

    /// Cancel a trigger that has not started, or ask a running one to
    /// stop; audited with the actor when it did either.
    async fn trigger_request_cancel(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        let (mut tx, _turn) = self.begin_write().await?;
        let found: Option<(String, String)> =
            sqlx::query_as(self.sql("SELECT state, plan_key FROM triggers WHERE id = ?"))
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((before, plan_key)) = found else {
            return Ok(false);
        };
        let mut done = sqlx::query(self.sql(CANCEL_UNSTARTED))
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let outcome = if done == 1 {
            "cancelled"
        } else {
            done = sqlx::query(self.sql(super::runner::REQUEST_STOP))
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            "stop_requested"
        };
        if done == 0 {
            return Ok(false);
        }
        self.audit_append(
            &mut tx,
            actor,
            "trigger.cancel",
            &id.to_string(),
            serde_json::json!({ "state": before, "outcome": outcome, "reason": reason }),
        )
        .await?;
        tx.commit().await?;
        let state = match outcome {
            "cancelled" => TriggerState::Cancelled,
            _ => TriggerState::Running,
        };
        let change = StateChange {
            cause: if outcome == "cancelled" {
                "cancel"
            } else {
                "stop_requested"
            },
            state: state.as_str(),
            actor,
        };
        change.log(&[(id, plan_key)]);
        Ok(true)
    }

    async fn connector_secret_set(
        &self,
        connector: &str,
        secret: Option<&crate::model::secret::ConnectorSecret>,
        actor: &str,
    ) -> StoreResult<Option<String>> {
        self.secret_set(connector, secret, actor).await
    }

    async fn connector_secrets(&self) -> StoreResult<Vec<super::SecretView>> {
        self.secrets_list().await
    }

    /// Create or replace a connector, audited.
    async fn connector_put(&self, c: &ConnectorRecord, actor: &str) -> StoreResult<()> {
        if let Some(problem) = c.problem() {
            return Err(StoreError::OutOfBounds(format!(
                "connector '{}': {problem}",
                c.name
            )));
        }
        let (mut tx, _turn) = self.begin_write().await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO connectors (",
            connector_columns!(),
            ", created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, base_url = excluded.base_url, \
             timeout_ms = excluded.timeout_ms, permits = excluded.permits, \
             rate_per_sec = excluded.rate_per_sec, compares_tokens = excluded.compares_tokens, \
             queryable = excluded.queryable, idempotent = excluded.idempotent, \
             breaker_failure_rate = excluded.breaker_failure_rate, \
             breaker_min_calls = excluded.breaker_min_calls, \
             breaker_window_ms = excluded.breaker_window_ms, \
             breaker_open_ms = excluded.breaker_open_ms, updated_at = excluded.updated_at"
        )))
        .bind(&c.name)
        .bind(&c.kind)
        .bind(&c.base_url)
        .bind(c.timeout_ms)
        .bind(c.permits)
        .bind(c.rate_per_sec)
        .bind(c.compares_tokens as i64)
        .bind(c.queryable as i64)
        .bind(c.idempotent as i64)
        .bind(c.breaker_failure_rate)
        .bind(c.breaker_min_calls)
        .bind(c.breaker_window_ms)
        .bind(c.breaker_open_ms)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "connector.put",
            &c.name,
            serde_json::to_value(c).unwrap_or_default(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Resolve an open ticket with one of its allowed actions (a
    /// high-risk one is proposed instead: see [`super::tickets`]).
    async fn exception_resolve(
        &self,
        id: i64,
        action: &str,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ExceptionRecord> {
        self.ticket_resolve(id, action, actor, reason).await
    }
}

/// A plan version about to be stored.
struct NewVersion<'a> {
    job_id: &'a str,
    version: u32,
    spec: &'a PlanSpec,
    digest: &'a str,
    schedule: Option<&'a str>,
    actor: &'a str,
}

impl Store {
    /// A new trigger's params as stored (canonical JSON), refused past
    /// its group's cap.
    async fn trigger_params(&self, params: &serde_json::Value, group: &str) -> StoreResult<String> {
        let params = canonical_json(params);
        // `{}`: nothing to cap (and no group read on the common path).
        if params.len() > 2
            && let Some(group) = self.group_get(group).await?
        {
            OutputCaps::check("the trigger's params", params.len(), group.caps.params)
                .map_err(StoreError::Conflict)?;
        }
        Ok(params)
    }

    /// A person's manual run, audited with who asked (params only as a
    /// digest: they may carry what an audit entry must not).
    async fn audit_manual_run(
        &self,
        tx: &mut Tx,
        new: &NewTrigger,
        (tenant, plan_key): (&str, &str),
        version: i64,
        params: &str,
    ) -> StoreResult<()> {
        let id: i64 = sqlx::query_scalar(
            self.sql("SELECT id FROM triggers WHERE tenant = ? AND plan_key = ?"),
        )
        .bind(tenant)
        .bind(plan_key)
        .fetch_one(&mut **tx)
        .await?;
        let actor = new.requested_by.as_deref().unwrap_or("unattributed");
        self.audit_append(
            tx,
            actor,
            "trigger.run",
            &id.to_string(),
            serde_json::json!({
                "job": new.job_id, "tenant": tenant, "version": version, "plan_key": plan_key,
                "params_digest": hex::encode(Sha256::digest(params.as_bytes())),
            }),
        )
        .await
    }

    /// Record a refused registration in the audit log (committed: the
    /// refusal is a fact too) and return the refusal.
    async fn refuse_plan(
        &self,
        mut tx: Tx,
        actor: &str,
        job_id: &str,
        detail: serde_json::Value,
        why: String,
    ) -> StoreError {
        if let Err(e) = self
            .audit_append(&mut tx, actor, "plan.rejected", job_id, detail)
            .await
        {
            return e;
        }
        if let Err(e) = tx.commit().await {
            return e.into();
        }
        StoreError::Conflict(why)
    }

    /// The job's new latest version, its plan, its schedule row and the
    /// audit entry, inside the registration's transaction.
    async fn insert_version(&self, tx: &mut Tx, new: &NewVersion<'_>) -> StoreResult<()> {
        let NewVersion {
            job_id,
            version,
            spec,
            digest,
            schedule,
            actor,
        } = *new;
        sqlx::query(self.sql(concat!(
            "INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at) \
             VALUES (?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (tenant, job_id) DO UPDATE SET latest_version = excluded.latest_version, \
             updated_at = excluded.updated_at"
        )))
        .bind(job_id)
        .bind(&spec.tenant)
        .bind(version as i64)
        .execute(&mut **tx)
        .await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO plan_versions (tenant, job_id, version, digest, spec, component_digest, \
             resource_group, created_by, job_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ")"
        )))
        .bind(&spec.tenant)
        .bind(job_id)
        .bind(version as i64)
        .bind(digest)
        .bind(spec.canonical())
        .bind(&spec.component)
        .bind(&spec.resource_group)
        .bind(actor)
        .bind(&spec.job_type)
        .execute(&mut **tx)
        .await?;
        self.job_schedule_sync(tx, job_id, version, spec, schedule)
            .await?;
        self.audit_append(
            tx,
            actor,
            "plan.created",
            &JobName::qualified(&spec.tenant, job_id),
            serde_json::json!({ "version": version, "digest": digest }),
        )
        .await
    }

    /// Keep `job_schedules` in step with a job's newest plan version: a
    /// time-based schedule is (re)registered in its shard; manual-only
    /// removes it. Runs inside the registration's transaction.
    pub(super) async fn job_schedule_sync(
        &self,
        tx: &mut Tx,
        job_id: &str,
        version: u32,
        spec: &PlanSpec,
        schedule: Option<&str>,
    ) -> StoreResult<()> {
        let Some(schedule) = schedule else {
            sqlx::query(self.sql("DELETE FROM job_schedules WHERE tenant = ? AND job_id = ?"))
                .bind(&spec.tenant)
                .bind(job_id)
                .execute(&mut **tx)
                .await?;
            return Ok(());
        };
        let shards: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM schedule_shards"))
            .fetch_one(&mut **tx)
            .await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO job_schedules (job_id, plan_version, shard, spec, tenant, resource_group, \
             priority, active_from, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (tenant, job_id) DO UPDATE SET plan_version = excluded.plan_version, \
             spec = excluded.spec, resource_group = excluded.resource_group, \
             priority = excluded.priority, active_from = excluded.active_from, updated_at = excluded.updated_at"
        )))
        .bind(job_id)
        .bind(version as i64)
        .bind(shard_of(job_id, shards as u32) as i64)
        .bind(schedule)
        .bind(&spec.tenant)
        .bind(&spec.resource_group)
        .bind(spec.priority as i64)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}
