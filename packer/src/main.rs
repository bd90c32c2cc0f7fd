//! `kpack-pack`: splits fat binaries into host-only binaries and kpack
//! archives, and inspects archives.

fn main() -> std::process::ExitCode {
    kpack_packer::cli::main()
}
