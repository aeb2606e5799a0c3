//! A manual run's request key (`trigger run --request-key K`): the same key
//! is the same run for as long as its trigger is kept. The key is the plan
//! key's partition (`manual-K`), and the plan key also carries the run's
//! time, so the plan key alone would only catch a retry within the same
//! millisecond; a run is looked up by job and partition first
//! (`triggers_request`, migration 0018), in the creating transaction.

use super::*;

impl Store {
    /// The plan key of the manual run of `job_id` with this `partition`
    /// (`manual-K`), if one exists. PostgreSQL: two creators of the same
    /// key queue on a transaction-scoped lock of it, so the second sees
    /// the first's run.
    pub(super) async fn existing_request(
        &self,
        tx: &mut Tx,
        job_id: &str,
        partition: &str,
    ) -> StoreResult<Option<String>> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7263519))")
                .bind(format!("{job_id}#{partition}"))
                .execute(&mut **tx)
                .await?;
        }
        Ok(sqlx::query_scalar(self.sql(
            "SELECT plan_key FROM triggers WHERE job_id = ? AND partition_key = ? \
             AND origin = 'manual' ORDER BY id LIMIT 1",
        ))
        .bind(job_id)
        .bind(partition)
        .fetch_optional(&mut **tx)
        .await?)
    }
}
