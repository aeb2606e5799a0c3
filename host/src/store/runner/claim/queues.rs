//! SQLite's candidate scan: the tenants waiting in each group with room,
//! how deep each one's queue is read (its *ask*, [`stride_asks`]), the
//! reads, and the check after the choice that a queue read short of its
//! full depth held nothing the choice would have taken
//! ([`Scan::read_deeper`]).
//!
//! Why asks: a claim of `limit` triggers needs, from each (group, tenant)
//! queue, only what the fair-share order could give that tenant. Reading
//! every queue to the claim's limit made a claim over four tenants read
//! about four candidates per trigger it claimed.

use super::tenants::{RunningCounts, tenant_share};
use super::{Candidate, Room, candidate_from_row, score_queue};
use crate::store::StoreResult;
use crate::trigger_state;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The tenants with work of a lane (`$lane`, its predicate) in group
/// `?1`: a loose walk of the lane's claim index, one probe per tenant,
/// whatever their backlogs.
macro_rules! tenants_walk {
    ($($lane:tt)+) => {
        concat!(
            "WITH RECURSIVE q (tenant) AS (SELECT (SELECT tenant FROM triggers WHERE ",
            $($lane)+,
            " AND resource_group = ?1 ORDER BY tenant LIMIT 1) \
             UNION ALL SELECT (SELECT tenant FROM triggers WHERE ",
            $($lane)+,
            " AND resource_group = ?1 AND tenant > q.tenant ORDER BY tenant LIMIT 1) \
             FROM q WHERE q.tenant IS NOT NULL) SELECT tenant FROM q WHERE tenant IS NOT NULL"
        )
    };
}

/// Both lanes of a tenant's due work in a group, as far as `?2` rows each,
/// in (priority, next_run_at, id) order: ordered walks of
/// `triggers_recovery` and `triggers_pending` (resource_group, tenant,
/// priority, next_run_at, id) that stop after their rows, reading index
/// columns only (the chosen triggers' rows are read after the choice,
/// [`super::CLAIMABLES`]).
const DUE: &str = concat!(
    "SELECT * FROM (SELECT id, 0 AS lane, priority, next_run_at, resource_group, tenant \
         FROM triggers WHERE ",
    recovery_lane!(""),
    " AND resource_group = ?3 AND tenant = ?4 AND next_run_at <= ?1 \
         ORDER BY priority, next_run_at, id LIMIT CAST(?2 AS INTEGER)) \
     UNION ALL \
     SELECT * FROM (SELECT id, 1 AS lane, priority, next_run_at, resource_group, tenant \
         FROM triggers WHERE ",
    fresh_lane!(""),
    " AND resource_group = ?3 AND tenant = ?4 AND next_run_at <= ?1 \
         ORDER BY priority, next_run_at, id LIMIT CAST(?2 AS INTEGER))"
);

/// Up to `?2` lapsed leases, oldest first, from `triggers_running`
/// (running rows only, `lease_until` in the index).
const LAPSED: &str = concat!(
    "SELECT id, 2 AS lane, priority, next_run_at, resource_group, tenant FROM triggers \
     WHERE state = ",
    trigger_state!(running),
    " AND lease_until < ?1 ORDER BY lease_until LIMIT CAST(?2 AS INTEGER)"
);

/// A tenant's standing in a group, as [`stride_asks`] weighs it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Share {
    pub weight: i64,
    /// Its running triggers in the group.
    pub running: i64,
    /// The most a claim could take of each of its lanes: the claim's
    /// limit, the group's room and its own, whichever is least.
    pub full: i64,
}

/// How far to read each tenant's queue in a group (each lane): as far as
/// the fair-share order ([`super::fair_score`]) could reach into it in a
/// lane's first `slots`, were every queue as deep as its `full`.
///
/// Let `T` be the `slots`-th lowest score with no aging, and `T'` the same
/// with the aging bonuses, whatever they are: each bonus lowers scores, so
/// `T' <= T`. A tenant's `k`-th candidate is reached only if
/// `(running + k) / weight - bonus <= T'`, and a bonus is at most 1, so
/// `k <= (T + 1) * weight - running`. Each ask is that bound plus one, at
/// least one and at most `full`: four tenants of weights 1–4 sharing 100
/// slots read 12 + 23 + 34 + 45 candidates, not 4 × 100. A queue that turns
/// out shallower than its ask leaves the others reaching deeper; the check
/// after the choice catches it ([`Scan::read_deeper`]).
pub(super) fn stride_asks(slots: i64, shares: &[Share]) -> Vec<i64> {
    if shares.iter().map(|s| s.full.max(0)).sum::<i64>() <= slots {
        return shares.iter().map(|s| s.full).collect();
    }
    let Some(t) = nth_score(slots, shares) else {
        return shares.iter().map(|s| s.full).collect();
    };
    shares
        .iter()
        .map(|s| {
            // Saturating: a weight stored before its limit existed (up to
            // i64::MAX) makes the float cast saturate, and `+ 1` on it must
            // not overflow.
            let reach =
                (((t + 1.0) * s.weight.max(1) as f64).floor() as i64).saturating_sub(s.running);
            reach.saturating_add(1).clamp(1, s.full.max(1))
        })
        .collect()
}

