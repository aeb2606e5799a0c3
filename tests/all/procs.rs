//! Real `paddock` processes for the fault-injection tests: started against a
//! test's database, signalled for real (SIGSTOP, SIGCONT, SIGTERM, SIGKILL),
//! and always killed when the handle is dropped, so a failing test leaves
//! no process behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `paddock` process. Its stdout and stderr go to files in `dir`.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Proc {
    /// `paddock --database-url URL ARGS...`, running in the background.
    pub fn spawn(name: &str, url: &str, dir: &Path, args: &[&str]) -> Self {
        Self::spawn_under(&[], name, url, dir, args)
    }

    /// [`Proc::spawn`] run by `wrapper` (a command and its arguments, the
    /// paddock command line appended): `faketime +2h`, say.
    pub fn spawn_under(wrapper: &[&str], name: &str, url: &str, dir: &Path, args: &[&str]) -> Self {
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let paddock = env!("CARGO_BIN_EXE_paddock");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(paddock);
                c
            }
            None => Command::new(paddock),
        };
        let child = command
            .arg("--database-url")
            .arg(url)
            .args(args)
            .env("PADDOCK_LOG", "paddock=info")
            // Plain log lines: tests read them.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start paddock");
        Self {
            name: name.into(),
            child: Some(child),
            stdout,
            stderr,
        }
    }

    /// `paddock serve --runner-id NAME` with the given extra flags.
    /// `paddock serve` as runner `name`, with [`SERVE_DB_CONNECTIONS`]
    /// unless `flags` say otherwise.
    pub fn serve(name: &str, url: &str, dir: &Path, flags: &[&str]) -> Self {
        let mut args = vec!["serve", "--runner-id", name];
        args.extend_from_slice(flags);
        if !flags.contains(&"--db-connections") {
            args.extend_from_slice(&["--db-connections", SERVE_DB_CONNECTIONS]);
        }
        Self::spawn(name, url, dir, &args)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("process is running").id()
    }

    /// Send a signal by name (`STOP`, `CONT`, `TERM`, `KILL`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {} failed", self.name);
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Wait for the process to exit on its own; `None` on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP this process at a moment it holds no lock on the triggers
    /// `ids`, and return how many tries that took.
    ///
    /// A process frozen inside one of its multi-statement transactions (a
    /// heartbeat is BEGIN; UPDATE triggers; UPDATE attempts; COMMIT) keeps
    /// its locks while frozen: on PostgreSQL the triggers' row locks, which
    /// the claim's `FOR UPDATE SKIP LOCKED` then skips, so nobody takes them
    /// over until it resumes; on SQLite the database's write lock, which
    /// stalls every writer. That is a hazard of its own (reproduced by
    /// `faults::a_runner_frozen_inside_its_heartbeat_transaction_does_not_block_the_takeover`),
    /// not the stale-writer case, so this probes with a no-op write to the
    /// rows; if the probe waits, the process is continued, the probe is
    /// awaited until the process has let the lock go, and it is stopped
    /// again.
    pub async fn stop_outside_a_transaction(
        &self,
        store: &paddock::store::Store,
        ids: &[i64],
    ) -> usize {
        let list = ids
            .iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let probe = format!("UPDATE triggers SET priority = priority WHERE id IN ({list})");
        let write = || sqlx::query(sqlx::AssertSqlSafe(probe.clone())).execute(store.pool());
        for retry in 0..20 {
            self.signal("STOP");
            let probed = tokio::time::timeout(Duration::from_secs(2), write()).await;
            if matches!(probed, Ok(Ok(_))) {
                return retry;
            }
            println!(
                "{} was stopped holding a lock ({probed:?}); retrying",
                self.name
            );
            self.signal("CONT");
            // The barrier: the probe goes through once the process has
            // ended the transaction it was frozen in.
            let freed = tokio::time::timeout(Duration::from_secs(60), write()).await;
            assert!(
                matches!(freed, Ok(Ok(_))),
                "{} kept its lock after SIGCONT: {freed:?}",
                self.name
            );
        }
        panic!("{} could not be stopped outside a transaction", self.name);
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A stopped process must be continued to die promptly.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(child.id().to_string())
                .status();
        }
        self.kill();
    }
}

/// Poll `check` until it returns `Some`, or panic with `what` after
/// `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Main-pool connections of each `paddock serve` a test starts. Two tests
/// run at once, each with up to three processes beside its own store, on
/// one PostgreSQL server whose `max_connections` is 100 by default: at the
/// default 16 (+ 6 hot, + 2 + 2 for heartbeats) a pair of multi-process
/// tests could exhaust the server, and a runner refused a connection
/// misses its heartbeats (CI saw it: "heartbeat timed out" three times,
/// then "pool timed out" on the other runner).
pub const SERVE_DB_CONNECTIONS: &str = "6";

/// As [`eventually`], but a timeout panics with `context()` too (the
/// processes' logs, say), so a failure on a loaded machine explains itself.
pub async fn eventually_or<T, F, Fut>(
    timeout: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A throwaway PostgreSQL server for one test, so a test may stop and start
/// its database without touching the server the rest of the suite shares.
/// Runs as the `postgres` user (initdb refuses root) from a data directory
/// of its own, on a free port, trust authentication, listening on
/// 127.0.0.1 only (its socket in the data directory). Dropping it stops the
/// server (`pg_ctl -m immediate`) and removes the directory.
pub struct PgServer {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
}

impl PgServer {
    /// The first `/usr/lib/postgresql/*/bin` that has `initdb`, or `None`.
    pub fn binaries() -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|bin| bin.join("initdb").exists())
            .collect();
        found.sort();
        found.pop()
    }

    /// `initdb` a fresh cluster and start it.
    pub fn start() -> Self {
        let bin = Self::binaries().expect("no PostgreSQL binaries under /usr/lib/postgresql");
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let dir = std::env::temp_dir().join(format!(
            "paddock-pg-{}-{port}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        run(Command::new("chown").arg("postgres:postgres").arg(&dir));
        let server = Self { port, dir, bin };
        server.as_postgres(&[
            "initdb",
            "--auth=trust",
            "--username=postgres",
            "--no-sync",
            "--no-instructions",
            "--encoding=UTF8",
            "-D",
            &server.data(),
        ]);
        server.pg_start();
        server
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// `runuser -u postgres -- BIN/TOOL ARGS`, which must succeed.
    fn as_postgres(&self, args: &[&str]) {
        let tool = self.bin.join(args[0]);
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(tool)
            .args(&args[1..])
            .current_dir(&self.dir));
    }

    fn pg_start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("server.log").display().to_string();
        self.as_postgres(&[
            "pg_ctl",
            "-D",
            &self.data(),
            "-o",
            &options,
            "-l",
            &log,
            "-w",
            "-t",
            "60",
            "start",
        ]);
    }

    /// `pg_ctl stop -m fast`: clients are disconnected, the server is down
    /// when this returns.
    pub fn stop(&self) {
        self.as_postgres(&["pg_ctl", "-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// Start again (same data, same port).
    pub fn start_again(&self) {
        self.pg_start();
    }

    /// A URL for database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// `CREATE DATABASE name`; returns its URL.
    pub async fn create_database(&self, name: &str) -> String {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connect to the throwaway server");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        self.url(name)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Run a command to success, or panic with its output.
fn run(cmd: &mut Command) {
    let out = cmd.output().expect("start command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
