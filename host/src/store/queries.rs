//! Triggers, attempts, checkpoints, registrations, counters and the audit
//! log. Queries are written once, in SQLite's spelling, and run on either
//! database through [`Store::sql`] (see [`super::dialect`]); `now_ms!()` is
//! the database clock. Writes that read what they then change (claims,
//! registrations, audit appends) open with [`Store::begin_write`]: SQLite's
//! write lock up front, or on PostgreSQL row locks where the rows are read.

use super::dialect::{now_ms, skip_locked};
use super::*;
use crate::audit::{self, AuditEntry};
use crate::registry::manifest::{self, ApplyDecision, PlanSpec};
use std::collections::HashMap;

/// What a claim's `UPDATE ... RETURNING` gives back per trigger.
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: i64,
    fencing_token: i64,
    attempts: i64,
    lease_until: i64,
    /// The claim's clock (the attempt's start).
    updated_at: i64,
    job_id: String,
    tenant: String,
    plan_version: i64,
    plan_key: String,
    scheduled_at: i64,
    params: String,
    resource_group: String,
    origin: String,
}

/// The claim's lanes (see [`Store::trigger_claim_batch_shared`]).
#[derive(Clone, Copy)]
enum Lane {
    /// `retry_wait` triggers whose backoff is over.
    Retries,
    /// Due `pending` triggers and `running` ones whose lease expired.
    Fresh,
}