/// The `n`-th lowest of the tenants' unaged scores, `(running + k) /
/// weight` for `k` in `1..=full`: a merge of their ascending sequences,
/// `n` steps of a heap over the tenants.
fn nth_score(n: i64, shares: &[Share]) -> Option<f64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    /// A score ordered by `total_cmp`, for the heap.
    struct Score(f64);
    impl PartialEq for Score {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other).is_eq()
        }
    }
    impl Eq for Score {}
    impl PartialOrd for Score {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Score {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&other.0)
        }
    }
    let score = |s: &Share, k: i64| (s.running + k) as f64 / s.weight.max(1) as f64;
    let mut heap: BinaryHeap<Reverse<(Score, usize, i64)>> = shares
        .iter()
        .enumerate()
        .filter(|(_, s)| s.full >= 1)
        .map(|(i, s)| Reverse((Score(score(s, 1)), i, 1)))
        .collect();
    let mut last = None;
    for _ in 0..n {
        let Reverse((Score(at), i, k)) = heap.pop()?;
        last = Some(at);
        if k < shares[i].full {
            heap.push(Reverse((Score(score(&shares[i], k + 1)), i, k + 1)));
        }
    }
    last
}

/// One (group, tenant) queue of a claim, and what was read of it.
struct Queue {
    group: String,
    tenant: String,
    share: Share,
    aging_ms: i64,
    /// How far each lane was read.
    ask: i64,
    /// The ids read, per lane (0 the recovery lane, 1 fresh work).
    read: [Vec<i64>; 2],
}

/// A claim's candidates, by id, each scored ([`super::fair_score`]), and
/// the queues they were read from.
pub(super) struct Scan {
    pub candidates: HashMap<i64, Candidate>,
    queues: Vec<Queue>,
    now: i64,
}

impl Scan {
    /// Read the candidates: per group with room and per tenant with due
    /// work in it, each lane as far as its ask ([`stride_asks`]); and up to
    /// `limit` lapsed leases, whatever their group's room (a takeover adds
    /// nothing to the running count). So the cost follows the batch, the
    /// tenants waiting and the running set (bounded by the groups'
    /// limits), never the backlog or a full group's queue.
    pub fn read(
        tx: &rusqlite::Transaction<'_>,
        now: i64,
        limit: i64,
        rooms: &HashMap<String, Room>,
        counts: &RunningCounts,
        tenant_rooms: &mut HashMap<String, i64>,
    ) -> StoreResult<Scan> {
        let mut pending_tenants = tx.prepare_cached(tenants_walk!(fresh_lane!("")))?;
        let mut retry_tenants = tx.prepare_cached(tenants_walk!(recovery_lane!("")))?;
        let mut queues = Vec::new();
        for (group, room) in rooms {
            if room.room <= 0 {
                continue;
            }
            let mut tenants = BTreeSet::new();
            for walk in [&mut pending_tenants, &mut retry_tenants] {
                for tenant in walk.query_map([group], |row| row.get::<_, String>(0))? {
                    tenants.insert(tenant?);
                }
            }
            let first = queues.len();
            for tenant in tenants {
                let (weight, tenant_room) = tenant_share(tx, &tenant, limit, counts, tenant_rooms)?;
                if tenant_room <= 0 {
                    continue;
                }
                let running = counts
                    .get(&(group.clone(), tenant.clone()))
                    .map_or(0, |r| r.n);
                let full = limit.min(room.room).min(tenant_room);
                queues.push(Queue {
                    group: group.clone(),
                    tenant,
                    share: Share {
                        weight,
                        running,
                        full,
                    },
                    aging_ms: room.aging_ms,
                    ask: full,
                    read: [Vec::new(), Vec::new()],
                });
            }
            // A lane's first `limit` are what the choice takes from
            // ([`super::choose_batch`]); its cut to the rooms comes after.
            let group_queues = &mut queues[first..];
            let shares: Vec<Share> = group_queues.iter().map(|q| q.share).collect();
            for (q, ask) in group_queues.iter_mut().zip(stride_asks(limit, &shares)) {
                q.ask = ask;
            }
        }
        let mut scan = Scan {
            candidates: HashMap::new(),
            queues,
            now,
        };
        for i in 0..scan.queues.len() {
            scan.read_queue(tx, i)?;
        }
        let mut lapsed = tx.prepare_cached(LAPSED)?;
        for row in lapsed.query_map(rusqlite::params![now, limit], candidate_from_row)? {
            let c = row?;
            scan.candidates.insert(c.id, c);
        }
        Ok(scan)
    }

