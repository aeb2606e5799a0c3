//! Every refusal of the real `paddock` binary is one line, `error: ...`,
//! with each cause once: no sentence of the chain repeats, nothing panics,
//! no backtrace. (The rule that makes it so is written where the binary
//! prints errors, `host/src/bin/paddock/main.rs`.)

use crate::{Db, TestHost, guest};
use std::path::Path;
use std::process::Command;

/// What one run of the binary said.
struct Refusal {
    args: Vec<String>,
    status: std::process::ExitStatus,
    stderr: String,
}

/// `paddock --database-url URL ARGS...`, to completion.
fn paddock(url: &str, args: &[&str]) -> Refusal {
    let out = Command::new(env!("CARGO_BIN_EXE_paddock"))
        .arg("--database-url")
        .arg(url)
        .args(args)
        // A panic would print its backtrace: make it visible to the check.
        .env("RUST_BACKTRACE", "1")
        .env_remove("PADDOCK_LOG")
        .output()
        .expect("run paddock");
    Refusal {
        args: args.iter().map(|a| a.to_string()).collect(),
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Refusal {
    /// Refused, in one line naming `expected`, each sentence once.
    fn is_one_clean_line(&self, expected: &str) {
        let what = format!("paddock {}:\n{}", self.args.join(" "), self.stderr);
        assert!(!self.status.success(), "{what}");
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("backtrace"),
            "{what}"
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {what}");
        let message = lines[0]
            .strip_prefix("error: ")
            .unwrap_or_else(|| panic!("starts with `error: `: {what}"));
        assert!(message.contains(expected), "names {expected:?}: {what}");
        let mut seen = std::collections::HashSet::new();
        for sentence in message.split(": ").flat_map(|part| part.split("; ")) {
            let sentence = sentence.trim();
            assert!(
                sentence.is_empty() || seen.insert(sentence),
                "{sentence:?} is said twice: {what}"
            );
        }
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

db_test!(component_refusals_are_one_line_each_cause_once);
async fn component_refusals_are_one_line_each_cause_once(db: Db) {
    let host = TestHost::new(db).await;
    let dir = host.dir.path();
    let empty = write(dir, "empty.wasm", b"");
    paddock(&host.url, &["component", "push", &empty]).is_one_clean_line("not a WebAssembly file");
    let core = write(dir, "core.wasm", b"\0asm\x01\0\0\0");
    paddock(&host.url, &["component", "push", &core])
        .is_one_clean_line("core WebAssembly module, not a component");
    let forbidden = guest("forbidden").display().to_string();
    paddock(&host.url, &["component", "push", &forbidden])
        .is_one_clean_line("which this host does not provide");
    paddock(&host.url, &["component", "push", "no/such/file.wasm"])
        .is_one_clean_line("cannot read 'no/such/file.wasm'");
}

db_test!(manifest_and_schedule_refusals_are_one_line_each_cause_once);
async fn manifest_and_schedule_refusals_are_one_line_each_cause_once(db: Db) {
    let host = TestHost::new(db).await;
    let dir = host.dir.path();
    let malformed = write(dir, "malformed.toml", b"id = \"x\"\ntenant = ");
    paddock(&host.url, &["job", "apply", &malformed]).is_one_clean_line("not valid TOML");
    let bad_cron = write(
        dir,
        "bad-cron.toml",
        format!(
            "id = \"x\"\ntenant = \"t\"\ncomponent = \"{}\"\n[schedule]\nkind = \"cron\"\ncron = \"0 0 25 * * *\"\n",
            guest("hello").display()
        )
        .as_bytes(),
    );
    paddock(&host.url, &["job", "apply", &bad_cron]).is_one_clean_line("cron field 'hour'");
    let window = [
        "--from",
        "2027-01-01T00:00:00Z",
        "--to",
        "2027-01-02T00:00:00Z",
    ];
    let mut preview = vec!["schedule", "preview", "--cron", "0 0 25 * * *"];
    preview.extend(window);
    paddock(&host.url, &preview).is_one_clean_line("cron field 'hour'");
    let mut preview = vec!["schedule", "preview", "--cron", "0 0 1 * * * * *"];
    preview.extend(window);
    paddock(&host.url, &preview).is_one_clean_line("cron expression has 8 fields");
}

db_test!(admin_refusals_are_one_line_each_cause_once);
async fn admin_refusals_are_one_line_each_cause_once(db: Db) {
    let host = TestHost::new(db).await;
    paddock(&host.url, &["trigger", "show", "999999"]).is_one_clean_line("not found");
    paddock(&host.url, &["trigger", "cancel", "999999"])
        .is_one_clean_line("trigger 999999 is not pending, waiting or running");
    paddock(&host.url, &["job", "show", "nobody"]).is_one_clean_line("job 'nobody' not found");
    paddock(&host.url, &["group", "set", "g", "--memory", "lots"])
        .is_one_clean_line("'lots' is not a size");
    paddock(&host.url, &["group", "set", "g", "--deadline", "soon"]).is_one_clean_line("soon");
    // This multiplied out of range and panicked before.
    paddock(
        &host.url,
        &["group", "set", "g", "--memory", "9999999999GiB"],
    )
    .is_one_clean_line("--memory: '9999999999GiB' is too large");
    paddock(&host.url, &["group", "set", "g", "--working-set=-1MiB"])
        .is_one_clean_line("--working-set: '-1MiB' must be positive");
    paddock(&host.url, &["group", "set", "g", "--concurrency", "0"])
        .is_one_clean_line("concurrency must be positive, not 0");
    paddock(&host.url, &["group", "set", "g", "--db-connections", "0"])
        .is_one_clean_line("db-connections must be positive, not 0");
    paddock(&host.url, &["group", "set", "g", "--connector-rate=-3"])
        .is_one_clean_line("connector-rate must be a positive number");
    paddock(&host.url, &["group", "show", "nobody"])
        .is_one_clean_line("no resource group named 'nobody'");
    paddock(&host.url, &["group", "grant", "default", "sockets"])
        .is_one_clean_line("grant 'sockets' is not a grant (grants are: clocks, random, stdio");
    paddock(&host.url, &["group", "grant", "nobody", "stdio"]).is_one_clean_line("nobody");
    paddock(&host.url, &["group", "set", "g", "--max-result", "100MiB"])
        .is_one_clean_line("max-result must be between 1 byte and");
    paddock(&host.url, &["group", "set", "g", "--grant", "env:1=x"])
        .is_one_clean_line("grant 'env:1=x' has an invalid variable name");
}

#[tokio::test]
async fn database_refusals_are_one_line_each_cause_once() {
    paddock("mysql://localhost/paddock", &["job", "list"])
        .is_one_clean_line("unsupported database URL");
    paddock("mysql://localhost/paddock", &["serve"]).is_one_clean_line("unsupported database URL");
    // The driver's own error (sqlx's text repeats its cause): a SQLite file
    // in a folder that does not exist, and on PostgreSQL a database that
    // does not exist on a server that does. (An unreachable server is not
    // tried: sqlx retries the connection for the pool's 30 s acquire
    // timeout before it answers.)
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("sqlite://{}/no/such/dir/p.db", dir.path().display());
    for args in [&["job", "list"][..], &["serve"]] {
        paddock(&nowhere, args).is_one_clean_line("unable to open database file");
    }
    {
        let base = crate::postgres_base_url();
        let (server, _) = base.rsplit_once('/').expect("a database in the URL");
        let missing = format!("{server}/paddock_no_such_database");
        for args in [&["job", "list"][..], &["serve"]] {
            paddock(&missing, args)
                .is_one_clean_line("database \"paddock_no_such_database\" does not exist");
        }
    }
}

/// `anyhow` belongs to the binary and the tests: the library's errors are
/// typed (`thiserror`), one enum per plane.
#[test]
fn no_library_module_uses_anyhow() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // The binary's own modules may use it.
                if path != src.join("bin") {
                    folders.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path).unwrap().contains("anyhow")
            {
                offenders.push(path.display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "library modules using anyhow: {offenders:?}"
    );
}
