//! Wheels as pip takes them (06-python.md, "Wheels as they are found"):
//! a RECORD that misses members, lists them without hashes or gives stale
//! sizes and hashes is noted member by member and every wheel written gets
//! a RECORD of its own; `--strict-record` refuses each case, saying which.
//! Decompression bombs are refused either way.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::wheel::{check_wheels, file_names, jax_wheel, make_wheel, python, split_ok, JAX};

/// `kpack-pack wheel split --strict-record`, which must write nothing;
/// the transcript.
fn strictly_refused(input: &Path, out: &Path) -> String {
    let existed = out.exists();
    let result = kpack_pack()
        .args(["wheel", "split", "--strict-record"])
        .arg(input)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(file_names(out).is_empty(), "{:?}", file_names(out));
    assert_eq!(out.exists(), existed, "the output directory was made");
    let dir = out.parent().unwrap().display().to_string();
    kpack_test_support::transcript(&result, &[(&dir, "<DIR>")])
}

/// Splits `input` leniently into `out`; the notes it printed, and checks
/// that every wheel written carries a RECORD true to its bytes.
fn split_with_notes(input: &Path, out: &Path) -> Vec<String> {
    let stdout = split_ok(input, out);
    let checked = check_wheels(out);
    assert!(checked.len() >= 2, "{checked:?}");
    stdout
        .lines()
        .filter(|line| line.starts_with("note: member"))
        .map(str::to_owned)
        .collect()
}

/// The jax wheel remade by `make_wheel.py` with `spoil` applied.
fn spoiled(dir: &Path, spoil: serde_json::Value) -> std::path::PathBuf {
    let mut spec = serde_json::json!({"out": dir.join(JAX), "from": jax_wheel()});
    for (key, value) in spoil.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    make_wheel(spec)
}

#[test]
fn a_member_not_listed_in_record_is_noted_or_strictly_refused() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(
        work.path(),
        serde_json::json!({"unrecorded": ["jax_rocm7_plugin/_prng.so"]}),
    );
    insta::assert_snapshot!(strictly_refused(&wheel, &work.path().join("strict")));
    let notes = split_with_notes(&wheel, &work.path().join("out"));
    assert_eq!(
        notes,
        ["note: member \"jax_rocm7_plugin/_prng.so\": not listed in RECORD"]
    );
}

#[test]
fn a_record_listing_a_missing_member_is_noted_or_strictly_refused() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(
        work.path(),
        serde_json::json!({"phantom": ["jax_rocm7_plugin/gone.py,sha256=AAAA,4"]}),
    );
    insta::assert_snapshot!(strictly_refused(&wheel, &work.path().join("strict")));
    let notes = split_with_notes(&wheel, &work.path().join("out"));
    assert_eq!(
        notes,
        ["note: member \"jax_rocm7_plugin/gone.py\": listed in RECORD, not in the wheel"]
    );
}

/// onnxruntime-rocm 1.22.2.post3 lists every member without a hash.
#[test]
fn a_hashless_record_is_noted_member_by_member_or_strictly_refused() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(work.path(), serde_json::json!({"hashless": true}));
    insta::assert_snapshot!(strictly_refused(&wheel, &work.path().join("strict")));
    let notes = split_with_notes(&wheel, &work.path().join("out"));
    let members = zip::ZipArchive::new(fs_err::File::open(&wheel).unwrap())
        .unwrap()
        .len();
    // Every member but RECORD.
    assert_eq!(notes.len(), members - 1, "{notes:#?}");
    assert!(notes
        .iter()
        .all(|note| note.ends_with(": listed in RECORD without a hash")));
}

/// A WHEEL file retagged after RECORD was written: its size and hash in
/// RECORD are stale; so is a member whose content changed at its size.
#[test]
fn stale_sizes_and_hashes_are_noted_or_strictly_refused() {
    let work = tempfile::tempdir().unwrap();
    let dist_info = "jax_rocm7_plugin-0.10.2.dist-info";
    let wheel = spoiled(
        work.path(),
        serde_json::json!({"tamper": {
            format!("{dist_info}/WHEEL"): "Wheel-Version: 1.0\nGenerator: retag 1.0\n\
                Root-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_27_x86_64\n\
                Tag: cp311-cp311-manylinux_2_28_x86_64\n",
        }}),
    );
    insta::assert_snapshot!(
        "a_retagged_wheel_file_is_strictly_refused",
        strictly_refused(&wheel, &work.path().join("strict"))
    );
    let notes = split_with_notes(&wheel, &work.path().join("out"));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!(
            "note: member \"{dist_info}/WHEEL\": RECORD gives size "
        )),
        "{notes:?}"
    );

    let changed_dir = work.path().join("changed");
    fs_err::create_dir(&changed_dir).unwrap();
    let changed = spoiled(
        &changed_dir,
        serde_json::json!({"tamper": {"jax_rocm7_plugin/version.py": "changed"}}),
    );
    insta::assert_snapshot!(
        "a_member_whose_hash_does_not_match_record_is_strictly_refused",
        strictly_refused(&changed, &work.path().join("strict"))
    );
    let notes = split_with_notes(&changed, &work.path().join("out-changed"));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("version.py"), "{notes:?}");
}

