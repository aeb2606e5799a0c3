//! The `paddock` binary: flags in [`cli`], work in the library (`paddock`),
//! errors printed here.

// Every line this binary prints passes each value through
// `paddock::model::text::Esc`: people's text (reasons, names, actors, job
// names, error messages) reaches the terminal with its control characters
// escaped, so no value can forge a line or send an escape sequence. These
// shadow the standard macros in every module below; a value is never
// captured inline (`{name}`), which would pass it unescaped —
// `tests/all/output.rs` checks that. Machine output (JSON) is printed by
// `cli::print::json`, escaped there for JSON.
macro_rules! println {
    () => { ::std::println!() };
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        ::std::println!($fmt $(, ::paddock::model::text::Esc(&$arg))*)
    };
}
macro_rules! print {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        ::std::print!($fmt $(, ::paddock::model::text::Esc(&$arg))*)
    };
}
macro_rules! eprintln {
    () => { ::std::eprintln!() };
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        ::std::eprintln!($fmt $(, ::paddock::model::text::Esc(&$arg))*)
    };
}
mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("PADDOCK_LOG")
        .unwrap_or_else(|_| "paddock=warn".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format() {
        // One JSON object per line, the event's fields at the top level
        // (`trigger_id`, `plan_key`, ...), for log pipelines.
        cli::LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
        cli::LogFormat::Text => logs.init(),
    }
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
            eprintln!("error: {0:#}", e);
            ExitCode::FAILURE
        }
    }
}
