//! The cluster-wide figures `/metrics` exports, read at scrape time in one
//! statement (one round trip), and the database half of `/readyz`.
//!
//! Every branch of [`SNAPSHOT`] is an aggregate over an index or a small
//! table:
//!
//! | rows | from | index |
//! |---|---|---|
//! | waiting triggers per (state, group, tenant) and the earliest `next_run_at` | `triggers` | the claim lanes' partial indexes `triggers_pending` and `triggers_recovery` (a walk of the waiting rows only; SQLite checked with `EXPLAIN QUERY PLAN`) |
//! | running, parked (`manual`) and `paused` triggers per (group, tenant) | `triggers` | `triggers_running`; `triggers_parked` (migration 0017); `triggers_paused` (0018) |
//! | counters | `counters` | a few dozen rows |
//! | unknown effects and the oldest | `effects` | `effects_state` |
//! | compensations | `effects` | `effects_compensates` |
//! | open tickets per kind and the oldest | `exceptions` | `exceptions_open_subject` (partial, `state = 'open'`) |
//! | effective concurrency per group | `resource_groups` | a small table |
//! | watermarks per shard | `schedule_shards` | 16 rows |
//! | takeovers of the last hour, each with its latency | `attempts` | `attempts_expired` (partial, on the `expired` outcome; migration 0037) |
//!
//! Instants are the database clock's, read in the same statement.

use super::dialect::now_ms;
use super::runner::running_rows;
use super::{Dialect, Store, StoreResult};

/// One statement, one row shape: `(kind, a, b, c, n, m)`; what `a`..`m`
/// mean depends on `kind` (see [`MetricsSnapshot::from_rows`]). Spelled for
/// SQLite, translated for PostgreSQL ([`Store::sql`]).
const SNAPSHOT: &str = concat!(
    "SELECT 'now' AS kind, '' AS a, '' AS b, '' AS c, ",
    now_ms!(),
    " AS n, CAST(NULL AS BIGINT) AS m",
    // Waiting: the claim lanes' partial indexes, each predicate spelled as
    // in its migration (0010) so both planners use it. A `pending` group
    // and tenant may come in two rows (fresh and recovery work), merged
    // in `from_rows`.
    " UNION ALL SELECT 'triggers', state, resource_group, tenant, count(*), min(next_run_at) \
     FROM triggers WHERE state = 'pending' AND recovery = 0 GROUP BY state, resource_group, tenant",
    " UNION ALL SELECT 'triggers', state, resource_group, tenant, count(*), min(next_run_at) \
     FROM triggers WHERE state = 'retry_wait' OR (state = 'pending' AND recovery = 1) \
     GROUP BY state, resource_group, tenant",
    // Running (`triggers_running`) and parked for a person
    // (`triggers_parked`, migration 0017): counts only.
    " UNION ALL SELECT 'triggers', state, resource_group, tenant, count(*), NULL \
     FROM triggers WHERE ",
    running_rows!(""),
    " GROUP BY state, resource_group, tenant",
    " UNION ALL SELECT 'triggers', state, resource_group, tenant, count(*), NULL \
     FROM triggers WHERE state = ",
    crate::trigger_state!(manual),
    " GROUP BY state, resource_group, tenant",
    // Held by a closed gate (`triggers_paused`, migration 0018): counts
    // only — a paused trigger is not due, whatever its `next_run_at`.
    " UNION ALL SELECT 'triggers', state, resource_group, tenant, count(*), NULL \
     FROM triggers WHERE state = ",
    crate::trigger_state!(paused),
    " GROUP BY state, resource_group, tenant",
    " UNION ALL SELECT 'counter', name, '', '', value, NULL FROM counters",
    " UNION ALL SELECT 'unknown_effects', '', '', '', count(*), min(created_at) FROM effects \
     WHERE state = ",
    crate::effect_state!(unknown),
    " UNION ALL SELECT 'compensations', '', '', '', count(*), NULL FROM effects \
     WHERE compensates IS NOT NULL",
    " UNION ALL SELECT 'exceptions', kind, '', '', count(*), min(created_at) FROM exceptions \
     WHERE state = 'open' GROUP BY kind",
    " UNION ALL SELECT 'group', name, '', '', effective_concurrency, NULL FROM resource_groups",
    " UNION ALL SELECT 'shard', CAST(shard AS TEXT), '', '', 0, watermark FROM schedule_shards",
    " UNION ALL SELECT 'takeover', t.resource_group, '', '', n.started_at - e.lease_until, NULL \
     FROM attempts e JOIN attempts n ON n.trigger_id = e.trigger_id \
       AND n.attempt_no = e.attempt_no + 1 JOIN triggers t ON t.id = e.trigger_id \
     WHERE e.outcome = ",
    crate::attempt_outcome!(expired),
    " AND e.ended_at > ",
    now_ms!(),
    " - 3600000",
);

