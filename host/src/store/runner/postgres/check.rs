//! The check of a claim that chose its batch without the claims' lock
//! (see [`super::claim_unlocked`]): under the lock, before it commits,
//! that the batch left every group, tenant and recovery lane it took from
//! within its limit.

use super::super::claim::{lock_groups, recovery_ceilings, running_rows};
use super::Scored;
use super::literal::int_array;
use std::collections::HashMap;

/// The last round trip of a claim that chose its batch without the
/// claims' lock ([`super::claim_unlocked`]): the lock, then — in a statement of
/// its own, so with a snapshot taken after the wait, that counts every
/// claim committed before it — the check that the batch left each group
/// and tenant it took from within its limits ([`PREPARE_CLAIM_CHECK`]),
/// then `COMMIT`. A limit passed (another process's claim committed in
/// between), a group or tenant held, or a recovery lane over the ceiling
/// the choice allowed: the check raises ([`REFUSED`]), the `COMMIT` never
/// runs, and the claim is rolled back. The lock is held for the check and
/// the commit alone — not for the claim's writes, which every claim on the
/// lock used to wait behind.
///
/// One simple query, so its arguments are written in (integer arrays, see
/// [`check_and_commit`], which ends the text); the check itself is
/// prepared once per session, so it is not planned again for every claim
/// (~0.7 ms a claim, measured with `EXPLAIN ANALYZE`).
const CHECK_AND_COMMIT: &str = concat!(lock_groups!(), "; EXECUTE paddock_claim_check(");

/// The claims' check, prepared by every hot session when it opens (see
/// `open_hot_pool`): `$1` one new claim of each (group, tenant) the batch
/// took from, `$2` one new recovery-lane claim of each group that took
/// some, `$3` those groups' recovery ceilings in this claim. Refuses
/// (`paddock_refuse_claim`, migration 0023) if any of those groups or
/// tenants is held or over its limit, or any of those recovery lanes over
/// its ceiling — counted as [`super::CANDIDATES`] counts (`triggers_running`).
pub(super) const PREPARE_CLAIM_CHECK: &str = concat!(
    "PREPARE paddock_claim_check (BIGINT[], BIGINT[], BIGINT[]) AS \
     WITH mine AS MATERIALIZED (SELECT resource_group, tenant FROM triggers WHERE id = ANY($1)), \
     ceilings AS MATERIALIZED (SELECT t.resource_group, c.ceiling \
         FROM unnest($2, $3) AS c (id, ceiling) JOIN triggers t ON t.id = c.id) \
     SELECT paddock_refuse_claim(string_agg(why, '; ')) FROM ( \
         SELECT 'group ' || g.name || CASE WHEN g.held IS NOT NULL THEN ' is held' \
             ELSE ' is over its effective concurrency' END AS why \
         FROM resource_groups g WHERE g.name IN (SELECT resource_group FROM mine) \
             AND (g.held IS NOT NULL OR (SELECT count(*) FROM triggers t WHERE ",
    running_rows!("t."),
    " AND t.resource_group = g.name) > g.effective_concurrency) \
         UNION ALL SELECT 'tenant ' || w.tenant || CASE WHEN w.held IS NOT NULL THEN ' is held' \
             ELSE ' is over its max in flight' END \
         FROM tenants w WHERE w.tenant IN (SELECT tenant FROM mine) \
             AND (w.held IS NOT NULL OR (w.max_in_flight IS NOT NULL \
                 AND (SELECT count(*) FROM triggers t WHERE ",
    running_rows!("t."),
    " AND t.tenant = w.tenant) > w.max_in_flight)) \
         UNION ALL SELECT 'the recovery lane of group ' || c.resource_group || ' is over its ceiling' \
         FROM ceilings c WHERE (SELECT count(*) FROM triggers t WHERE ",
    running_rows!("t."),
    " AND t.recovery = 1 AND t.resource_group = c.resource_group) > c.ceiling) AS over \
     HAVING count(*) > 0"
);

/// The SQLSTATE of `paddock_refuse_claim` (migration 0023): the check of
/// [`CHECK_AND_COMMIT`] refused the batch.
pub(super) const REFUSED: &str = "PD001";

/// [`CHECK_AND_COMMIT`] for a chosen batch: one new claim of each
/// (group, tenant) it took from, and per group that took recovery-lane
/// work one of those claims and the group's recovery ceiling in this
/// claim. A batch of takeovers only (or none) adds nothing to any count:
/// it commits without the lock.
pub(super) fn check_and_commit(chosen: &[i64], scored: &Scored) -> String {
    let new = chosen
        .iter()
        .map(|id| &scored.candidates[id])
        .filter(|c| c.lane != 2);
    let mut pairs: HashMap<(&str, &str), i64> = HashMap::new();
    let mut recovering: HashMap<&str, i64> = HashMap::new();
    for c in new {
        pairs.entry((&c.resource_group, &c.tenant)).or_insert(c.id);
        if c.lane == 0 {
            recovering.entry(&c.resource_group).or_insert(c.id);
        }
    }
    if pairs.is_empty() {
        return "COMMIT".to_string();
    }
    let ceilings = recovery_ceilings(&scored.candidates, &scored.rooms);
    let recovering: Vec<(&str, i64)> = recovering.into_iter().collect();
    let mut text = String::from(CHECK_AND_COMMIT);
    int_array(&mut text, pairs.values().copied());
    text.push_str(", ");
    int_array(&mut text, recovering.iter().map(|r| r.1));
    text.push_str(", ");
    int_array(&mut text, recovering.iter().map(|r| ceilings[r.0]));
    text.push_str("); COMMIT");
    text
}
