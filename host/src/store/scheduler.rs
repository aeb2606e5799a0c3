//! Trigger control's store ([`SchedulerStore`]): shard leases, the
//! schedules of a shard, and a scan's writes. Every write here is made under
//! a shard lease and fenced by its generation and owner in the same
//! statement (see [`super::fence`]): a scheduler that stalled past its
//! lease and was replaced writes nothing.

use super::dialect::{new_trigger_id, now_ms};
use super::fence::shard_fence;
use super::state_log::{Created, StateChange};
use super::*;
use crate::model::{ShardGeneration, ShardLease, TriggerState, plan_key_ms};
use async_trait::async_trait;

/// Multi-row statements: one round trip per chunk instead of per row.
/// 200 rows x 9 binds stays far below SQLite's bound-parameter limit.
const CHUNK: usize = 200;

/// The shard predicate for statements built at run time: the shard's
/// number, generation and owner follow the rows' placeholders.
fn fence(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => shard_fence!(shard = "?", generation = "?", owner = "?", lock = ""),
        Dialect::Postgres => {
            shard_fence!(
                shard = "?",
                generation = "?",
                owner = "?",
                lock = " FOR SHARE"
            )
        }
    }
}

#[async_trait]
impl SchedulerStore for Store {
    async fn shard_lease(
        &self,
        shard: u32,
        owner: &str,
        ttl_ms: i64,
        now: Option<i64>,
    ) -> StoreResult<Option<ShardLease>> {
        let row: Option<(i64, i64, Option<i64>, i64)> = sqlx::query_as(self.sql(concat!(
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
        .await?;
        Ok(row.map(|(shard, generation, watermark, now)| ShardLease {
            shard,
            generation: ShardGeneration::new(generation),
            owner: owner.to_string(),
            watermark,
            now,
        }))
    }

    async fn shard_release(&self, lease: &ShardLease) -> StoreResult<()> {
        sqlx::query(self.sql(
            "UPDATE schedule_shards SET owner = NULL, lease_until = NULL \
             WHERE shard = ? AND generation = ? AND owner = ?",
        ))
        .bind(lease.shard)
        .bind(lease.generation.get())
        .bind(&lease.owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A cheap fingerprint of a shard's schedules, to reload them only when
    /// something changed: (count, newest update, sum of versions).
    async fn schedules_fingerprint(&self, shard: u32) -> StoreResult<(i64, i64, i64)> {
        Ok(sqlx::query_as(self.sql(
            "SELECT count(*), coalesce(max(updated_at), 0), CAST(coalesce(sum(plan_version), 0) AS BIGINT) \
             FROM job_schedules WHERE shard = ?",
        ))
        .bind(shard as i64)
        .fetch_one(&self.pool)
        .await?)
    }

    /// The schedules of every job in a shard.
    async fn schedules_in_shard(&self, shard: u32) -> StoreResult<Vec<JobScheduleRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT job_id, plan_version, shard, spec, tenant, resource_group, priority, active_from \
             FROM job_schedules WHERE shard = ? ORDER BY job_id, tenant",
        ))
        .bind(shard as i64)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Scheduled triggers (of any plan version) that already exist for the
    /// jobs of a shard in `[from, to)` — the overlap a re-scan covers again —
    /// so a scan inserts only what is missing.
    async fn shard_existing(
        &self,
        shard: u32,
        from: i64,
        to: i64,
    ) -> StoreResult<std::collections::HashSet<(String, String, i64)>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(self.sql(concat!(
            "SELECT tenant, job_id, scheduled_at FROM triggers \
             WHERE scheduled_at >= ?2 AND scheduled_at < ?3 AND origin = ",
            crate::trigger_origin!(schedule),
            " AND EXISTS (SELECT 1 FROM job_schedules s WHERE s.shard = ?1 \
                   AND s.tenant = triggers.tenant AND s.job_id = triggers.job_id)"
        )))
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
    async fn decided_times(
        &self,
        tenant: &str,
        job_id: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<i64>> {
        Ok(sqlx::query_scalar(self.sql(concat!(
            "SELECT scheduled_at FROM triggers WHERE tenant = ?4 AND job_id = ?1 AND origin = ",
            crate::trigger_origin!(schedule),
            " AND scheduled_at >= ?2 AND scheduled_at < ?3 \
             UNION SELECT scheduled_at FROM skipped_fires WHERE tenant = ?4 AND job_id = ?1 \
                 AND scheduled_at >= ?2 AND scheduled_at < ?3"
        )))
        .bind(job_id)
        .bind(from)
        .bind(to)
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn scan_commit(&self, lease: &ShardLease, scan: &ScanCommit) -> StoreResult<ScanWritten> {
        let (mut tx, turn) = self.begin_write().await?;
        let inserted = self
            .insert_scheduled(&mut tx, lease, &scan.triggers)
            .await?;
        let created = inserted.len() as i64;
        self.insert_skipped(&mut tx, lease, &scan.skipped).await?;
        let mut held = Vec::new();
        if let Some(first_at) = scan.triggers.iter().map(|t| t.scheduled_at).min() {
            held = self
                .hold_gated_fires(&mut tx, lease.shard, first_at)
                .await?;
        }
        let existing = scan.triggers.len() as i64 - created;
        // The watermark moves last, fenced like the rest: zero rows means
        // the shard moved to another scheduler, and nothing of this scan
        // is kept.
        let advanced = sqlx::query(self.sql(concat!(
            "UPDATE schedule_shards SET \
                 watermark = CASE WHEN watermark > ?1 THEN watermark ELSE ?1 END, \
                 last_scan_at = ?2, triggers_created = triggers_created + ?3, \
                 triggers_existing = triggers_existing + ?4 \
             WHERE shard = ?5 AND ",
            shard_fence!(shard = "?5", generation = "?6", owner = "?7", lock = "")
        )))
        .bind(scan.watermark)
        .bind(lease.now)
        .bind(created)
        .bind(existing)
        .bind(lease.shard)
        .bind(lease.generation.get())
        .bind(&lease.owner)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if advanced == 0 {
            tx.rollback().await?;
            drop(turn);
            return Err(self.shard_lost(lease, "scan").await);
        }
        let first_due = scan
            .triggers
            .iter()
            .filter(|t| t.state == TriggerState::Pending)
            .map(|t| t.scheduled_at)
            .min();
        if let (Some(due_at), true) = (first_due, created > 0) {
            self.announce_due(&mut *tx, due_at).await?;
        }
        tx.commit().await?;
        for (trigger_id, plan_key, job_id, state) in &inserted {
            Created {
                trigger_id: *trigger_id,
                plan_key,
                job_id,
                origin: crate::model::TriggerOrigin::Schedule,
                state,
                params: "{}",
                actor: &lease.owner,
            }
            .log();
        }
        let hold = StateChange {
            cause: "gate_held",
            state: TriggerState::Paused.as_str(),
            actor: &lease.owner,
        };
        hold.log(&held);
        Ok(ScanWritten { created, existing })
    }
}

impl Store {
    /// A scan's triggers, `ON CONFLICT DO NOTHING` on the plan key, each
    /// statement fenced by the shard lease. Returns those created: id,
    /// plan key, job and state.
    async fn insert_scheduled(
        &self,
        tx: &mut Tx,
        lease: &ShardLease,
        triggers: &[ScheduledTrigger],
    ) -> StoreResult<Vec<(i64, String, String, String)>> {
        let mut created = Vec::new();
        for chunk in triggers.chunks(CHUNK) {
            let ids = self.reserve_ids_by_tenant(tx, chunk).await?;
            let head = concat!(
                "INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, \
                 resource_group, origin, scheduled_at, params, state, priority, next_run_at, \
                 recovery, created_at, updated_at) \
                 SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, \
                     ",
                crate::trigger_origin!(schedule),
                ", v.column7, '{}', v.column8, v.column9, v.column10, v.column11, "
            );
            let sql = self.dialect.multi_row(
                &format!("{head}{now}, {now} FROM (", now = now_ms!()),
                concat!("(", new_trigger_id!(), ", ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                chunk.len(),
                &format!(
                    ") AS v WHERE {} ON CONFLICT (tenant, plan_key) DO NOTHING \
                     RETURNING id, plan_key, job_id, state",
                    fence(self.dialect)
                ),
            );
            let mut insert = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for (t, id) in chunk.iter().zip(ids) {
                debug_assert!(crate::model::Transition::Create.ends_in(t.state));
                insert = insert
                    .bind(id)
                    .bind(plan_key_ms(
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
                    .bind(t.state.as_str())
                    .bind(t.priority)
                    .bind(t.scheduled_at)
                    .bind(i16::from(t.recovery));
            }
            insert = insert
                .bind(lease.shard)
                .bind(lease.generation.get())
                .bind(lease.owner.as_str());
            created.extend(insert.fetch_all(&mut **tx).await?);
        }
        Ok(created)
    }

    /// Each trigger's id in `chunk` (see `store/trigger_ids.rs`): one
    /// reservation for the chunk, a run of ids per tenant, so each
    /// tenant's triggers lie together; `None` where the database gives it.
    async fn reserve_ids_by_tenant(
        &self,
        tx: &mut Tx,
        chunk: &[ScheduledTrigger],
    ) -> StoreResult<Vec<Option<i64>>> {
        // (tenant, its triggers in the chunk): chunks are small, tenants in
        // one fewer still.
        let mut asks: Vec<(&str, usize)> = Vec::new();
        for t in chunk {
            match asks.iter_mut().find(|(tenant, _)| *tenant == t.tenant) {
                Some((_, n)) => *n += 1,
                None => asks.push((&t.tenant, 1)),
            }
        }
        let mut next = self.reserve_trigger_ids(tx, &asks).await?;
        Ok(chunk
            .iter()
            .map(|t| {
                let i = asks
                    .iter()
                    .position(|(tenant, _)| *tenant == t.tenant)
                    .expect("asked above");
                let id = next[i];
                next[i] = id.map(|id| id + 1);
                id
            })
            .collect())
    }

    /// Late fire times the misfire policy skipped, recorded so no later
    /// scan fires them; fenced like the triggers.
    async fn insert_skipped(
        &self,
        tx: &mut Tx,
        lease: &ShardLease,
        skipped: &[(String, String, i64, i64)],
    ) -> StoreResult<()> {
        for chunk in skipped.chunks(CHUNK) {
            let sql = self.dialect.multi_row(
                &format!(
                    "INSERT INTO skipped_fires (tenant, job_id, plan_version, scheduled_at, \
                     reason, recorded_at) SELECT v.column1, v.column2, v.column3, v.column4, \
                     'misfire_skip', {} FROM (",
                    now_ms!()
                ),
                "(?, ?, ?, ?)",
                chunk.len(),
                &format!(
                    ") AS v WHERE {} ON CONFLICT DO NOTHING",
                    fence(self.dialect)
                ),
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (tenant, job_id, version, at) in chunk {
                insert = insert
                    .bind(tenant.as_str())
                    .bind(job_id.as_str())
                    .bind(*version)
                    .bind(*at);
            }
            insert = insert
                .bind(lease.shard)
                .bind(lease.generation.get())
                .bind(lease.owner.as_str());
            insert.execute(&mut **tx).await?;
        }
        Ok(())
    }
}
