//! Kernel database files in install trees. Each library's files, laid out
//! with the names and directories of its real packages, are routed by
//! target: into one payload per component and processor beside the host
//! tree (or, with `--pack-databases`, into the archives), shared and
//! unknown files stay in the host tree, and the host tree plus every
//! payload is the input tree again, byte for byte and mode for mode, fat
//! binaries aside.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{FatLibrary, TestContext};
use kpack_binary::bundle::build::offload_bundle;
use kpack_gpu::Owner;
use kpack_packer::databases::payload::DatabasePayload;
use kpack_packer::tree::{split_tree_with, DatabaseMode, TreeOptions, TreeReport};
use rocm_kpack::{capi, Archive, ErrorCode, Target};

/// Where a file of a synthetic tree must end up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goes {
    /// Copied into the host tree as it is.
    Host,
    /// A fat binary: split, its host-only file in the host tree.
    Fat,
    /// Into the payload of `component` for the owner of `target`: a full
    /// target (whose processor's package owns it) or a sub-family or
    /// family key, as a file of `library`.
    Payload {
        library: &'static str,
        component: &'static str,
        target: &'static str,
    },
}

const fn tensile(library: &'static str, target: &'static str) -> Goes {
    Goes::Payload {
        library,
        component: "tensile",
        target,
    }
}

const fn own(library: &'static str, target: &'static str) -> Goes {
    Goes::Payload {
        library,
        component: library,
        target,
    }
}

/// A synthetic tree: its files and where each goes, and its symlinks.
struct Layout {
    files: Vec<(&'static str, Goes)>,
    symlinks: Vec<(&'static str, &'static str)>,
}

fn t(s: &str) -> Target {
    Target::parse(s).unwrap()
}

/// The owner of a file a layout gives `target` for: a full target's
/// processor package, or a sub-family or family.
fn owner(target: &str) -> String {
    Owner::parse(target).unwrap().key().to_owned()
}

/// The full target a layout gives, if it is one (not a group's key).
fn full_target(target: &str) -> Option<Target> {
    Target::parse(target)
        .ok()
        .filter(|t| kpack_gpu::gpus::processor(t.processor()).is_some())
}

fn mode(path: &Path) -> u32 {
    fs_err::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Bytes unique to `path`, so a file put in another's place is seen.
fn contents(path: &str) -> Vec<u8> {
    let mut data = format!("{path}\n")
        .repeat(20 + path.len() % 13)
        .into_bytes();
    data.extend((0..path.len() * 7).map(|i| (i % 251) as u8));
    data
}

/// Compiles a shared library whose `.hip_fatbin` holds one bundle with a
/// code object for each of `targets`.
fn fat_library(path: &Path, targets: &[&str]) {
    let code: Vec<(String, Vec<u8>)> = targets
        .iter()
        .map(|target| {
            let mut bytes = format!("code for {target};").into_bytes();
            bytes.extend((0..3000).map(|i| (i % 253) as u8));
            (format!("hipv4-amdgcn-amd-amdhsa--{target}"), bytes)
        })
        .collect();
    let entries: Vec<(&str, &[u8])> = code.iter().map(|(t, b)| (t.as_str(), &b[..])).collect();
    FatLibrary::new(offload_bundle(&entries))
        .aligned(4096)
        .compile(path);
}

/// The targets of Debian 13's `librocblas.so.0.1` (65 bundles, each with
/// plain-processor code only, no xnack variants).
const DEBIAN_ROCBLAS_TARGETS: &[&str] = &[
    "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1010", "gfx1030", "gfx1100", "gfx1101",
    "gfx1102",
];

/// Writes the layout under `root`: fat binaries compiled, other files with
/// their own bytes, one file and every library directory with a mode of
/// their own.
fn write_tree(root: &Path, layout: &Layout) {
    for (path, goes) in &layout.files {
        let at = root.join(path);
        fs_err::create_dir_all(at.parent().unwrap()).unwrap();
        match goes {
            Goes::Fat => fat_library(&at, DEBIAN_ROCBLAS_TARGETS),
            _ => fs_err::write(&at, contents(path)).unwrap(),
        }
    }
    for (link, target) in &layout.symlinks {
        fs_err::os::unix::fs::symlink(target, root.join(link)).unwrap();
    }
    let (first, _) = layout.files[1];
    fs_err::set_permissions(root.join(first), std::fs::Permissions::from_mode(0o640)).unwrap();
    for (path, goes) in &layout.files {
        if matches!(goes, Goes::Payload { .. }) {
            let dir = root.join(path).parent().unwrap().to_owned();
            fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o750)).unwrap();
        }
    }
}

