//! Publishing a repository and verifying it as a client, with every kind
//! of tampering caught.

use std::path::PathBuf;
use std::sync::OnceLock;

use fs_err as fs;
use kpack_repo::publish::{NewArtifact, NewVersion, Publisher};
use kpack_repo::verify::{verify_repository, VerifyError};
use kpack_repo_index::sign::sign_root;
use kpack_repo_index::{ArtifactKind, Component, RootIndex, Timestamp};
use kpack_sign::{keygen, PublicKey, SecretKey};

use crate::common::{archive, build_rocm_rand, host_tree, published_shard, tree};
use kpack_test_support::chain::{copy_dir, target_tmp};
use kpack_test_support::run;

struct Fixture {
    dir: tempfile::TempDir,
    key: SecretKey,
    public: PublicKey,
}

/// The rocRAND manifest built from Debian's package into a signed
/// repository: the one every tampering test starts from. Built once per
/// test process (its host tree at zstd level 19 takes seconds) and copied
/// for each test, which tampers with its own copy.
fn publish() -> Fixture {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = target_tmp().join(format!("publish-fixture-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("repo.key");
        keygen(&secret, &dir.join("repo.pub"), None).unwrap();
        run(&mut build_rocm_rand(&dir.join("repo"), &secret));
        dir
    });
    let dir = tempfile::tempdir().unwrap();
    copy_dir(built, dir.path());
    let public = PublicKey::load(dir.path().join("repo.pub").to_str().unwrap()).unwrap();
    let key = SecretKey::load(&dir.path().join("repo.key"), None).unwrap();
    Fixture { dir, key, public }
}

impl Fixture {
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn verify(&self) -> Result<kpack_repo::verify::VerifyReport, VerifyError> {
        verify_repository(&self.repo(), &self.public, Timestamp::now(), None)
            .map(|(_, report)| report)
    }

    /// `error` with its causes, the fixture's directory masked.
    fn chain(&self, error: &dyn std::error::Error) -> String {
        let dir = self.dir.path().display().to_string();
        kpack_test_support::error_chain(error, &[(&dir, "<DIR>")])
    }

    fn flip(&self, relative: &str, at: usize) {
        let path = self.repo().join(relative);
        let mut bytes = fs::read(&path).unwrap();
        bytes[at] ^= 1;
        fs::write(&path, bytes).unwrap();
    }

    fn shard_path(&self) -> String {
        let text = fs::read_to_string(self.repo().join("index.toml")).unwrap();
        let root = kpack_repo_index::RootIndex::parse("index.toml", &text).unwrap();
        let name = "rocm-rand".parse().unwrap();
        root.packages[&name].shard_path(&name).to_string()
    }

    /// Replaces the root with `text`, validly signed with our key (as a
    /// compromised build host could), so only parsing can catch it.
    fn resign(&self, text: &str) {
        fs::write(self.repo().join("index.toml"), text).unwrap();
        let signature = self
            .key
            .sign("index.toml", text.as_bytes(), "repo:rocm version:1")
            .unwrap();
        fs::write(self.repo().join("index.toml.minisig"), signature).unwrap();
    }
}

#[test]
fn publishes_a_verifiable_repository() {
    let fixture = publish();
    let report = fixture.verify().unwrap();
    assert_eq!(
        (report.packages, report.versions, report.artifacts),
        (1, 1, 7)
    );
    let shard = published_shard(&fixture.repo(), "rocm-rand");
    let artifacts = &shard.versions[0].artifacts;
    assert_eq!(artifacts[0].kind, ArtifactKind::Tree);
    assert_eq!(artifacts[6].kind, ArtifactKind::Kpack);
    // Targets come from the archive's own table of contents.
    assert_eq!(
        artifacts[6]
            .targets
            .iter()
            .flatten()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["gfx90a:xnack+", "gfx90a:xnack-"]
    );
    assert_eq!(
        artifacts[6].install_as.as_ref().unwrap().as_str(),
        ".kpack/rocrand_gfx90a.kpack"
    );
    assert!(fixture
        .repo()
        .join("pool/rocm-rand/5.3.3/rocrand_gfx1030.kpack.zst")
        .exists());
}

