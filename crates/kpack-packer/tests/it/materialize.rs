//! A split binary made fat again for the installed GPUs
//! (08-hip-runtimes.md): HIPF wrappers over uncompressed offload bundles
//! holding the host entry and exactly the installed processors' code
//! objects, byte-equal to the original's, laid out as clang lays them out,
//! in a healthy file that splits again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use kpack_binary::elf::{FatElf, WRAPPER_SECTION};
use kpack_binary::wrapper::{HipWrapper, HIPF_MAGIC};
use kpack_gpu::Target;
use kpack_test_support::chain::describe;
use kpack_test_support::measure::{run_watched_on_disk, DiskWatch, Measured};
use kpack_test_support::{zero_bomb_archive, GFX90A_VARIANTS};
use object::{Object, ObjectSection};

/// Debian's rocRAND, split with `kpack-pack split` into `split` of the
/// context's directory.
struct Rocrand {
    context: TestContext,
    original: PathBuf,
    split: PathBuf,
}

impl Rocrand {
    fn new() -> Rocrand {
        let context = TestContext::new();
        let original = unpack_rocrand(&context.path().join("deb"));
        run(kpack_pack()
            .arg("split")
            .arg(&original)
            .arg("-o")
            .arg(context.path().join("split")));
        let split = context.path().join("split/librocrand.so.1.1");
        Rocrand {
            context,
            original,
            split,
        }
    }

    /// `kpack-pack materialize` of the split library for `targets` into
    /// `name`, with `more` arguments: where it went and its transcript.
    fn materialize_with(&self, name: &str, targets: &str, more: &[&str]) -> (PathBuf, String) {
        let out = self.context.path().join(name);
        let mut command = self
            .context
            .kpack_pack(&["materialize", "split/librocrand.so.1.1"]);
        command.args(["-o", name, "--targets", targets]).args(more);
        (out, self.context.run(&mut command))
    }

    /// `kpack-pack materialize` for `targets` into `name`, which succeeds.
    fn materialize(&self, name: &str, targets: &str) -> PathBuf {
        let (out, transcript) = self.materialize_with(name, targets, &[]);
        assert!(transcript.starts_with("exit: 0\n"), "{transcript}");
        out
    }

    /// The original's code objects, by target.
    fn original_code(&self) -> BTreeMap<Target, Vec<u8>> {
        code_of(&fs_err::read(&self.original).unwrap())
            .into_values()
            .next()
            .unwrap()
    }
}

/// Every bundle's code objects by target, by bundle index.
fn code_of(data: &[u8]) -> BTreeMap<usize, BTreeMap<Target, Vec<u8>>> {
    code_by_bundle(data).into_iter().enumerate().collect()
}

/// The raw header of the bundle at `at` in `bundle`: (offset, size,
/// triple) per entry.
fn bundle_header(bundle: &[u8]) -> Vec<(u64, u64, String)> {
    let u64_at = |at: usize| u64::from_le_bytes(bundle[at..at + 8].try_into().unwrap());
    let count = u64_at(24) as usize;
    let mut at = 32;
    (0..count)
        .map(|_| {
            let (offset, size, len) = (u64_at(at), u64_at(at + 8), u64_at(at + 16) as usize);
            let triple = String::from_utf8(bundle[at + 24..at + 24 + len].to_vec()).unwrap();
            at += 24 + len;
            (offset, size, triple)
        })
        .collect()
}

/// The `.hip_fatbin` section: its address, its alignment and its bytes.
fn fatbin(data: &[u8]) -> (u64, u64, Vec<u8>) {
    let file = object::File::parse(data).unwrap();
    let section = file.section_by_name(".hip_fatbin").unwrap();
    (
        section.address(),
        section.align(),
        section.data().unwrap().to_vec(),
    )
}

fn wrappers(data: &[u8]) -> Vec<HipWrapper> {
    let file = object::File::parse(data).unwrap();
    let bytes = file
        .section_by_name(WRAPPER_SECTION)
        .unwrap()
        .data()
        .unwrap();
    object::pod::slice_from_all_bytes::<HipWrapper>(bytes)
        .unwrap()
        .to_vec()
}

