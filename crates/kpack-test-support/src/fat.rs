//! Shared libraries as HIP libraries are built, compiled with `cc`: a
//! `.hip_fatbin` section holding given bundle bytes and one wrapper in
//! `.hipFatBinSegment` pointing into it; optionally a constructor that
//! registers the wrapper with the HIP runtime, linked against the
//! stand-in `libamdhip64.so.5`, as Debian's libraries are. The one builder
//! of fat libraries every test uses.

use std::path::{Path, PathBuf};

use crate::{run, tool};

/// A fat library to compile; see the module documentation.
#[derive(Debug, Clone)]
pub struct FatLibrary {
    bundle: Vec<u8>,
    align: Option<usize>,
    pointer: String,
    soname: Option<String>,
    /// The directory of the stand-in HIP runtime to link against and
    /// register with.
    registers: Option<PathBuf>,
}

impl FatLibrary {
    /// A library whose `.hip_fatbin` is exactly `bundle` (no alignment),
    /// its wrapper pointing at the start.
    pub fn new(bundle: Vec<u8>) -> FatLibrary {
        FatLibrary {
            bundle,
            align: None,
            pointer: "b".to_owned(),
            soname: None,
            registers: None,
        }
    }

    /// The section aligned to `bytes`, as clang aligns it (4096).
    pub fn aligned(mut self, bytes: usize) -> FatLibrary {
        self.align = Some(bytes);
        self
    }

    /// The wrapper's pointer as a C expression over the bundle array `b`
    /// (`b + 8` points into the middle of it).
    pub fn pointer(mut self, expression: &str) -> FatLibrary {
        expression.clone_into(&mut self.pointer);
        self
    }

    pub fn soname(mut self, soname: &str) -> FatLibrary {
        self.soname = Some(soname.to_owned());
        self
    }

    /// Registers its wrapper with the HIP runtime when loaded, as a HIP
    /// library does; linked against a stand-in `libamdhip64.so.5` built
    /// once in `work/hip` (a test replaces it when it loads the library).
    pub fn registered(mut self, work: &Path) -> FatLibrary {
        self.registers = Some(work.join("hip"));
        self
    }

    /// Compiles the library to `library`.
    pub fn compile(&self, library: &Path) {
        let bytes: Vec<String> = self.bundle.iter().map(u8::to_string).collect();
        let align = self
            .align
            .map_or(String::new(), |a| format!(", aligned({a})"));
        let mut source = format!(
            "#include <stdint.h>\n\
             struct w {{ uint32_t m; uint32_t v; const void* p; void* r; }};\n\
             __attribute__((section(\".hip_fatbin\"){align}, used)) static const unsigned char b[] = {{{}}};\n\
             __attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) static struct w wr = {{ 0x48495046u, 1u, {}, 0 }};\n",
            bytes.join(","),
            self.pointer
        );
        if self.registers.is_some() {
            source.push_str(
                "void** __hipRegisterFatBinary(const void*);\n\
                 __attribute__((constructor)) static void register_code(void) { __hipRegisterFatBinary(&wr); }\n",
            );
        }
        let source_path = library.with_extension("fat.c");
        fs_err::write(&source_path, source).expect("writing the C source");
        let mut cc = tool("cc");
        cc.args(["-shared", "-fPIC"]);
        if let Some(soname) = &self.soname {
            cc.arg(format!("-Wl,-soname,{soname}"));
        }
        cc.arg("-o").arg(library).arg(&source_path);
        if let Some(hip) = &self.registers {
            standin_hip(hip);
            cc.arg(format!("-L{}", hip.display()))
                .arg("-l:libamdhip64.so.5");
        }
        run(&mut cc);
        fs_err::remove_file(&source_path).expect("removing the C source");
    }
}

/// The stand-in HIP runtime a registering library links against, built
/// into `dir` unless it is there.
fn standin_hip(dir: &Path) {
    if dir.join("libamdhip64.so.5").exists() {
        return;
    }
    fs_err::create_dir_all(dir).expect("a directory for the stand-in HIP runtime");
    let imports = ["__hipRegisterFatBinary", "__hipUnregisterFatBinary"]
        .into_iter()
        .map(|name| (name.to_owned(), None))
        .collect();
    crate::hip::build_standin(dir, &imports);
}

/// Builds `library` (soname `soname`) with host code only.
pub fn host_library(work: &Path, library: &Path, soname: &str) {
    let source = work.join(format!("{soname}.c"));
    fs_err::write(
        &source,
        format!(
            "int {}_version(void) {{ return 1; }}\n",
            soname.replace(['.', '-'], "_")
        ),
    )
    .expect("writing the C source");
    run(tool("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(library)
        .arg(&source));
}
