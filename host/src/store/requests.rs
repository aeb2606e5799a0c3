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
    /// The plan key of the manual run of `job_id` with this request key,
    /// if one exists. PostgreSQL: two creators of the same
    /// key queue on a transaction-scoped lock of it, so the second sees
    /// the first's run.
    pub(super) async fn existing_request(
        &self,
        tx: &mut Tx,
        job_id: &str,
        request_key: &str,
    ) -> StoreResult<Option<String>> {
        if self.dialect == Dialect::Postgres {
            // Keyed as before migration 0022 (job and partition `manual-K`),
            // so processes of both versions queue on the same lock during
            // an upgrade.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7263519))")
                .bind(format!("{job_id}#manual-{request_key}"))
                .execute(&mut **tx)
                .await?;
        }
        Ok(sqlx::query_scalar(self.sql(
            "SELECT plan_key FROM triggers WHERE job_id = ? AND request_key = ? \
             ORDER BY id LIMIT 1",
        ))
        .bind(job_id)
        .bind(request_key)
        .fetch_optional(&mut **tx)
        .await?)
    }
}
