//! Gates in the store (migration 0018; the rules are [`crate::model::gates`]):
//! pause, resume and cancel at a scope, each one transaction with its audit
//! entry (`gate.pause`, `gate.resume`, `gate.cancel`), and the checks that
//! keep trigger creation closed while a gate is ([`holds`]).
//!
//! Atomic against claims and creation on both databases. SQLite: every
//! write transaction holds the database's one write lock. PostgreSQL
//! (READ COMMITTED): a pause takes [`GATE_LOCK`] exclusively, which every
//! creator of triggers takes shared before it decides — so an insert
//! either commits before the pause reads (and is paused by it) or reads the
//! closed gate. Inside the pause, running triggers are asked to pause
//! *before* queued ones move: a running trigger released in between is
//! queued by the second statement, and one released after it sees its own
//! `pause_requested` and lands `paused` (the release's `CASE`). Claims run
//! beside it, and are met by a third statement that asks the running
//! again: a claim locks its triggers from its candidates' read until it
//! commits, so the second statement either moves a queued trigger before
//! any claim locks it (and claims skip it) or waits for the claim that
//! locked it — which then commits before the third statement reads, and is
//! asked. A cancel is built the same way. Neither takes the claims' lock
//! (the groups' rows): a claim may wait for it while it holds its
//! triggers (see `store/runner/postgres.rs`), so a pause that held it
//! while it waited for those triggers would deadlock with the claim.

pub(in crate::store) mod holds;
mod second;

use super::dialect::now_ms;
use super::state_log::{Moved, StateChange};
use super::*;
use crate::model::gates::{
    CancelReport, GateScope, LateFire, MisfireRule, PauseReport, ResumeReport, check_reason,
    judge_late_fires,
};
use crate::model::tickets::LocalApprovals;
use crate::trigger_state;
use second::Second;
use serde::Serialize;

/// The transaction-scoped advisory lock a pause or resume holds
/// exclusively and trigger creators shared (PostgreSQL).
pub(super) const GATE_LOCK: i64 = 7_263_518;

/// A gate, open or reopened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct GateRecord {
    pub id: i64,
    pub kind: String,
    pub value: String,
    pub reason: String,
    pub closed_by: String,
    pub closed_at: i64,
    pub reopened_by: Option<String>,
    pub reopened_at: Option<i64>,
    pub reopen_reason: Option<String>,
    /// A closed global gate's resume waiting for a second person
    /// ([`second`]): who proposed it, and why.
    #[sqlx(default)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_proposed_by: Option<String>,
    #[sqlx(default)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_proposed_reason: Option<String>,
}

impl GateRecord {
    /// The scope it covers.
    pub fn scope(&self) -> GateScope {
        GateScope::parse(&self.kind, &self.value).unwrap_or(GateScope::Global)
    }
}

const GATE_COLUMNS: &str = "id, kind, value, reason, closed_by, closed_at, reopened_by, \
     reopened_at, reopen_reason, resume_proposed_by, resume_proposed_reason";

/// Whether a `triggers` row is covered by any closed gate.
pub(super) const COVERED: &str = "EXISTS (SELECT 1 FROM gates g WHERE g.reopened_at IS NULL \
     AND (g.kind = 'global' OR (g.kind = 'job' AND g.value = triggers.tenant || '/' || triggers.job_id) \
     OR (g.kind = 'tenant' AND g.value = triggers.tenant) \
     OR (g.kind = 'group' AND g.value = triggers.resource_group) \
     OR (g.kind = 'type' AND g.value = (SELECT p.job_type FROM plan_versions p \
         WHERE p.tenant = triggers.tenant AND p.job_id = triggers.job_id \
         AND p.version = triggers.plan_version))))";

/// The `triggers` rows a scope covers, with one placeholder for its value.
/// A job gate's value is the job's qualified name, `tenant/job`.
fn scope_clause(scope: &GateScope) -> &'static str {
    match scope {
        GateScope::Job(_) => "triggers.tenant || '/' || triggers.job_id = ?",
        GateScope::Type(_) => {
            "EXISTS (SELECT 1 FROM plan_versions p WHERE p.tenant = triggers.tenant \
             AND p.job_id = triggers.job_id \
             AND p.version = triggers.plan_version AND p.job_type = ?)"
        }
        GateScope::Tenant(_) => "triggers.tenant = ?",
        GateScope::Group(_) => "triggers.resource_group = ?",
        GateScope::Global => "? = ''",
    }
}

