//! Helpers for the packer's integration tests: fixtures, the runtime's C
//! library, the stand-in HIP runtime and binutils' view of split files, all
//! from the workspace's test-support crate.

pub use kpack_test_support::elf_checks::*;
pub use kpack_test_support::fat::FatLibrary;
pub use kpack_test_support::hip::*;
pub use kpack_test_support::{fixtures, run, unpack_rocrand};

/// `kpack-pack`, with no `SOURCE_DATE_EPOCH` or signing password from the
/// caller's environment.
pub fn kpack_pack() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kpack-pack"));
    command
        .env_remove("SOURCE_DATE_EPOCH")
        .env_remove("KPACK_SIGN_PASSWORD");
    command
}

/// The one context a packer test works in, as uv's `TestContext`: a
/// temporary directory that `kpack-pack` runs in, and the filter that
/// makes its output a snapshot (the directory, times and durations).
pub struct TestContext {
    pub dir: tempfile::TempDir,
}

impl TestContext {
    pub fn new() -> TestContext {
        TestContext {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// `kpack-pack ARGS`, run in the directory (so relative paths are
    /// relative to it).
    pub fn kpack_pack(&self, args: &[&str]) -> std::process::Command {
        let mut command = kpack_pack();
        command.args(args).current_dir(self.path());
        command
    }

    /// Runs `command`: its exit code, stdout and stderr as one text, with
    /// the directory masked as `<DIR>`.
    pub fn run(&self, command: &mut std::process::Command) -> String {
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("{command:?}: {e}"));
        let dir = self.path().display().to_string();
        kpack_test_support::transcript(&output, &[(dir.as_str(), "<DIR>")])
    }
}

/// Each bundle's code objects by target, in section order, of the fat
/// binary `data` (ELF or PE).
pub fn code_by_bundle(data: &[u8]) -> Vec<std::collections::BTreeMap<kpack_gpu::Target, Vec<u8>>> {
    kpack_binary::image::FatImage::parse(data)
        .expect("a readable binary")
        .expect("a fat binary")
        .bundles()
        .iter()
        .map(|bundle| {
            bundle
                .code_objects()
                .expect("readable code objects")
                .iter()
                .map(|c| (c.target.clone(), c.bytes.to_vec()))
                .collect()
        })
        .collect()
}

pub use kpack_binary::bundle::build::{big_block, BIG_BUNDLES, BIG_CODE_LEN};

/// The SHA-256 of the code object of `bundle` for `BIG_TARGETS[target]`.
pub fn big_code_sha256(bundle: usize, target: usize) -> [u8; 32] {
    use std::io::Write;
    let block = big_block(bundle, target);
    let mut hashing = kpack_hash::HashingWriter::new(std::io::sink());
    for _ in 0..BIG_CODE_LEN / 4096 {
        hashing.write_all(&block).expect("a sink takes everything");
    }
    *hashing.finish().0.as_bytes()
}

/// Compiles the shared library `library` of
/// [`kpack_binary::bundle::build::big_library_assembly`]: 2 GiB of device
/// code in compressed bundles, a few megabytes on disk. A constructor
/// registers every wrapper with the HIP runtime in `standin`.
pub fn compile_big_library(library: &std::path::Path, standin: &std::path::Path) {
    use std::fmt::Write;
    let dir = library.parent().expect("the library's directory");
    let source =
        kpack_binary::bundle::build::big_library_assembly(dir).expect("writing the bundles");
    let mut register = String::new();
    for bundle in 0..BIG_BUNDLES {
        let _ = writeln!(
            register,
            "extern char big_wrapper{bundle}[]; __hipRegisterFatBinary(big_wrapper{bundle});"
        );
    }
    let constructor = dir.join("register.c");
    fs_err::write(
        &constructor,
        format!(
            "void **__hipRegisterFatBinary(const void *);\n\
             __attribute__((constructor)) static void register_all(void) {{\n{register}}}\n"
        ),
    )
    .expect("writing the constructor");
    run(kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(library)
        .arg(&source)
        .arg(&constructor)
        .arg(format!("-L{}", standin.display()))
        .arg("-l:libamdhip64.so.5"));
}

/// Peak resident memory a split may reach, whatever the input's size.
pub const MEMORY_GOAL: u64 = 256 << 20;

/// Runs a split (`command`) watched; asserts it succeeds within
/// [`MEMORY_GOAL`] of peak resident memory (its own, from `wait4`);
/// returns its standard output.
pub fn split_within_memory_goal(command: &mut std::process::Command) -> String {
    let measured = kpack_test_support::measure::run_watched(
        command,
        std::time::Duration::from_secs(600),
        4 << 30,
    );
    assert!(
        measured.output.status.success() && measured.killed.is_none(),
        "{:?} {}",
        measured.killed,
        String::from_utf8_lossy(&measured.output.stderr)
    );
    assert!(
        measured.peak_rss < MEMORY_GOAL,
        "peak resident memory {} MiB, more than {} MiB",
        measured.peak_rss >> 20,
        MEMORY_GOAL >> 20
    );
    String::from_utf8_lossy(&measured.output.stdout).into_owned()
}

/// Builds the stand-in HIP runtime in `dir` (made if needed), exporting
/// the registration calls; returns `dir`.
pub fn registering_standin(dir: &std::path::Path) -> std::path::PathBuf {
    fs_err::create_dir_all(dir).expect("making the stand-in's directory");
    let imports = std::collections::BTreeSet::from([
        ("__hipRegisterFatBinary".to_owned(), None),
        ("__hipUnregisterFatBinary".to_owned(), None),
    ]);
    build_standin(dir, &imports);
    dir.to_owned()
}

/// Writes the member `member` of the wheel `wheel` to `to`; returns `to`.
pub fn wheel_member(
    wheel: &std::path::Path,
    member: &str,
    to: &std::path::Path,
) -> std::path::PathBuf {
    let mut wheel =
        zip::ZipArchive::new(fs_err::File::open(wheel).expect("the wheel")).expect("a zip");
    let mut member = wheel.by_name(member).expect("the member");
    std::io::copy(
        &mut member,
        &mut fs_err::File::create(to).expect("the copy"),
    )
    .expect("the member's bytes");
    to.to_owned()
}
