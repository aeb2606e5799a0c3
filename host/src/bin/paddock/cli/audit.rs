//! `paddock audit ...`: verify the chain against its key and anchors,
//! list it, export it as JSON lines for a SIEM; and the anchoring every
//! other command and `paddock serve` do.

use super::{Host, review};
use anyhow::{Context, bail};
use clap::Subcommand;
use paddock::api::wire::VerifyResponse;
use paddock::model::audit::{ChainBreak, export_line};
use paddock::model::secret::redacted_url;
use paddock::model::time::{from_millis, parse_duration, rfc3339};
use paddock::store::Store;
use paddock::store::prelude::*;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// The audit chain's evidence outside the database is configured by
/// environment: `PADDOCK_AUDIT_KEY_FILE` (default
/// `~/.config/paddock/audit.key`, created 0600 on first use) and
/// `PADDOCK_AUDIT_ANCHOR_FILE` (default for SQLite: `DB.audit-anchor`
/// beside the database file; PostgreSQL: none unless set).
#[derive(Subcommand)]
pub enum AuditCmd {
    /// Verify the chain end to end: hashes, MACs (the key file) and the
    /// anchored heads (the anchor file); names the first bad entry and
    /// exits 1. When it holds, its head is anchored.
    Verify,
    /// Print the audit log.
    List,
    /// Write entries as JSON lines (one object per entry: seq, time, at_ms,
    /// actor, action, subject, detail, prev_hash, hash, mac) for a SIEM.
    /// Exits 1 after writing them if the chain does not verify.
    Export {
        /// Entries written at or after this instant (RFC 3339) or this long
        /// ago (e.g. 24h).
        #[arg(long)]
        since: String,
    },
    /// For a security reviewer: every component, its imports judged
    /// against each group that runs it, its jobs, the connectors it reaches
    /// (`--by tenant`: each tenant's groups and what they grant it).
    Capabilities {
        /// text or json.
        #[arg(long, default_value = "text")]
        format: String,
        /// component or tenant.
        #[arg(long, default_value = "component")]
        by: String,
    },
}

pub async fn audit(host: &Host, cmd: AuditCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCmd::Verify => {
            let verdict = host.store.audit_verify().await?;
            return Ok(print_verdict(&VerifyResponse::of(&verdict)));
        }
        AuditCmd::Export { since } => {
            let since = since_ms(&host.store, &since).await?;
            let entries = host.store.audit_since(since).await?;
            let mut out = std::io::stdout().lock();
            for e in &entries {
                // The export is JSON lines: serde escaped C0 in its strings;
                // the rest is escaped here, the lines kept.
                writeln!(out, "{}", paddock::model::text::json_safe(&export_line(e)))?;
            }
            out.flush()?;
            if let Err(e) = host.store.audit_verify().await?.result {
                return Ok(export_broken(&e.to_string()));
            }
        }
        AuditCmd::Capabilities { format, by } => review::capabilities(host, &format, &by).await?,
        AuditCmd::List => audit_lines(&host.store.audit_list().await?),
    }
    Ok(ExitCode::SUCCESS)
}

/// After `audit export`'s lines: the chain does not verify.
pub fn export_broken(broken: &str) -> ExitCode {
    eprintln!("audit log BROKEN: {0}", broken);
    ExitCode::FAILURE
}

/// `audit list`.
pub fn audit_lines(entries: &[paddock::model::audit::AuditEntry]) {
    for e in entries {
        println!(
            "{:>5} {} {:<10} {:<20} {:<40} {}",
            e.seq,
            rfc3339(from_millis(e.at)),
            e.actor,
            e.action,
            e.subject,
            e.detail
        );
    }
}

/// `--since`: an RFC 3339 instant, or a duration before the database's now.
async fn since_ms(store: &Store, text: &str) -> anyhow::Result<i64> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.timestamp_millis());
    }
    match parse_duration(text) {
        Ok(ago) => Ok(store.now_ms().await? - ago.as_millis() as i64),
        Err(_) => bail!(
            "--since: '{text}' is neither an RFC 3339 instant nor a duration \
             (e.g. 2026-12-04T00:00:00Z or 24h)"
        ),
    }
}