#[test]
fn catches_a_flipped_byte_in_an_archive() {
    let fixture = publish();
    fixture.flip("pool/rocm-rand/5.3.3/rocrand_gfx1030.kpack.zst", 70);
    let error = fixture.verify().unwrap_err();
    assert!(matches!(error, VerifyError::HashMismatch { .. }), "{error}");
    insta::assert_snapshot!(fixture.chain(&error));
}

#[test]
fn catches_a_flipped_byte_in_a_shard() {
    let fixture = publish();
    fixture.flip(&fixture.shard_path(), 3);
    let error = fixture.verify().unwrap_err();
    assert!(
        matches!(error, VerifyError::HashMismatch { ref pinned_by, .. } if pinned_by == "index.toml"),
        "{error}"
    );
}

#[test]
fn catches_a_flipped_byte_in_the_root() {
    let fixture = publish();
    fixture.flip("index.toml", 30);
    let error = fixture.verify().unwrap_err();
    insta::assert_snapshot!(fixture.chain(&error));
}

#[test]
fn catches_a_root_signed_by_another_key() {
    let fixture = publish();
    let other = fixture.dir.path().join("other");
    keygen(
        &other.with_extension("key"),
        &other.with_extension("pub"),
        None,
    )
    .unwrap();
    let key = SecretKey::load(&other.with_extension("key"), None).unwrap();
    let text = fs::read(fixture.repo().join("index.toml")).unwrap();
    let version = RootIndex::peek_version(&text).unwrap();
    let copy = format!("{}.minisig", RootIndex::versioned_key(version));
    for signature in ["index.toml.minisig", copy.as_str()] {
        fs::write(
            fixture.repo().join(signature),
            sign_root(&key, &text).unwrap(),
        )
        .unwrap();
    }
    let error = fixture.verify().unwrap_err();
    insta::assert_snapshot!(fixture.chain(&error));
}

/// A publisher stopped after swapping the root in but before writing its
/// signature leaves the previous root's signature beside it: the root
/// still verifies, through its immutable copy's signature.
#[test]
fn a_root_whose_signature_lags_verifies_through_its_copy() {
    let fixture = publish();
    let repo = fixture.repo();
    let previous = fs::read(repo.join("index.toml.minisig")).unwrap();
    Publisher::open(&repo)
        .unwrap()
        .reindex(Some(&fixture.key))
        .unwrap();
    fs::write(repo.join("index.toml.minisig"), &previous).unwrap();
    let (root, _) = verify_repository(&repo, &fixture.public, Timestamp::now(), None).unwrap();
    assert_eq!(root.repo.version, 2);
    // Without the copy's signature it does not.
    let copy = format!("{}.minisig", RootIndex::versioned_key(2));
    fs::remove_file(repo.join(copy)).unwrap();
    let error = fixture.verify().unwrap_err();
    insta::assert_snapshot!(fixture.chain(&error));
}

#[test]
fn catches_a_rollback_and_an_expired_root() {
    let fixture = publish();
    let error =
        verify_repository(&fixture.repo(), &fixture.public, Timestamp::now(), Some(2)).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Rollback {
                found: 1,
                seen: 2,
                ..
            }
        ),
        "{error}"
    );
    let later = Timestamp::from_second(Timestamp::now().as_second() + 31 * 86_400).unwrap();
    let error = verify_repository(&fixture.repo(), &fixture.public, later, None).unwrap_err();
    assert!(matches!(error, VerifyError::Expired { .. }), "{error}");
}

#[test]
fn refuses_paths_and_names_that_escape() {
    let fixture = publish();
    let text = fs::read_to_string(fixture.repo().join("index.toml")).unwrap();
    fixture.resign(&text.replace(
        "[packages.rocm-rand]\n",
        "[packages.rocm-rand]\nshard = \"packages/rocm-rand/../../../etc/passwd\"\n",
    ));
    let error = fixture.verify().unwrap_err();
    insta::assert_snapshot!("shard_path_escapes", fixture.chain(&error));

    fixture.resign(&text.replace("[packages.rocm-rand]", "[packages.\"rocm/rand\"]"));
    let error = fixture.verify().unwrap_err();
    insta::assert_snapshot!("package_name_escapes", fixture.chain(&error));
}

