//! Parsing and writing the index documents.

use kpack_repo_index::{ArtifactKind, Component, RootIndex, SchemaError, Shard};

const ROOT: &str = r#"format = 1

[repo]
name = "rocm"
version = 42
generated = 2026-11-21T10:00:00Z
expires = 2026-12-21T10:00:00Z

[families]
gfx110X-all = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]

[packages.rocm-blas]
shard = "packages/rocm-blas/5b1f000000000000000000000000000000000000000000000000000000000000.toml"
sha256 = "5b1f000000000000000000000000000000000000000000000000000000000000"
latest = "5.5.1"
summary = "ROCm BLAS"
"#;

const SHARD: &str = r#"name = "rocm-blas"

[[versions]]
version = "5.5.1"
depends = ["rocm-core >=5.5, <6"]

[[versions.artifacts]]
kind = "tree"
path = "pool/rocm-blas/5.5.1/rocm-blas-host.tar.zst"
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"
size = 12345678

[[versions.artifacts]]
kind = "kpack"
path = "pool/rocm-blas/5.5.1/blas_gfx1100.kpack"
install-as = ".kpack/blas_gfx1100.kpack"
targets = ["gfx1100"]
sha256 = "2222222222222222222222222222222222222222222222222222222222222222"
size = 2345678
"#;

#[test]
fn parses_the_spec_examples() {
    let root = RootIndex::parse("index.toml", ROOT).unwrap();
    assert_eq!(root.repo.name.as_str(), "rocm");
    assert_eq!(root.repo.version, 42);
    assert_eq!(root.repo.generated.to_string(), "2026-11-21T10:00:00Z");
    assert_eq!(root.families["gfx110X-all"].len(), 4);
    let entry = &root.packages[&"rocm-blas".parse().unwrap()];
    assert_eq!(entry.latest, semver::Version::new(5, 5, 1));

    let shard = Shard::parse("shard.toml", SHARD).unwrap();
    let version = &shard.versions[0];
    assert_eq!(version.depends[0].name.as_str(), "rocm-core");
    assert_eq!(version.artifacts[1].kind, ArtifactKind::Kpack);
    assert_eq!(
        version.artifacts[1].install_as.as_ref().unwrap().as_str(),
        ".kpack/blas_gfx1100.kpack"
    );
    assert!(version.artifacts[1].is_device());
    assert!(!version.artifacts[0].is_device());
}

#[test]
fn writes_the_same_bytes_for_the_same_state() {
    let root = RootIndex::parse("index.toml", ROOT).unwrap();
    let text = root.to_toml().unwrap();
    assert_eq!(RootIndex::parse("index.toml", &text).unwrap(), root);
    assert_eq!(
        text,
        RootIndex::parse("index.toml", &text)
            .unwrap()
            .to_toml()
            .unwrap()
    );
    // The canonical form, kept visible so format drift shows in review: a
    // shard at its usual place is not spelled out.
    assert_eq!(text, ROOT.replace("shard = \"packages/rocm-blas/5b1f000000000000000000000000000000000000000000000000000000000000.toml\"\n", ""));
    let name = "rocm-blas".parse().unwrap();
    assert_eq!(
        root.packages[&name].shard_path(&name).as_str(),
        "packages/rocm-blas/5b1f000000000000000000000000000000000000000000000000000000000000.toml"
    );

    let shard = Shard::parse("shard.toml", SHARD).unwrap();
    assert_eq!(shard.to_toml().unwrap(), SHARD);
}

/// The spec's shard with a Tensile payload: a device tree of component
/// `tensile` beside the archive, whose component (`kernels`) goes unsaid.
fn shard_with_components() -> String {
    format!(
        r#"{SHARD}
[[versions.artifacts]]
kind = "tree"
component = "tensile"
path = "pool/rocm-blas/5.5.1/rocm-blas-gfx1100-tensile.tar.zst"
targets = ["gfx1100"]
sha256 = "3333333333333333333333333333333333333333333333333333333333333333"
size = 3456789
"#
    )
}

#[test]
fn an_artifact_names_its_component_unless_it_is_the_default() {
    // A shard written before components: read, and written back byte for
    // byte, its archive of the default component.
    let old = Shard::parse("shard.toml", SHARD).unwrap();
    assert_eq!(old.to_toml().unwrap(), SHARD);
    let artifacts = &old.versions[0].artifacts;
    assert_eq!(artifacts[0].component, None);
    assert_eq!(artifacts[0].component(), None, "a host tree has none");
    assert_eq!(artifacts[1].component, None);
    assert_eq!(artifacts[1].component(), Some(&Component::KERNELS));

    let text = shard_with_components();
    let shard = Shard::parse("shard.toml", &text).unwrap();
    assert_eq!(shard.to_toml().unwrap(), text);
    let tensile = &shard.versions[0].artifacts[2];
    let expected: Component = "tensile".parse().unwrap();
    assert_eq!(tensile.component.as_ref(), Some(&expected));
    assert_eq!(tensile.component(), Some(&expected));
    assert_eq!(tensile.kind, ArtifactKind::Tree);
    assert!(tensile.is_device());

    let message = Shard::parse("shard.toml", &text.replace("\"tensile\"", "\"Tensile DB\""))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Tensile DB") && message.contains("component"),
        "{message}"
    );
}

fn error(text: &str) -> String {
    RootIndex::parse("index.toml", text)
        .unwrap_err()
        .to_string()
}

#[test]
fn errors_name_the_file_and_key() {
    let message = error(&ROOT.replace("version = 42", "version = \"42\""));
    assert!(message.starts_with("index.toml: "), "{message}");
    assert!(message.contains("version"), "{message}");

    let message = error(&ROOT.replace("[packages.rocm-blas]", "[packages.\"rocm/blas\"]"));
    assert!(
        message.contains("rocm/blas") && message.contains("package name"),
        "{message}"
    );

    let message = error(&ROOT.replace(
        "shard = \"packages/rocm-blas/",
        "shard = \"packages/rocm-blas/../../etc/",
    ));
    assert!(message.contains(".."), "{message}");

    let message = error(&ROOT.replace("sha256 = \"5b1f", "sha256 = \"XXXX"));
    assert!(message.contains("sha256"), "{message}");

    let message = error(&ROOT.replace("expires = 2026-12-21T10:00:00Z", "expires = \"soon\""));
    assert!(message.contains("expires"), "{message}");

    let message =
        error(&ROOT.replace("shard = \"packages/rocm-blas/", "shard = \"packages/other/"));
    assert!(message.contains("packages.rocm-blas.shard"), "{message}");
}

#[test]
fn refuses_a_newer_format() {
    let text = ROOT.replace("format = 1", "format = 2");
    assert_eq!(
        RootIndex::parse("index.toml", &text).unwrap_err(),
        SchemaError::UnsupportedFormat {
            file: "index.toml".into(),
            found: 2
        }
    );
}

#[test]
fn refuses_a_version_listed_twice() {
    let twice = format!("{SHARD}\n[[versions]]\nversion = \"5.5.1\"\n");
    let message = Shard::parse("packages/rocm-blas/x.toml", &twice)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("versions[1].version") && message.contains("twice"),
        "{message}"
    );
}