    /// Read queue `i` as far as its ask, in place of what was read of it.
    fn read_queue(&mut self, tx: &rusqlite::Transaction<'_>, i: usize) -> StoreResult<()> {
        let q = &mut self.queues[i];
        for id in q.read.iter_mut().flat_map(std::mem::take) {
            self.candidates.remove(&id);
        }
        let mut queue = tx
            .prepare_cached(DUE)?
            .query_map(
                rusqlite::params![self.now, q.ask, q.group, q.tenant],
                candidate_from_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        score_queue(
            &mut queue,
            q.share.running,
            q.share.weight,
            self.now,
            q.aging_ms,
        );
        for c in queue {
            q.read[c.lane as usize].push(c.id);
            self.candidates.insert(c.id, c);
        }
        Ok(())
    }

    /// After a choice took `taken` (before its cut to the rooms): read to
    /// its full depth every queue read short of it of which a lane gave all
    /// it read — what lay beyond might have been taken too. Says whether
    /// it read any, and so whether to choose again. Reading more of a
    /// queue only adds candidates that come after its own in their lane,
    /// and more candidates never make the choice take more of another
    /// queue, so each queue is read again at most once.
    pub fn read_deeper(
        &mut self,
        tx: &rusqlite::Transaction<'_>,
        taken: &[i64],
    ) -> StoreResult<bool> {
        let taken: HashSet<i64> = taken.iter().copied().collect();
        let short: Vec<usize> = (0..self.queues.len())
            .filter(|&i| {
                let q = &self.queues[i];
                q.ask < q.share.full
                    && q.read.iter().any(|lane| {
                        lane.len() as i64 == q.ask && lane.iter().all(|id| taken.contains(id))
                    })
            })
            .collect();
        for &i in &short {
            self.queues[i].ask = self.queues[i].share.full;
            self.read_queue(tx, i)?;
        }
        Ok(!short.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::{Share, stride_asks};
    use proptest::prelude::*;

    fn share(weight: i64, running: i64, full: i64) -> Share {
        Share {
            weight,
            running,
            full,
        }
    }

    #[test]
    fn asks_follow_the_weights_and_stop_at_the_full_depth() {
        let weighted: Vec<Share> = (1..=4).map(|w| share(w, 0, 100)).collect();
        assert_eq!(stride_asks(100, &weighted), vec![12, 23, 34, 45]);
        // Running triggers count against a tenant's reach.
        let busy = [share(1, 30, 100), share(1, 0, 100)];
        assert_eq!(stride_asks(100, &busy), vec![37, 67]);
        // All of every queue fits in the slots: read them whole.
        let small = [share(1, 0, 10), share(5, 0, 20)];
        assert_eq!(stride_asks(100, &small), vec![10, 20]);
        // A tenant far ahead still reads one, never none.
        let ahead = [share(1, 1000, 100), share(1, 0, 100)];
        assert_eq!(stride_asks(100, &ahead), vec![1, 100]);
    }

    #[test]
    fn a_weight_of_i64_max_asks_its_whole_queue_without_overflow() {
        // Stored before weights had a limit: the reach saturates.
        let huge = [share(i64::MAX, 0, 5), share(1, 0, 5), share(1_000, 3, 5)];
        assert_eq!(stride_asks(1, &huge), vec![5, 2, 5]);
    }

    /// The fair-share order's first `slots`, with queues `full` deep and
    /// each tenant's aging bonus in [0, 1]: how many each tenant gets.
    fn reached(slots: i64, shares: &[Share], bonus: &[f64]) -> Vec<i64> {
        let mut all: Vec<(f64, usize)> = shares
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                (1..=s.full).map(move |k| ((s.running + k) as f64 / s.weight as f64 - bonus[i], i))
            })
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut got = vec![0; shares.len()];
        for (_, i) in all.into_iter().take(slots as usize) {
            got[i] += 1;
        }
        got
    }

    proptest! {
        /// Whatever the aging bonuses, the order never reaches past an ask.
        #[test]
        fn no_tenant_is_reached_past_its_ask(
            slots in 1i64..200,
            tenants in proptest::collection::vec(
                (1i64..10, 0i64..150, 0i64..200, 0.0f64..=1.0), 1..8),
        ) {
            let shares: Vec<Share> =
                tenants.iter().map(|&(w, r, f, _)| share(w, r, f)).collect();
            let bonus: Vec<f64> = tenants.iter().map(|t| t.3).collect();
            let asks = stride_asks(slots, &shares);
            for (i, got) in reached(slots, &shares, &bonus).into_iter().enumerate() {
                prop_assert!(got <= asks[i], "tenant {i} reached {got} past its ask {}", asks[i]);
                prop_assert!(asks[i] <= shares[i].full.max(1));
            }
        }
    }
}
