//! The `paddock` binary: a thin shell over [`paddock::cli`].

fn main() -> std::process::ExitCode {
    paddock::cli::main()
}
