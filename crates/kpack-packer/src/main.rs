//! `kpack-pack`: splits fat binaries into host-only binaries and kpack
//! archives, and inspects archives.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
