//! What a measured run cost the machine and the PostgreSQL server, per job:
//! WAL records and bytes and the index entries, heap inserts and (HOT)
//! updates among them and the commits of writing transactions (read with
//! `pg_walinspect` over the run's WAL range; without it, commits from
//! `pg_stat_database`, a lower bound), server and client CPU (`/proc`), and how
//! busy the machine's cores were — so a figure says which resource ran out.

use paddock::store::Store;

/// CPU time of the processes whose name is `postgres` (the server, its
/// backends and its background writers), in clock ticks.
fn server_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| stat.contains("(postgres)"))
        .map(|stat| ticks_of(&stat))
        .sum()
}

/// utime + stime of one `/proc/<pid>/stat` line.
fn ticks_of(stat: &str) -> u64 {
    let after = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14 and stime 15.
    fields
        .get(11)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
}

/// CPU ticks of `pids` (this process if empty).
pub fn client_ticks(pids: &[u32]) -> u64 {
    if pids.is_empty() {
        return std::fs::read_to_string("/proc/self/stat")
            .map(|s| ticks_of(&s))
            .unwrap_or(0);
    }
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|s| ticks_of(&s))
        .sum()
}

/// (busy, total) ticks of all cores since boot.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

fn cores() -> f64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}

/// A run's starting point.
pub struct Meter {
    lsn: Option<String>,
    commits: i64,
    server: u64,
    client: u64,
    machine: (u64, u64),
}

/// A run's costs, per job where it says so.
#[derive(Clone, Copy, Default)]
pub struct Costs {
    pub wal_records: f64,
    pub wal_bytes: f64,
    pub index_entries: f64,
    pub heap_inserts: f64,
    pub heap_updates: f64,
    pub hot_updates: f64,
    pub commits: f64,
    pub server_cpu_us: f64,
    pub client_cpu_us: f64,
    /// Share of all cores busy during the run (0..1).
    pub machine_busy: f64,
    /// Share of all cores the server used (0..1).
    pub server_share: f64,
}

impl Costs {
    /// The resource that ran out, as far as the figures tell.
    pub fn saturated(&self) -> &'static str {
        if self.machine_busy >= 0.9 {
            "CPU (all cores busy)"
        } else if self.server_share * cores() >= 0.9 {
            "server CPU (one core's worth)"
        } else {
            "none: round trips / WAL flushes"
        }
    }
}

/// `pg_walinspect` in the database behind `store`, if the server has it.
pub async fn install(store: &Store) -> bool {
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public")
        .execute(store.pool())
        .await
        .is_ok()
}

async fn commits(store: &Store) -> i64 {
    sqlx::query_scalar(
        "SELECT CAST(xact_commit AS BIGINT) FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(store.pool())
    .await
    .unwrap_or(0)
}

impl Meter {
    /// Start measuring (PostgreSQL; `None` on SQLite). `pids` are the
    /// client processes (this one if empty).
    pub async fn start(store: &Store, pids: &[u32]) -> Option<Meter> {
        if store.dialect() != paddock::store::Dialect::Postgres {
            return None;
        }
        // Statistics are sent to the collector at transaction end, with a
        // delay: force them out so the counts start here.
        let _ = sqlx::query("SELECT pg_stat_clear_snapshot()")
            .execute(store.pool())
            .await;
        let lsn: Option<String> = sqlx::query_scalar("SELECT pg_current_wal_lsn()::TEXT")
            .fetch_one(store.pool())
            .await
            .ok();
        Some(Meter {
            lsn,
            commits: commits(store).await,
            server: server_ticks(),
            client: client_ticks(pids),
            machine: machine_ticks(),
        })
    }

    /// The costs of the run since [`Meter::start`], per job of `jobs`.
    pub async fn end(self, store: &Store, pids: &[u32], jobs: i64) -> Costs {
        let (server, client, machine) = (server_ticks(), client_ticks(pids), machine_ticks());
        let jobs = jobs.max(1) as f64;
        let tick_us = 1e6 / 100.0; // USER_HZ
        let mut costs = Costs {
            server_cpu_us: (server - self.server) as f64 * tick_us / jobs,
            client_cpu_us: (client.saturating_sub(self.client)) as f64 * tick_us / jobs,
            ..Costs::default()
        };
        let (busy, total) = (
            machine.0 - self.machine.0,
            (machine.1 - self.machine.1).max(1),
        );
        costs.machine_busy = busy as f64 / total as f64;
        costs.server_share = (server - self.server) as f64 / total as f64;
        let Some(start) = self.lsn else {
            // No WAL to count commits in: `pg_stat_database`, which lags
            // by up to PGSTAT_MIN_INTERVAL (1 s, PG15) — and longer for a
            // pooled connection gone idle, which flushes its counts only
            // at its next transaction or after 10 s: a lower bound.
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
            let _ = sqlx::query("SELECT pg_stat_clear_snapshot()")
                .execute(store.pool())
                .await;
            costs.commits = (commits(store).await - self.commits) as f64 / jobs;
            return costs;
        };
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT \"resource_manager/record_type\", CAST(count AS BIGINT), \
                 CAST(combined_size AS BIGINT) \
             FROM public.pg_get_wal_stats(CAST($1 AS pg_lsn), pg_current_wal_lsn(), true)",
        )
        .bind(start)
        .fetch_all(store.pool())
        .await
        .unwrap_or_default();
        for (kind, count, size) in rows {
            let count = count as f64 / jobs;
            costs.wal_records += count;
            costs.wal_bytes += size as f64 / jobs;
            match kind.as_str() {
                "Btree/INSERT_LEAF" | "Btree/INSERT_POST" => costs.index_entries += count,
                "Heap/INSERT"
                | "Heap/INSERT+INIT"
                | "Heap2/MULTI_INSERT"
                | "Heap2/MULTI_INSERT+INIT" => costs.heap_inserts += count,
                "Heap/UPDATE" | "Heap/UPDATE+INIT" => costs.heap_updates += count,
                "Heap/HOT_UPDATE" | "Heap/HOT_UPDATE+INIT" => {
                    costs.heap_updates += count;
                    costs.hot_updates += count;
                }
                // Every transaction that wrote, exactly (a read-only one
                // writes no commit record).
                "Transaction/COMMIT" => costs.commits += count,
                _ => {}
            }
        }
        costs
    }
}
