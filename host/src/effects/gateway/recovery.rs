//! The recovery scanner: effects left `intent` or `unknown` by attempts
//! that no longer hold a lease (crash, drain, expiry) are resolved by asking
//! the downstream by key ([`protocol::recovery_found`]). Nothing is ever
//! resent here.

use super::{EffectGateway, tickets};
use crate::effects::protocol::{self, Recovered};
use crate::store::{EffectRecord, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// What one recovery scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryReport {
    pub scanned: usize,
    /// Found applied at the downstream: marked succeeded, nothing resent.
    pub succeeded: usize,
    /// Found refused at the downstream: marked failed.
    pub failed: usize,
    /// Not found at the downstream: marked retryable (safe to resend).
    pub not_found: usize,
    /// Could not be decided: an exception ticket each.
    pub tickets: usize,
    /// Query failed; left for the next scan.
    pub undecided: usize,
}

impl RecoveryReport {
    fn tally(&mut self, recovered: &Recovered) {
        let count = match recovered {
            Recovered::Unqueryable { .. } | Recovered::EvidenceConflict(_) => &mut self.tickets,
            Recovered::Succeeded(_) => &mut self.succeeded,
            Recovered::Failed(_) => &mut self.failed,
            Recovered::NotFound(_) => &mut self.not_found,
            Recovered::Undecided(_) => &mut self.undecided,
        };
        *count += 1;
    }
}

/// Owns the background recovery scanner; stops it on drop.
pub struct RecoveryGuard(tokio::task::JoinHandle<()>);

impl Drop for RecoveryGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl EffectGateway {
    /// One scan: resolve up to `limit` unresolved effects whose trigger
    /// holds no live lease.
    pub async fn recover(&self, limit: i64) -> Result<RecoveryReport, StoreError> {
        let mut report = RecoveryReport::default();
        for rec in self.store.effects_unresolved(limit).await? {
            report.scanned += 1;
            let recovered = match self.connectors.get(&rec.connector).await? {
                Some(live) if live.record.queryable => {
                    let found = self
                        .http
                        .query(
                            live.endpoint(crate::effects::http::MAX_BODY),
                            &rec.downstream_key,
                        )
                        .await;
                    protocol::recovery_found(&rec, found)
                }
                _ => protocol::recovery_unqueryable(&rec),
            };
            self.apply_recovery(&rec, &recovered).await?;
            report.tally(&recovered);
        }
        Ok(report)
    }

    /// Do what recovery decided for `rec`. Its write is a compare-and-set on
    /// the token the record holds, applied only while no live lease could be
    /// writing the effect (`EffectStore::effect_recover`).
    async fn apply_recovery(
        &self,
        rec: &EffectRecord,
        recovered: &Recovered,
    ) -> Result<(), StoreError> {
        let key = &rec.idempotency_key;
        let outcome = match recovered {
            Recovered::Unqueryable { ticket, outcome } => {
                tickets::open(&*self.store, ticket, rec.trigger_id, Some(rec)).await;
                outcome
            }
            Recovered::EvidenceConflict(ticket) => {
                tickets::open(&*self.store, ticket, rec.trigger_id, Some(rec)).await;
                return Ok(());
            }
            Recovered::Succeeded(outcome)
            | Recovered::Failed(outcome)
            | Recovered::NotFound(outcome) => outcome,
            Recovered::Undecided(why) => {
                tracing::warn!(key = %crate::model::text::Esc(&key), why = %crate::model::text::Esc(&why), "recovery could not decide");
                return Ok(());
            }
        };
        self.store
            .effect_recover(&rec.tenant, key, rec.fencing_token, outcome)
            .await?;
        Ok(())
    }

    /// Run [`EffectGateway::recover`] every `every` until the returned guard
    /// is dropped (a `serve` process keeps one).
    pub fn spawn_recovery(self: &Arc<Self>, every: Duration, limit: i64) -> RecoveryGuard {
        let gateway = self.clone();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                match gateway.recover(limit).await {
                    Ok(r) if r.scanned > 0 => tracing::info!(?r, "effect recovery scan"),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %crate::model::text::Esc(&e), "effect recovery scan failed")
                    }
                }
            }
        });
        RecoveryGuard(task)
    }
}
