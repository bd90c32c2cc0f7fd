//! Small valid wheels for the pip tests: a zip with the package's files,
//! `{dist}-{ver}.dist-info/METADATA`, `WHEEL` and a `RECORD` of sha256
//! (urlsafe base64, no padding) hashes and sizes, as pip and uv check them.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use sha2::Digest;

/// What goes into one wheel.
#[derive(Debug, Clone, Default)]
pub struct WheelSpec {
    pub name: String,
    pub version: String,
    /// A PEP 825 variant label for the file name.
    pub label: Option<String>,
    /// Extra METADATA header lines (`Provides-Extra: x`).
    pub headers: Vec<String>,
    /// Files: path inside the wheel and contents.
    pub files: Vec<(String, Vec<u8>)>,
}

fn record_hash(data: &[u8]) -> String {
    let digest = sha2::Sha256::digest(data);
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

/// Writes the wheel into `dir`; returns its path.
pub fn build_wheel(dir: &Path, spec: &WheelSpec) -> PathBuf {
    let dist = spec.name.replace('-', "_");
    let dist_info = format!("{dist}-{}.dist-info", spec.version);
    let mut metadata = format!(
        "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
        spec.name, spec.version
    );
    for header in &spec.headers {
        metadata.push_str(header);
        metadata.push('\n');
    }
    metadata.push_str("\nA test distribution.\n");
    let wheel =
        "Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n";
    let mut files = spec.files.clone();
    files.push((format!("{dist_info}/METADATA"), metadata.into_bytes()));
    files.push((format!("{dist_info}/WHEEL"), wheel.as_bytes().to_vec()));
    let mut record = String::new();
    for (path, data) in &files {
        record.push_str(&format!("{path},{},{}\n", record_hash(data), data.len()));
    }
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    files.push((format!("{dist_info}/RECORD"), record.into_bytes()));

    let label = spec
        .label
        .as_ref()
        .map(|l| format!("-{l}"))
        .unwrap_or_default();
    let path = dir.join(format!("{dist}-{}-py3-none-any{label}.whl", spec.version));
    let file = fs_err::File::create(&path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in &files {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// The device processors of the demo distribution.
pub const DEMO_DEVICES: [&str; 2] = ["gfx1100", "gfx90a"];

/// The host wheel of `demo` 1.0: extras `device-gfx1100`, `device-gfx90a`
/// and `device-all`, each requiring its device distributions; a file
/// `demo/variant.txt` saying which build it is (`plain` or a label).
pub fn demo_host(dir: &Path, label: Option<&str>) -> PathBuf {
    demo_host_at(dir, "1.0", label)
}

/// The host wheel of `demo` at `version`, its extras pinning device
/// distributions of the same version.
pub fn demo_host_at(dir: &Path, version: &str, label: Option<&str>) -> PathBuf {
    demo_host_with(dir, version, label, &[])
}

/// The host wheel of `demo` 1.0 as an every-GPU index republishes it
/// (RFC0012's `whl/`): its own `device-all` extra an automatic
/// requirement, so that installing it installs every device wheel.
pub fn demo_host_demanding_all(dir: &Path) -> PathBuf {
    demo_host_with(dir, "1.0", None, &["Requires-Dist: demo[device-all]"])
}

/// The host wheel of `demo` at `version` with `more` METADATA headers.
fn demo_host_with(dir: &Path, version: &str, label: Option<&str>, more: &[&str]) -> PathBuf {
    let mut headers: Vec<String> = more.iter().map(|h| h.to_string()).collect();
    for device in DEMO_DEVICES {
        headers.push(format!("Provides-Extra: device-{device}"));
        headers.push(format!(
            "Requires-Dist: demo-device-{device}=={version}; extra == \"device-{device}\""
        ));
    }
    headers.push("Provides-Extra: device-all".to_owned());
    for device in DEMO_DEVICES {
        headers.push(format!(
            "Requires-Dist: demo-device-{device}=={version}; extra == \"device-all\""
        ));
    }
    build_wheel(
        dir,
        &WheelSpec {
            name: "demo".into(),
            version: version.into(),
            label: label.map(str::to_owned),
            headers,
            files: vec![
                ("demo/__init__.py".into(), b"VALUE = 1\n".to_vec()),
                (
                    "demo/variant.txt".into(),
                    label.unwrap_or("plain").as_bytes().to_vec(),
                ),
            ],
        },
    )
}

/// The device wheel `demo-device-<processor>` 1.0.
pub fn demo_device(dir: &Path, processor: &str) -> PathBuf {
    demo_device_at(dir, processor, "1.0")
}

/// The device wheel `demo-device-<processor>` at `version`.
pub fn demo_device_at(dir: &Path, processor: &str, version: &str) -> PathBuf {
    build_wheel(
        dir,
        &WheelSpec {
            name: format!("demo-device-{processor}"),
            version: version.into(),
            label: None,
            headers: vec![format!("Requires-Dist: demo=={version}")],
            files: vec![(
                format!("demo/.kpack/code_{processor}.kpack"),
                format!("device code for {processor}\n").into_bytes(),
            )],
        },
    )
}

/// A find-links directory with the demo host and every device wheel.
pub fn demo_links(dir: &Path) {
    fs_err::create_dir_all(dir).unwrap();
    demo_host(dir, None);
    for device in DEMO_DEVICES {
        demo_device(dir, device);
    }
}

/// Adds variant wheels of demo (labels `gfx1100`, `gfx90a`, `null`) and
/// the index file `demo-1.0-variants.json` describing them.
pub fn demo_variants(dir: &Path) {
    for label in ["gfx1100", "gfx90a", "null"] {
        demo_host(dir, Some(label));
    }
    let index = r#"{
  "$schema": "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json",
  "default-priorities": {"namespace": ["amd"]},
  "providers": {"amd": {"requires": ["rocm-bootstrap"],
                        "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin"}},
  "variants": {
    "gfx1100": {"amd": {"gfx_arch": ["gfx1100"]}},
    "gfx90a": {"amd": {"gfx_arch": ["gfx90a"]}},
    "null": {}
  }
}
"#;
    fs_err::write(dir.join("demo-1.0-variants.json"), index).unwrap();
}
