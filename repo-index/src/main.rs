//! `kpack-repo`: the mirror operator's tool.

fn main() -> std::process::ExitCode {
    kpack_repo_index::cli::main()
}