/// Ask a scope's running triggers to pause at their next safe point.
pub(super) const ASK_RUNNING: &str = concat!(
    "UPDATE triggers SET pause_requested = 1 WHERE state = ",
    trigger_state!(running),
    " AND pause_requested = 0 AND {scope}"
);

/// [`crate::model::Transition::Pause`]: a scope's queued triggers. A
/// retry keeps its due time and stays in the recovery lane.
pub(super) const PAUSE_QUEUED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(paused),
    ", recovery = CASE WHEN state = ",
    trigger_state!(retry_wait),
    " THEN 1 ELSE recovery END, updated_at = ",
    now_ms!(),
    " WHERE state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(retry_wait),
    ") AND {scope}"
);

/// [`crate::model::Transition::Resume`] to `pending`: a scope's paused
/// triggers no other closed gate covers.
pub(super) const RESUME_PAUSED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(pending),
    ", updated_at = ",
    now_ms!(),
    " WHERE state = ",
    trigger_state!(paused),
    " AND {scope} AND NOT {covered}"
);

/// Withdraw the pause request of a scope's running triggers no other
/// closed gate covers.
const UNASK_RUNNING: &str = concat!(
    "UPDATE triggers SET pause_requested = 0 WHERE state = ",
    trigger_state!(running),
    " AND pause_requested = 1 AND {scope} AND NOT {covered}"
);

/// Scheduled fires a gate held that never started, for the misfire policy.
const HELD_FIRES: &str = concat!(
    "SELECT id, tenant || '/' || job_id, scheduled_at FROM triggers WHERE state = ",
    trigger_state!(paused),
    " AND attempts = 0 AND origin = ",
    crate::trigger_origin!(schedule),
    " AND {scope} AND NOT {covered} \
     ORDER BY tenant, job_id, scheduled_at"
);

/// [`crate::model::Transition::Resume`] of a late held fire its policy parks.
pub(super) const RESUME_PARKED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(manual),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state = ",
    trigger_state!(paused)
);

/// [`crate::model::Transition::Resume`] of a late held fire its policy skips.
pub(super) const RESUME_SKIPPED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(skipped),
    ", error_class = 'misfire_skip', error_message = 'a late scheduled fire held by a gate, \
     skipped by its misfire policy at resume', finished_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state = ",
    trigger_state!(paused)
);

/// [`crate::model::Transition::CancelUnstarted`] at a scope.
pub(super) const CANCEL_QUEUED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(cancelled),
    ", error_class = 'cancelled', error_message = 'cancelled before it finished (scope cancel)', \
     finished_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(retry_wait),
    ", ",
    trigger_state!(manual),
    ", ",
    trigger_state!(paused),
    ") AND {scope}"
);

/// Ask a scope's running triggers to stop (they end `cancelled` at their
/// next safe point, unless they succeed first).
const STOP_RUNNING: &str = concat!(
    "UPDATE triggers SET cancel_requested = 1 WHERE state = ",
    trigger_state!(running),
    " AND cancel_requested = 0 AND {scope}"
);

const FINISHED_IN_SCOPE: &str = concat!(
    "SELECT count(*) FROM triggers WHERE state IN (",
    trigger_state!(succeeded),
    ", ",
    trigger_state!(failed),
    ", ",
    trigger_state!(cancelled),
    ", ",
    trigger_state!(skipped),
    ") AND {scope}"
);

const STILL_HELD: &str = concat!(
    "SELECT count(*) FROM triggers WHERE (state = ",
    trigger_state!(paused),
    " OR (state = ",
    trigger_state!(running),
    " AND pause_requested = 1)) AND {scope}"
);

/// `template` with its scope (and the covered test) filled in, for this
/// database.
pub(super) fn scoped(dialect: Dialect, template: &str, scope: &GateScope) -> String {
    dialect.sql_owned(
        template
            .replace("{scope}", scope_clause(scope))
            .replace("{covered}", COVERED),
    )
}