#[test]
fn rocrand_materialized_holds_exactly_the_installed_processors_code() {
    let rocrand = Rocrand::new();
    let (fat, materialized) =
        rocrand.materialize_with("fat.so", "gfx90a:sramecc+:xnack-,gfx1030", &[]);
    insta::assert_snapshot!(materialized);
    let data = fs_err::read(&fat).unwrap();
    let original = rocrand.original_code();
    let expected: BTreeMap<Target, Vec<u8>> = original
        .into_iter()
        .filter(|(t, _)| ["gfx90a", "gfx1030"].contains(&t.processor()))
        .collect();
    assert_eq!(expected.len(), 3, "gfx90a:xnack+, gfx90a:xnack-, gfx1030");
    assert_eq!(code_of(&data), BTreeMap::from([(0, expected)]));

    let wrappers = wrappers(&data);
    let (address, align, section) = fatbin(&data);
    assert_eq!(wrappers.len(), 1);
    assert_eq!(wrappers[0].magic.get(object::LittleEndian), HIPF_MAGIC);
    assert_eq!(wrappers[0].reserved.get(object::LittleEndian), 0);
    assert_eq!(align, 4096);
    assert_eq!(address % 4096, 0);
    let header = bundle_header(&section);
    assert_eq!(header[0], (4096, 0, "host-x86_64-unknown-linux".to_owned()));
    let triples: Vec<&str> = header[1..].iter().map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(
        triples,
        [
            "hipv4-amdgcn-amd-amdhsa--gfx1030",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        ]
    );
    assert!(
        header.iter().all(|(offset, _, _)| offset % 4096 == 0),
        "{header:?}"
    );
}

#[test]
fn a_materialized_file_is_healthy_deterministic_and_splits_again() {
    let rocrand = Rocrand::new();
    let fat = rocrand.materialize("fat.so", "gfx1030");
    let again = rocrand.materialize("again.so", "gfx1030");
    assert_eq!(fs_err::read(&fat).unwrap(), fs_err::read(&again).unwrap());
    assert_eq!(health_warnings(&fat), Vec::<String>::new());
    // gdb finds no section at a library's entry point 0, in the original too.
    assert_eq!(
        gdb_warnings(&fat).len(),
        gdb_warnings(&rocrand.original).len()
    );
    let stripped = rocrand.context.path().join("stripped.so");
    strip_copy(&fat, &stripped);
    assert_eq!(
        code_of(&fs_err::read(&stripped).unwrap()),
        code_of(&fs_err::read(&fat).unwrap())
    );
    // The mode of the input is kept.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs_err::metadata(&fat).unwrap().permissions().mode(),
        fs_err::metadata(&rocrand.split)
            .unwrap()
            .permissions()
            .mode()
    );
    // Split again, it loads its gfx1030 code through the new marker.
    let context = &rocrand.context;
    run(&mut context.kpack_pack(&["split", "fat.so", "-o", "resplit"]));
    let mut verify = context.kpack_pack(&["verify", "resplit", "--target", "gfx1030"]);
    verify.arg("--original").arg(&rocrand.original);
    insta::assert_snapshot!(context.run(&mut verify));
}

#[test]
fn a_target_without_code_gets_a_bundle_with_the_host_entry_only() {
    let rocrand = Rocrand::new();
    let (fat, materialized) =
        rocrand.materialize_with("fat.so", "gfx1100", &["--archives", "split/.kpack"]);
    insta::assert_snapshot!(materialized);
    let data = fs_err::read(&fat).unwrap();
    assert_eq!(code_of(&data), BTreeMap::from([(0, BTreeMap::new())]));
    let (_, _, section) = fatbin(&data);
    assert_eq!(
        bundle_header(&section),
        [(4096, 0, "host-x86_64-unknown-linux".to_owned())]
    );
    assert_eq!(health_warnings(&fat), Vec::<String>::new());
}

#[test]
fn archives_come_from_a_directory_when_asked() {
    let rocrand = Rocrand::new();
    let dir = rocrand.context.path();
    fs_err::rename(dir.join("split/.kpack"), dir.join("elsewhere")).unwrap();
    let (out, refused) = rocrand.materialize_with("fat.so", "gfx1030", &[]);
    insta::assert_snapshot!("archives_moved_away", refused);
    assert!(!out.exists());
    let (_, materialized) =
        rocrand.materialize_with("fat.so", "gfx1030", &["--archives", "elsewhere"]);
    insta::assert_snapshot!("archives_from_elsewhere", materialized);
}

