//! New triggers' ids on SQLite: handed out to each tenant in blocks, so
//! one tenant's triggers lie together in the table.
//!
//! Why: SQLite stores a table in the order of its rowid, which is the
//! trigger's id. With ids handed out one after another, the triggers of
//! tenants whose work arrives interleaved (many tenants' cron fires in the
//! same minute, API calls from several teams) share every page, and a
//! fair-share claim — which takes each tenant's queue at its own pace —
//! visits each page once per tenant, with a B-tree descent for every row
//! (SQLite steps to the next row without one only when the id asked for is
//! the last one plus one). Measured on `benches/throughput` (four tenants
//! of weights 1–4 creating triggers in turn, 10 rounds alternated): with
//! quotas and fair shares on,
//! in-process throughput went from 0.86× to 0.92× of one tenant's with
//! them off.
//!
//! How: a tenant's block (`trigger_id_blocks`) is a range of ids reserved
//! above every id handed out before (`sqlite_sequence`, which
//! `AUTOINCREMENT` keeps: no insert that takes its own id can take one of a
//! block's), used in order until it runs out or lies more than [`REACH`]
//! ids below the newest trigger, when the rest of it is left unused and
//! the tenant gets a new one (an insert of [`BLOCK`] or more of a tenant's
//! triggers needs none: `AUTOINCREMENT` gives them a run of their own).
//! Reservations run in the inserting transaction, under SQLite's write
//! lock, so processes sharing a file never hand out the same id.
//!
//! What ids still mean: unique, never reused, and increasing with creation
//! within a tenant (a tenant's trigger list, newest first, is in creation
//! order). Across tenants, creation order holds only up to [`REACH`]: a
//! trigger created after another has an id above the other's less
//! `REACH` (the backlog's walk of recent arrivals starts that far back,
//! `store/backlog.rs`).
//!
//! PostgreSQL keeps its sequence: its heap stores rows in the order they
//! are inserted, whatever their ids, so blocks would buy nothing there.

use super::*;

/// Ids a tenant's block holds. An insert of this many or more of a
/// tenant's triggers takes no block: its rows get consecutive ids from
/// `AUTOINCREMENT`, above every other, a run of their own.
pub const BLOCK: i64 = 64;

/// How far below the newest trigger's id a tenant's block may start and
/// still be used. Bounds how far out of creation order ids can be across
/// tenants (see the module doc).
pub const REACH: i64 = 4096;

/// A tenant's block: ids `next..end` are still free; it started at
/// `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub start: i64,
    pub next: i64,
    pub end: i64,
}

/// Where `k` new ids of a tenant come from: `first..first + k`, the
/// tenant's block after them, and the highest id reserved so far after
/// them (`sqlite_sequence`'s value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub first: i64,
    pub block: Block,
    pub reserved: i64,
}

/// Reserve `k` (above 0) ids for a tenant whose block is `block`, when
/// ids up to `reserved` are handed out and the newest trigger's is
/// `newest`: from the block if it holds `k` more and starts within
/// [`REACH`] of `newest`, else from a new block of at least [`BLOCK`]
/// above `reserved`. Pure, for the tests; [`Store::reserve_trigger_ids`]
/// does the reading and writing.
pub fn reserve(block: Option<Block>, reserved: i64, newest: i64, k: i64) -> Reservation {
    debug_assert!(k > 0);
    match block {
        Some(b) if b.end - b.next >= k && b.start > newest - REACH => Reservation {
            first: b.next,
            block: Block {
                next: b.next + k,
                ..b
            },
            reserved,
        },
        _ => {
            let start = reserved + 1;
            let end = start + k.max(BLOCK);
            Reservation {
                first: start,
                block: Block {
                    start,
                    next: start + k,
                    end,
                },
                reserved: end - 1,
            }
        }
    }
}

