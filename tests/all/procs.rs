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
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_paddock"))
            .arg("--database-url")
            .arg(url)
            .args(args)
            .env("PADDOCK_LOG", "paddock=info")
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
    pub fn serve(name: &str, url: &str, dir: &Path, flags: &[&str]) -> Self {
        let mut args = vec!["serve", "--runner-id", name];
        args.extend_from_slice(flags);
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