/// One line per fact: what held, what was checked with what, and what was
/// not (no key, no anchor file) — never silently. The same from the
/// database and from `--server` (the server's files).
pub fn print_verdict(v: &VerifyResponse) -> ExitCode {
    if let Some(broken) = &v.broken {
        println!("audit log BROKEN: {0}", broken);
        println!("first bad entry: {}", v.first_bad.unwrap_or_default());
        return ExitCode::FAILURE;
    }
    println!("audit log intact: {} entries, chain verified", v.entries);
    print_keying(v);
    match &v.anchor_file {
        Some(path) => println!(
            "anchors: {} matched of {} in {3}{}",
            v.anchors_matched,
            v.anchors,
            v.head
                .map(|seq| format!("; head {seq} anchored"))
                .unwrap_or_default(),
            path
        ),
        None => println!(
            "anchors: none (set PADDOCK_AUDIT_ANCHOR_FILE): a truncated tail \
             cannot be detected"
        ),
    }
    ExitCode::SUCCESS
}

fn print_keying(v: &VerifyResponse) {
    match (v.keyed_from, v.keyed, &v.key_file) {
        (Some(1), _, Some(key)) => println!("keyed: every entry's MAC checked ({0})", key),
        (Some(first), _, Some(key)) => println!(
            "keyed from entry {1} ({2}); entries 1-{} were written before keying \
             (hash chain only)",
            first - 1,
            first,
            key
        ),
        (None, true, _) if v.entries > 0 => {
            println!("keyed: no entry carries a MAC yet (all written before keying)")
        }
        (None, true, _) => println!("keyed: no entries yet"),
        (_, _, key) => println!(
            "not keyed: no key file{} (MACs not checked)",
            key.as_ref().map(|k| format!(" at {k}")).unwrap_or_default()
        ),
    }
}

/// After a command: anchor the head it may have added. A break found here
/// is reported, never hidden, but does not undo what the command did.
pub async fn anchor_after(store: &Store) {
    match store.audit_anchor().await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => warn_break(&e),
        Err(e) => eprintln!("warning: audit anchor not written: {0}", e),
    }
}

fn warn_break(e: &ChainBreak) {
    eprintln!(
        "warning: audit anchor not written: {0}; run `paddock audit verify`",
        e
    );
}

/// `paddock serve`'s anchoring: every `every` until the returned task is
/// aborted, on a store of its own.
pub async fn anchor_periodically(url: &str, every: Duration) -> anyhow::Result<AnchorTask> {
    let store = Store::open_with(url, Some(1))
        .await
        .with_context(|| format!("opening {} for audit anchoring", redacted_url(url)))?;
    if store.audit_config().anchor_file.is_none() {
        // PostgreSQL has no default place outside the database (each
        // machine's own file would vouch only for what it saw).
        tracing::warn!(
            "audit anchors: none — set PADDOCK_AUDIT_ANCHOR_FILE to a file the database's \
             writers cannot rewrite, or a truncated audit tail goes undetected"
        );
    }
    let anchoring = store.clone();
    let task = tokio::spawn(async move {
        let store = anchoring;
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match store.audit_anchor().await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "audit chain broken; not anchored"),
                Err(e) => tracing::warn!(error = %e, "audit anchor not written"),
            }
        }
    });
    Ok(AnchorTask { task, store })
}

/// The anchoring task; stops when dropped.
pub struct AnchorTask {
    task: tokio::task::JoinHandle<()>,
    store: Store,
}

impl AnchorTask {
    /// Stop, then anchor what the node wrote last.
    pub async fn finish(self) {
        self.task.abort();
        anchor_after(&self.store).await;
    }
}

impl Drop for AnchorTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}
