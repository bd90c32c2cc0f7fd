//! rocm-rand versions with device code for more targets than Debian
//! builds: rocRAND's gfx1030 code objects under other targets, as a
//! publisher building for them would add archives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kpack_repo::publish::{NewArtifact, NewVersion, Publisher};
use kpack_sign::SecretKey;
use kpack_test_support::context::TestContext;
use rocm_kpack::{Archive, ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};

/// Publishes rocm-rand `version` into the context's own repository:
/// rocRAND's host tree and gfx1030 archive as 5.3.3 has them, plus one
/// archive for each of `targets` (`rocrand_<target>.kpack`) holding
/// rocRAND's code under that target.
pub fn publish_rocrand_for(context: &TestContext, version: &str, targets: &[&str]) {
    let repo = &context.repo;
    let inputs = context.home().join(format!("inputs-{version}"));
    fs_err::create_dir_all(&inputs).unwrap();
    let pool = repo.dir.join("pool/rocm-rand/5.3.3");
    let host = inputs.join(format!("rocm-rand-{version}-host.tar.zst"));
    fs_err::copy(pool.join("rocm-rand-5.3.3-host.tar.zst"), &host).unwrap();
    let gfx1030 = inputs.join("rocrand_gfx1030.kpack");
    let served = crate::common::installed_bytes(&repo.dir, "rocrand_gfx1030.kpack.zst");
    fs_err::write(&gfx1030, served).unwrap();
    let mut files = vec![host, gfx1030.clone()];
    for target in targets {
        files.push(relabelled(&gfx1030, &inputs, target));
    }
    let artifacts: Vec<NewArtifact> = files
        .iter()
        .map(|file| NewArtifact {
            owner: None,
            file: file.clone(),
            targets: None,
            component: None,
            unpacked_size: None,
        })
        .collect();
    Publisher::open(&repo.dir)
        .unwrap()
        .add(
            &NewVersion::new(&"rocm-rand".parse().unwrap(), &version.parse().unwrap()),
            &artifacts,
            Some(&SecretKey::load(&repo.secret_key, None).unwrap()),
        )
        .unwrap();
}

/// An archive in `dir` holding every code object of the gfx1030 archive
/// `source` under `target`.
fn relabelled(source: &Path, dir: &Path, target: &str) -> PathBuf {
    let path = dir.join(format!("rocrand_{target}.kpack"));
    let source = Archive::open(source).unwrap();
    let gfx1030 = Target::parse("gfx1030").unwrap();
    let target = Target::parse(target).unwrap();
    let options = ArchiveOptions {
        group: "rocrand".into(),
        family: target.to_string(),
        arches: vec![target.clone()],
        compression: Compression::DEFAULT,
    };
    let mut writer = ArchiveWriter::new(fs_err::File::create(&path).unwrap(), options).unwrap();
    for binary in source.binaries() {
        let (file, index) = binary.rsplit_once('#').unwrap();
        let code = source.kernel(binary, &gfx1030).unwrap();
        writer
            .add(
                &BinaryKey::new(file, index.parse().unwrap()),
                &target,
                &code,
            )
            .unwrap();
    }
    writer.finish().unwrap();
    path
}
