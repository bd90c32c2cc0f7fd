//! `kpack-repo`: the mirror operator's tool.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
