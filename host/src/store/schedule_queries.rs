//! Queries of trigger control: shard leases and watermarks, job
//! schedules, batched scheduled-trigger inserts, skipped fire times, manual
//! approval, and cancel requests.

use super::dialect::now_ms;
use super::*;
use crate::registry::manifest::PlanSpec;
use crate::schedule::{Kind, shard_of};

impl Store {
    /// Keep `job_schedules` in step with a job's newest plan version: a
    /// time-based schedule is (re)registered in its shard; manual-only
    /// removes it. Runs inside the registration's transaction.
    pub(super) async fn job_schedule_sync(
        &self,
        tx: &mut Tx,
        job_id: &str,
        version: u32,
        spec: &PlanSpec,
    ) -> StoreResult<()> {
        let schedule = spec.schedule_spec().map_err(StoreError::Conflict)?;
        if schedule.trigger.kind() == Kind::Manual {
            sqlx::query(self.sql("DELETE FROM job_schedules WHERE job_id = ?"))
                .bind(job_id)
                .execute(&mut **tx)
                .await?;
            return Ok(());
        }
        let shards: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM schedule_shards"))
            .fetch_one(&mut **tx)
            .await?;
        sqlx::query(self.sql(concat!(
            "INSERT INTO job_schedules (job_id, plan_version, shard, spec, tenant, resource_group, \
             priority, active_from, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (job_id) DO UPDATE SET plan_version = excluded.plan_version, \
             spec = excluded.spec, tenant = excluded.tenant, resource_group = excluded.resource_group, \
             priority = excluded.priority, active_from = excluded.active_from, updated_at = excluded.updated_at"
        )))
        .bind(job_id)
        .bind(version as i64)
        .bind(shard_of(job_id, shards as u32) as i64)
        .bind(schedule.canonical_json())
        .bind(&spec.tenant)
        .bind(&spec.resource_group)
        .bind(spec.priority as i64)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    pub async fn shard_count(&self) -> StoreResult<u32> {
        let n: i64 = sqlx::query_scalar(self.sql("SELECT count(*) FROM schedule_shards"))
            .fetch_one(&self.pool)
            .await?;
        Ok(n as u32)
    }

    pub async fn shards_list(&self) -> StoreResult<Vec<ShardRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT shard, owner, generation, lease_until, watermark, last_scan_at, \
             triggers_created, triggers_existing FROM schedule_shards ORDER BY shard",
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Take or renew the lease on a shard. The generation increases when
    /// ownership changes or the previous lease had lapsed. `None`: another
    /// owner holds a live lease.
    pub async fn shard_lease(
        &self,
        shard: u32,
        owner: &str,
        ttl_ms: i64,
        now: Option<i64>,
    ) -> StoreResult<Option<ShardLease>> {
        Ok(sqlx::query_as(self.sql(concat!(
            "WITH clock (now) AS (SELECT coalesce(?4, ",
            now_ms!(),
            ")) \
             UPDATE schedule_shards SET \
                 generation = CASE WHEN owner = ?2 AND lease_until >= (SELECT now FROM clock) \
                                   THEN generation ELSE generation + 1 END, \
                 owner = ?2, lease_until = (SELECT now FROM clock) + ?3 \
             WHERE shard = ?1 AND (owner IS NULL OR owner = ?2 OR lease_until < (SELECT now FROM clock)) \
             RETURNING shard, generation, watermark, (SELECT now FROM clock) AS now"
        )))
        .bind(shard as i64)
        .bind(owner)
        .bind(ttl_ms)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Give a shard up (drain): the next owner takes it without waiting.
    pub async fn shard_release(&self, lease: &ShardLease, owner: &str) -> StoreResult<()> {
        sqlx::query(self.sql(
            "UPDATE schedule_shards SET owner = NULL, lease_until = NULL \
             WHERE shard = ? AND generation = ? AND owner = ?",
        ))
        .bind(lease.shard)
        .bind(lease.generation)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Advance the watermark, only under the generation that scanned.
    /// Returns false (and counts it) when the shard moved to another owner
    /// in the meantime: the watermark is then left to the new owner.
    pub async fn shard_advance(
        &self,
        lease: &ShardLease,
        owner: &str,
        watermark: i64,
        created: i64,
        existing: i64,
    ) -> StoreResult<bool> {
        let updated = sqlx::query(self.sql(
            "UPDATE schedule_shards SET \
                 watermark = CASE WHEN watermark > ?1 THEN watermark ELSE ?1 END, \
                 last_scan_at = ?2, triggers_created = triggers_created + ?3, \
                 triggers_existing = triggers_existing + ?4 \
             WHERE shard = ?5 AND generation = ?6 AND owner = ?7",
        ))
        .bind(watermark)
        .bind(lease.now)
        .bind(created)
        .bind(existing)
        .bind(lease.shard)
        .bind(lease.generation)
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if updated == 0 {
            self.counter_add(&self.pool, "stale_shard_generation_rejections", 1)
                .await?;
        }
        Ok(updated == 1)
    }

    /// A cheap fingerprint of a shard's schedules, to reload them only when
    /// something changed: (count, newest update, sum of versions).
    pub async fn schedules_fingerprint(&self, shard: u32) -> StoreResult<(i64, i64, i64)> {
        Ok(sqlx::query_as(self.sql(
            "SELECT count(*), coalesce(max(updated_at), 0), CAST(coalesce(sum(plan_version), 0) AS BIGINT) \
             FROM job_schedules WHERE shard = ?",
        ))
        .bind(shard as i64)
        .fetch_one(&self.pool)
        .await?)
    }

    /// The schedules of every job in a shard.
    pub async fn schedules_in_shard(&self, shard: u32) -> StoreResult<Vec<JobScheduleRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, plan_version, shard, spec, tenant, resource_group, priority, active_from \
             FROM job_schedules WHERE shard = ? ORDER BY job_id",
        ))
        .bind(shard as i64)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Scheduled triggers (of any plan version) that already exist for the
    /// jobs of a shard in `[from, to)` — the overlap a re-scan covers again —
    /// so a scan inserts only what is missing.
    pub async fn shard_existing(
        &self,
        shard: u32,
        from: i64,
        to: i64,
    ) -> StoreResult<std::collections::HashSet<(String, i64)>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(self.sql(
            "SELECT job_id, scheduled_at FROM triggers \
             WHERE scheduled_at >= ?2 AND scheduled_at < ?3 AND origin = 'schedule' \
               AND job_id IN (SELECT job_id FROM job_schedules WHERE shard = ?1)",
        ))
        .bind(shard as i64)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// Fire times of a job in `[from, to)` that are already decided, under
    /// any plan version: a trigger exists or the time was recorded as
    /// skipped. (A new version never fires a time an older one already
    /// decided, and never rewrites it.)
    pub async fn decided_times(&self, job_id: &str, from: i64, to: i64) -> StoreResult<Vec<i64>> {
        Ok(sqlx::query_scalar(self.sql(
            "SELECT scheduled_at FROM triggers \
                 WHERE job_id = ?1 AND origin = 'schedule' AND scheduled_at >= ?2 AND scheduled_at < ?3 \
             UNION SELECT scheduled_at FROM skipped_fires \
                 WHERE job_id = ?1 AND scheduled_at >= ?2 AND scheduled_at < ?3",
        ))
        .bind(job_id)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Insert scheduled triggers and skipped times in one transaction, each
    /// `ON CONFLICT DO NOTHING`. Returns (created, already existed).
    pub async fn scheduled_insert(
        &self,
        triggers: &[ScheduledTrigger],
        skipped: &[(String, i64, i64, &'static str)],
    ) -> StoreResult<(i64, i64)> {
        // Multi-row statements: one round trip per chunk instead of per row.
        // 200 rows x 9 binds stays far below SQLite's bound-parameter limit.
        const CHUNK: usize = 200;
        let (mut tx, _turn) = self.begin_write().await?;
        let mut created = 0;
        for chunk in triggers.chunks(CHUNK) {
            let sql = self.dialect.multi_row(
                "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, \
                 origin, scheduled_at, params, state, priority, next_run_at, created_at, updated_at)",
                concat!(
                    "(?, ?, ?, ?, ?, 'schedule', ?, '{}', ?, ?, ?, ",
                    now_ms!(),
                    ", ",
                    now_ms!(),
                    ")"
                ),
                chunk.len(),
                "ON CONFLICT (plan_key) DO NOTHING",
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for t in chunk {
                insert = insert
                    .bind(crate::registry::plan_key(
                        &t.job_id,
                        t.scheduled_at,
                        t.plan_version as u32,
                        None,
                    ))
                    .bind(t.job_id.as_str())
                    .bind(t.plan_version)
                    .bind(t.tenant.as_str())
                    .bind(t.resource_group.as_str())
                    .bind(t.scheduled_at)
                    .bind(t.state)
                    .bind(t.priority)
                    .bind(t.scheduled_at);
            }
            created += insert.execute(&mut *tx).await?.rows_affected() as i64;
        }
        for chunk in skipped.chunks(CHUNK) {
            let sql = self.dialect.multi_row(
                "INSERT INTO skipped_fires (job_id, plan_version, scheduled_at, reason, recorded_at)",
                concat!("(?, ?, ?, ?, ", now_ms!(), ")"),
                chunk.len(),
                "ON CONFLICT DO NOTHING",
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (job_id, version, at, reason) in chunk {
                insert = insert
                    .bind(job_id.as_str())
                    .bind(*version)
                    .bind(*at)
                    .bind(*reason);
            }
            insert.execute(&mut *tx).await?;
        }
        let first_due = triggers
            .iter()
            .filter(|t| t.state == "pending")
            .map(|t| t.scheduled_at)
            .min();
        if let (Some(due_at), true) = (first_due, created > 0) {
            self.announce_due(&mut *tx, due_at).await?;
        }
        tx.commit().await?;
        Ok((created, triggers.len() as i64 - created))
    }

    /// Skipped fire times, newest first, optionally of one job.
    pub async fn skipped_list(
        &self,
        job_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<(String, i64, i64, String)>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, plan_version, scheduled_at, reason FROM skipped_fires \
             WHERE ?1 IS NULL OR job_id = ?1 ORDER BY scheduled_at DESC LIMIT CAST(?2 AS INTEGER)",
        ))
        .bind(job_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Skipped fire times by reason.
    pub async fn skipped_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            self.sql("SELECT reason, count(*) FROM skipped_fires GROUP BY reason ORDER BY reason"),
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Approve a parked (`manual`) trigger: it becomes pending, audited.
    pub async fn trigger_approve(&self, id: i64, actor: &str, reason: &str) -> StoreResult<()> {
        let (mut tx, _turn) = self.begin_write().await?;
        let updated = sqlx::query(self.sql(concat!(
            "UPDATE triggers SET state = 'pending', next_run_at = ",
            now_ms!(),
            ", updated_at = ",
            now_ms!(),
            " WHERE id = ? AND state = 'manual'"
        )))
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated == 0 {
            return Err(StoreError::Conflict(format!(
                "trigger {id} is not waiting for approval"
            )));
        }
        self.audit_append(
            &mut tx,
            actor,
            "trigger.approve",
            &id.to_string(),
            serde_json::json!({ "reason": reason }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Running triggers of a job that were scheduled before trigger `mine`
    /// (earlier `scheduled_at`, or the same and a lower id), oldest first,
    /// with their lease still live. Only older runs count against a new
    /// one, so two runs checking each other at once never both yield.
    pub async fn job_running_before(&self, job_id: &str, mine: i64) -> StoreResult<Vec<i64>> {
        Ok(sqlx::query_scalar(self.sql(concat!(
            "SELECT r.id FROM triggers r, triggers m WHERE m.id = ?2 AND r.job_id = ?1 \
             AND r.state = 'running' AND r.lease_until >= ",
            now_ms!(),
            " AND (r.scheduled_at < m.scheduled_at OR (r.scheduled_at = m.scheduled_at AND r.id < m.id)) \
             ORDER BY r.scheduled_at, r.id"
        )))
        .bind(job_id)
        .bind(mine)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Cancel a trigger: one that has not started is cancelled at once (a
    /// terminal state); a running one is asked to stop at its next safe
    /// point (its runner sees the request at the next heartbeat). Returns
    /// false when the trigger is already finished.
    pub async fn trigger_request_cancel(&self, id: i64) -> StoreResult<bool> {
        let cancelled = sqlx::query(self.sql(concat!(
            "UPDATE triggers SET state = 'cancelled', error_class = 'cancelled',              error_message = 'cancelled before it ran', finished_at = ",
            now_ms!(),
            ", updated_at = ",
            now_ms!(),
            " WHERE id = ? AND state IN ('pending', 'retry_wait', 'manual')"
        )))
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if cancelled == 1 {
            return Ok(true);
        }
        Ok(sqlx::query(
            self.sql("UPDATE triggers SET cancel_requested = 1 WHERE id = ? AND state = 'running'"),
        )
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    /// Put a claimed trigger back to pending without running it (overlap
    /// `wait`), fenced by token.
    pub async fn trigger_release(&self, lease: &LeaseRef, delay_ms: i64) -> StoreResult<()> {
        let updated = sqlx::query(self.sql(concat!(
            "UPDATE triggers SET state = 'pending', lease_owner = NULL, lease_until = NULL, \
             next_run_at = ",
            now_ms!(),
            " + ?, updated_at = ",
            now_ms!(),
            " WHERE id = ? AND fencing_token = ? AND state = 'running'"
        )))
        .bind(delay_ms)
        .bind(lease.trigger_id)
        .bind(lease.fencing_token)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if updated == 0 {
            return Err(self.lease_lost(lease, "release").await);
        }
        sqlx::query(self.sql(concat!(
            "UPDATE attempts SET outcome = 'released', ended_at = ",
            now_ms!(),
            ", error_class = 'overlap_wait' WHERE id = ?"
        )))
        .bind(lease.attempt_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