#[test]
fn published_files_never_change() {
    let fixture = publish();
    let repo = Publisher::open(&fixture.repo()).unwrap();
    let inputs = fixture.dir.path().join("other-inputs");
    fs::create_dir_all(&inputs).unwrap();
    // Same name, different bytes, same version: refused.
    let error = repo
        .add(
            &NewVersion::new(
                &"rocm-rand".parse().unwrap(),
                &semver::Version::new(5, 3, 3),
            ),
            &[NewArtifact {
                owner: None,
                file: archive(&inputs, "gfx1030", &["gfx1030"]),
                targets: None,
                component: None,
                unpacked_size: None,
            }],
            Some(&fixture.key),
        )
        .unwrap_err();
    insta::assert_snapshot!(fixture.chain(&error));
}

#[test]
fn concurrent_writers_both_publish() {
    let fixture = publish();
    let repo_dir = fixture.repo();
    let key_path = fixture.dir.path().join("repo.key");
    let workers: Vec<_> = ["rocm-core", "rocm-blas"]
        .into_iter()
        .map(|name| {
            let (repo_dir, key_path) = (repo_dir.clone(), key_path.clone());
            let inputs = fixture.dir.path().join(format!("in-{name}"));
            fs::create_dir_all(&inputs).unwrap();
            let file = archive(&inputs, "gfx1100", &["gfx1100"]);
            std::thread::spawn(move || {
                let key = SecretKey::load(&key_path, None).unwrap();
                let repo = Publisher::open(&repo_dir).unwrap();
                repo.add(
                    &NewVersion::new(&name.parse().unwrap(), &semver::Version::new(6, 0, 0)),
                    &[NewArtifact {
                        owner: None,
                        file,
                        targets: None,
                        component: None,
                        unpacked_size: None,
                    }],
                    Some(&key),
                )
                .unwrap();
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let (root, report) =
        verify_repository(&repo_dir, &fixture.public, Timestamp::now(), None).unwrap();
    assert!(root.repo.version >= 3, "{}", root.repo.version);
    assert_eq!(report.packages, 3);
}

#[test]
fn a_component_is_kept_for_device_code_and_refused_for_host_code() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Publisher::open(&dir.path().join("repo")).unwrap();
    let inputs = dir.path().join("inputs");
    fs::create_dir_all(&inputs).unwrap();
    let tensile: Component = "tensile".parse().unwrap();
    let new = |file, targets: Option<&str>, component: Option<&Component>| NewArtifact {
        owner: None,
        file,
        targets: targets.map(|t| vec![t.parse().unwrap()]),
        component: component.cloned(),
        unpacked_size: None,
    };
    let name = "rocm-blas".parse().unwrap();
    let error = repo
        .add(
            &NewVersion::new(&name, &semver::Version::new(5, 5, 1)),
            &[new(host_tree(&inputs), None, Some(&tensile))],
            None,
        )
        .unwrap_err();
    let masked = dir.path().display().to_string();
    let error = kpack_test_support::error_chain(&error, &[(&masked, "<DIR>")]);
    insta::assert_snapshot!(error);

    let payload = tree(
        &inputs,
        "tensile-gfx1100.tar.zst",
        "lib/rocblas/library/TensileLibrary_gfx1100.dat",
        b"tuning",
    );
    repo.add(
        &NewVersion::new(&name, &semver::Version::new(5, 5, 1)),
        &[
            new(host_tree(&inputs), None, None),
            // The default is left unsaid.
            new(
                archive(&inputs, "gfx1100", &["gfx1100"]),
                None,
                Some(&Component::KERNELS),
            ),
            new(payload, Some("gfx1100"), Some(&tensile)),
        ],
        None,
    )
    .unwrap();
    let shard = published_shard(&dir.path().join("repo"), "rocm-blas");
    let components: Vec<_> = shard.versions[0]
        .artifacts
        .iter()
        .map(|a| (a.component.clone(), a.component().cloned()))
        .collect();
    assert_eq!(
        components,
        [
            (None, None),
            (None, Some(Component::KERNELS)),
            (Some(tensile.clone()), Some(tensile)),
        ]
    );
}