/// Each asked tenant's block (`?1`, a JSON array of tenants), with the
/// highest id handed out and the newest trigger's id —
/// `sqlite_sequence` is written only by `AUTOINCREMENT` inserts and by
/// reservations, so it can lag no id.
const READ: &str = "SELECT j.value, b.start_id, b.next_id, b.end_id, \
     coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'triggers'), 0), \
     coalesce((SELECT max(id) FROM triggers), 0) \
     FROM json_each(?1) AS j LEFT JOIN trigger_id_blocks b ON b.tenant = j.value";

/// A row of [`READ`]: tenant, its block's start, next and end if it has
/// one, the highest id handed out, the newest trigger's id.
type BlockRow = (String, Option<i64>, Option<i64>, Option<i64>, i64, i64);

/// The blocks after a reservation, `?1` a JSON array of `[tenant, start,
/// next, end]` (`WHERE true`: SQLite's upsert after a `SELECT` needs it).
const WRITE_BLOCKS: &str = "INSERT INTO trigger_id_blocks (tenant, start_id, next_id, end_id) \
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
         json_extract(value, '$[2]'), json_extract(value, '$[3]') \
     FROM json_each(?1) WHERE true ON CONFLICT (tenant) DO UPDATE SET \
         start_id = excluded.start_id, next_id = excluded.next_id, end_id = excluded.end_id";

/// `sqlite_sequence` has no key: its `triggers` row is updated, or made
/// by the first reservation on a table no insert has touched.
const WRITE_RESERVED: &str = "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'triggers'";
const FIRST_RESERVED: &str = "INSERT INTO sqlite_sequence (name, seq) SELECT 'triggers', ?1 \
     WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'triggers')";

impl Store {
    /// [`Store::reserve_trigger_ids`] for one new trigger of `tenant`.
    pub(crate) async fn one_trigger_id(
        &self,
        tx: &mut Tx,
        tenant: &str,
    ) -> StoreResult<Option<i64>> {
        Ok(self.reserve_trigger_ids(tx, &[(tenant, 1)]).await?[0])
    }

