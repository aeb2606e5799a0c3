//! Triggers, attempts, checkpoints, registrations, counters and the audit
//! log. Queries are written once, in SQLite's spelling, and run on either
//! database through [`Store::sql`] (see [`super::dialect`]); `now_ms!()` is
//! the database clock. Writes that read what they then change (claims,
//! registrations, audit appends) open with [`Store::begin_write`]: SQLite's
//! write lock up front, or on PostgreSQL row locks where the rows are read.

use super::dialect::now_ms;
use super::*;
use crate::audit::{self, AuditEntry};
use crate::registry::manifest::{self, ApplyDecision, PlanSpec};

/// `(?, ?, ...)` with `n` placeholders, for `IN` lists.
pub(super) fn id_list(n: usize) -> String {
    let mut list = String::with_capacity(2 + n * 3);
    list.push('(');
    for i in 0..n {
        if i > 0 {
            list.push_str(", ");
        }
        list.push('?');
    }
    list.push(')');
    list
}

/// The columns of a [`TriggerRecord`], as a literal for `concat!`.
macro_rules! trigger_columns {
    () => {
        "id, plan_key, job_id, plan_version, tenant, resource_group, origin, scheduled_at, \
         partition_key, params, state, priority, next_run_at, fencing_token, lease_owner, \
         lease_until, attempts, result, error_class, error_message, created_at, updated_at, \
         finished_at"
    };
}

/// The columns of an [`AttemptRecord`].
macro_rules! attempt_columns {
    () => {
        "id, trigger_id, attempt_no, runner_id, fencing_token, started_at, lease_until, \
         heartbeat_at, ended_at, outcome, error_class, error_message, fuel_used, \
         peak_memory_bytes, wall_ms, log"
    };
}

impl Store {
    /// A transaction that will write what it reads (see
    /// [`Dialect::begin_write`]), and the turn at this process's write gate
    /// that goes with it (see [`Store::write_turn`]); keep the turn until the
    /// transaction has ended.
    pub(super) async fn begin_write(&self) -> StoreResult<(Tx, WriteTurn)> {
        let turn = self.write_turn().await;
        Ok((
            self.pool.begin_with(self.dialect.begin_write()).await?,
            turn,
        ))
    }

