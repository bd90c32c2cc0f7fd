//! Device code that cannot be split is named, not denied (03-packer.md):
//! a host library embedding complete code objects in `.rodata` (real ones,
//! out of Debian's rocRAND), which it would load by its own means, is
//! reported with its section, targets, count and bytes by `inspect`,
//! `split`, a tree split and `wheel split`, and stays in the host output
//! as it was.

use std::path::{Path, PathBuf};

use kpack_gpu::Target;

use crate::common::*;
use crate::wheel::wheel_of;

/// A shared library whose `.rodata` holds the gfx1030 and gfx90a:xnack-
/// code objects of rocRAND's first bundle, one after the other (an
/// assembler `.incbin` each, as such libraries embed them); the library and
/// the code objects' total size.
fn library_embedding_code(dir: &Path) -> (PathBuf, u64) {
    let rocrand = fs_err::read(unpack_rocrand(&dir.join("deb"))).unwrap();
    let first = code_by_bundle(&rocrand).swap_remove(0);
    let mut source = String::from("__asm__(\".section .rodata\\n.balign 4096\\n");
    let mut total = 0;
    for target in ["gfx1030", "gfx90a:xnack-"] {
        let code = &first[&Target::parse(target).unwrap()];
        let file = dir.join(format!("{}.co", target.replace(':', "-")));
        fs_err::write(&file, code).unwrap();
        source.push_str(&format!(
            ".incbin \\\"{}\\\"\\n.balign 4096\\n",
            file.display()
        ));
        total += code.len() as u64;
    }
    source.push_str(".previous\\n\");\nint answer(void) { return 42; }\n");
    let c = dir.join("embeds.c");
    fs_err::write(&c, source).unwrap();
    let library = dir.join("libembeds.so");
    run(kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&c));
    (library, total)
}

fn expected_note(file: &str, total: u64) -> String {
    format!(
        "note: {file}: embeds 2 code objects for gfx1030, gfx90a:xnack- in .rodata ({}), \
         which it loads itself: they cannot be split and stay in the host output",
        kpack_cli::ByteSize(total)
    )
}

#[test]
fn inspect_names_the_section_targets_count_and_bytes_of_embedded_code() {
    let work = tempfile::tempdir().unwrap();
    let (library, total) = library_embedding_code(work.path());
    let text = run(kpack_pack().arg("inspect").arg(&library));
    assert!(
        text.contains(&format!(
            "embedded  .rodata: 2 code objects for gfx1030, gfx90a:xnack- ({})",
            kpack_cli::ByteSize(total)
        )),
        "{text}"
    );
    assert!(text.contains("kind      no offload bundles"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&run(kpack_pack().args(["inspect", "--json"]).arg(&library))).unwrap();
    assert_eq!(json["kind"], "plain");
    assert_eq!(json["embedded"][0]["section"], ".rodata");
    assert_eq!(json["embedded"][0]["count"], 2);
    assert_eq!(json["embedded"][0]["bytes"], total);

    // A plain library is the one thing said to have no device code.
    let plain = run(kpack_pack().arg("inspect").arg(
        work.path()
            .join("deb/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"),
    ));
    assert!(plain.contains("kind      fat: "), "{plain}");
}

#[test]
fn splitting_the_library_says_its_code_is_embedded_and_writes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let (library, total) = library_embedding_code(work.path());
    let out = work.path().join("out");
    let result = kpack_pack()
        .arg("split")
        .arg(&library)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stdout.contains(&expected_note(&library.display().to_string(), total)),
        "{stdout}"
    );
    assert!(
        stderr.contains("has no offload bundles to split"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not a binary with device code"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn tree_and_wheel_splits_name_it_and_leave_it_in_the_host_output() {
    let work = tempfile::tempdir().unwrap();
    let (library, total) = library_embedding_code(work.path());
    let bytes = fs_err::read(&library).unwrap();

    let tree = work.path().join("tree");
    fs_err::create_dir_all(tree.join("lib")).unwrap();
    fs_err::copy(&library, tree.join("lib/libembeds.so")).unwrap();
    fs_err::copy(
        work.path()
            .join("deb/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"),
        tree.join("lib/librocrand.so.1.1"),
    )
    .unwrap();
    let split = work.path().join("split");
    let stdout = run(kpack_pack().arg("split").arg(&tree).arg("-o").arg(&split));
    assert!(
        stdout.contains(&expected_note("lib/libembeds.so", total)),
        "{stdout}"
    );
    assert_eq!(fs_err::read(split.join("lib/libembeds.so")).unwrap(), bytes);

    let wheel = wheel_of(
        work.path(),
        "embeds-1.0-cp311-cp311-linux_x86_64.whl",
        &[
            ("embeds/__init__.py", b""),
            ("embeds/libembeds.so", &bytes),
            (
                "embeds-1.0.dist-info/METADATA",
                b"Metadata-Version: 2.1\nName: embeds\nVersion: 1.0\n",
            ),
            (
                "embeds-1.0.dist-info/WHEEL",
                b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
            ),
        ],
        serde_json::Value::Null,
    );
    let out = work.path().join("wheels");
    let stdout = run(kpack_pack()
        .args(["wheel", "split"])
        .arg(&wheel)
        .arg("-o")
        .arg(&out));
    assert!(
        stdout.contains(&expected_note("member \"embeds/libembeds.so\"", total)),
        "{stdout}"
    );
    assert!(stdout.contains("nothing to split"), "{stdout}");
}
