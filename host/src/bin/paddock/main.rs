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
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
