//! `kpack-repo`: the mirror operator's tool.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