impl Store {
    /// Run `template` (one scope placeholder) and return its row count.
    async fn scoped_exec(
        &self,
        tx: &mut Tx,
        template: &str,
        scope: &GateScope,
    ) -> StoreResult<u64> {
        Ok(
            sqlx::query(sqlx::AssertSqlSafe(scoped(self.dialect, template, scope)))
                .bind(scope.value())
                .execute(&mut **tx)
                .await?
                .rows_affected(),
        )
    }

    /// Run a state-moving `template` (one scope placeholder): the
    /// triggers it moved, for their log lines.
    async fn scoped_moves(
        &self,
        tx: &mut Tx,
        template: &str,
        scope: &GateScope,
    ) -> StoreResult<Vec<Moved>> {
        let sql = scoped(
            self.dialect,
            &format!("{template} RETURNING id, plan_key"),
            scope,
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(scope.value())
            .fetch_all(&mut **tx)
            .await?)
    }

    async fn scoped_count(
        &self,
        tx: &mut Tx,
        template: &str,
        scope: &GateScope,
    ) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(scoped(self.dialect, template, scope)))
            .bind(scope.value())
            .fetch_one(&mut **tx)
            .await?;
        Ok(n as u64)
    }

    /// The open gate of exactly this scope, if any.
    async fn open_gate(&self, tx: &mut Tx, scope: &GateScope) -> StoreResult<Option<GateRecord>> {
        let sql = format!(
            "SELECT {GATE_COLUMNS} FROM gates WHERE kind = ? AND value = ? AND reopened_at IS NULL"
        );
        Ok(
            sqlx::query_as(sqlx::AssertSqlSafe(self.dialect.sql_owned(sql)))
                .bind(scope.kind())
                .bind(scope.value())
                .fetch_optional(&mut **tx)
                .await?,
        )
    }

    /// The scope as gates store it: a job by its qualified name,
    /// `tenant/job` (job ids are names inside a tenant); a bare id must be
    /// one tenant's job, and an unknown one is refused rather than gated.
    async fn stored_scope(&self, scope: &GateScope) -> StoreResult<GateScope> {
        match scope {
            GateScope::Job(name) if !name.contains('/') => {
                let job = self
                    .job_get_for(&crate::model::identity::TenantScope::Every, name)
                    .await?;
                Ok(GateScope::Job(job.qualified()))
            }
            other => Ok(other.clone()),
        }
    }

    /// Close the gate of `scope`: nothing new starts in it until it
    /// reopens. Its queued triggers become `paused` and its running ones
    /// are asked to pause at their next safe point — in the transaction
    /// that closes the gate, with its audit entry. A scope already closed
    /// is refused, saying by whom.
    pub async fn gate_pause(
        &self,
        scope: &GateScope,
        actor: &str,
        reason: &str,
    ) -> StoreResult<PauseReport> {
        check_reason(reason).map_err(StoreError::Conflict)?;
        let scope = &self.stored_scope(scope).await?;
        let (mut tx, _turn) = self.begin_write().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(GATE_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(open) = self.open_gate(&mut tx, scope).await? {
            return Err(StoreError::Conflict(format!(
                "{scope} is already paused (by {} at {}: {}); nothing changed",
                open.closed_by,
                crate::model::time::rfc3339(crate::model::time::from_millis(open.closed_at)),
                open.reason
            )));
        }
        sqlx::query(self.sql(concat!(
            "INSERT INTO gates (kind, value, reason, closed_by, closed_at) VALUES (?, ?, ?, ?, ",
            now_ms!(),
            ")"
        )))
        .bind(scope.kind())
        .bind(scope.value())
        .bind(reason)
        .bind(actor)
        .execute(&mut *tx)
        .await?;
        let mut running_asked = self.scoped_exec(&mut tx, ASK_RUNNING, scope).await?;
        let paused = self.scoped_moves(&mut tx, PAUSE_QUEUED, scope).await?;
        // The claims that committed meanwhile (see the module comment).
        // None on SQLite: its write lock kept every claim out since BEGIN.
        if self.dialect == Dialect::Postgres {
            running_asked += self.scoped_exec(&mut tx, ASK_RUNNING, scope).await?;
        }
        let queued_paused = paused.len() as u64;
        let report = PauseReport {
            scope: scope.clone(),
            closed: true,
            running_asked,
            queued_paused,
        };
        self.audit_append(
            &mut tx,
            actor,
            "gate.pause",
            &scope.subject(),
            serde_json::json!({ "reason": reason, "running_asked": running_asked,
                "queued_paused": queued_paused }),
        )
        .await?;
        tx.commit().await?;
        let change = StateChange {
            cause: "pause",
            state: TriggerState::Paused.as_str(),
            actor,
        };
        change.log(&paused);
        Ok(report)
    }

    /// Reopen the gate of `scope`. Its paused triggers that no other closed
    /// gate covers are due again (from their checkpoints, with a new token
    /// at their next claim) — except late scheduled fires that never
    /// started, which follow their job's misfire policy — and its running
    /// ones no longer need to pause. Audited; a scope with no closed gate
    /// is refused. The global gate takes two people ([`second`]): the
    /// first resume is recorded as a proposal (the report's
    /// `proposed_by`), a different person's reopens it; a local command
    /// line's is refused.
    pub async fn gate_resume(
        &self,
        scope: &GateScope,
        actor: &str,
        reason: &str,
    ) -> StoreResult<ResumeReport> {
        self.gate_resume_with(scope, actor, reason, LocalApprovals::Refuse)
            .await
    }

    /// [`Store::gate_resume`], the local command line's second resume of
    /// the global gate as `local` says.
    pub async fn gate_resume_with(
        &self,
        scope: &GateScope,
        actor: &str,
        reason: &str,
        local: LocalApprovals,
    ) -> StoreResult<ResumeReport> {
        check_reason(reason).map_err(StoreError::Conflict)?;
        let scope = &self.stored_scope(scope).await?;
        let (mut tx, _turn) = self.begin_write().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(GATE_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        let mut detail = serde_json::json!({ "reason": reason });
        if scope.resume_needs_two_people() {
            match self
                .resume_second_person(&mut tx, scope, actor, reason, local)
                .await?
            {
                Second::Proposed(report) => {
                    tx.commit().await?;
                    return Ok(report);
                }
                Second::Approved(proposal) => detail = proposal,
            }
            detail["reason"] = reason.into();
        }
        let reopened = sqlx::query(self.sql(concat!(
            "UPDATE gates SET reopened_at = ",
            now_ms!(),
            ", reopened_by = ?, reopen_reason = ? \
             WHERE kind = ? AND value = ? AND reopened_at IS NULL"
        )))
        .bind(actor)
        .bind(reason)
        .bind(scope.kind())
        .bind(scope.value())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if reopened == 0 {
            return Err(StoreError::Conflict(format!(
                "{scope} is not paused; nothing changed (see `paddock gates`)"
            )));
        }
        let (mut report, judged) = self.judge_held_fires(&mut tx, scope).await?;
        report.reopened = true;
        let resumed = self.scoped_moves(&mut tx, RESUME_PAUSED, scope).await?;
        report.resumed = resumed.len() as u64;
        report.running_unasked = self.scoped_exec(&mut tx, UNASK_RUNNING, scope).await?;
        report.still_held = self.scoped_count(&mut tx, STILL_HELD, scope).await?;
        if report.resumed > 0 {
            let now: i64 = sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
                .fetch_one(&mut *tx)
                .await?;
            self.announce_due(&mut *tx, now).await?;
        }
        detail["report"] = serde_json::to_value(&report).unwrap_or_default();
        self.audit_append(&mut tx, actor, "gate.resume", &scope.subject(), detail)
            .await?;
        tx.commit().await?;
        for (fate, moved) in judged {
            let (cause, state) = match fate {
                LateFire::Park => ("resume_parked", TriggerState::Manual),
                _ => ("resume_skipped", TriggerState::Skipped),
            };
            StateChange {
                cause,
                state: state.as_str(),
                actor,
            }
            .log(&[moved]);
        }
        let change = StateChange {
            cause: "resume",
            state: TriggerState::Pending.as_str(),
            actor,
        };
        change.log(&resumed);
        Ok(report)
    }

    /// Late scheduled fires the gate held and that never started, judged
    /// by their job's misfire policy: parked or skipped now; those that
    /// fire are left paused for [`RESUME_PAUSED`]. Returns the counts and
    /// each trigger moved with its fate.
    async fn judge_held_fires(
        &self,
        tx: &mut Tx,
        scope: &GateScope,
    ) -> StoreResult<(ResumeReport, Vec<(LateFire, Moved)>)> {
        let held: Vec<(i64, String, i64)> =
            sqlx::query_as(sqlx::AssertSqlSafe(scoped(self.dialect, HELD_FIRES, scope)))
                .bind(scope.value())
                .fetch_all(&mut **tx)
                .await?;
        let mut report = ResumeReport::default();
        let mut judged = Vec::new();
        if held.is_empty() {
            return Ok((report, judged));
        }
        let now: i64 = sqlx::query_scalar(self.sql(concat!("SELECT ", now_ms!())))
            .fetch_one(&mut **tx)
            .await?;
        for job in held.chunk_by(|a, b| a.1 == b.1) {
            let spec: Option<String> = sqlx::query_scalar(
                self.sql("SELECT spec FROM job_schedules WHERE tenant || '/' || job_id = ?"),
            )
            .bind(&job[0].1)
            .fetch_optional(&mut **tx)
            .await?;
            let rule = spec.map_or_else(MisfireRule::default, |s| MisfireRule::from_spec(&s));
            let times: Vec<i64> = job.iter().map(|(_, _, at)| *at).collect();
            for ((id, _, _), fate) in job.iter().zip(judge_late_fires(&times, now, &rule)) {
                let sql = match fate {
                    LateFire::Fire => continue,
                    LateFire::Park => RESUME_PARKED,
                    LateFire::Skip => RESUME_SKIPPED,
                };
                let moved: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(
                    self.dialect.sql_owned(format!("{sql} RETURNING plan_key")),
                ))
                .bind(id)
                .fetch_optional(&mut **tx)
                .await?;
                let Some(plan_key) = moved else { continue };
                match fate {
                    LateFire::Park => report.parked += 1,
                    _ => report.skipped += 1,
                }
                judged.push((fate, (*id, plan_key)));
            }
        }
        Ok((report, judged))
    }

    /// Cancel everything live in `scope`: triggers that have not started
    /// (or are paused) end `cancelled` now; running ones are asked to stop
    /// and end `cancelled` at their next safe point — unless they succeed
    /// first: a cancel never rewrites a finished trigger, and the report
    /// counts those it found finished. Audited.
    pub async fn gate_cancel(
        &self,
        scope: &GateScope,
        actor: &str,
        reason: &str,
    ) -> StoreResult<CancelReport> {
        check_reason(reason).map_err(StoreError::Conflict)?;
        let scope = &self.stored_scope(scope).await?;
        let (mut tx, _turn) = self.begin_write().await?;
        let already_final = self.scoped_count(&mut tx, FINISHED_IN_SCOPE, scope).await?;
        let mut stop_requested = self.scoped_exec(&mut tx, STOP_RUNNING, scope).await?;
        let cancelled_now = self.scoped_moves(&mut tx, CANCEL_QUEUED, scope).await?;
        // The claims that committed meanwhile (see the module comment).
        // None on SQLite: its write lock kept every claim out since BEGIN.
        if self.dialect == Dialect::Postgres {
            stop_requested += self.scoped_exec(&mut tx, STOP_RUNNING, scope).await?;
        }
        let cancelled = cancelled_now.len() as u64;
        let report = CancelReport {
            cancelled,
            stop_requested,
            already_final,
        };
        self.audit_append(
            &mut tx,
            actor,
            "gate.cancel",
            &scope.subject(),
            serde_json::json!({ "reason": reason, "report": report }),
        )
        .await?;
        tx.commit().await?;
        let change = StateChange {
            cause: "cancel",
            state: TriggerState::Cancelled.as_str(),
            actor,
        };
        change.log(&cancelled_now);
        Ok(report)
    }

    /// The closed gates (with `history`, reopened ones too), newest first.
    pub async fn gates_list(&self, history: bool) -> StoreResult<Vec<GateRecord>> {
        let sql = format!(
            "SELECT {GATE_COLUMNS} FROM gates {} ORDER BY id DESC",
            if history {
                ""
            } else {
                "WHERE reopened_at IS NULL"
            }
        );
        Ok(
            sqlx::query_as(sqlx::AssertSqlSafe(self.dialect.sql_owned(sql)))
                .fetch_all(&self.pool)
                .await?,
        )
    }
}
