//! Takeover time after SIGKILL, against the configured lease.
//!
//! Two real `paddock serve --lease 2s --heartbeat 500ms --poll 100ms`
//! processes share one PostgreSQL database. B runs for the whole
//! benchmark. Each run: B is paused (SIGSTOP) so that a freshly started A
//! is the one to claim a new long `hello` trigger (steps=1000, a busy loop
//! per step, a checkpoint after each); once A has saved its first
//! checkpoint B is resumed (SIGCONT), and after a random 0–500 ms (so the
//! kill lands anywhere in A's heartbeat cycle) the database clock is read
//! and A is SIGKILLed at once. Takeover time = B's attempt `started_at`
//! (database clock, written by its claim) − that clock reading. The run
//! then cancels the trigger (B stops the guest at its next checkpoint) and
//! waits for it to end before the next run.
//!
//! Printed: median and p90 of the takeover time over the runs, next to the
//! lease still left when A died (`lease_until − kill`, bounded by the
//! lease and the heartbeat period) and B's delay after the lease expired
//! (bounded by the poll interval plus a claim). Target: takeover <= lease
//! + 1 s.
//!
//! Run: `cargo bench -p paddock --bench takeover` (after
//! `bash scripts/build-guests.sh`). Needs PostgreSQL:
//! `PADDOCK_BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) is the admin connection; a
//! fresh database is created and dropped at the end.
//! Env: `PADDOCK_BENCH_RUNS` (default 20), `PADDOCK_BENCH_SPIN` (busy-loop
//! iterations per step, default 1000000).

mod common;
use common::{env_or, guest, with_database};
use paddock::model::ResourceGroup;
use paddock::registry::Registry;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::{ControlStore, NewTrigger, Store};
use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LEASE: &str = "2s";
const LEASE_MS: i64 = 2000;
const HEARTBEAT: &str = "500ms";
const POLL: &str = "100ms";

/// One `paddock serve` process; SIGKILLed when dropped.
struct Serve {
    child: Option<Child>,
    err: PathBuf,
}

impl Serve {
    fn start(url: &str, id: &str, logs: &Path) -> Serve {
        let err = logs.join(format!("{id}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_paddock"))
            .args(["--database-url", url, "serve", "--runner-id", id])
            .args(["--lease", LEASE, "--heartbeat", HEARTBEAT, "--poll", POLL])
            .args(["--concurrency", "4"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start paddock serve");
        Serve {
            child: Some(child),
            err,
        }
    }

    /// Wait for the banner: store open, sandbox built, loops about to start.
    async fn ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&self.err)
            .unwrap_or_default()
            .contains("paddock serve: runner")
        {
            assert!(
                Instant::now() < deadline,
                "paddock serve did not start: {}",
                self.err.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{sig} {pid} failed");
    }

    /// SIGKILL and reap.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal("CONT");
        }
        self.kill();
    }
}

