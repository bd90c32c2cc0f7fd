//! Trees and wheels are routed by one rule (03-packer.md): the same files,
//! split as a tree and as a wheel, leave the host output for the same
//! owners with the same bytes: AOTriton's group directory (`amd-gfx11xx`,
//! owned by `gfx11`) and a processor's, and loose code objects (real ones,
//! out of Debian's rocRAND) with their companions; a file named for a GPU
//! but holding no code for it stays.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use kpack_gpu::Target;

use crate::common::*;
use crate::wheel::wheel_of;

/// Owner -> path -> bytes.
type Routed = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// The files of the tree, by path below the package root.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let rocrand = fs_err::read(unpack_rocrand(&dir.join("deb"))).unwrap();
    let first = code_by_bundle(&rocrand).swap_remove(0);
    let code = |target: &str| first[&Target::parse(target).unwrap()].clone();
    let images = "pkg/lib/aotriton.images";
    [
        ("pkg/__init__.py", b"".to_vec()),
        (
            &format!("{images}/amd-gfx11xx/flash/attn_fwd/k.aks2") as &str,
            b"rdna3 attention".to_vec(),
        ),
        (
            &format!("{images}/amd-gfx942/__signature__"),
            b"cdna3".to_vec(),
        ),
        // Real names hold `=`, `@`, spaces and non-ASCII characters.
        (
            &format!("{images}/amd-gfx942/flash/FONLY__\u{ff0a}bf16@16_M=1 x.aks2"),
            b"cdna3 attention".to_vec(),
        ),
        ("pkg/hsa/gfx1030/fwd.co", code("gfx1030")),
        (
            "pkg/hsa/gfx1030/kernels.csv",
            b"name,tile\nfwd,64\n".to_vec(),
        ),
        ("pkg/aot/gemm_M=16/gemm.hsaco", code("gfx90a:xnack-")),
        (
            "pkg/aot/gemm_M=16/gemm.json",
            b"{\"target\": \"gfx90a\"}".to_vec(),
        ),
        ("pkg/configs/gfx942_tuning.json", b"{}".to_vec()),
    ]
    .into_iter()
    .map(|(path, bytes)| (path.to_owned(), bytes))
    .collect()
}

/// What a tree split's payloads hold, by owner (the component aside).
fn payloads(root: &Path) -> Routed {
    let mut routed = Routed::new();
    for component in fs_err::read_dir(root).unwrap() {
        for owner in fs_err::read_dir(component.unwrap().path()).unwrap() {
            let owner = owner.unwrap().path();
            let key = owner.file_name().unwrap().to_string_lossy().into_owned();
            let mut pending = vec![owner.clone()];
            while let Some(dir) = pending.pop() {
                for entry in fs_err::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        pending.push(path);
                    } else {
                        let relative = path.strip_prefix(&owner).unwrap();
                        routed.entry(key.clone()).or_default().insert(
                            relative.to_string_lossy().into_owned(),
                            fs_err::read(&path).unwrap(),
                        );
                    }
                }
            }
        }
    }
    routed
}

/// What the device wheels in `dir` hold, by owner (`.dist-info` aside).
fn device_wheels(dir: &Path) -> Routed {
    let mut routed = Routed::new();
    for entry in fs_err::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("pkg_device_") else {
            continue;
        };
        let owner = rest.split('-').next().unwrap().to_owned();
        let mut archive = zip::ZipArchive::new(fs_err::File::open(&path).unwrap()).unwrap();
        for index in 0..archive.len() {
            let mut member = archive.by_index(index).unwrap();
            let member_name = member.name().unwrap().into_owned();
            if member_name.contains(".dist-info/") {
                continue;
            }
            let mut bytes = Vec::new();
            member.read_to_end(&mut bytes).unwrap();
            routed
                .entry(owner.clone())
                .or_default()
                .insert(member_name, bytes);
        }
    }
    routed
}

#[test]
fn a_tree_and_a_wheel_holding_the_same_files_route_them_to_the_same_owners() {
    let work = tempfile::tempdir().unwrap();
    let files = files(work.path());
    let tree = work.path().join("tree");
    for (path, bytes) in &files {
        let file = tree.join(path);
        fs_err::create_dir_all(file.parent().unwrap()).unwrap();
        fs_err::write(file, bytes).unwrap();
    }
    let split = work.path().join("split");
    run(kpack_pack().arg("split").arg(&tree).arg("-o").arg(&split));
    let from_tree = payloads(&work.path().join("split.payloads"));

    let mut members: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    members.push((
        "pkg-1.0.dist-info/METADATA",
        b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    ));
    members.push((
        "pkg-1.0.dist-info/WHEEL",
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    ));
    let wheel = wheel_of(
        work.path(),
        "pkg-1.0-py3-none-any.whl",
        &members,
        serde_json::Value::Null,
    );
    let out = work.path().join("wheels");
    run(kpack_pack()
        .args(["wheel", "split"])
        .arg(&wheel)
        .arg("-o")
        .arg(&out));
    let from_wheel = device_wheels(&out);
    // Python's zipfile reads every name as written (the UTF-8 flag) and
    // every RECORD row matches.
    crate::wheel::check_wheels(&out);

    assert_eq!(
        from_tree.keys().collect::<Vec<_>>(),
        ["gfx1030", "gfx11", "gfx90a", "gfx942"]
    );
    assert_eq!(from_tree, from_wheel);
    let routed: Vec<&String> = from_tree.values().flat_map(|files| files.keys()).collect();
    assert_eq!(routed.len(), 7, "{routed:?}");
    for stays in ["pkg/__init__.py", "pkg/configs/gfx942_tuning.json"] {
        assert!(
            tree.join(stays).is_file() && split.join(stays).is_file(),
            "{stays}"
        );
    }

    let host =
        zip::ZipArchive::new(fs_err::File::open(out.join("pkg-1.0-py3-none-any.whl")).unwrap())
            .unwrap();
    let metadata_extras: Vec<String> = {
        let mut host = host;
        let mut text = String::new();
        host.by_name("pkg-1.0.dist-info/METADATA")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with("Requires-Dist: pkg-device-gfx11==1.0"))
            .map(str::to_owned)
            .collect()
    };
    // gfx11's eight processors and device-all each require its wheel.
    assert_eq!(metadata_extras.len(), 9, "{metadata_extras:#?}");
}
