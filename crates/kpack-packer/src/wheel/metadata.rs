//! The METADATA and WHEEL files of the split wheels: the host's gains a
//! `device-<processor>` extra per processor and `device-all`; each device
//! wheel gets its own, requiring the host at exactly its version. Names
//! and METADATA editing come from `kpack-wheel`.

use std::collections::{BTreeMap, BTreeSet};

use kpack_wheel::{DistName, ExtraName, Metadata, MetadataEditor};

use super::error::WheelError;

/// Reads METADATA's bytes.
pub fn parse(bytes: &[u8]) -> Result<Metadata, WheelError> {
    let text = std::str::from_utf8(bytes).map_err(|_| WheelError::MetadataNotUtf8)?;
    Metadata::parse(text).map_err(|source| WheelError::BadMetadata { source })
}

/// The distribution of the device wheel for `processor`.
pub fn device_distribution(host: &DistName, processor: &str) -> Result<DistName, WheelError> {
    host.device(processor)
        .map_err(|source| WheelError::BadName { source })
}

/// The host wheel's METADATA: the original with, for each processor of
/// `extras`, a `device-<processor>` extra requiring the device wheels of
/// the keys it lists (its own, its groups') at exactly this version, and
/// `device-all` requiring every device wheel, added at the end of the
/// header block.
pub fn with_device_extras(
    bytes: &[u8],
    extras: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<u8>, WheelError> {
    let host = parse(bytes)?;
    let text = std::str::from_utf8(bytes).map_err(|_| WheelError::MetadataNotUtf8)?;
    let mut editor = MetadataEditor::new(text);
    let mut all_keys = BTreeSet::new();
    for (processor, keys) in extras {
        let extra =
            ExtraName::device(processor).map_err(|source| WheelError::BadName { source })?;
        editor.provides_extra(&extra);
        for key in keys {
            let device = device_distribution(&host.name, key)?;
            editor.requires_dist(&requirement(&device, &host.version, &extra));
            all_keys.insert(key);
        }
    }
    let all = ExtraName::device("all").map_err(|source| WheelError::BadName { source })?;
    editor.provides_extra(&all);
    for key in all_keys {
        let device = device_distribution(&host.name, key)?;
        editor.requires_dist(&requirement(&device, &host.version, &all));
    }
    Ok(editor.finish().into_bytes())
}

fn requirement(device: &DistName, version: &str, extra: &ExtraName) -> String {
    format!("{device}=={version}; extra == \"{extra}\"")
}

/// A device wheel's METADATA: its name, the host's version, and the host
/// distribution at exactly that version.
pub fn device_metadata(host: &Metadata, device: &DistName, processor: &str) -> String {
    let (name, version) = (&host.name, &host.version);
    format!(
        "Metadata-Version: 2.1\nName: {device}\nVersion: {version}\n\
         Summary: {processor} device code for {name}\n\
         Requires-Dist: {name}=={version}\n"
    )
}

/// A device wheel's WHEEL file: the host's tags and purelib flag, this
/// packer as the generator.
pub fn device_wheel_file(host_wheel: &[u8]) -> String {
    let text = String::from_utf8_lossy(host_wheel);
    let mut out = format!(
        "Wheel-Version: 1.0\nGenerator: kpack-pack {}\n",
        env!("CARGO_PKG_VERSION")
    );
    for line in text.lines() {
        let key = line.split_once(':').map(|(k, _)| k.trim());
        if matches!(key, Some("Root-Is-Purelib" | "Tag" | "Build")) {
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = "Metadata-Version: 2.4\nName: Jax-ROCm7_Plugin\nVersion: 0.10.2\n\
        Requires-Dist: jax-rocm7-pjrt==0.10.2\n\nThe description.\n";

    #[test]
    fn device_extras_end_the_header_block() {
        let extras = ["gfx1100", "gfx90a"]
            .map(|p| (p.to_owned(), vec![p.to_owned()]))
            .into();
        let edited = with_device_extras(METADATA.as_bytes(), &extras).unwrap();
        assert_eq!(
            String::from_utf8(edited).unwrap(),
            "Metadata-Version: 2.4\nName: Jax-ROCm7_Plugin\nVersion: 0.10.2\n\
             Requires-Dist: jax-rocm7-pjrt==0.10.2\n\
             Provides-Extra: device-gfx1100\n\
             Requires-Dist: jax-rocm7-plugin-device-gfx1100==0.10.2; extra == \"device-gfx1100\"\n\
             Provides-Extra: device-gfx90a\n\
             Requires-Dist: jax-rocm7-plugin-device-gfx90a==0.10.2; extra == \"device-gfx90a\"\n\
             Provides-Extra: device-all\n\
             Requires-Dist: jax-rocm7-plugin-device-gfx1100==0.10.2; extra == \"device-all\"\n\
             Requires-Dist: jax-rocm7-plugin-device-gfx90a==0.10.2; extra == \"device-all\"\n\
             \nThe description.\n"
        );
    }

    #[test]
    fn a_group_s_device_wheel_is_required_by_each_member_s_extra() {
        let extras = [
            ("gfx1100", vec!["gfx11", "gfx1100"]),
            ("gfx1151", vec!["gfx11"]),
        ]
        .map(|(p, keys)| (p.to_owned(), keys.into_iter().map(str::to_owned).collect()))
        .into();
        let edited = with_device_extras(METADATA.as_bytes(), &extras).unwrap();
        let text = String::from_utf8(edited).unwrap();
        for line in [
            "Requires-Dist: jax-rocm7-plugin-device-gfx11==0.10.2; extra == \"device-gfx1100\"\n",
            "Requires-Dist: jax-rocm7-plugin-device-gfx1100==0.10.2; extra == \"device-gfx1100\"\n",
            "Requires-Dist: jax-rocm7-plugin-device-gfx11==0.10.2; extra == \"device-gfx1151\"\n",
            "Requires-Dist: jax-rocm7-plugin-device-gfx11==0.10.2; extra == \"device-all\"\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert_eq!(text.matches("extra == \"device-all\"").count(), 2, "{text}");
    }

    #[test]
    fn a_device_wheel_requires_its_host_at_the_same_version() {
        let host = parse(METADATA.as_bytes()).unwrap();
        let device = device_distribution(&host.name, "gfx90a").unwrap();
        let text = device_metadata(&host, &device, "gfx90a");
        assert!(text.contains("Name: jax-rocm7-plugin-device-gfx90a\n"));
        assert!(text.contains("Requires-Dist: jax-rocm7-plugin==0.10.2\n"));
    }

    #[test]
    fn metadata_without_a_version_is_refused() {
        assert!(parse(b"Name: x\n").is_err());
    }
}