/// Every file and symlink under `root`, relative to it, except `.kpack/`.
fn listing(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        for entry in fs_err::read_dir(root.join(&dir)).unwrap() {
            let entry = entry.unwrap();
            let relative = dir.join(entry.file_name());
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                if relative != Path::new(".kpack") {
                    pending.push(relative);
                }
            } else {
                out.insert(relative);
            }
        }
    }
    out
}

/// Splits `input` into `output` and the default payload directory.
fn split(input: &Path, output: &Path, databases: DatabaseMode) -> TreeReport {
    let options = TreeOptions {
        databases,
        ..TreeOptions::new("rocm")
    };
    split_tree_with(input, output, &options).unwrap()
}

fn payloads_root(output: &Path) -> PathBuf {
    output.with_file_name(format!(
        "{}.payloads",
        output.file_name().unwrap().to_str().unwrap()
    ))
}

/// The payload a report lists for a component and owner key.
fn payload<'r>(report: &'r TreeReport, component: &str, owner: &str) -> &'r DatabasePayload {
    report
        .payloads
        .iter()
        .find(|p| p.component == component && p.owner.key() == owner)
        .unwrap_or_else(|| panic!("no {component} payload for {owner}: {report:?}"))
}

/// Checks every file is where the layout says, byte-equal with its mode,
/// and nowhere else; that host tree and payloads together are the input;
/// and that the report describes each payload.
fn check_split(layout: &Layout, input: &Path, output: &Path, report: &TreeReport) {
    let root = payloads_root(output);
    for (path, goes) in &layout.files {
        let from = input.join(path);
        let at = match goes {
            Goes::Host | Goes::Fat => output.join(path),
            Goes::Payload {
                component, target, ..
            } => {
                assert!(!output.join(path).exists(), "{path} left in the host tree");
                let dir = payload(report, component, &owner(target)).dir.clone();
                assert_eq!(dir, root.join(component).join(owner(target)));
                dir.join(path)
            }
        };
        let (original, copied) = (fs_err::read(&from).unwrap(), fs_err::read(&at).unwrap());
        assert_eq!(*goes == Goes::Fat, original != copied, "{path}");
        assert_eq!(mode(&at), mode(&from), "{path}");
    }
    // Together, host tree and payloads are the input tree, each file once.
    let mut together = listing(output);
    for payload in &report.payloads {
        for relative in listing(&payload.dir) {
            assert!(
                together.insert(relative.clone()),
                "{} twice",
                relative.display()
            );
            let parent = relative.parent().unwrap();
            assert_eq!(mode(&payload.dir.join(parent)), mode(&input.join(parent)));
        }
    }
    assert_eq!(together, listing(input));
    for (link, target) in &layout.symlinks {
        assert_eq!(
            fs_err::read_link(output.join(link)).unwrap(),
            Path::new(target)
        );
    }
    check_payload_targets(layout, report);
}