    /// The database's clock, in ms.
    pub async fn now_ms(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
            .fetch_one(&self.pool)
            .await?)
    }

    // ---- audit log -------------------------------------------------------

    /// Append an entry inside `tx`, chained to the last one.
    pub(super) async fn audit_append(
        &self,
        tx: &mut Tx,
        actor: &str,
        action: &str,
        subject: &str,
        detail: serde_json::Value,
    ) -> StoreResult<()> {
        // Read-then-append: on PostgreSQL two processes could read the same
        // last entry; the lock makes them take turns (SQLite's write lock
        // already does).
        if let Some(lock) = self.dialect.serialize_appends() {
            sqlx::query(lock).execute(&mut **tx).await?;
        }
        let last: Option<(i64, String)> =
            sqlx::query_as(self.sql("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"))
                .fetch_optional(&mut **tx)
                .await?;
        let (seq, prev) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, audit::GENESIS.to_string()),
        };
        let at: i64 = sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
            .fetch_one(&mut **tx)
            .await?;
        let detail = manifest::canonical_json(&detail);
        let hash = audit::entry_hash(&prev, seq, at, actor, action, subject, &detail);
        sqlx::query(self.sql(
            "INSERT INTO audit_log (seq, at, actor, action, subject, detail, prev_hash, hash) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(seq)
        .bind(at)
        .bind(actor)
        .bind(action)
        .bind(subject)
        .bind(&detail)
        .bind(&prev)
        .bind(&hash)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Append one audit entry on its own (for decisions that store nothing
    /// else, such as a refused registration).
    pub async fn audit_record(
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

    pub async fn audit_list(&self) -> StoreResult<Vec<AuditEntry>> {
        /// seq, at, actor, action, subject, detail, prev_hash, hash
        type AuditRow = (i64, i64, String, String, String, String, String, String);
        let rows: Vec<AuditRow> = sqlx::query_as(self.sql(
            "SELECT seq, at, actor, action, subject, detail, prev_hash, hash \
                 FROM audit_log ORDER BY seq",
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(seq, at, actor, action, subject, detail, prev_hash, hash)| AuditEntry {
                    seq,
                    at,
                    actor,
                    action,
                    subject,
                    detail,
                    prev_hash,
                    hash,
                },
            )
            .collect())
    }

    // ---- counters --------------------------------------------------------

    pub(super) async fn counter_add<'e, E>(
        &self,
        executor: E,
        name: &str,
        by: i64,
    ) -> StoreResult<()>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        sqlx::query(self.sql(
            "INSERT INTO counters (name, value) VALUES (?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
        ))
        .bind(name)
        .bind(by)
        .execute(executor)
        .await?;
        Ok(())
    }

    /// Add one to a counter.
    pub async fn counter_bump(&self, name: &str) -> StoreResult<()> {
        self.counter_add(&self.pool, name, 1).await
    }

    pub async fn counter(&self, name: &str) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar(self.sql("SELECT value FROM counters WHERE name = ?"))
                .bind(name)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or(0),
        )
    }

    pub async fn counters(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(
            sqlx::query_as(self.sql("SELECT name, value FROM counters ORDER BY name"))
                .fetch_all(&self.pool)
                .await?,
        )
    }

    // ---- resource groups -------------------------------------------------

    pub async fn group_get(&self, name: &str) -> StoreResult<Option<ResourceGroup>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT name, fuel_per_attempt, memory_bytes, deadline_ms, max_concurrency, grants \
             FROM resource_groups WHERE name = ?",
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn groups_list(&self) -> StoreResult<Vec<ResourceGroup>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT name, fuel_per_attempt, memory_bytes, deadline_ms, max_concurrency, grants \
             FROM resource_groups ORDER BY name",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Create or replace a group's limits, audited.
    pub async fn group_put(&self, group: &ResourceGroup, actor: &str) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms, \
             max_concurrency, grants, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (name) DO UPDATE SET fuel_per_attempt = excluded.fuel_per_attempt, \
             memory_bytes = excluded.memory_bytes, deadline_ms = excluded.deadline_ms, \
             max_concurrency = excluded.max_concurrency, grants = excluded.grants, \
             updated_at = excluded.updated_at"
        )))
        .bind(&group.name)
        .bind(group.fuel_per_attempt)
        .bind(group.memory_bytes)
        .bind(group.deadline_ms)
        .bind(group.max_concurrency)
        .bind(&group.grants)
        .execute(&mut *tx)
        .await?;
        self.audit_append(
            &mut tx,
            actor,
            "group.put",
            &group.name,
            serde_json::to_value(group).unwrap_or_default(),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    // ---- components ------------------------------------------------------

    pub async fn component_get(&self, digest: &str) -> StoreResult<Option<ComponentRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT digest, size_bytes, manifest, pushed_by, pushed_at FROM components WHERE digest = ?",
        ))
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn component_bytes(&self, digest: &str) -> StoreResult<Vec<u8>> {
        sqlx::query_scalar(self.sql("SELECT bytes FROM components WHERE digest = ?"))
            .bind(digest)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("component sha256:{digest}")))
    }

    pub async fn components_list(&self) -> StoreResult<Vec<ComponentRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT digest, size_bytes, manifest, pushed_by, pushed_at FROM components ORDER BY pushed_at",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Store a checked component. Returns whether it was new (false: the
    /// same bytes were pushed before — an idempotent hit).
    pub async fn component_put(
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
            self.counter_add(&mut *tx, "component_idempotent_hits", 1)
                .await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }

    // ---- jobs and plan versions ------------------------------------------

    /// Apply a plan for `job_id`: an idempotent hit, a new version, or a
    /// refusal (audited) — decided and written in one transaction.
    pub async fn plan_apply(
        &self,
        job_id: &str,
        spec: &PlanSpec,
        requested_version: Option<u32>,
        actor: &str,
    ) -> StoreResult<ApplyOutcome> {
        let digest = spec.digest();
        let (mut tx, _turn) = self.begin_write().await?;
        let owner: Option<String> =
            sqlx::query_scalar(self.sql("SELECT tenant FROM jobs WHERE job_id = ?"))
                .bind(job_id)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(owner) = owner.filter(|t| t != &spec.tenant) {
            self.audit_append(
                &mut tx,
                actor,
                "plan.rejected",
                job_id,
                serde_json::json!({ "reason": "tenant_mismatch", "owner": owner, "requested": spec.tenant }),
            )
            .await?;
            tx.commit().await?;
            return Err(StoreError::Conflict(format!(
                "job '{job_id}' belongs to tenant '{owner}', not '{}'",
                spec.tenant
            )));
        }
        let versions: Vec<(i64, String)> =
            sqlx::query_as(self.sql("SELECT version, digest FROM plan_versions WHERE job_id = ?"))
                .bind(job_id)
                .fetch_all(&mut *tx)
                .await?;
        let versions: Vec<(u32, String)> =
            versions.into_iter().map(|(v, d)| (v as u32, d)).collect();
        let outcome = match manifest::decide_apply(&versions, requested_version, &digest) {
            ApplyDecision::Existing { version } => {
                self.counter_add(&mut *tx, "plan_idempotent_hits", 1)
                    .await?;
                ApplyOutcome::Unchanged { version, digest }
            }
            ApplyDecision::Create { version } => {
                sqlx::query(self.sql(concat!(
                    "INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at) \
                     VALUES (?, ?, ?, ",
                    now_ms!(),
                    ", ",
                    now_ms!(),
                    ") ON CONFLICT (job_id) DO UPDATE SET latest_version = excluded.latest_version, \
                     updated_at = excluded.updated_at"
                )))
                .bind(job_id)
                .bind(&spec.tenant)
                .bind(version as i64)
                .execute(&mut *tx)
                .await?;
                sqlx::query(self.sql(concat!(
                    "INSERT INTO plan_versions (job_id, version, digest, spec, component_digest, \
                     resource_group, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ",
                    now_ms!(),
                    ")"
                )))
                .bind(job_id)
                .bind(version as i64)
                .bind(&digest)
                .bind(spec.canonical())
                .bind(&spec.component)
                .bind(&spec.resource_group)
                .bind(actor)
                .execute(&mut *tx)
                .await?;
                self.job_schedule_sync(&mut tx, job_id, version, spec)
                    .await?;
                self.audit_append(
                    &mut tx,
                    actor,
                    "plan.created",
                    job_id,
                    serde_json::json!({ "version": version, "digest": digest }),
                )
                .await?;
                ApplyOutcome::Created { version, digest }
            }
            ApplyDecision::VersionConflict {
                version,
                stored_digest,
            } => {
                self.audit_append(
                    &mut tx,
                    actor,
                    "plan.rejected",
                    job_id,
                    serde_json::json!({
                        "reason": "version_conflict", "version": version,
                        "stored_digest": stored_digest, "submitted_digest": digest,
                    }),
                )
                .await?;
                tx.commit().await?;
                return Err(StoreError::Conflict(format!(
                    "job '{job_id}' version {version} already exists with different content \
                     (stored digest {stored_digest}, submitted {digest}); omit `version` or use a new number"
                )));
            }
            ApplyDecision::NotNext { requested, latest } => {
                self.audit_append(
                    &mut tx,
                    actor,
                    "plan.rejected",
                    job_id,
                    serde_json::json!({ "reason": "not_next", "requested": requested, "latest": latest }),
                )
                .await?;
                tx.commit().await?;
                return Err(StoreError::Conflict(format!(
                    "job '{job_id}': version {requested} is not the next version (latest is {latest})"
                )));
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    pub async fn job_get(&self, job_id: &str) -> StoreResult<Option<JobRecord>> {
        Ok(sqlx::query_as(
            self.sql(
                "SELECT job_id, tenant, latest_version, created_at FROM jobs WHERE job_id = ?",
            ),
        )
        .bind(job_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn jobs_list(&self) -> StoreResult<Vec<JobRecord>> {
        Ok(sqlx::query_as(
            self.sql("SELECT job_id, tenant, latest_version, created_at FROM jobs ORDER BY job_id"),
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn plan_get(&self, job_id: &str, version: i64) -> StoreResult<PlanVersionRecord> {
        sqlx::query_as(self.sql(
            "SELECT job_id, version, digest, spec, component_digest, resource_group, created_by, created_at \
             FROM plan_versions WHERE job_id = ? AND version = ?",
        ))
        .bind(job_id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("job '{job_id}' version {version}")))
    }

    pub async fn plan_versions(&self, job_id: &str) -> StoreResult<Vec<PlanVersionRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, version, digest, spec, component_digest, resource_group, created_by, created_at \
             FROM plan_versions WHERE job_id = ? ORDER BY version",
        ))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?)
    }

    // ---- triggers --------------------------------------------------------

    /// Create a trigger, or return the existing one with the same plan key
    /// (`false`). The plan key is `job@scheduled_at@vN[#partition]`.
    pub async fn trigger_create(&self, new: &NewTrigger) -> StoreResult<(TriggerRecord, bool)> {
        let job = self
            .job_get(&new.job_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("job '{}'", new.job_id)))?;
        let version = new
            .plan_version
            .map(i64::from)
            .unwrap_or(job.latest_version);
        let plan = self.plan_get(&new.job_id, version).await?;
        let spec: PlanSpec = serde_json::from_str(&plan.spec)
            .map_err(|e| StoreError::Conflict(format!("stored plan is unreadable: {e}")))?;
        let scheduled_at = match new.scheduled_at {
            Some(at) => at,
            None => self.now_ms().await?,
        };
        let plan_key = crate::registry::plan_key(
            &new.job_id,
            scheduled_at,
            version as u32,
            new.partition_key.as_deref(),
        );
        let inserted = sqlx::query(self.sql(concat!(
            "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, origin, \
             scheduled_at, partition_key, params, state, priority, next_run_at, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (plan_key) DO NOTHING"
        )))
        .bind(&plan_key)
        .bind(&new.job_id)
        .bind(version)
        .bind(&job.tenant)
        .bind(&plan.resource_group)
        .bind(&new.origin)
        .bind(scheduled_at)
        .bind(&new.partition_key)
        .bind(manifest::canonical_json(&new.params))
        .bind(spec.priority as i64)
        .bind(scheduled_at)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            self.announce_due(&self.pool, scheduled_at).await?;
        }
        let record = self.trigger_by_key(&plan_key).await?;
        Ok((record, inserted))
    }

    pub async fn trigger_by_key(&self, plan_key: &str) -> StoreResult<TriggerRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE plan_key = ?"
        )))
        .bind(plan_key)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger '{plan_key}'")))
    }

    pub async fn trigger_get(&self, id: i64) -> StoreResult<TriggerRecord> {
        sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger {id}")))
    }

    /// The newest triggers first.
    pub async fn triggers_list(&self, limit: i64) -> StoreResult<Vec<TriggerRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            trigger_columns!(),
            " FROM triggers ORDER BY id DESC LIMIT CAST(? AS INTEGER)"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn attempts_for(&self, trigger_id: i64) -> StoreResult<Vec<AttemptRecord>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "SELECT ",
            attempt_columns!(),
            " FROM attempts WHERE trigger_id = ? ORDER BY id"
        )))
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Triggers by state; the states sum to the total.
    pub async fn trigger_counts(&self) -> StoreResult<TriggerCounts> {
        let by_state: Vec<(String, i64)> = sqlx::query_as(
            self.sql("SELECT state, count(*) FROM triggers GROUP BY state ORDER BY state"),
        )
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM triggers"))
            .fetch_one(&self.pool)
            .await?;
        Ok(TriggerCounts { total, by_state })
    }

    // ---- leases ----------------------------------------------------------

    /// Count a stale write and build its error.
    pub(super) async fn lease_lost(&self, lease: &LeaseRef, what: &str) -> StoreError {
        let found: Option<i64> =
            match sqlx::query_scalar(self.sql("SELECT fencing_token FROM triggers WHERE id = ?"))
                .bind(lease.trigger_id)
                .fetch_optional(&self.pool)
                .await
            {
                Ok(found) => found,
                Err(e) => return e.into(),
            };
        if let Err(e) = self
            .counter_add(&self.pool, "stale_token_rejections", 1)
            .await
        {
            return e;
        }
        tracing::warn!(
            trigger_id = lease.trigger_id,
            expected = lease.fencing_token,
            found = ?found,
            owner = %lease.owner,
            "stale {what} rejected"
        );
        StoreError::LeaseLost {
            trigger_id: lease.trigger_id,
            expected: lease.fencing_token,
            found,
        }
    }

    /// Renew a lease, only while owner, token and state still match.
    /// Returns the new `lease_until` and whether a cancel was requested.
    pub async fn lease_renew(
        &self,
        lease: &LeaseRef,
        lease_ms: i64,
        progress_seq: i64,
    ) -> StoreResult<(i64, bool)> {
        let (mut tx, turn) = self.begin_write().await?;
        let renewed: Option<(i64, i64)> = sqlx::query_as(self.sql(concat!(
            "UPDATE triggers SET lease_until = ",
            now_ms!(),
            " + ?, updated_at = ",
            now_ms!(),
            " WHERE id = ? AND fencing_token = ? AND lease_owner = ? AND state = 'running' \
             RETURNING lease_until, cancel_requested"
        )))
        .bind(lease_ms)
        .bind(lease.trigger_id)
        .bind(lease.fencing_token)
        .bind(&lease.owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((until, cancel)) = renewed else {
            tx.rollback().await?;
            // The next writer need not wait for the bookkeeping.
            drop(turn);
            return Err(self.lease_lost(lease, "heartbeat").await);
        };
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET heartbeat_at = ",
            now_ms!(),
            ", lease_until = ?, progress_seq = ? WHERE id = ?"
        )))
        .bind(until)
        .bind(progress_seq)
        .bind(lease.attempt_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((until, cancel != 0))
    }

    /// The last checkpoint saved for a trigger, by any attempt.
    pub async fn checkpoint_load(&self, trigger_id: i64) -> StoreResult<Option<(i64, Vec<u8>)>> {
        Ok(
            sqlx::query_as(self.sql("SELECT seq, data FROM checkpoints WHERE trigger_id = ?"))
                .bind(trigger_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Save a checkpoint, fenced: written only if the lease's token is still
    /// the trigger's and it is running. Returns the new sequence number.
    pub async fn checkpoint_save(&self, lease: &LeaseRef, data: &[u8]) -> StoreResult<i64> {
        let seq: Option<i64> = sqlx::query_scalar(self.sql(concat!(
            "INSERT INTO checkpoints (trigger_id, seq, data, fencing_token, saved_at) \
             SELECT t.id, coalesce((SELECT c.seq FROM checkpoints c WHERE c.trigger_id = t.id), 0) + 1, \
                 ?3, t.fencing_token, ",
            now_ms!(),
            " FROM triggers t WHERE t.id = ?1 AND t.fencing_token = ?2 AND t.state = 'running' \
             ON CONFLICT (trigger_id) DO UPDATE SET seq = excluded.seq, data = excluded.data, \
                 fencing_token = excluded.fencing_token, saved_at = excluded.saved_at \
             RETURNING seq"
        )))
        .bind(lease.trigger_id)
        .bind(lease.fencing_token)
        .bind(data)
        .fetch_optional(&self.pool)
        .await?;
        match seq {
            Some(seq) => Ok(seq),
            None => Err(self.lease_lost(lease, "checkpoint").await),
        }
    }

    /// Close an attempt whose result must not count (its commit gate closed,
    /// or its token went stale) without touching the trigger: the lease
    /// lapses and another runner takes the trigger over with token + 1.
    pub async fn attempt_abandon(
        &self,
        lease: &LeaseRef,
        end: &AttemptEnd,
        why: &str,
    ) -> StoreResult<()> {
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = 'lease_lost', ended_at = ",
            now_ms!(),
            ", error_class = 'lease_lost', error_message = ?, \
             fuel_used = ?, peak_memory_bytes = ?, wall_ms = ?, log = ? \
             WHERE id = ? AND fencing_token = ? AND outcome IS NULL"
        )))
        .bind(why)
        .bind(end.fuel_used)
        .bind(end.peak_memory_bytes)
        .bind(end.wall_ms)
        .bind(&end.log)
        .bind(lease.attempt_id)
        .bind(lease.fencing_token)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Commit how an attempt ended: the trigger's transition is fenced by
    /// token and state in the same statement; the attempt row is closed in
    /// the same transaction.
    pub async fn attempt_finish(&self, lease: &LeaseRef, end: &AttemptEnd) -> StoreResult<()> {
        let ends = [(lease.clone(), end.clone())];
        self.attempt_finish_batch(&ends)
            .await?
            .pop()
            .expect("one result per attempt")
    }

    /// Commit several attempts' ends in one transaction (group commit: one
    /// durable write for the batch instead of one per attempt). Every
    /// trigger transition is fenced by its own token and state inside the
    /// statement that makes it, and only the attempts of triggers that moved
    /// are closed. A stale one is left out of the batch — its attempt is
    /// abandoned and it comes back as [`StoreError::LeaseLost`] — and the
    /// rest commit. The outer error is the database's (nothing committed).
    pub async fn attempt_finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        if ends.is_empty() {
            return Ok(Vec::new());
        }
        let moved = match self.dialect {
            Dialect::Sqlite => {
                let owned = ends.to_vec();
                self.sqlite_write(move |tx| finish_in(tx, &owned)).await?
            }
            Dialect::Postgres => self.finish_postgres(ends).await?,
        };
        // Stale ends are closed and counted outside the write turn.
        let mut results: Vec<StoreResult<()>> = ends.iter().map(|_| Ok(())).collect();
        for (i, (lease, end)) in ends.iter().enumerate() {
            if !moved.contains(&lease.trigger_id) {
                self.attempt_abandon(lease, end, "result refused: stale fencing token")
                    .await?;
                results[i] = Err(self.lease_lost(lease, "result commit").await);
            }
        }
        Ok(results)
    }

    /// PostgreSQL's group commit, in two set-based statements whatever the
    /// batch size: `UPDATE triggers ... FROM (VALUES ...)` makes the fenced
    /// transitions and returns the triggers that moved; `UPDATE attempts
    /// ... FROM (VALUES ...)` closes their attempts. Batches are padded with
    /// all-NULL rows (which match nothing) to the next power of two, so each
    /// statement has a handful of distinct texts and stays in the
    /// prepared-statement cache.
    async fn finish_postgres(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<std::collections::HashSet<i64>> {
        let (mut tx, _turn) = self.begin_write().await?;
        let moved = self.finish_transitions(&mut tx, ends).await?;
        let committed: Vec<&(LeaseRef, AttemptEnd)> = ends
            .iter()
            .filter(|(lease, _)| moved.contains(&lease.trigger_id))
            .collect();
        if !committed.is_empty() {
            let rows = committed.len().next_power_of_two();
            // column1 attempt id, column2 token, column3 outcome, column4
            // error class, column5 error message, column6 fuel, column7 peak
            // memory, column8 wall ms, column9 log.
            let close = self.dialect.multi_row(
                concat!(
                    "UPDATE attempts SET outcome = v.column3, ended_at = ",
                    now_ms!(),
                    ", error_class = v.column4, error_message = v.column5, \
                       fuel_used = v.column6, peak_memory_bytes = v.column7, \
                       wall_ms = v.column8, log = v.column9 FROM ("
                ),
                "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
                ") AS v WHERE attempts.id = v.column1 AND attempts.fencing_token = v.column2",
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(close));
            for (lease, end) in &committed {
                q = q
                    .bind(lease.attempt_id)
                    .bind(lease.fencing_token)
                    .bind(end.attempt_outcome)
                    .bind(&end.error_class)
                    .bind(&end.error_message)
                    .bind(end.fuel_used)
                    .bind(end.peak_memory_bytes)
                    .bind(end.wall_ms)
                    .bind(&end.log);
            }
            for _ in committed.len()..rows {
                q = q
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<i64>)
                    .bind(None::<String>);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// The fenced trigger transitions of [`Store::finish_postgres`], in one
    /// set-based statement: the ids that moved.
    async fn finish_transitions(
        &self,
        tx: &mut Tx,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<std::collections::HashSet<i64>> {
        let rows = ends.len().next_power_of_two();
        // column1 trigger id, column2 token, column3 state, column4 result,
        // column5 error class, column6 error message, column7 retry after,
        // column8 terminal (0/1).
        let transitions = self.dialect.multi_row(
            concat!(
                "UPDATE triggers SET state = v.column3, result = v.column4, \
                     error_class = v.column5, error_message = v.column6, \
                     next_run_at = CASE WHEN v.column7 IS NULL THEN next_run_at ELSE ",
                now_ms!(),
                " + v.column7 END, lease_owner = NULL, lease_until = NULL, \
                     finished_at = CASE WHEN v.column8 <> 0 THEN ",
                now_ms!(),
                " ELSE NULL END, updated_at = ",
                now_ms!(),
                " FROM ("
            ),
            "(?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
            ") AS v WHERE triggers.id = v.column1 AND triggers.fencing_token = v.column2 \
               AND triggers.state = 'running' RETURNING id",
        );
        let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(transitions));
        for (lease, end) in ends {
            q = q
                .bind(lease.trigger_id)
                .bind(lease.fencing_token)
                .bind(end.trigger_state)
                .bind(&end.result)
                .bind(&end.error_class)
                .bind(&end.error_message)
                .bind(end.retry_after_ms)
                .bind(is_terminal(end.trigger_state) as i64);
        }
        for _ in ends.len()..rows {
            q = q
                .bind(None::<i64>)
                .bind(None::<i64>)
                .bind(None::<String>)
                .bind(None::<Vec<u8>>)
                .bind(None::<String>)
                .bind(None::<String>)
                .bind(None::<i64>)
                .bind(None::<i64>);
        }
        Ok(q.fetch_all(&mut **tx).await?.into_iter().collect())
    }
}

/// Whether a trigger in `state` is done for good (it gets `finished_at`).
fn is_terminal(state: &str) -> bool {
    matches!(state, "succeeded" | "failed" | "cancelled" | "skipped")
}

/// SQLite's group commit, inside the writer's transaction: per end, one
/// prepared statement makes the fenced transition — its row count says
/// whether the token and state still held — and, if it moved, one closes
/// its attempt. In-thread calls on cached statements, so the batch costs
/// SQLite's work and one hand-off (see [`super::sqlite_writer`]).
fn finish_in(
    tx: &rusqlite::Transaction<'_>,
    ends: &[(LeaseRef, AttemptEnd)],
) -> StoreResult<std::collections::HashSet<i64>> {
    // One clock for the batch: the commit's.
    let now: i64 = tx.query_row(concat!("SELECT ", now_ms!()), [], |row| row.get(0))?;
    let mut transition = tx.prepare_cached(
        "UPDATE triggers SET state = ?3, result = ?4, error_class = ?5, error_message = ?6, \
             next_run_at = CASE WHEN ?7 IS NULL THEN next_run_at ELSE ?9 + ?7 END, \
             lease_owner = NULL, lease_until = NULL, \
             finished_at = CASE WHEN ?8 <> 0 THEN ?9 ELSE NULL END, updated_at = ?9 \
         WHERE id = ?1 AND fencing_token = ?2 AND state = 'running'",
    )?;
    let mut close = tx.prepare_cached(
        "UPDATE attempts SET outcome = ?3, ended_at = ?4, error_class = ?5, error_message = ?6, \
             fuel_used = ?7, peak_memory_bytes = ?8, wall_ms = ?9, log = ?10 \
         WHERE id = ?1 AND fencing_token = ?2",
    )?;
    let mut moved = std::collections::HashSet::with_capacity(ends.len());
    for (lease, end) in ends {
        let changed = transition.execute(rusqlite::params![
            lease.trigger_id,
            lease.fencing_token,
            end.trigger_state,
            end.result,
            end.error_class,
            end.error_message,
            end.retry_after_ms,
            is_terminal(end.trigger_state) as i64,
            now,
        ])?;
        if changed == 0 {
            continue;
        }
        close.execute(rusqlite::params![
            lease.attempt_id,
            lease.fencing_token,
            end.attempt_outcome,
            now,
            end.error_class,
            end.error_message,
            end.fuel_used,
            end.peak_memory_bytes,
            end.wall_ms,
            end.log,
        ])?;
        moved.insert(lease.trigger_id);
    }
    Ok(moved)
}