#[test]
fn a_file_that_is_not_split_is_refused() {
    let rocrand = Rocrand::new();
    let context = &rocrand.context;
    let mut materialize = context.kpack_pack(&["materialize"]);
    materialize
        .arg(&rocrand.original)
        .args(["-o", "x.so", "--targets", "gfx1030"]);
    insta::assert_snapshot!(context.run(&mut materialize));
    assert!(!context.path().join("x.so").exists());
}

/// The jax wheel's libraries, whose bundles are CCOB-compressed: each
/// split and materialized, per processor and for all at once, holds per
/// bundle exactly that processor's code objects, decompressed, byte-equal
/// to the original's (several wrappers per library).
#[test]
fn jax_libraries_with_compressed_bundles_materialize_uncompressed() {
    use std::io::Read;
    let work = tempfile::tempdir().unwrap();
    let wheel = fs_err::File::open(
        fixtures().join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"),
    )
    .unwrap();
    let mut wheel = zip::ZipArchive::new(wheel).unwrap();
    for name in ["_linalg.so", "_prng.so", "_solver.so"] {
        let mut data = Vec::new();
        wheel
            .by_name(&format!("jax_rocm7_plugin/{name}"))
            .unwrap()
            .read_to_end(&mut data)
            .unwrap();
        let original = work.path().join(format!("original{name}"));
        fs_err::write(&original, &data).unwrap();
        let split = work.path().join(name.trim_end_matches(".so"));
        run(kpack_pack()
            .arg("split")
            .arg(&original)
            .arg("-o")
            .arg(&split));
        let host = split.join(format!("original{name}"));
        let code = code_of(&data);
        let processors: std::collections::BTreeSet<String> = code
            .values()
            .flat_map(|bundle| bundle.keys().map(|t| t.processor().to_owned()))
            .collect();
        assert!(processors.len() > 1, "{name}: {processors:?}");
        let mut choices: Vec<Vec<String>> = processors.iter().map(|p| vec![p.clone()]).collect();
        choices.push(processors.iter().cloned().collect());
        for chosen in choices {
            let out = work.path().join(format!("{}-{name}", chosen.join("+")));
            run(kpack_pack()
                .arg("materialize")
                .arg(&host)
                .arg("-o")
                .arg(&out)
                .args(["--targets", &chosen.join(",")]));
            let expected: BTreeMap<usize, BTreeMap<Target, Vec<u8>>> = code
                .iter()
                .map(|(index, bundle)| {
                    let kept = bundle
                        .iter()
                        .filter(|(t, _)| chosen.iter().any(|p| p == t.processor()))
                        .map(|(t, b)| (t.clone(), b.clone()))
                        .collect();
                    (*index, kept)
                })
                .collect();
            let materialized = fs_err::read(&out).unwrap();
            assert_eq!(code_of(&materialized), expected, "{name} for {chosen:?}");
            let fat = FatElf::parse(&materialized).unwrap().unwrap();
            assert!(
                fat.bundles
                    .iter()
                    .all(|b| b.kind == kpack_binary::bundle::BundleKind::Uncompressed),
                "{name}"
            );
            assert_eq!(health_warnings(&out), Vec::<String>::new(), "{name}");
        }
    }
}

const MIB: u64 = 1 << 20;
const GFX90A: &str = "gfx90a:sramecc+:xnack-";

/// The TOC key of the split library's one bundle, as its archives name it.
fn bundle_key(rocrand: &Rocrand) -> String {
    let archive = rocm_kpack::Archive::open(
        rocrand
            .context
            .path()
            .join("split/.kpack/rocm_gfx90a.kpack"),
    )
    .unwrap();
    let keys: Vec<&str> = archive.binaries().collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].to_owned()
}

