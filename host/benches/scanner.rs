//! The scanner against a real SQLite store: CPU and wall time of one
//! 10-second tick over 24,000 cron jobs in 16 shards (compute + inserts +
//! watermarks), next to the floor of computing the same fire times alone;
//! and batched trigger-insert throughput.
//!
//! Run: `cargo bench -p paddock --bench scanner`. Env `PADDOCK_BENCH_JOBS`
//! (default 24000). CPU time is the whole process's (`/proc/self/stat`,
//! 10 ms resolution, summed over several ticks).

use paddock::schedule::scanner::{Scanner, ScannerConfig};
use paddock::schedule::{Schedule, ScheduleSpec, TriggerSpec, shard_of};
use paddock::store::prelude::*;
use paddock::store::{ScheduledTrigger, Store};
use std::time::{Duration, Instant};

fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // After the command name: state is field 0; utime 11, stime 12 (clock ticks).
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// A realistic mix: every minute at a second, every 5 minutes, hourly,
/// daily, and a tenth at seconds level.
fn cron_of(i: usize) -> String {
    match i % 10 {
        0 => format!("*/{} * * * * *", [5, 10, 15, 30][i % 4]),
        1..=6 => format!("{} */{} * * * *", i % 60, [1, 2, 5][i % 3]),
        7 | 8 => format!("{} {} * * * *", i % 60, (i / 60) % 60),
        _ => format!("0 {} {} * * *", i % 60, i % 24),
    }
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("PADDOCK_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24_000);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!(
        "sqlite://{}",
        dir.path().join("bench.db").display()
    ))
    .await
    .unwrap();
    let zones = [
        chrono_tz::UTC,
        chrono_tz::America::New_York,
        chrono_tz::Europe::London,
        chrono_tz::Asia::Kolkata,
    ];
    let specs: Vec<(String, ScheduleSpec)> = (0..n)
        .map(|i| {
            (
                format!("job-{i}"),
                ScheduleSpec {
                    trigger: TriggerSpec::Cron {
                        cron: cron_of(i),
                        timezone: zones[i % zones.len()],
                    },
                    ..ScheduleSpec::default()
                },
            )
        })
        .collect();
    // Register directly (a component row satisfies the foreign key).
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::query(store.sql("INSERT INTO components (digest, size_bytes, bytes, manifest, pushed_by, pushed_at) VALUES ('c', 0, ?, '{}', 'bench', 0)"))
        .bind(Vec::<u8>::new())
        .execute(&mut *tx).await.unwrap();
    for (id, spec) in &specs {
        sqlx::query(store.sql("INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at) VALUES (?, 't', 1, 0, 0)"))
            .bind(id).execute(&mut *tx).await.unwrap();
        sqlx::query(store.sql("INSERT INTO plan_versions (tenant, job_id, version, digest, spec, component_digest, resource_group, created_by, created_at) VALUES ('t', ?, 1, 'd', '{}', 'c', 'default', 'b', 0)"))
            .bind(id).execute(&mut *tx).await.unwrap();
        sqlx::query(store.sql("INSERT INTO job_schedules (job_id, plan_version, shard, spec, tenant, resource_group, priority, active_from, updated_at) VALUES (?, 1, ?, ?, 't', 'default', 0, 0, 0)"))
            .bind(id).bind(shard_of(id, 16) as i64).bind(spec.canonical_json()).execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();

    // Floor: the same fire times computed from compiled schedules, no I/O.
    let compiled: Vec<Schedule> = specs.iter().map(|(_, s)| s.compile().unwrap()).collect();
    let start = 1_800_000_000_000i64; // 2027-01-15T08:00:00Z
    let ticks = 10;
    let (mut floor_fires, floor_wall) = (0usize, Instant::now());
    for k in 0..ticks {
        let from = paddock::model::time::from_millis(start + k * 10_000);
        let to = paddock::model::time::from_millis(start + (k + 1) * 10_000);
        floor_fires += compiled
            .iter()
            .map(|s| s.occurrences(from, to).count())
            .sum::<usize>();
    }
    let floor_ms = floor_wall.elapsed().as_secs_f64() * 1e3 / ticks as f64;

    // The scanner, 10-second ticks on an injected database clock.
    let scanner = Scanner::new(
        store.clone(),
        ScannerConfig {
            owner: "bench".into(),
            overlap: Duration::from_secs(10),
            lookahead: Duration::ZERO,
            initial_lookback: Duration::from_secs(10),
            ..ScannerConfig::default()
        },
    );
    scanner.tick(Some(start)).await.unwrap(); // first tick compiles and warms caches
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    let mut created = 0;
    let mut existing = 0;
    for k in 1..=ticks {
        let r = scanner.tick(Some(start + k * 10_000)).await.unwrap();
        created += r.created;
        existing += r.existing;
    }
    let wall_ms = wall0.elapsed().as_secs_f64() * 1e3 / ticks as f64;
    let t = Instant::now();
    for shard in 0..16 {
        store.schedules_in_shard(shard).await.unwrap();
    }
    println!(
        "  (loading all schedules: {:.1} ms)",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    for shard in 0..16 {
        store
            .shard_existing(shard, start, start + 100_000)
            .await
            .unwrap();
    }
    println!(
        "  (existing lookups: {:.1} ms)",
        t.elapsed().as_secs_f64() * 1e3
    );
    let cpu_ms = (process_cpu() - cpu0).as_secs_f64() * 1e3 / ticks as f64;
    println!(
        "scanner tick over {n} cron jobs in 16 shards, 10 s windows with 10 s overlap, {ticks} ticks"
    );
    println!(
        "  scanner:  {wall_ms:>8.1} ms wall/tick  {cpu_ms:>8.1} ms CPU/tick  ({} created, {} re-seen in the overlap per tick)",
        created / ticks,
        existing / ticks
    );
    println!(
        "  floor:    {floor_ms:>8.1} ms wall/tick  (fire-time computation only, {} fires/tick)",
        floor_fires / ticks as usize
    );
    println!("  ratio scanner / floor (wall): {:.1}x", wall_ms / floor_ms);

    // Batched insert throughput.
    let batch = 1_000;
    let total = 50_000;
    // The inserts are fenced by a shard lease, as the scanner's are.
    let lease = store
        .shard_lease(0, "bench-insert", 3_600_000, None)
        .await
        .unwrap()
        .expect("shard 0 is free after the ticks above released it");
    let t0 = Instant::now();
    for b in 0..total / batch {
        let rows: Vec<ScheduledTrigger> = (0..batch)
            .map(|i| ScheduledTrigger {
                job_id: specs[(b * batch + i) % n].0.clone(),
                plan_version: 1,
                tenant: "t".into(),
                resource_group: "default".into(),
                priority: 0,
                scheduled_at: 1_900_000_000_000 + (b * batch + i) as i64 * 1000,
                state: paddock::model::TriggerState::Pending,
                recovery: false,
            })
            .collect();
        let scan = paddock::store::ScanCommit {
            triggers: rows,
            skipped: vec![],
            watermark: 0,
        };
        store.scan_commit(&lease, &scan).await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "trigger insert on SQLite, batches of {batch}: {:.0} triggers/s ({total} in {secs:.2} s)",
        total as f64 / secs
    );
}
