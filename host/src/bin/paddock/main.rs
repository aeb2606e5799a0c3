//! The `paddock` binary: flags in [`cli`], work in the library (`paddock`),
//! errors printed here.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PADDOCK_LOG")
                .unwrap_or_else(|_| "paddock=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = cli::Cli::parse();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(cli::dispatch(args)) {
        Ok(code) => code,
        Err(e) => {
            // One line, each cause once. The rule that makes `{:#}` safe:
            // every library error's message is whole — it includes its
            // cause's text — and no library error returns a `source()`
            // (pure wrappers are `#[error(transparent)]`, so they add
            // nothing). The chain `{:#}` walks is therefore only the
            // contexts this binary adds (`opening URL`, ...) and then the
            // library's message. Foreign errors whose own text repeats
            // their source (sqlx's) reach anyhow only inside a library
            // error, never directly. `tests/all/cli_errors.rs` checks it.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
