//! The real `ledger` binary as a separate process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

/// Kills the child on drop, so a failing assertion leaves no process behind.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_its_address_serves_requests_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");
    let child = Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn ledger");
    let mut child = ChildGuard(child);

    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("`listening on` line within 30s");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let base = format!("http://{addr}");

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = client
        .post(format!("{base}/v1/RES-900/reserve"))
        .header("Idempotency-Key", "bin-1")
        .header("Fencing-Token", "1")
        .json(&json!({"amount": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["balance_after"], 97);
    let op: serde_json::Value = client
        .get(format!("{base}/v1/operations/bin-1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(op["outcome"], "applied");
    assert!(db.exists(), "the database file is where --db says");

    // Graceful stop on SIGTERM.
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ledger did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
}