    /// Reserve ids for new triggers in `tx` (see the module doc), `asks`
    /// each a tenant and how many of its triggers one insert makes: for
    /// each, the first of that many consecutive ids, bound as the id of
    /// each insert ([`super::dialect::SQLITE_NEW_TRIGGER_ID`]) — or `None`,
    /// and the inserts take `AUTOINCREMENT`'s ids (SQLite) or the
    /// sequence's (PostgreSQL): on PostgreSQL always; on SQLite for none
    /// asked, and for [`BLOCK`] or more, which one insert's rows get
    /// consecutive above every other anyway, a run of their own as a new
    /// block would be. Three statements however many tenants ask.
    pub async fn reserve_trigger_ids(
        &self,
        tx: &mut Tx,
        asks: &[(&str, usize)],
    ) -> StoreResult<Vec<Option<i64>>> {
        let wanted = |k: usize| k > 0 && (k as i64) < BLOCK;
        let mut firsts = vec![None; asks.len()];
        if self.dialect != Dialect::Sqlite || !asks.iter().any(|(_, k)| wanted(*k)) {
            return Ok(firsts);
        }
        // Each tenant read once: its block is then moved in one place, and
        // written once.
        let mut tenants: Vec<&str> = asks
            .iter()
            .filter(|(_, k)| wanted(*k))
            .map(|(t, _)| *t)
            .collect();
        tenants.sort_unstable();
        tenants.dedup();
        let rows: Vec<BlockRow> = sqlx::query_as(READ)
            .bind(serde_json::to_string(&tenants).expect("strings"))
            .fetch_all(&mut **tx)
            .await?;
        let (held, newest) = rows.first().map_or((0, 0), |r| (r.4, r.5));
        let mut blocks: Vec<(String, Option<Block>)> = rows
            .into_iter()
            .map(|(tenant, start, next, end, _, _)| {
                let block = match (start, next, end) {
                    (Some(start), Some(next), Some(end)) => Some(Block { start, next, end }),
                    _ => None,
                };
                (tenant, block)
            })
            .collect();
        let mut reserved = held;
        for (first, (tenant, k)) in firsts.iter_mut().zip(asks) {
            if !wanted(*k) {
                continue;
            }
            let slot = blocks
                .iter_mut()
                .find(|(t, _)| t == tenant)
                .expect("every asked tenant was read");
            let r = reserve(slot.1, reserved, newest, *k as i64);
            *first = Some(r.first);
            slot.1 = Some(r.block);
            reserved = r.reserved;
        }
        let written: Vec<(&str, i64, i64, i64)> = blocks
            .iter()
            .filter_map(|(t, b)| b.map(|b| (t.as_str(), b.start, b.next, b.end)))
            .collect();
        sqlx::query(WRITE_BLOCKS)
            .bind(serde_json::to_string(&written).expect("tuples"))
            .execute(&mut **tx)
            .await?;
        if reserved != held {
            let updated = sqlx::query(WRITE_RESERVED)
                .bind(reserved)
                .execute(&mut **tx)
                .await?
                .rows_affected();
            if updated == 0 {
                sqlx::query(FIRST_RESERVED)
                    .bind(reserved)
                    .execute(&mut **tx)
                    .await?;
            }
        }
        Ok(firsts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_tenant_continues_its_block_until_it_runs_out() {
        let a = reserve(None, 0, 0, 1);
        assert_eq!(a.first, 1);
        assert_eq!(a.reserved, BLOCK);
        let b = reserve(Some(a.block), a.reserved, 1, 1);
        assert_eq!((b.first, b.reserved), (2, BLOCK));
        let c = reserve(Some(b.block), b.reserved, 2, BLOCK - 2);
        assert_eq!((c.first, c.block.next, c.reserved), (3, BLOCK + 1, BLOCK));
        let d = reserve(Some(c.block), c.reserved, BLOCK, 1);
        assert_eq!((d.first, d.reserved), (BLOCK + 1, 2 * BLOCK), "a new block");
    }

    #[test]
    fn a_block_left_far_behind_the_newest_trigger_is_abandoned() {
        let a = reserve(None, 0, 0, 1);
        let near = reserve(Some(a.block), 10_000, REACH, 1);
        assert_eq!(near.first, 2, "within reach: continued");
        let far = reserve(Some(a.block), 10_000, REACH + 1, 1);
        assert_eq!(far.first, 10_001, "out of reach: a new block");
    }

    #[test]
    fn a_large_insert_gets_a_block_of_its_own_size() {
        let r = reserve(None, 7, 7, 500);
        assert_eq!(
            (r.first, r.block.next, r.block.end, r.reserved),
            (8, 508, 508, 507)
        );
    }

    proptest! {
        /// Any sequence of reservations by any tenants: every id handed
        /// out once; each tenant's increasing; every id above the newest
        /// trigger's at its creation less REACH (what the backlog's walk
        /// relies on).
        #[test]
        fn ids_are_unique_increasing_per_tenant_and_within_reach(
            asks in proptest::collection::vec((0usize..5, 1i64..150), 1..300)
        ) {
            let mut blocks: Vec<Option<Block>> = vec![None; 5];
            let (mut reserved, mut newest) = (0i64, 0i64);
            let mut seen = std::collections::HashSet::new();
            let mut last = [0i64; 5];
            for (tenant, k) in asks {
                let r = reserve(blocks[tenant], reserved, newest, k);
                prop_assert!(r.reserved >= reserved);
                prop_assert!(r.first > newest - REACH);
                prop_assert!(r.first > last[tenant]);
                for id in r.first..r.first + k {
                    prop_assert!(seen.insert(id), "id {} handed out twice", id);
                    prop_assert!(id <= r.reserved);
                }
                last[tenant] = r.first + k - 1;
                newest = newest.max(r.first + k - 1);
                blocks[tenant] = Some(r.block);
                reserved = r.reserved;
            }
        }
    }
}
