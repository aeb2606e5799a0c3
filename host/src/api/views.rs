//! Triggers as people read them — with attempts, logs and why they wait —
//! built once for both the API and the local command line, so `paddock
//! trigger show` prints the same thing from either. A trigger's params are
//! shown as their digest only (`sha256:…` of the stored JSON): params may
//! carry what a job needs and nobody else should read.

use super::wire::GroupView;
use crate::model::plan::sha256_hex;
use crate::store::{AttemptRecord, ReadStore, Store, StoreResult, TriggerRecord, capacity_now};
use serde::{Deserialize, Serialize};

/// A row of `trigger list`: the trigger, its last attempt, why it waits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TriggerRow {
    pub trigger: TriggerRecord,
    pub last_attempt: Option<AttemptRecord>,
    pub waiting: Option<String>,
}

/// `trigger show`: the trigger with every attempt (and its log).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TriggerView {
    pub trigger: TriggerRecord,
    pub attempts: Vec<AttemptRecord>,
    pub waiting: Option<String>,
}

/// `trigger` with its params replaced by their digest.
pub fn redacted(mut trigger: TriggerRecord) -> TriggerRecord {
    trigger.params = format!("sha256:{}", sha256_hex(trigger.params.as_bytes()));
    trigger
}

pub async fn trigger_row(store: &Store, trigger: TriggerRecord) -> StoreResult<TriggerRow> {
    let trigger = redacted(trigger);
    let last_attempt = store.attempts_for(trigger.id).await?.pop();
    let waiting = store.wait_reason(&trigger).await?;
    Ok(TriggerRow {
        trigger,
        last_attempt,
        waiting,
    })
}

/// Rows of a page: the tenants' quotas and the groups' states behind the
/// waiting reasons are read once per page ([`Store::wait_reasons`]).
pub async fn trigger_rows(
    store: &Store,
    triggers: Vec<TriggerRecord>,
) -> StoreResult<Vec<TriggerRow>> {
    let reasons = store.wait_reasons(&triggers).await?;
    let mut rows = Vec::with_capacity(triggers.len());
    for (trigger, waiting) in triggers.into_iter().zip(reasons) {
        let last_attempt = store.attempts_for(trigger.id).await?.pop();
        rows.push(TriggerRow {
            trigger: redacted(trigger),
            last_attempt,
            waiting,
        });
    }
    Ok(rows)
}

pub async fn trigger_view(store: &Store, trigger: TriggerRecord) -> StoreResult<TriggerView> {
    let trigger = redacted(trigger);
    let attempts = store.attempts_for(trigger.id).await?;
    let waiting = store.wait_reason(&trigger).await?;
    Ok(TriggerView {
        trigger,
        attempts,
        waiting,
    })
}

/// A group as `paddock group show` prints it (`None`: no such group);
/// `pool` is the answering process's instance pool.
pub async fn group_view(store: &Store, name: &str, pool: i64) -> StoreResult<Option<GroupView>> {
    let Some(group) = store.group_get(name).await? else {
        return Ok(None);
    };
    let Some(load) = store.group_load(name).await? else {
        return Ok(None);
    };
    let (observed, _) = capacity_now(store, &group).await?;
    let ramp = store.group_ramp(&group).await?;
    let (held, holds) = store.group_held(name).await?;
    let counters = store.counters().await?;
    let counter = |name: &str| {
        counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    };
    Ok(Some(GroupView {
        observed,
        running: load.running,
        effective_concurrency: load.effective_concurrency,
        effective_binding: load.effective_binding,
        pool,
        ramp,
        held,
        holds,
        held_pool: counter("claims_held_pool"),
        held_memory: counter("claims_held_memory"),
        group,
    }))
}