async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Sample {
    takeover: i64,
    lease_left: i64,
    after_expiry: i64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs = env_or("PADDOCK_BENCH_RUNS", 20usize);
    let spin = env_or("PADDOCK_BENCH_SPIN", 1_000_000u64);
    let admin = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let logs = tempfile::tempdir().unwrap();

    // A fresh database for the run.
    let db = format!(
        "pb_takeover_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    );
    let mut admin_conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("PADDOCK_BENCH_DATABASE_URL={admin} is unreachable: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .execute(&mut admin_conn)
        .await
        .unwrap();
    let url = with_database(&admin, &db);

    let store = Store::open(&url).await.unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let registry = Registry::new(store.clone(), sandbox);
    registry
        .group_put(
            ResourceGroup {
                name: "long".into(),
                fuel_per_attempt: 1 << 50,
                memory_bytes: 64 << 20,
                deadline_ms: 600_000,
                max_concurrency: 4,
                grants: "[]".into(),
                caps: Default::default(),
                capacity: Default::default(),
                aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            "bench",
        )
        .await
        .unwrap();
    registry
        .job_apply(
            &format!(
                "id = \"long\"\ntenant = \"t\"\ncomponent = \"{}\"\nresource_group = \"long\"\n\
                 [params]\nsteps = 1000\nspin_per_step = {spin}\n[retry]\nmax_attempts = 1\n",
                guest("hello").display()
            ),
            Path::new("."),
            "bench",
        )
        .await
        .unwrap();

    let b = Serve::start(&url, "B", logs.path());
    b.ready().await;
    let total = Instant::now();
    let mut samples = Vec::new();
    let mut invalid = 0;
    for run in 0..runs {
        // Only A may claim this run's trigger: pause B until A holds it.
        b.signal("STOP");
        let a_id = format!("A{run}");
        let mut a = Serve::start(&url, &a_id, logs.path());
        a.ready().await;
        let (trigger, _) = store
            .trigger_create(&NewTrigger::manual(
                "long",
                serde_json::json!({}),
                Some(&format!("run-{run}")),
            ))
            .await
            .unwrap();
        let id = trigger.id;
        // A has claimed it and its guest is running (first checkpoint saved).
        wait_for(Duration::from_secs(30), "A's first checkpoint", || {
            let store = store.clone();
            let a_id = a_id.clone();
            async move {
                let seq: Option<i64> = sqlx::query_scalar(store.sql(
                    "SELECT c.seq FROM checkpoints c JOIN triggers t ON t.id = c.trigger_id \
                     WHERE c.trigger_id = ? AND t.lease_owner = ?",
                ))
                .bind(id)
                .bind(&a_id)
                .fetch_optional(store.pool())
                .await
                .unwrap();
                seq
            }
        })
        .await;
        b.signal("CONT");
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 500)).await;
        let held: Option<(i64, i64, String, i64)> = sqlx::query_as(store.sql(
            "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER), lease_until, lease_owner, \
             fencing_token FROM triggers WHERE id = ? AND state = 'running'",
        ))
        .bind(id)
        .fetch_optional(store.pool())
        .await
        .unwrap();
        a.kill();
        let Some((killed_at, lease_until, owner, token_a)) = held.filter(|h| h.2 == a_id) else {
            eprintln!(
                "run {run}: A no longer held the trigger at kill time; skipped (raise PADDOCK_BENCH_SPIN)"
            );
            invalid += 1;
            let _ = store.trigger_request_cancel(id, "test", "").await;
            continue;
        };
        let (started_at, token_b): (i64, i64) =
            wait_for(Duration::from_secs(30), "B's takeover", || {
                let store = store.clone();
                async move {
                    sqlx::query_as(store.sql(
                        "SELECT started_at, fencing_token FROM attempts \
                         WHERE trigger_id = ? AND runner_id = 'B'",
                    ))
                    .bind(id)
                    .fetch_optional(store.pool())
                    .await
                    .unwrap()
                }
            })
            .await;
        store.trigger_request_cancel(id, "test", "").await.unwrap();
        assert_eq!(owner, a_id);
        assert_eq!(token_b, token_a + 1, "takeover must get token + 1");
        let s = Sample {
            takeover: started_at - killed_at,
            lease_left: lease_until - killed_at,
            after_expiry: started_at - lease_until,
        };
        eprintln!(
            "run {run:>2}: takeover {:>5} ms (lease left at kill {:>5} ms, claimed {:>4} ms after expiry), token {token_a} -> {token_b}",
            s.takeover, s.lease_left, s.after_expiry
        );
        samples.push(s);
        // B stops the guest at its next checkpoint after the cancel reaches
        // it (next heartbeat); wait so the next run starts clean.
        wait_for(Duration::from_secs(60), "the cancel", || {
            let store = store.clone();
            async move {
                let state: String =
                    sqlx::query_scalar(store.sql("SELECT state FROM triggers WHERE id = ?"))
                        .bind(id)
                        .fetch_one(store.pool())
                        .await
                        .unwrap();
                (state != "running").then_some(())
            }
        })
        .await;
    }
    drop(b);
    let elapsed = total.elapsed();
    store.close().await;

    let col = |f: fn(&Sample) -> i64| {
        let mut v: Vec<i64> = samples.iter().map(f).collect();
        v.sort();
        v
    };
    let takeover = col(|s| s.takeover);
    let left = col(|s| s.lease_left);
    let after = col(|s| s.after_expiry);
    println!();
    println!(
        "takeover after SIGKILL: paddock serve --lease {LEASE} --heartbeat {HEARTBEAT} --poll {POLL}, \
         PostgreSQL, {} runs ({invalid} invalid), {:.0} s",
        samples.len(),
        elapsed.as_secs_f64()
    );
    println!(
        "{:<46} {:>8} {:>8} {:>8} {:>8}",
        "", "min ms", "p50 ms", "p90 ms", "max ms"
    );
    for (name, v) in [
        ("takeover (B's claim - kill, DB clock)", &takeover),
        ("  lease left at kill (lease_until - kill)", &left),
        ("  B's claim after lease expiry", &after),
    ] {
        println!(
            "{name:<46} {:>8} {:>8} {:>8} {:>8}",
            v[0],
            pct(v, 0.5),
            pct(v, 0.9),
            v[v.len() - 1]
        );
    }
    let target = LEASE_MS + 1000;
    println!(
        "target: takeover <= lease + 1 s = {target} ms: p50 {} ({:.2}x lease), p90 {} ({:.2}x lease)",
        if pct(&takeover, 0.5) <= target {
            "met"
        } else {
            "MISSED"
        },
        pct(&takeover, 0.5) as f64 / LEASE_MS as f64,
        if pct(&takeover, 0.9) <= target {
            "met"
        } else {
            "MISSED"
        },
        pct(&takeover, 0.9) as f64 / LEASE_MS as f64,
    );

    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
    )))
    .execute(&mut admin_conn)
    .await;
}
