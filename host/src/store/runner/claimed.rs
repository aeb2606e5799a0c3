//! The SQLite writer thread's record of the triggers its claims took: each
//! one's (group, tenant), by (trigger, token). A group commit counts its
//! successes per (group, tenant) for `paddock status` (`success_counts`,
//! migration 0024); reading the two columns again by id, one `json_each`
//! join per commit, was ~5% of SQLite's store calls with quotas on or off
//! (`docs/performance.md`, 2026-12-05) — and returning them from
//! each fenced `UPDATE` cost more than that join.
//!
//! The record is the store's own: written by the claim from the rows it
//! read, on the one thread every SQLite write runs on, so a caller's copy
//! is never trusted. A trigger's group and tenant never change, so an entry
//! can be missing but never wrong: a trigger claimed before a restart, by
//! another store on the same file, or an entry dropped at the cap is
//! counted by the join instead. Entries are taken when the attempt's end
//! commits (moved or stale); those of attempts that end otherwise
//! (releases, takeovers) are dropped with everything else when the record
//! reaches its cap.

use std::cell::RefCell;
use std::collections::HashMap;

/// Entries kept at most: far above any fleet's attempts in flight, so a
/// clear is rare, and bounded whatever never reaches a group commit.
const CAPACITY: usize = 1 << 16;

/// (group, tenant) pairs, each stored once and found by group then tenant
/// (a lookup by `&str`, whatever the number of tenants), and the pair of
/// each claimed (trigger, token).
#[derive(Default)]
pub(super) struct Claimed {
    pairs: Vec<(String, String)>,
    index: HashMap<String, HashMap<String, usize>>,
    by_lease: HashMap<(i64, i64), usize>,
}

impl Claimed {
    /// Record that `trigger` was claimed under `token` in `group` for
    /// `tenant`.
    pub fn record(&mut self, trigger: i64, token: i64, group: &str, tenant: &str) {
        if self.by_lease.len() >= CAPACITY {
            self.by_lease.clear();
            self.pairs.clear();
            self.index.clear();
        }
        let found = self
            .index
            .get(group)
            .and_then(|tenants| tenants.get(tenant));
        let pair = match found {
            Some(&i) => i,
            None => {
                let i = self.pairs.len();
                self.pairs.push((group.to_string(), tenant.to_string()));
                self.index
                    .entry(group.to_string())
                    .or_default()
                    .insert(tenant.to_string(), i);
                i
            }
        };
        self.by_lease.insert((trigger, token), pair);
    }

    /// Take the entry of `trigger` under `token`: its pair's index for
    /// [`Claimed::pair`], valid until the next [`Claimed::record`].
    pub fn take(&mut self, trigger: i64, token: i64) -> Option<usize> {
        self.by_lease.remove(&(trigger, token))
    }

    /// The (group, tenant) of a pair [`Claimed::take`] returned.
    pub fn pair(&self, i: usize) -> (&str, &str) {
        let (group, tenant) = &self.pairs[i];
        (group, tenant)
    }
}

thread_local! {
    /// One record per thread; only SQLite's writer thread writes to it.
    static CLAIMED: RefCell<Claimed> = RefCell::new(Claimed::default());
}

/// Run `f` on this thread's record.
pub(super) fn with<R>(f: impl FnOnce(&mut Claimed) -> R) -> R {
    CLAIMED.with(|claimed| f(&mut claimed.borrow_mut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_taken_once_under_its_own_token() {
        let mut claimed = Claimed::default();
        claimed.record(1, 5, "g", "a");
        claimed.record(2, 1, "g", "b");
        claimed.record(3, 1, "g", "a");
        assert_eq!(claimed.take(1, 4), None, "another token");
        let one = claimed.take(1, 5).unwrap();
        assert_eq!(claimed.pair(one), ("g", "a"));
        assert_eq!(claimed.take(1, 5), None, "taken already");
        let two = claimed.take(2, 1).unwrap();
        assert_eq!(claimed.pair(two), ("g", "b"));
        assert_eq!(claimed.take(3, 1), Some(one), "a pair is stored once");
    }

    #[test]
    fn the_record_is_cleared_at_its_cap_and_misses_are_only_misses() {
        let mut claimed = Claimed::default();
        for id in 0..CAPACITY as i64 {
            claimed.record(id, 1, "g", "a");
        }
        claimed.record(-1, 1, "h", "b");
        assert_eq!(claimed.take(0, 1), None, "dropped at the cap");
        let kept = claimed.take(-1, 1).unwrap();
        assert_eq!(claimed.pair(kept), ("h", "b"));
        assert_eq!((claimed.pairs.len(), claimed.index.len()), (1, 1));
    }
}
