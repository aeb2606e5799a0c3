//! What SQLite's claim counts of its tenants: the running triggers per
//! (group, tenant), in one walk, and each tenant's weight and room.

use super::super::super::*;
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// Running triggers per (group, tenant), lapsed leases included.
pub(super) type RunningCounts = HashMap<(String, String), Running>;

/// What runs of a (group, tenant): all its running triggers, and those of
/// the recovery lane among them.
#[derive(Clone, Copy, Default)]
pub(super) struct Running {
    pub n: i64,
    pub recovering: i64,
}

/// [`RunningCounts`] from one walk of `triggers_running` (its order is
/// that grouping) — as PostgreSQL's claim counts (`running_counts` in
/// `postgres.rs`): each tenant's count in its group and across groups
/// come from it, where a count per tenant and one per (group, tenant) were
/// two statements per tenant of every claim. Each group's counts are
/// their sums ([`super::room_in`]).
pub(super) fn running_counts_in(tx: &rusqlite::Transaction<'_>) -> StoreResult<RunningCounts> {
    let mut counts = tx.prepare_cached(concat!(
        "SELECT resource_group, tenant, count(*), count(*) FILTER (WHERE recovery = 1) \
         FROM triggers WHERE ",
        running_rows!(""),
        " GROUP BY resource_group, tenant"
    ))?;
    let rows = counts.query_map([], |r| {
        let running = Running {
            n: r.get(2)?,
            recovering: r.get(3)?,
        };
        Ok(((r.get(0)?, r.get(1)?), running))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A tenant's weight and its room in this claim: none while held over a
/// quota, its max in flight less its running attempts across groups if it
/// has one (counted once per claim, then kept in `tenant_rooms`), else the
/// claim's limit.
pub(super) fn tenant_share(
    tx: &rusqlite::Transaction<'_>,
    tenant: &str,
    limit: i64,
    running: &RunningCounts,
    tenant_rooms: &mut HashMap<String, i64>,
) -> StoreResult<(i64, i64)> {
    let mut quota_of = tx.prepare_cached(
        "SELECT weight, max_in_flight, held IS NOT NULL FROM tenants WHERE tenant = ?1",
    )?;
    let (weight, max_in_flight, held): (i64, Option<i64>, bool) = quota_of
        .query_row([tenant], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?
        .unwrap_or((1, None, false));
    let room = match (held, max_in_flight, tenant_rooms.get(tenant)) {
        (true, _, _) => {
            tenant_rooms.insert(tenant.to_string(), 0);
            0
        }
        (false, None, _) => limit,
        (false, Some(_), Some(room)) => *room,
        (false, Some(max), None) => {
            let running: i64 = running
                .iter()
                .filter(|((_, t), _)| t == tenant)
                .map(|(_, r)| r.n)
                .sum();
            tenant_rooms.insert(tenant.to_string(), max - running);
            max - running
        }
    };
    Ok((weight, room))
}