/// The counter `Store::lease_lost` adds to for each stale write, with the
/// kind of write after the colon (`stale_token_rejections:heartbeat`); the
/// bare name is the total over every kind.
pub const STALE_TOKEN_KIND_PREFIX: &str = "stale_token_rejections:";

/// Triggers in one state, of one group and tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerGauge {
    pub state: String,
    pub group: String,
    pub tenant: String,
    pub count: i64,
    /// The earliest `next_run_at` among them (ms).
    pub earliest_next_run: Option<i64>,
}

/// Open exception tickets of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionGauge {
    pub kind: String,
    pub open: i64,
    /// When the oldest was opened (ms).
    pub oldest_at: Option<i64>,
}

/// What the database says, at one instant of its clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// The database clock (ms).
    pub now: i64,
    /// `pending`, `retry_wait`, `running`, `manual` and `paused` triggers.
    pub triggers: Vec<TriggerGauge>,
    /// Every row of `counters`, by name.
    pub counters: Vec<(String, i64)>,
    /// Effects whose outcome is unknown now, and the oldest one's intent
    /// time (ms).
    pub unknown_effects: i64,
    pub oldest_unknown_at: Option<i64>,
    /// Compensating effects ever recorded.
    pub compensations: i64,
    pub exceptions: Vec<ExceptionGauge>,
    /// Each group's effective concurrency.
    pub groups: Vec<(String, i64)>,
    /// Each shard's watermark (ms), if it was ever scanned.
    pub shards: Vec<(i64, Option<i64>)>,
    /// Each takeover of the last hour: its group and latency (ms;
    /// [`crate::model::takeover`]).
    pub takeovers: Vec<(String, i64)>,
}

type Row = (String, String, String, String, i64, Option<i64>);

impl MetricsSnapshot {
    fn from_rows(rows: Vec<Row>) -> Self {
        let mut s = Self::default();
        for (kind, a, b, c, n, m) in rows {
            match kind.as_str() {
                "now" => s.now = n,
                "triggers" => match s
                    .triggers
                    .iter_mut()
                    .find(|t| (&t.state, &t.group, &t.tenant) == (&a, &b, &c))
                {
                    Some(t) => {
                        t.count += n;
                        t.earliest_next_run = match (t.earliest_next_run, m) {
                            (Some(x), Some(y)) => Some(x.min(y)),
                            (x, y) => x.or(y),
                        };
                    }
                    None => s.triggers.push(TriggerGauge {
                        state: a,
                        group: b,
                        tenant: c,
                        count: n,
                        earliest_next_run: m,
                    }),
                },
                "counter" => s.counters.push((a, n)),
                "unknown_effects" => (s.unknown_effects, s.oldest_unknown_at) = (n, m),
                "compensations" => s.compensations = n,
                "exceptions" => s.exceptions.push(ExceptionGauge {
                    kind: a,
                    open: n,
                    oldest_at: m,
                }),
                "group" => s.groups.push((a, n)),
                "shard" => s.shards.push((a.parse().unwrap_or(-1), m)),
                "takeover" => s.takeovers.push((a, n)),
                _ => {}
            }
        }
        s.triggers
            .sort_by(|x, y| (&x.state, &x.group, &x.tenant).cmp(&(&y.state, &y.group, &y.tenant)));
        s.counters.sort();
        s.groups.sort();
        s.shards.sort();
        s.takeovers.sort();
        s
    }