/// Writes `argv[1]`, a wheel whose `bomb/_bomb.so` (an ELF header, then
/// zeros) inflates to `argv[2]` bytes while RECORD gives it 4096 (with the
/// hash of its first 4096), every other member recorded truly. With
/// `argv[3]` = `lie`, its zip headers say 4096 bytes too.
const MAKE_BOMB: &str = r#"
import base64, hashlib, sys, zipfile
out, inflated, lie = sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["lie"]
head = b"\x7fELF" + bytes(4092)
def line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"
small = {
    "bomb/__init__.py": b"",
    "bomb-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n",
    "bomb-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
}
record = [line(name, data) for name, data in small.items()]
record.append(line("bomb/_bomb.so", head))
record.append("bomb-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
    for name, data in small.items():
        wheel.writestr(name, data)
    with wheel.open("bomb/_bomb.so", "w", force_zip64=not lie) as member:
        member.write(head)
        chunk = bytes(1 << 20)
        for _ in range((inflated - len(head)) // len(chunk)):
            member.write(chunk)
    wheel.writestr("bomb-1.0.dist-info/RECORD", "\n".join(record) + "\n")
if lie:
    import struct
    data = bytearray(open(out, "rb").read())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_length] == b"bomb/_bomb.so":
            struct.pack_into("<I", data, at + 24, 4096)
            local = struct.unpack_from("<I", data, at + 42)[0]
            struct.pack_into("<I", data, local + 22, 4096)
        at = data.find(b"PK\x01\x02", at + 4)
    open(out, "wb").write(bytes(data))
"#;

/// Splits a 512 MiB bomb (made by [`MAKE_BOMB`], its zip headers lying
/// when `lie`) with files limited to 32 MiB, so that spooling the whole
/// member would kill the split; returns its stderr once it has checked
/// that the split failed in time and left nothing behind.
fn split_bomb(lie: bool, args: &[&str]) -> String {
    let work = tempfile::tempdir().unwrap();
    let wheel = work.path().join("bomb-1.0-cp311-cp311-linux_x86_64.whl");
    let inflated: u64 = 512 << 20;
    let made = python()
        .arg("-c")
        .arg(MAKE_BOMB)
        .arg(&wheel)
        .arg(inflated.to_string())
        .args(lie.then_some("lie"))
        .status()
        .unwrap();
    assert!(made.success());
    assert!(fs_err::metadata(&wheel).unwrap().len() < 2 << 20);
    let out = work.path().join("out");
    fs_err::create_dir(&out).unwrap();
    let started = std::time::Instant::now();
    // ulimit -f counts 512- or 1024-byte blocks: 32 or 64 MiB.
    let result = Command::new("sh")
        .arg("-c")
        .arg("ulimit -c 0 && ulimit -f 65536 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_kpack-pack"))
        .args(["wheel", "split"])
        .arg(&wheel)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(
        result.status.code(),
        Some(1),
        "{:?}: {stderr}",
        result.status
    );
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    let left: Vec<_> = fs_err::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    stderr.into_owned()
}

/// With the RECORD checked strictly, a member whose zip entry is far
/// larger than the size RECORD gives it is refused by name before it is
/// read.
#[test]
fn strictly_a_member_larger_than_its_record_size_is_refused_unread() {
    let stderr = split_bomb(false, &["--strict-record"]);
    let sizes = "RECORD gives size 4096, the member has 5";
    for text in ["\"bomb/_bomb.so\"", sizes] {
        assert!(stderr.contains(text), "{text:?} in {stderr}");
    }
}

/// By default a stale RECORD size is only noted, but no member may
/// inflate past the size its zip entry declares: a bomb whose zip headers
/// lie is refused as soon as it passes that size.
#[test]
fn a_member_inflating_past_its_zip_size_is_refused_at_that_size() {
    let stderr = split_bomb(true, &[]);
    for text in [
        "\"bomb/_bomb.so\"",
        "larger than its declared uncompressed size",
    ] {
        assert!(stderr.contains(text), "{text:?} in {stderr}");
    }
}