/// `(?, ?, ...)` with `n` placeholders, for `IN` lists.
fn id_list(n: usize) -> String {
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
    /// [`Dialect::begin_write`]).
    pub(super) async fn begin_write(&self) -> StoreResult<Tx> {
        Ok(self.pool.begin_with(self.dialect.begin_write()).await?)
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
        let mut tx = self.begin_write().await?;
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
        let mut tx = self.begin_write().await?;
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
        let mut tx = self.begin_write().await?;
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
        let mut tx = self.begin_write().await?;
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

    /// Claim up to `limit` due triggers for `owner` in one transaction: rows
    /// that are pending or waiting to retry with `next_run_at <= now`, or
    /// running with an expired lease. Each gets `fencing_token + 1`, a lease
    /// until `now + lease_ms` (database clock) and a new attempt row; an
    /// expired predecessor attempt is closed as `expired`.
    pub async fn trigger_claim_batch(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<Claim>> {
        self.trigger_claim_batch_shared(owner, lease_ms, limit, (limit + 1) / 2, now)
            .await
    }

    /// [`Store::trigger_claim_batch`] with an explicit share for retries:
    /// up to `retry_slots` of the batch go to due `retry_wait` triggers
    /// first, the rest to fresh work (pending, or running with an expired
    /// lease), and slots either lane leaves empty go to the other. So a
    /// backlog of retries can neither starve fresh triggers nor be starved
    /// by them, and no slot is wasted.
    pub async fn trigger_claim_batch_shared(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        retry_slots: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<Claim>> {
        let limit = limit.max(0);
        let share = retry_slots.clamp(0, limit);
        let mut tx = self.begin_write().await?;
        // Up to `share` due retries first, then fresh work for the rest,
        // then — if fresh work left room and the retry lane was not
        // exhausted — more retries. Each lane is its own statement, one
        // ordered walk of `triggers_claim` (state, priority, next_run_at,
        // id) that stops after its limit, so the claim's cost follows the
        // batch, not the backlog; an empty lane costs one index probe. (One
        // statement for all lanes, with the shares computed in SQL, cost
        // SQLite twice as much per claimed row.) Rows a lane claims are
        // `running` at once, so a second pass over a lane takes the next
        // ones.
        let mut claimed = Vec::with_capacity(limit as usize);
        if share > 0 {
            claimed.extend(
                self.claim_lane(&mut tx, Lane::Retries, owner, lease_ms, share, now)
                    .await?,
            );
        }
        let retried = claimed.len() as i64;
        if limit - retried > 0 {
            claimed.extend(
                self.claim_lane(&mut tx, Lane::Fresh, owner, lease_ms, limit - retried, now)
                    .await?,
            );
        }
        let spare = limit - claimed.len() as i64;
        if spare > 0 && retried == share {
            claimed.extend(
                self.claim_lane(&mut tx, Lane::Retries, owner, lease_ms, spare, now)
                    .await?,
            );
        }
        if claimed.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let now = claimed[0].updated_at;
        // A trigger claimed again may have an earlier attempt: the total-time
        // budget counts from its first start, and an attempt still open
        // belongs to a lease that lapsed (taken over now).
        let again: Vec<i64> = claimed
            .iter()
            .filter(|c| c.attempts > 1)
            .map(|c| c.id)
            .collect();
        let mut first_started: HashMap<i64, i64> = HashMap::new();
        if !again.is_empty() {
            let ids = id_list(again.len());
            let close = self.dialect.sql_owned(format!(
                "UPDATE attempts SET outcome = 'expired', ended_at = ?, \
                     error_class = 'lease_expired', error_message = 'lease expired; trigger taken over' \
                 WHERE ended_at IS NULL AND trigger_id IN {ids}"
            ));
            let mut q = sqlx::query(sqlx::AssertSqlSafe(close)).bind(now);
            for id in &again {
                q = q.bind(*id);
            }
            q.execute(&mut *tx).await?;
            let firsts = self.dialect.sql_owned(format!(
                "SELECT trigger_id, min(started_at) FROM attempts \
                 WHERE trigger_id IN {ids} GROUP BY trigger_id"
            ));
            let mut q = sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(firsts));
            for id in &again {
                q = q.bind(*id);
            }
            first_started.extend(q.fetch_all(&mut *tx).await?);
        }
        // One multi-row insert for the batch's attempts.
        let insert = self.dialect.multi_row(
            "INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, started_at, \
             lease_until)",
            "(?, ?, ?, ?, ?, ?)",
            claimed.len(),
            "RETURNING trigger_id, id",
        );
        let mut q = sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(insert));
        for c in &claimed {
            q = q
                .bind(c.id)
                .bind(c.attempts)
                .bind(owner)
                .bind(c.fencing_token)
                .bind(c.updated_at)
                .bind(c.lease_until);
        }
        let attempt_ids: HashMap<i64, i64> = q.fetch_all(&mut *tx).await?.into_iter().collect();
        tx.commit().await?;
        Ok(claimed
            .into_iter()
            .map(|c| Claim {
                attempt_id: attempt_ids[&c.id],
                first_started_at: first_started.get(&c.id).copied().unwrap_or(c.updated_at),
                trigger_id: c.id,
                attempt_no: c.attempts,
                fencing_token: c.fencing_token,
                lease_until: c.lease_until,
                job_id: c.job_id,
                tenant: c.tenant,
                plan_version: c.plan_version,
                plan_key: c.plan_key,
                scheduled_at: c.scheduled_at,
                params: c.params,
                resource_group: c.resource_group,
                origin: c.origin,
                started_at: c.updated_at,
            })
            .collect())
    }

    /// Claim up to `limit` triggers of one lane: fencing token + 1, lease on
    /// the database clock, `running`, in the lane's order.
    async fn claim_lane(
        &self,
        tx: &mut Tx,
        lane: Lane,
        owner: &str,
        lease_ms: i64,
        limit: i64,
        now: Option<i64>,
    ) -> StoreResult<Vec<ClaimedRow>> {
        macro_rules! claim_where_id_in {
            ($candidates:expr) => {
                concat!(
                    "WITH clock (now) AS (SELECT coalesce(?1, ",
                    now_ms!(),
                    ")) \
                     UPDATE triggers SET state = 'running', lease_owner = ?2, \
                         lease_until = (SELECT now FROM clock) + ?3, \
                         fencing_token = fencing_token + 1, attempts = attempts + 1, \
                         updated_at = (SELECT now FROM clock) \
                     WHERE id IN (",
                    $candidates,
                    ") RETURNING id, fencing_token, attempts, lease_until, updated_at, job_id, \
                         tenant, plan_version, plan_key, scheduled_at, params, resource_group, \
                         origin"
                )
            };
        }
        let sql = match lane {
            Lane::Retries => claim_where_id_in!(concat!(
                "SELECT id FROM triggers \
                 WHERE state = 'retry_wait' AND next_run_at <= (SELECT now FROM clock) \
                 ORDER BY priority, next_run_at, id LIMIT CAST(?4 AS INTEGER)",
                skip_locked!()
            )),
            // Pending and due, or running with an expired lease: two walks
            // merged by the same order.
            Lane::Fresh => claim_where_id_in!(concat!(
                "SELECT id FROM (\
                     SELECT id, priority, next_run_at FROM (SELECT id, priority, next_run_at \
                         FROM triggers \
                         WHERE state = 'pending' AND next_run_at <= (SELECT now FROM clock) \
                         ORDER BY priority, next_run_at, id LIMIT CAST(?4 AS INTEGER)",
                skip_locked!(),
                ") AS due \
                     UNION ALL \
                     SELECT id, priority, next_run_at FROM (SELECT id, priority, next_run_at \
                         FROM triggers \
                         WHERE state = 'running' AND lease_until < (SELECT now FROM clock) \
                         ORDER BY priority, next_run_at, id LIMIT CAST(?4 AS INTEGER)",
                skip_locked!(),
                ") AS expired) AS fresh \
                 ORDER BY priority, next_run_at, id LIMIT CAST(?4 AS INTEGER)"
            )),
        };
        Ok(sqlx::query_as(self.sql(sql))
            .bind(now)
            .bind(owner)
            .bind(lease_ms)
            .bind(limit)
            .fetch_all(&mut **tx)
            .await?)
    }

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
        let mut tx = self.pool.begin().await?;
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
    /// durable write for the batch instead of one per attempt), in two
    /// set-based statements whatever the batch size: every trigger
    /// transition is fenced by its own token and state inside the one
    /// `UPDATE triggers ... FROM (VALUES ...)`, which returns the triggers it
    /// moved; then one `UPDATE attempts ... FROM (VALUES ...)` closes their
    /// attempts. A stale one is left out of the batch — its attempt is
    /// abandoned and it comes back as [`StoreError::LeaseLost`] — and the
    /// rest commit. The outer error is the database's (nothing committed).
    ///
    /// Batches are padded with all-NULL rows (which match nothing) to the
    /// next power of two, so each statement has a handful of distinct texts
    /// and stays in the prepared-statement cache.
    pub async fn attempt_finish_batch(
        &self,
        ends: &[(LeaseRef, AttemptEnd)],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        if ends.is_empty() {
            return Ok(Vec::new());
        }
        let rows = ends.len().next_power_of_two();
        let mut tx = self.pool.begin().await?;
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
            let terminal = matches!(
                end.trigger_state,
                "succeeded" | "failed" | "cancelled" | "skipped"
            );
            q = q
                .bind(lease.trigger_id)
                .bind(lease.fencing_token)
                .bind(end.trigger_state)
                .bind(&end.result)
                .bind(&end.error_class)
                .bind(&end.error_message)
                .bind(end.retry_after_ms)
                .bind(terminal as i64);
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
        let moved: std::collections::HashSet<i64> =
            q.fetch_all(&mut *tx).await?.into_iter().collect();
        let (committed, stale): (Vec<usize>, Vec<usize>) =
            (0..ends.len()).partition(|&i| moved.contains(&ends[i].0.trigger_id));
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
            for &i in &committed {
                let (lease, end) = &ends[i];
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
        let mut results: Vec<StoreResult<()>> = ends.iter().map(|_| Ok(())).collect();
        for i in stale {
            let (lease, end) = &ends[i];
            self.attempt_abandon(lease, end, "result refused: stale fencing token")
                .await?;
            results[i] = Err(self.lease_lost(lease, "result commit").await);
        }
        Ok(results)
    }
}
