//! The governor: what each serving process moves every few seconds so
//! that the claims of every process enforce it.
//!
//! - **Effective concurrency**: recomputed from what the groups' recent
//!   attempts measured (service time, peak memory —
//!   [`crate::model::group::effective_concurrency`]); a change is logged.
//! - **The recovery ramp** ([`crate::model::shares::ramp_next`]): up a step
//!   while the group is healthy, back a step when its failure rate or
//!   service time rises, back to the first step when no recovery work is
//!   left.
//! - **Fuel per hour**: this process's guests' fuel, per tenant, is
//!   reported; a tenant at or over its quota is held (its claims wait) and
//!   released once the last hour's usage falls below it.
//! - **A downstream's breaker** open in this process holds the claims of
//!   the groups that called it (their attempts would only be refused),
//!   until the breaker lets a probe through; each hold is counted.
//!
//! Processes computing at once agree (the same inputs, the same window;
//! the ramp moves only from the step it read), so the last write wins
//! harmlessly.

use crate::effects::EffectGateway;
use crate::model::shares::ramp_next;
use crate::store::{ReadStore, Store, StoreResult, capacity_now};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Fuel burnt by this process's guests since the governor last reported
/// it, per tenant.
#[derive(Debug, Default)]
pub struct FuelMeter(Mutex<HashMap<String, i64>>);

impl FuelMeter {
    pub fn add(&self, tenant: &str, fuel: u64) {
        if fuel == 0 {
            return;
        }
        let mut used = self.0.lock().expect("fuel meter");
        *used.entry(tenant.to_string()).or_insert(0) += i64::try_from(fuel).unwrap_or(i64::MAX);
    }

    /// What was burnt since the last call, emptied.
    pub fn take(&self) -> Vec<(String, i64)> {
        let mut used = self.0.lock().expect("fuel meter");
        used.drain().collect()
    }

    /// Put back what a report could not write, for the next.
    fn restore(&self, used: Vec<(String, i64)>) {
        let mut meter = self.0.lock().expect("fuel meter");
        for (tenant, fuel) in used {
            *meter.entry(tenant).or_insert(0) += fuel;
        }
    }
}

/// What a serving process gives its governor.
#[derive(Clone, Default)]
pub struct Gauges {
    /// Who holds a group on this process's behalf.
    pub runner_id: String,
    pub fuel: Arc<FuelMeter>,
    /// Whose breakers to watch.
    pub effects: Option<Arc<EffectGateway>>,
    /// How long a group hold lasts unless the next round renews it.
    pub hold_for: Duration,
}

/// What one round moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    pub effective_moved: usize,
    pub ramps_moved: usize,
    pub tenant_holds_moved: usize,
    pub group_holds_moved: usize,
}

/// One round of everything the governor moves.
pub async fn govern_once(store: &Store, gauges: &Gauges) -> StoreResult<Round> {
    let mut round = Round::default();
    let breakers = open_breaker_groups(store, gauges).await?;
    for group in store.groups_list().await? {
        let (observed, capacity) = capacity_now(store, &group).await?;
        if store.group_effective_set(&group.name, &capacity).await? {
            round.effective_moved += 1;
            tracing::info!(
                group = %crate::model::text::Esc(&group.name),
                effective_concurrency = capacity.effective,
                binding = capacity.binding,
                samples = observed.samples,
                service_time_ms = observed.service_time_ms,
                "effective concurrency moved"
            );
        }
        let ramp = store.group_ramp(&group).await?;
        if let Some(step) = ramp_next(ramp.pct, &ramp.inputs, group.shares.ramp_every_ms)
            && store
                .group_ramp_set(&group.name, ramp.pct, step.to_pct)
                .await?
        {
            round.ramps_moved += 1;
            tracing::info!(group = %crate::model::text::Esc(&group.name), from_pct = ramp.pct, to_pct = step.to_pct,
                why = %crate::model::text::Esc(&step.why), "recovery ramp moved");
        }
        if hold_group(store, gauges, &group.name, breakers.get(&group.name)).await? {
            round.group_holds_moved += 1;
        }
    }
    let used = gauges.fuel.take();
    if let Err(e) = store.tenant_fuel_add(&used).await {
        gauges.fuel.restore(used);
        return Err(e);
    }
    for change in store.tenant_holds_refresh().await? {
        round.tenant_holds_moved += 1;
        match &change.held {
            Some(why) => {
                tracing::warn!(tenant = %crate::model::text::Esc(&change.tenant), why = %crate::model::text::Esc(&why), "tenant held")
            }
            None => {
                tracing::info!(tenant = %crate::model::text::Esc(&change.tenant), "tenant released")
            }
        }
    }
    Ok(round)
}

/// The groups that called a connector whose breaker is open in this
/// process, each with the connectors.
async fn open_breaker_groups(
    store: &Store,
    gauges: &Gauges,
) -> StoreResult<HashMap<String, Vec<String>>> {
    let mut groups: HashMap<String, Vec<String>> = HashMap::new();
    let Some(effects) = &gauges.effects else {
        return Ok(groups);
    };
    for connector in effects.open_breakers() {
        for group in store.groups_calling(&connector).await? {
            groups.entry(group).or_default().push(connector.clone());
        }
    }
    Ok(groups)
}

/// Hold the group while a breaker it calls is open here; release it when
/// none is (or when another process's hold lapsed). Returns whether the
/// hold moved.
async fn hold_group(
    store: &Store,
    gauges: &Gauges,
    group: &str,
    open: Option<&Vec<String>>,
) -> StoreResult<bool> {
    match open {
        Some(connectors) => {
            let mut names = connectors.clone();
            names.sort_unstable();
            names.dedup();
            let why = format!("breaker open on connector {}", names.join(", "));
            let until = store.now_ms().await? + gauges.hold_for.as_millis() as i64;
            let new = store
                .group_hold(group, &why, &gauges.runner_id, until)
                .await?;
            if new {
                tracing::warn!(group, why = %crate::model::text::Esc(&why), "group held: claims stop until the breaker lets a probe through");
            }
            Ok(new)
        }
        None => {
            let (held, _) = store.group_held(group).await?;
            if held.is_some() && store.group_release(group, &gauges.runner_id).await? {
                tracing::info!(group, "group released: claims resume");
                return Ok(true);
            }
            Ok(false)
        }
    }
}

/// Stops the governor's task when dropped.
pub struct GovernorGuard(tokio::task::JoinHandle<()>);

impl Drop for GovernorGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run [`govern_once`] every `every` until the guard is dropped.
pub fn spawn_governor(store: Store, gauges: Gauges, every: Duration) -> GovernorGuard {
    GovernorGuard(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = govern_once(&store, &gauges).await {
                tracing::warn!(error = %crate::model::text::Esc(&e), "governor round failed; will retry");
            }
        }
    }))
}