    /// The last hour's takeovers per group ([`crate::model::takeover`]).
    pub fn takeovers_by_group(&self) -> Vec<(String, crate::model::takeover::Takeovers)> {
        let mut groups: Vec<&str> = self.takeovers.iter().map(|(g, _)| g.as_str()).collect();
        groups.dedup();
        groups
            .into_iter()
            .map(|group| {
                let latencies: Vec<i64> = self
                    .takeovers
                    .iter()
                    .filter(|(g, _)| g == group)
                    .map(|(_, ms)| *ms)
                    .collect();
                (
                    group.to_string(),
                    crate::model::takeover::Takeovers::of(&latencies),
                )
            })
            .collect()
    }

    /// A counter's value (0 if never written).
    pub fn counter(&self, name: &str) -> i64 {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// What `/readyz` needs from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaState {
    /// The newest migration applied to the database.
    pub applied: Option<i64>,
    /// The newest migration this binary carries.
    pub expected: i64,
}

impl SchemaState {
    /// The database is at exactly this binary's newest migration.
    pub fn current(&self) -> bool {
        self.applied == Some(self.expected)
    }
}

impl Store {
    /// The cluster-wide figures, in one statement.
    pub async fn metrics_snapshot(&self) -> StoreResult<MetricsSnapshot> {
        let rows: Vec<Row> = sqlx::query_as(self.sql(SNAPSHOT))
            .fetch_all(self.pool())
            .await?;
        Ok(MetricsSnapshot::from_rows(rows))
    }

    /// Reach the database and read which migrations it has: an error if it
    /// cannot be reached.
    pub async fn schema_state(&self) -> StoreResult<SchemaState> {
        let applied: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(max(version) AS BIGINT) FROM _sqlx_migrations WHERE success",
        )
        .fetch_one(self.pool())
        .await?;
        let migrator = match self.dialect() {
            Dialect::Sqlite => &super::SQLITE_MIGRATIONS,
            Dialect::Postgres => &super::POSTGRES_MIGRATIONS,
        };
        let expected = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        Ok(SchemaState { applied, expected })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_rows_are_sorted_into_their_figures() {
        let row = |kind: &str, a: &str, n: i64, m: Option<i64>| {
            (kind.into(), a.into(), "g".into(), "t".into(), n, m)
        };
        let s = MetricsSnapshot::from_rows(vec![
            row("now", "", 5000, None),
            row("triggers", "pending", 3, Some(1000)),
            row("triggers", "pending", 2, Some(900)),
            row("counter", "stale_token_rejections", 2, None),
            row("unknown_effects", "", 1, Some(4000)),
            row("compensations", "", 4, None),
            row("exceptions", "key_conflict", 2, Some(3000)),
            row("group", "default", 16, None),
            row("shard", "3", 0, Some(4500)),
            row("shard", "1", 0, None),
        ]);
        assert_eq!(s.now, 5000);
        // Fresh and recovery work of one group and tenant are one figure.
        assert_eq!(s.triggers.len(), 1);
        assert_eq!(s.triggers[0].count, 5);
        assert_eq!(s.triggers[0].earliest_next_run, Some(900));
        assert_eq!(s.counter("stale_token_rejections"), 2);
        assert_eq!(s.counter("never"), 0);
        assert_eq!((s.unknown_effects, s.oldest_unknown_at), (1, Some(4000)));
        assert_eq!(s.compensations, 4);
        assert_eq!(s.exceptions[0].open, 2);
        assert_eq!(s.groups, vec![("default".into(), 16)]);
        assert_eq!(s.shards, vec![(1, None), (3, Some(4500))]);
    }

    #[test]
    fn the_schema_is_current_only_at_the_newest_migration() {
        let at = |applied| SchemaState {
            applied,
            expected: 12,
        };
        assert!(at(Some(12)).current());
        assert!(!at(Some(11)).current());
        assert!(!at(None).current());
    }
}