/// `kpack-pack materialize` of the split library for gfx90a into
/// `name`, from the archives in `archives`, watched: its memory, what the
/// directory held at most, and its output.
fn materialize_watched(rocrand: &Rocrand, name: &str, archives: &str, more: &[&str]) -> Measured {
    let dir = rocrand.context.path();
    let mut command = rocrand
        .context
        .kpack_pack(&["materialize", "split/librocrand.so.1.1"]);
    command
        .args(["-o", name, "--targets", GFX90A, "--archives", archives])
        .args(more);
    let watch = DiskWatch {
        dir,
        limit: kpack_test_support::measure::disk_use(dir) + 1024 * MIB,
    };
    run_watched_on_disk(
        &mut command,
        Duration::from_secs(120),
        1024 * MIB,
        Some(watch),
    )
}

/// A 9 KiB archive listing the nine feature variants of gfx90a for the
/// library's bundle, each pointing at one frame of 256 MiB of zeros (2.25
/// GiB in all), is refused by name with what it lists and the bound,
/// before anything is written: by default (an archive that declares
/// nothing may decode to 256 times its size, at least 64 MiB) and under an
/// explicit `--max-decoded-size`.
#[test]
fn a_materialization_bomb_is_refused_before_anything_is_written() {
    let rocrand = Rocrand::new();
    let dir = rocrand.context.path();
    let bomb = zero_bomb_archive(&bundle_key(&rocrand), &GFX90A_VARIANTS, 256 * MIB);
    assert!(bomb.len() < 16 << 10, "{}", bomb.len());
    fs_err::create_dir(dir.join("bomb")).unwrap();
    fs_err::write(dir.join("bomb/rocrand_gfx90a.kpack"), &bomb).unwrap();
    let good = materialize_watched(&rocrand, "good.so", "split/.kpack", &[]);
    assert!(good.output.status.success(), "{}", describe(&good.output));
    let lists = (9 * 256 * MIB).to_string();
    for (more, limit) in [
        (&[][..], (64 * MIB).to_string()),
        (&["--max-decoded-size", "1048576"][..], "1048576".to_owned()),
    ] {
        let run = materialize_watched(&rocrand, "fat.so", "bomb", more);
        let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
        let growth = run.peak_rss.saturating_sub(good.peak_rss);
        let disk = run.peak_disk.saturating_sub(good.peak_disk);
        eprintln!(
            "{more:?}: peak RSS {} MiB ({} MiB over a good run), disk {} MiB over",
            run.peak_rss / MIB,
            growth / MIB,
            disk / MIB
        );
        assert_eq!(run.killed, None, "{more:?}: {text}");
        assert_eq!(run.output.status.code(), Some(1), "{more:?}: {text}");
        for mention in ["bomb/rocrand_gfx90a.kpack", &lists, &limit] {
            assert!(text.contains(mention), "{more:?}: no {mention:?} in {text}");
        }
        assert!(!dir.join("fat.so").exists(), "{more:?}");
        assert!(growth < 64 * MIB, "{more:?}: grew {growth} bytes");
        assert!(disk < 64 * MIB, "{more:?}: wrote {disk} bytes");
    }
}

/// A code object of 256 MiB is decoded into the output as a stream: the
/// materializing process grows by far less than the code object.
#[test]
fn a_large_code_object_is_streamed_into_the_output() {
    let rocrand = Rocrand::new();
    let dir = rocrand.context.path();
    let size = 256 * MIB;
    let large = zero_bomb_archive(&bundle_key(&rocrand), &[GFX90A], size);
    fs_err::create_dir(dir.join("large")).unwrap();
    fs_err::write(dir.join("large/rocrand_gfx90a.kpack"), &large).unwrap();
    let good = materialize_watched(&rocrand, "good.so", "split/.kpack", &[]);
    assert!(good.output.status.success(), "{}", describe(&good.output));
    let bound = size.to_string();
    let run = materialize_watched(&rocrand, "fat.so", "large", &["--max-decoded-size", &bound]);
    assert_eq!(run.killed, None);
    assert!(run.output.status.success(), "{}", describe(&run.output));
    let growth = run.peak_rss.saturating_sub(good.peak_rss);
    eprintln!(
        "a {} MiB code object: peak RSS {} MiB ({} MiB over a good run)",
        size / MIB,
        run.peak_rss / MIB,
        growth / MIB
    );
    assert!(growth < 64 * MIB, "grew {growth} bytes");
    let written = fs_err::metadata(dir.join("fat.so")).unwrap().len();
    assert!(written > size, "{written}");
}

