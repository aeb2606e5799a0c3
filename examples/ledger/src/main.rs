//! `ledger --listen 127.0.0.1:8787 --db PATH` — see the library docs.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use paddock_ledger::{Config, DEFAULT_INITIAL_BALANCE, Ledger};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// Paddock's reference downstream: an idempotent, fencing-aware ledger.
#[derive(Debug, Parser)]
#[command(name = "ledger", version)]
struct Args {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, env = "LEDGER_LISTEN", default_value = "127.0.0.1:8787")]
    listen: String,
    /// SQLite file; created if missing. Default: a fresh file in a temp dir.
    #[arg(long, env = "LEDGER_DB")]
    db: Option<PathBuf>,
    /// Opening balance of a resource created on first touch.
    #[arg(long, default_value_t = DEFAULT_INITIAL_BALANCE)]
    initial_balance: i64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();

    let db = match args.db {
        Some(p) => p,
        None => {
            let dir = std::env::temp_dir().join(format!("paddock-ledger-{}", std::process::id()));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.join("ledger.db")
        }
    };
    let ledger = Ledger::open(Config {
        db_path: db.clone(),
        initial_balance: args.initial_balance,
    })
    .await
    .with_context(|| format!("opening {}", db.display()))?;
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(db = %db.display(), "ledger ready");
    // Tests wait for exactly this line.
    println!("listening on {addr}");
    std::io::stdout().flush()?;

    ledger.serve(listener, shutdown_signal()).await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}