/// Each payload lists the full targets of its files and the libraries they
/// belong to, and there is no other payload.
fn check_payload_targets(layout: &Layout, report: &TreeReport) {
    type Key = (&'static str, String);
    let mut expected: BTreeMap<Key, (BTreeSet<Target>, BTreeSet<&str>, usize)> = BTreeMap::new();
    for (_, goes) in &layout.files {
        if let Goes::Payload {
            library,
            component,
            target,
        } = goes
        {
            let entry = expected.entry((component, owner(target))).or_default();
            entry.0.extend(full_target(target));
            entry.1.insert(library);
            entry.2 += 1;
        }
    }
    assert_eq!(
        report.payloads.len(),
        expected.len(),
        "{:?}",
        report.payloads
    );
    for ((component, owner), (targets, libraries, files)) in expected {
        let payload = payload(report, component, &owner);
        assert_eq!(payload.targets, targets.into_iter().collect::<Vec<_>>());
        assert_eq!(payload.libraries, libraries.into_iter().collect::<Vec<_>>());
        assert_eq!(payload.files, files);
    }
}

/// Splits the layout's tree and checks it.
/// `text` with the sizes of the compiled library (which vary with the
/// C toolchain) masked in the split's summary.
fn mask_host_sizes(text: &str) -> String {
    let digits = |c: char| c.is_ascii_digit();
    let text = kpack_test_support::mask_run(text, "bytes in ", "bytes in <N>", digits);
    kpack_test_support::mask_run(&text, "host bytes out ", "host bytes out <N>", digits)
}

/// `error` with its causes, `dir` masked as `<DIR>`.
fn masked_chain(error: &dyn std::error::Error, dir: &Path) -> String {
    let dir = dir.display().to_string();
    kpack_test_support::error_chain(error, &[(&dir, "<DIR>")])
}

fn split_and_check(layout: &Layout) -> TreeReport {
    let work = tempfile::tempdir().unwrap();
    let (input, output) = (work.path().join("in"), work.path().join("out"));
    write_tree(&input, layout);
    let report = split(&input, &output, DatabaseMode::Payloads);
    check_split(layout, &input, &output, &report);
    report
}

const DEBIAN_LIBRARY: &str = "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library";

/// Debian 13's `librocblas0` 5.5.1, every file of the package with its own
/// name (`dpkg-deb -c`), the library a small fat binary.
fn debian_rocblas() -> Layout {
    let mut files = vec![
        ("usr/lib/x86_64-linux-gnu/librocblas.so.0.1", Goes::Fat),
        ("usr/share/doc/librocblas0/changelog.Debian.gz", Goes::Host),
        ("usr/share/doc/librocblas0/changelog.gz", Goes::Host),
        ("usr/share/doc/librocblas0/copyright", Goes::Host),
        ("usr/share/lintian/overrides/librocblas0", Goes::Host),
        (
            "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary.dat",
            Goes::Host,
        ),
    ];
    let kernels: &[(&'static str, &'static str)] = &[
        ("Kernels.so-000-gfx1010.hsaco", "gfx1010"),
        ("Kernels.so-000-gfx1030.hsaco", "gfx1030"),
        ("Kernels.so-000-gfx1100.hsaco", "gfx1100"),
        ("Kernels.so-000-gfx1101.hsaco", "gfx1101"),
        ("Kernels.so-000-gfx1102.hsaco", "gfx1102"),
        ("Kernels.so-000-gfx803.hsaco", "gfx803"),
        ("Kernels.so-000-gfx900.hsaco", "gfx900"),
        ("Kernels.so-000-gfx906.hsaco", "gfx906"),
        ("Kernels.so-000-gfx908.hsaco", "gfx908"),
        ("Kernels.so-000-gfx90a-xnack+.hsaco", "gfx90a:xnack+"),
        ("Kernels.so-000-gfx90a-xnack-.hsaco", "gfx90a:xnack-"),
        ("TensileLibrary_gfx1030.co", "gfx1030"),
        ("TensileLibrary_gfx1100.co", "gfx1100"),
        ("TensileLibrary_gfx1101.co", "gfx1101"),
        ("TensileLibrary_gfx1102.co", "gfx1102"),
        ("TensileLibrary_gfx803.co", "gfx803"),
        ("TensileLibrary_gfx900.co", "gfx900"),
        ("TensileLibrary_gfx906.co", "gfx906"),
        ("TensileLibrary_gfx908.co", "gfx908"),
        ("TensileLibrary_gfx90a.co", "gfx90a"),
    ];
    for (name, target) in kernels {
        let path: &'static str = format!("{DEBIAN_LIBRARY}/{name}").leak();
        files.push((path, tensile("rocblas", target)));
    }
    Layout {
        files,
        symlinks: vec![(
            "usr/lib/x86_64-linux-gnu/librocblas.so.0",
            "librocblas.so.0.1",
        )],
    }
}

#[test]
fn debian_rocblas_files_go_to_one_tensile_payload_per_processor() {
    let report = split_and_check(&debian_rocblas());
    assert_eq!(report.payloads.len(), 10);
    assert_eq!(report.database_files, 20);
    assert_eq!(report.binaries, 1);
    // gfx90a's xnack+ and xnack- kernels and its plain Tensile library are
    // one payload, each file under its full target.
    let gfx90a = payload(&report, "tensile", "gfx90a");
    assert_eq!(
        gfx90a.targets,
        [t("gfx90a"), t("gfx90a:xnack-"), t("gfx90a:xnack+")]
    );
    assert_eq!(gfx90a.files, 3);
}

#[test]
fn rocm_rocblas_and_hipblaslt_share_the_tensile_payloads() {
    let layout = Layout {
        files: vec![
            ("opt/rocm/lib/librocblas.so.4.4", Goes::Host),
            ("opt/rocm/lib/rocblas/library/TensileManifest.txt", Goes::Host),
            (
                "opt/rocm/lib/rocblas/library/TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback.dat",
                Goes::Host,
            ),
            (
                "opt/rocm/lib/rocblas/library/TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback_gfx942.hsaco",
                tensile("rocblas", "gfx942"),
            ),
            (
                "opt/rocm/lib/rocblas/library/TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.co",
                tensile("rocblas", "gfx942"),
            ),
            (
                "opt/rocm/lib/rocblas/library/TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.dat",
                tensile("rocblas", "gfx942"),
            ),
            ("opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx942.dat", tensile("rocblas", "gfx942")),
            ("opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat", tensile("rocblas", "gfx1100")),
            ("opt/rocm/lib/rocblas/library/Kernels.so-000-gfx942-xnack-.hsaco", tensile("rocblas", "gfx942:xnack-")),
            ("opt/rocm/lib/rocblas/library/Kernels.so-000-gfx942-xnack+.hsaco", tensile("rocblas", "gfx942:xnack+")),
            ("opt/rocm/lib/hipblaslt/library/hipblasltTransform.hsaco", Goes::Host),
            ("opt/rocm/lib/hipblaslt/library/hipblasltExtOpLibrary.dat", Goes::Host),
            ("opt/rocm/lib/hipblaslt/library/TensileLiteLibrary_lazy_Mapping.dat", Goes::Host),
            ("opt/rocm/lib/hipblaslt/library/extop_gfx942.co", tensile("hipblaslt", "gfx942")),
            ("opt/rocm/lib/hipblaslt/library/extop_gfx1100.co", tensile("hipblaslt", "gfx1100")),
            ("opt/rocm/lib/hipblaslt/library/Kernels.so-000-gfx942.hsaco", tensile("hipblaslt", "gfx942")),
            (
                "opt/rocm/lib/hipblaslt/library/TensileLibrary_BB_BB_HA_Bias_Aux_SAV_UA_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.co",
                tensile("hipblaslt", "gfx1100"),
            ),
            (
                "opt/rocm/lib/hipblaslt/library/TensileLibrary_BB_BB_HA_Bias_Aux_SAV_UA_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.dat",
                tensile("hipblaslt", "gfx1100"),
            ),
        ],
        symlinks: vec![("opt/rocm/lib/librocblas.so.4", "librocblas.so.4.4")],
    };
    let report = split_and_check(&layout);
    let gfx942 = payload(&report, "tensile", "gfx942");
    assert_eq!(gfx942.libraries, ["hipblaslt", "rocblas"]);
    assert_eq!(
        gfx942.targets,
        [t("gfx942"), t("gfx942:xnack-"), t("gfx942:xnack+")]
    );
}

#[test]
fn aotriton_images_go_to_their_processors_or_groups_payload() {
    let layout = Layout {
        files: vec![
            ("torch/lib/libaotriton_v2.so.0.11.1", Goes::Host),
            ("torch/lib/aotriton.images/amd-gfx942/__signature__", own("aotriton", "gfx942")),
            (
                "torch/lib/aotriton.images/amd-gfx942/flash/attn_fwd/FONLY__\u{ff0a}bf16@16_128_F_F_3_0___gfx942.aks2",
                own("aotriton", "gfx942"),
            ),
            (
                "torch/lib/aotriton.images/amd-gfx942/flash/bwd_kernel_dk_dv/FONLY__\u{ff0a}bf16@16_128_F_F_3_0___gfx942.aks2",
                own("aotriton", "gfx942"),
            ),
            ("torch/lib/aotriton.images/amd-gfx90a/__signature__", own("aotriton", "gfx90a")),
            (
                "torch/lib/aotriton.images/amd-gfx90a/flash/attn_fwd/FONLY__\u{ff0a}fp16@16_64_F_F_3_0___MI200.aks2",
                own("aotriton", "gfx90a"),
            ),
            ("torch/lib/aotriton.images/amd-gfx11xx/__signature__", own("aotriton", "gfx11")),
            (
                "torch/lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/FONLY__\u{ff0a}bf16@16_256_F_F_3_0___gfx11xx.aks2",
                own("aotriton", "gfx11"),
            ),
            ("torch/lib/aotriton.images/amd-gfx120x/__signature__", own("aotriton", "gfx12_0")),
            (
                "torch/lib/aotriton.images/amd-gfx120x/flash/attn_fwd/FONLY__\u{ff0a}bf16@16_256_F_F_3_0___gfx120x.aks2",
                own("aotriton", "gfx12_0"),
            ),
            ("torch/lib/aotriton.images/amd-common/README", Goes::Host),
        ],
        symlinks: vec![("torch/lib/libaotriton_v2.so", "libaotriton_v2.so.0.11.1")],
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 4);
    let gfx11 = payload(&report, "aotriton", "gfx11");
    assert_eq!(
        (gfx11.owner.level(), gfx11.files),
        (kpack_gpu::Level::Family, 2)
    );
    assert!(gfx11.targets.is_empty());
    assert_eq!(
        payload(&report, "aotriton", "gfx12_0").owner.level(),
        kpack_gpu::Level::SubFamily
    );
}

#[test]
fn miopen_databases_go_to_their_processors_payload() {
    let layout = Layout {
        files: vec![
            ("opt/rocm/share/miopen/db/readme.txt", Goes::Host),
            (
                "opt/rocm/share/miopen/db/gfx90a68.kdb",
                own("miopen", "gfx90a"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx90a6e.HIP.fdb.txt",
                own("miopen", "gfx90a"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx90a68.db",
                own("miopen", "gfx90a"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx90a_metadata.tn.model",
                own("miopen", "gfx90a"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx942.kdb",
                own("miopen", "gfx942"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx942130.HIP.fdb.txt",
                own("miopen", "gfx942"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx942_3d_metadata.tn.model",
                own("miopen", "gfx942"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx906_60.kdb",
                own("miopen", "gfx906"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx906_60.OpenCL.fdb.txt",
                own("miopen", "gfx906"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx1030_36.db",
                own("miopen", "gfx1030"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx90878.db.txt",
                own("miopen", "gfx908"),
            ),
            (
                "opt/rocm/share/miopen/db/gfx908.tn.model",
                own("miopen", "gfx908"),
            ),
        ],
        symlinks: Vec::new(),
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 5);
}

#[test]
fn rocfft_per_target_kernel_caches_go_to_their_processors_payload() {
    let layout = Layout {
        files: vec![
            ("opt/rocm/lib/librocfft.so.0.1", Goes::Host),
            ("opt/rocm/lib/rocfft/rocfft_kernel_cache.db", Goes::Host),
            (
                "opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx950.db",
                own("rocfft", "gfx950"),
            ),
            (
                "opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx1201.db",
                own("rocfft", "gfx1201"),
            ),
            (
                "opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx942.db",
                own("rocfft", "gfx942"),
            ),
        ],
        symlinks: vec![("opt/rocm/lib/librocfft.so.0", "librocfft.so.0.1")],
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 3);
}

/// The TOC key a packed database file must have.
fn packed_key(path: &str, library: &str, target: &str) -> String {
    let name = match path.split_once("aotriton.images/amd-") {
        Some((_, below)) => below.split_once('/').unwrap().1,
        None => path.rsplit_once('/').unwrap().1,
    };
    format!("{library}/{}/{name}", t(target))
}

/// Reads an entry through the C API, as a library would.
fn c_get_kernel(archive: &Path, key: &str, arch: &str) -> Vec<u8> {
    let path = CString::new(archive.to_str().unwrap()).unwrap();
    let (key, arch) = (CString::new(key).unwrap(), CString::new(arch).unwrap());
    let mut handle = std::ptr::null_mut();
    let (mut data, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: valid C strings and out-pointers; everything is freed once.
    unsafe {
        assert_eq!(
            capi::kpack_open(path.as_ptr(), &mut handle),
            ErrorCode::Success
        );
        let code =
            capi::kpack_get_kernel(handle, key.as_ptr(), arch.as_ptr(), &mut data, &mut size);
        assert_eq!(code, ErrorCode::Success, "{key:?}");
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec();
        capi::kpack_free_kernel(data);
        capi::kpack_close(handle);
        bytes
    }
}

#[test]
fn packed_database_files_come_back_through_kpack_get_kernel() {
    let layout = debian_rocblas();
    let context = TestContext::new();
    let (input, output) = (context.path().join("in"), context.path().join("out"));
    write_tree(&input, &layout);
    let split =
        context.run(&mut context.kpack_pack(&["split", "in", "-o", "out", "--pack-databases"]));
    insta::assert_snapshot!("pack_databases_split", mask_host_sizes(&split));
    assert!(!payloads_root(&output).exists());
    for (path, goes) in &layout.files {
        let Goes::Payload {
            library, target, ..
        } = goes
        else {
            assert!(output.join(path).exists(), "{path}");
            continue;
        };
        assert!(!output.join(path).exists(), "{path} left in the host tree");
        let archive_path = output.join(format!(".kpack/rocm_{}.kpack", t(target).processor()));
        let archive = Archive::open(&archive_path).unwrap();
        let key = packed_key(path, library, target);
        let kernel = archive.find(&key, &t(target)).unwrap();
        assert_eq!(*kernel.bytes().unwrap(), contents(path), "{key}");
        let metadata = kernel.metadata().unwrap().unwrap();
        assert_eq!(metadata.get("library"), Some(*library));
        assert_eq!(metadata.get("path"), Some(*path));
        assert_eq!(
            c_get_kernel(&archive_path, &key, target),
            contents(path),
            "{key}"
        );
    }
    // The archive lists the library's plain gfx90a only: listing the
    // kernels' gfx90a:xnack- would make the loader look for the library's
    // code for exactly that target on an xnack- GPU, and find none.
    let gfx90a = Archive::open(output.join(".kpack/rocm_gfx90a.kpack")).unwrap();
    assert_eq!(gfx90a.architectures(), [t("gfx90a")]);
    assert!(gfx90a
        .binaries()
        .any(|k| k == "rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco"));
    // The split library still loads its code for every target it has, on
    // GPUs in either xnack mode too.
    let verified = context.run(&mut context.kpack_pack(&["verify", "out"]));
    insta::assert_snapshot!("pack_databases_verify", verified);
    for (gpu, name) in [
        ("gfx90a:sramecc+:xnack-", "pack_databases_verify_xnack_off"),
        ("gfx90a:sramecc+:xnack+", "pack_databases_verify_xnack_on"),
    ] {
        let verified = context.run(&mut context.kpack_pack(&["verify", "out", "--target", gpu]));
        insta::assert_snapshot!(name, verified);
    }
}

#[test]
fn the_cli_names_each_payload_and_its_targets() {
    let context = TestContext::new();
    write_tree(&context.path().join("in"), &debian_rocblas());
    let split = context.run(&mut context.kpack_pack(&["split", "in", "-o", "out"]));
    insta::assert_snapshot!(mask_host_sizes(&split));
}

#[test]
fn refuses_an_existing_payload_directory_and_leaves_nothing_behind() {
    let work = tempfile::tempdir().unwrap();
    let (input, output) = (work.path().join("in"), work.path().join("out"));
    write_tree(&input, &debian_rocblas());
    fs_err::create_dir(payloads_root(&output)).unwrap();
    let error = split_tree_with(&input, &output, &TreeOptions::new("rocm")).unwrap_err();
    insta::assert_snapshot!(masked_chain(&error, work.path()));
    assert!(!output.exists());
    let left: Vec<_> = fs_err::read_dir(work.path()).unwrap().flatten().collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn packing_refuses_two_files_with_one_key_naming_both() {
    let work = tempfile::tempdir().unwrap();
    let (input, output) = (work.path().join("in"), work.path().join("out"));
    let layout = Layout {
        files: vec![
            (
                "lib/rocblas/library/TensileLibrary_gfx90a.co",
                tensile("rocblas", "gfx90a"),
            ),
            (
                "lib/rocblas/2.47.0/library/TensileLibrary_gfx90a.co",
                tensile("rocblas", "gfx90a"),
            ),
        ],
        symlinks: Vec::new(),
    };
    write_tree(&input, &layout);
    let options = TreeOptions {
        databases: DatabaseMode::Pack,
        ..TreeOptions::new("rocm")
    };
    let error = split_tree_with(&input, &output, &options).unwrap_err();
    insta::assert_snapshot!(masked_chain(&error, work.path()));
    assert!(!output.exists());
    // As payloads, both keep their own paths.
    split_and_check(&layout);
}

#[test]
fn payloads_go_where_asked_but_never_inside_the_host_tree() {
    let work = tempfile::tempdir().unwrap();
    let (input, output) = (work.path().join("in"), work.path().join("out"));
    write_tree(&input, &debian_rocblas());
    let inside = TreeOptions {
        payload_dir: Some(output.join("payloads")),
        ..TreeOptions::new("rocm")
    };
    let error = split_tree_with(&input, &output, &inside).unwrap_err();
    insta::assert_snapshot!(masked_chain(&error, work.path()));
    assert!(!output.exists());
    let elsewhere = work.path().join("device/blas");
    let options = TreeOptions {
        payload_dir: Some(elsewhere.clone()),
        ..TreeOptions::new("rocm")
    };
    let report = split_tree_with(&input, &output, &options).unwrap();
    assert!(!payloads_root(&output).exists());
    assert_eq!(
        payload(&report, "tensile", "gfx90a").dir,
        elsewhere.join("tensile/gfx90a")
    );
    assert!(elsewhere
        .join("tensile/gfx90a")
        .join(DEBIAN_LIBRARY)
        .join("Kernels.so-000-gfx90a-xnack-.hsaco")
        .is_file());
}

#[test]
fn hipsparselt_files_go_to_the_tensile_payloads() {
    let dir = "opt/rocm/lib/hipsparselt/library";
    let layout = Layout {
        files: vec![
            ("opt/rocm/lib/libhipsparselt.so.0.2", Goes::Host),
            (
                "opt/rocm/lib/hipsparselt/library/TensileLibrary_BB_BB_A_fallback.dat",
                Goes::Host,
            ),
            (
                "opt/rocm/lib/hipsparselt/library/extop_gfx942.co",
                tensile("hipsparselt", "gfx942"),
            ),
            (
                "opt/rocm/lib/hipsparselt/library/Kernels.so-000-gfx950.hsaco",
                tensile("hipsparselt", "gfx950"),
            ),
            (
                "opt/rocm/lib/hipsparselt/library/TensileLibrary_BB_BB_A_gfx942.dat",
                tensile("hipsparselt", "gfx942"),
            ),
            (
                "opt/rocm/lib/hipsparselt/library/gfx950/TensileLibrary_BB_BB_A_fallback.dat",
                tensile("hipsparselt", "gfx950"),
            ),
        ],
        symlinks: vec![("opt/rocm/lib/libhipsparselt.so.0", "libhipsparselt.so.0.2")],
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 2, "{dir}");
    assert_eq!(
        payload(&report, "tensile", "gfx942").libraries,
        ["hipsparselt"]
    );
}

#[test]
fn hip_kernel_provider_content_goes_to_its_targets_payload() {
    let layout = Layout {
        files: vec![
            ("lib/hipdnn_plugins/libhipkernelprovider_plugin.so", Goes::Host),
            (
                "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/config/settings.json",
                Goes::Host,
            ),
            (
                "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/gfx942/kernels_gfx942.kpack",
                own("hip-kernel-provider", "gfx942"),
            ),
            (
                "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/gfx942/kernels_gfx942.json",
                own("hip-kernel-provider", "gfx942"),
            ),
            (
                "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/gfx1201/kernels_gfx1201.kpack",
                own("hip-kernel-provider", "gfx1201"),
            ),
            (
                "lib/hipdnn_plugins/engines/test_arch_content/hip-kernel-provider/unit/shared/gfx1101/kernels.kpack",
                own("hip-kernel-provider", "gfx1101"),
            ),
            (
                "lib/hipdnn_plugins/engines/test_arch_content/hip-kernel-provider/test_kpack_binary/test_zstd.kpack",
                Goes::Host,
            ),
        ],
        symlinks: Vec::new(),
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 3);
}

#[test]
fn rocjitsu_translation_caches_go_to_their_processors_payload() {
    let layout = Layout {
        files: vec![
            ("lib/librocjitsu.so.1", Goes::Host),
            (
                "share/rocjitsu/translations/gfx1250-b0-a0/v1/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.obj",
                own("rocjitsu", "gfx1250"),
            ),
            (
                "share/rocjitsu/translations/gfx1250-b0-a0/v1/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.man",
                own("rocjitsu", "gfx1250"),
            ),
            ("share/rocjitsu/translations/gfx1250-b0-a0/v2/README", Goes::Host),
        ],
        symlinks: Vec::new(),
    };
    let report = split_and_check(&layout);
    assert_eq!(report.payloads.len(), 1);
}

#[test]
fn composable_kernel_libraries_and_strict_files_go_with_their_processors_package() {
    let layout = Layout {
        files: vec![
            ("lib/libdevice_conv_operations.a", Goes::Host),
            (
                "lib/libdevice_conv_operations_gfx942.a",
                own("composablekernel", "gfx942"),
            ),
            (
                "lib/libdevice_conv_operations_gfx950_xnackp.a",
                own("composablekernel", "gfx950"),
            ),
            (
                "lib/libdevice_conv_operations_gfx1250.a",
                own("composablekernel", "gfx1250"),
            ),
            (
                "lib/libdevice_conv_operations_gfx1250_strict.a",
                own("composablekernel", "gfx1250-strict"),
            ),
            (
                "lib/libMIOpenCKGroupedConv_gfx942.so",
                own("miopen", "gfx942"),
            ),
            (
                "lib/libMIOpenCKGroupedConv_gfx942-xnack+.so",
                own("miopen", "gfx942:xnack+"),
            ),
            (
                "share/miopen/db/gfx1250_256.db.txt",
                own("miopen", "gfx1250"),
            ),
            (
                "share/miopen/db/gfx1250-strict_256.db.txt",
                own("miopen", "gfx1250-strict"),
            ),
            (
                "lib/rocblas/library/TensileLibrary_gfx1250-strict.dat",
                tensile("rocblas", "gfx1250-strict"),
            ),
        ],
        symlinks: Vec::new(),
    };
    let report = split_and_check(&layout);
    // gfx1250-strict's files are packaged with gfx1250's, each under its
    // own target.
    let gfx1250 = payload(&report, "composablekernel", "gfx1250");
    assert_eq!(gfx1250.targets, [t("gfx1250"), t("gfx1250-strict")]);
    assert_eq!(
        payload(&report, "miopen", "gfx1250").targets,
        [t("gfx1250"), t("gfx1250-strict")]
    );
    assert_eq!(
        payload(&report, "tensile", "gfx1250").targets,
        [t("gfx1250-strict")]
    );
}