/// A jax library with compressed bundles, written into `dir`.
fn jax_library(dir: &std::path::Path, name: &str) -> PathBuf {
    wheel_member(
        &fixtures().join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"),
        &format!("jax_rocm7_plugin/{name}"),
        &dir.join(name),
    )
}

#[test]
fn a_compressed_materialization_holds_ccob_smaller_than_plain_that_decodes_to_the_original_code() {
    let work = tempfile::tempdir().unwrap();
    let original = jax_library(work.path(), "_prng.so");
    let data = fs_err::read(&original).unwrap();
    let code = code_of(&data);
    let split = work.path().join("split");
    run(kpack_pack()
        .arg("split")
        .arg(&original)
        .arg("-o")
        .arg(&split));
    let host = split.join("_prng.so");
    let materialize = |name: &str, more: &[&str]| {
        let out = work.path().join(name);
        run(kpack_pack()
            .arg("materialize")
            .arg(&host)
            .arg("-o")
            .arg(&out)
            .args(["--targets", "gfx1100"])
            .args(more));
        out
    };
    let plain = materialize("plain.so", &[]);
    let compressed = materialize("compressed.so", &["--compress"]);

    let bytes = fs_err::read(&compressed).unwrap();
    let fat = FatElf::parse(&bytes).unwrap().unwrap();
    assert!(fat.bundles.iter().all(|b| b.kind
        == kpack_binary::bundle::BundleKind::Compressed {
            version: 3,
            method: kpack_binary::bundle::CcobMethod::Zstd
        }));
    let gfx1100 = Target::parse("gfx1100").unwrap();
    let expected: BTreeMap<usize, BTreeMap<Target, Vec<u8>>> = code
        .iter()
        .map(|(&index, bundle)| {
            let kept = bundle
                .iter()
                .filter(|(t, _)| t.processor() == gfx1100.processor())
                .map(|(t, b)| (t.clone(), b.clone()))
                .collect();
            (index, kept)
        })
        .collect();
    assert_eq!(code_of(&bytes), expected);
    assert_eq!(code_of(&fs_err::read(&plain).unwrap()), expected);
    let (plain_len, compressed_len) = (
        fs_err::metadata(&plain).unwrap().len(),
        fs_err::metadata(&compressed).unwrap().len(),
    );
    assert!(
        compressed_len < plain_len,
        "{compressed_len} >= {plain_len}"
    );
    assert_eq!(health_warnings(&compressed), Vec::<String>::new());
}

#[test]
fn recompressing_clangs_bundles_gives_its_header_fields() {
    use kpack_binary::bundle::{parse_fatbin, write_ccob, BundleKind, CcobHeader};
    let work = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for name in ["_prng.so", "_linalg.so"] {
        let data = fs_err::read(jax_library(work.path(), name)).unwrap();
        let fat = FatElf::parse(&data).unwrap().unwrap();
        for bundle in fat
            .bundles
            .iter()
            .filter(|b| b.kind != BundleKind::Uncompressed)
        {
            let clangs = CcobHeader::parse(bundle.bytes(), 0).unwrap();
            let mut plain = Vec::new();
            bundle.write_plain(&mut plain).unwrap();
            let mut ours = std::io::Cursor::new(Vec::new());
            write_ccob(&mut ours, plain.len() as u64, |out| out.write_all(&plain)).unwrap();
            let ours = ours.into_inner();
            let header = CcobHeader::parse(&ours, 0).unwrap();
            assert_eq!(
                (
                    header.version,
                    header.method,
                    header.uncompressed_size,
                    header.hash
                ),
                (
                    clangs.version,
                    clangs.method,
                    clangs.uncompressed_size,
                    clangs.hash
                ),
                "{name}"
            );
            // The payload is zstd at clang's level; the zstd library
            // clang was built with may pick a few bytes differently.
            let (ours_total, clangs_total) =
                (header.total_size.unwrap(), clangs.total_size.unwrap());
            assert!(
                ours_total.abs_diff(clangs_total) * 100 <= clangs_total,
                "{name}: {ours_total} bytes against clang's {clangs_total}"
            );
            let again = parse_fatbin(&ours).unwrap();
            let mut decoded = Vec::new();
            again[0].write_plain(&mut decoded).unwrap();
            assert!(decoded == plain);
            compared += 1;
        }
    }
    assert!(compared > 0);
}
