//! A manual run's request key (`trigger run --request-key K`): the same key
//! is the same run for as long as its trigger is kept. The key is also the
//! plan key's partition (`manual-K`), but the plan key carries the run's
//! time too, so the plan key alone would only catch a retry within the
//! same millisecond; a run is looked up by job and request key first, in
//! the creating transaction. The key has a column of its own, NULL for
//! runs given none, so `triggers_request` (migration 0022) holds only the
//! keyed runs instead of an entry per state change of every manual run.

use super::*;

impl Store {
    /// The plan key of the manual run of `job` with this request key,
    /// if one exists. PostgreSQL: two creators of the same
    /// key queue on a transaction-scoped lock of it, so the second sees
    /// the first's run.
    pub(super) async fn existing_request(
        &self,
        tx: &mut Tx,
        job: &JobRecord,
        request_key: &str,
    ) -> StoreResult<Option<String>> {
        if self.dialect == Dialect::Postgres {
            // Keyed by the job's qualified name and the partition
            // `manual-K`: a request key is a name inside its tenant.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7263519))")
                .bind(format!("{}#manual-{request_key}", job.qualified()))
                .execute(&mut **tx)
                .await?;
        }
        Ok(sqlx::query_scalar(self.sql(
            "SELECT plan_key FROM triggers WHERE tenant = ? AND job_id = ? AND request_key = ? \
             ORDER BY id LIMIT 1",
        ))
        .bind(&job.tenant)
        .bind(&job.job_id)
        .bind(request_key)
        .fetch_optional(&mut **tx)
        .await?)
    }
}
