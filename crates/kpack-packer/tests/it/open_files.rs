//! Splitting with few open files: a fat binary with code for more
//! processors than the process may open files is split into every archive.

use crate::common::*;
use kpack_binary::bundle::build::offload_bundle;
use kpack_test_support::measure::limit_open_files;

/// Processors the fat library has code for: far more than the open files
/// allowed below.
const PROCESSORS: usize = 300;

/// The open files `kpack-pack` may hold (its soft `RLIMIT_NOFILE`): fewer
/// than [`kpack_packer::archive::MAX_OPEN_ARCHIVES`], as a tight shell or
/// service limit may leave.
const OPEN_FILES: u64 = 24;

#[test]
fn a_split_into_more_archives_than_open_files_writes_every_archive() {
    let context = TestContext::new();
    let triples: Vec<(String, Vec<u8>)> = (0..PROCESSORS)
        .map(|i| {
            let code: Vec<u8> = (0..96).map(|j| (i * 7 + j) as u8).collect();
            (format!("hipv4-amdgcn-amd-amdhsa--gfx{}", 9000 + i), code)
        })
        .collect();
    let entries: Vec<(&str, &[u8])> = triples.iter().map(|(t, b)| (t.as_str(), &b[..])).collect();
    let library = context.path().join("libmany.so");
    FatLibrary::new(offload_bundle(&entries)).compile(&library);

    let out = context.path().join("out");
    let mut split = kpack_pack();
    split.arg("split").arg(&library).arg("-o").arg(&out);
    let output = limit_open_files(&mut split, OPEN_FILES).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    for (i, (_, code)) in triples.iter().enumerate() {
        let processor = format!("gfx{}", 9000 + i);
        let path = out.join(format!(".kpack/rocm_{processor}.kpack"));
        let archive = rocm_kpack::Archive::open(&path).unwrap();
        let target = kpack_gpu::Target::parse(&processor).unwrap();
        assert_eq!(
            archive.architectures(),
            std::slice::from_ref(&target),
            "{processor}"
        );
        let read = archive.kernel("libmany.so#0", &target).unwrap();
        assert_eq!(&read[..], &code[..], "{processor}");
    }
    let verified = context.run(kpack_pack().arg("verify").arg(&out));
    assert!(verified.contains("0 problems"), "{verified}");
}
