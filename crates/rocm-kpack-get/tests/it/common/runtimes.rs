//! Small HIP runtimes and libraries built by the tests with `cc`, each
//! holding one kind of evidence for or against kpack support, and loader
//! caches written in glibc's format.

use std::path::{Path, PathBuf};

/// What a fake `libamdhip64.so.5` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeRuntime {
    /// Names `librocm_kpack.so.0` in DT_NEEDED.
    NeedsKpackLibrary,
    /// Imports `kpack_load_code_object` (without naming its library).
    ImportsLoadCodeObject,
    /// Holds the static loader's string `kpack_search_paths`.
    HoldsSearchPathsKey,
    /// Built like a CLR without kpack: every marker above, and
    /// `ROCM_KPACK_ENABLED=OFF`.
    BuiltWithoutKpack,
    /// None of these.
    Plain,
    /// None of these, and a HIP version string (`6.2.41133-dd7f95766`),
    /// as CLR carries one.
    HipVersion(&'static str),
}

const RUNTIME_NAME: &str = "libamdhip64.so.5";

fn cc(output: &Path, source: &str, flags: &[&str]) {
    let dir = output.parent().unwrap();
    fs_err::create_dir_all(dir).unwrap();
    let file = output.file_name().unwrap().to_string_lossy();
    let source_path = dir.join(format!("{file}.c"));
    fs_err::write(&source_path, source).unwrap();
    kpack_test_support::run(
        kpack_test_support::tool("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(output)
            .arg(&source_path)
            .args(flags),
    );
    fs_err::remove_file(&source_path).unwrap();
}

/// Builds `dir/libamdhip64.so.5` holding `kind`'s evidence; returns its path.
pub fn build_runtime(dir: &Path, kind: FakeRuntime) -> PathBuf {
    build_runtime_named(dir, kind, RUNTIME_NAME)
}

/// Builds `dir/<name>` (`libamdhip64.so.7`, as TheRock's ROCm 7 names it)
/// holding `kind`'s evidence; returns its path.
pub fn build_runtime_named(dir: &Path, kind: FakeRuntime, name: &str) -> PathBuf {
    let output = dir.join(name);
    let mut source = String::from("int hipInit(unsigned flags) { return (int)flags; }\n");
    let soname = format!("-Wl,-soname,{name}");
    let mut flags = vec![soname.as_str()];
    let kpack_dir;
    let kpack_flag;
    if matches!(
        kind,
        FakeRuntime::NeedsKpackLibrary | FakeRuntime::BuiltWithoutKpack
    ) {
        kpack_dir = dir.join("kpack-loader");
        cc(
            &kpack_dir.join("librocm_kpack.so.0"),
            "int kpack_open(void) { return 0; }\n",
            &["-Wl,-soname,librocm_kpack.so.0"],
        );
        kpack_flag = format!("-L{}", kpack_dir.display());
        flags.extend(["-Wl,--no-as-needed", &kpack_flag, "-l:librocm_kpack.so.0"]);
    }
    if matches!(
        kind,
        FakeRuntime::ImportsLoadCodeObject | FakeRuntime::BuiltWithoutKpack
    ) {
        source.push_str(
            "extern int kpack_load_code_object(const char *key);\n\
             int hipLoad(void) { return kpack_load_code_object(\"k\"); }\n",
        );
    }
    if matches!(
        kind,
        FakeRuntime::HoldsSearchPathsKey | FakeRuntime::BuiltWithoutKpack
    ) {
        source.push_str("const char *marker_key(void) { return \"kpack_search_paths\"; }\n");
    }
    if let FakeRuntime::HipVersion(version) = kind {
        source.push_str(&format!(
            "const char *hip_version(void) {{ return \"{version}-dd7f95766\"; }}\n"
        ));
    }
    if kind == FakeRuntime::BuiltWithoutKpack {
        source.push_str(
            "const char *refusal(void) {\n\
             return \"Kpack binary detected but ROCM_KPACK_ENABLED=OFF\"; }\n",
        );
    }
    cc(&output, &source, &flags);
    output
}

/// Builds a library at `output` that needs no HIP runtime of its own
/// (as jax's `_linalg.so`, which reaches it through `libhipblas.so`), with
/// `flags` (run paths).
pub fn build_library_without_runtime(output: &Path, flags: &[&str]) -> PathBuf {
    cc(output, "int user(void) { return 0; }\n", flags);
    output.to_owned()
}

/// Builds a library at `output` that needs the runtime `name` in
/// `runtime_dir` (and nothing else).
pub fn build_library_named(output: &Path, runtime_dir: &Path, name: &str) -> PathBuf {
    let link = format!("-L{}", runtime_dir.display());
    let needed = format!("-l:{name}");
    cc(
        output,
        "extern int hipInit(unsigned);\nint user(void) { return hipInit(0); }\n",
        &["-Wl,--no-as-needed", link.as_str(), needed.as_str()],
    );
    output.to_owned()
}

/// Builds a library at `output` that needs `libamdhip64.so.5` (linked
/// against the runtime in `runtime_dir`), with `flags` (run paths).
pub fn build_library(output: &Path, runtime_dir: &Path, flags: &[&str]) -> PathBuf {
    let link = format!("-L{}", runtime_dir.display());
    let mut all = vec!["-Wl,--no-as-needed", link.as_str(), "-l:libamdhip64.so.5"];
    all.extend_from_slice(flags);
    cc(
        output,
        "extern int hipInit(unsigned);\nint user(void) { return hipInit(0); }\n",
        &all,
    );
    output.to_owned()
}

/// A loader cache (glibc-ld.so.cache1.1, little-endian) listing each
/// `(name, path)` as an x86-64 libc6 library.
pub fn ld_cache(entries: &[(&str, &Path)]) -> Vec<u8> {
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    let strings_start = HEADER + entries.len() * ENTRY;
    let mut table = Vec::new();
    let mut strings = Vec::new();
    for (name, path) in entries {
        let key = (strings_start + strings.len()) as u32;
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
        let value = (strings_start + strings.len()) as u32;
        strings.extend_from_slice(path.to_str().unwrap().as_bytes());
        strings.push(0);
        table.extend_from_slice(&0x0303i32.to_le_bytes()); // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
        table.extend_from_slice(&key.to_le_bytes());
        table.extend_from_slice(&value.to_le_bytes());
        table.extend_from_slice(&[0; 12]); // osversion, hwcap
    }
    let mut bytes = b"glibc-ld.so.cache1.1".to_vec();
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[2, 0, 0, 0]); // little-endian
    bytes.extend_from_slice(&[0; 16]); // extension offset, unused
    bytes.extend_from_slice(&table);
    bytes.extend_from_slice(&strings);
    bytes
}

/// `ldconfig`, where Debian keeps it when it is not on the PATH.
pub fn ldconfig() -> std::process::Command {
    let on_path =
        kpack_test_support::find_tool("ldconfig", &kpack_test_support::SearchPath::from_env());
    let path = match on_path {
        Ok(path) => path,
        Err(_) => ["/usr/sbin/ldconfig", "/sbin/ldconfig"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("ldconfig (libc-bin) is needed")),
    };
    std::process::Command::new(path)
}
