//! Core metadata (`METADATA`, an email-style header block and a body):
//! reading the name and version, adding the device extras to a host
//! wheel's, and writing a device wheel's.

use super::error::WheelError;
use super::name::normalize;

/// The name and version a wheel's METADATA declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameVersion {
    pub name: String,
    pub version: String,
}

/// The header block: everything before the first empty line.
fn header(text: &str) -> &str {
    let end = header_end(text);
    &text[..end]
}

/// Where the header block ends (the empty line, or the end of the text).
fn header_end(text: &str) -> usize {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).is_empty() {
            return offset;
        }
        offset += line.len();
    }
    text.len()
}

/// The first value of header field `field` (case-insensitive).
fn field<'t>(text: &'t str, field: &str) -> Option<&'t str> {
    header(text).lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(field).then(|| value.trim())
    })
}

/// Reads `Name` and `Version` from METADATA's bytes.
pub fn name_version(bytes: &[u8]) -> Result<NameVersion, WheelError> {
    let text = std::str::from_utf8(bytes).map_err(|_| WheelError::BadMetadata {
        reason: "not UTF-8".to_owned(),
    })?;
    let get = |name: &str| {
        field(text, name)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| WheelError::BadMetadata {
                reason: format!("no {name} field"),
            })
    };
    Ok(NameVersion {
        name: get("Name")?,
        version: get("Version")?,
    })
}

/// The distribution name of the device wheel for `processor`.
pub fn device_distribution(name: &str, processor: &str) -> String {
    normalize(&format!("{name}-device-{processor}"))
}

/// The extra that selects `processor`'s device wheel (PEP 685 normalised).
pub fn device_extra(processor: &str) -> String {
    normalize(&format!("device-{processor}"))
}

/// The host wheel's METADATA: the original with, for each processor, a
/// `device-<processor>` extra requiring its device wheel at exactly this
/// version, and `device-all` requiring all of them, added at the end of
/// the header block.
pub fn with_device_extras(bytes: &[u8], processors: &[String]) -> Result<Vec<u8>, WheelError> {
    let NameVersion { name, version } = name_version(bytes)?;
    let text = std::str::from_utf8(bytes).map_err(|_| WheelError::BadMetadata {
        reason: "not UTF-8".to_owned(),
    })?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut added = String::new();
    let mut extra = |extra: &str, processors: &[String]| {
        added.push_str(&format!("Provides-Extra: {extra}{newline}"));
        for processor in processors {
            let device = device_distribution(&name, processor);
            added.push_str(&format!(
                "Requires-Dist: {device}=={version}; extra == \"{extra}\"{newline}"
            ));
        }
    };
    for processor in processors {
        extra(&device_extra(processor), std::slice::from_ref(processor));
    }
    extra("device-all", processors);
    let end = header_end(text);
    let mut out = String::with_capacity(text.len() + added.len() + 1);
    out.push_str(&text[..end]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(newline);
    }
    out.push_str(&added);
    out.push_str(&text[end..]);
    Ok(out.into_bytes())
}

/// A device wheel's METADATA: its name, the host's version, and the host
/// distribution at exactly that version.
pub fn device_metadata(host: &NameVersion, processor: &str) -> String {
    let NameVersion { name, version } = host;
    let device = device_distribution(name, processor);
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
    fn name_and_version_come_from_the_header() {
        let found = name_version(METADATA.as_bytes()).unwrap();
        assert_eq!(found.name, "Jax-ROCm7_Plugin");
        assert_eq!(found.version, "0.10.2");
        assert!(name_version(b"Name: x\n").is_err());
    }

    #[test]
    fn device_extras_end_the_header_block() {
        let processors = ["gfx1100".to_owned(), "gfx90a".to_owned()];
        let edited = with_device_extras(METADATA.as_bytes(), &processors).unwrap();
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
    fn a_device_wheel_requires_its_host_at_the_same_version() {
        let host = name_version(METADATA.as_bytes()).unwrap();
        let text = device_metadata(&host, "gfx90a");
        assert!(text.contains("Name: jax-rocm7-plugin-device-gfx90a\n"));
        assert!(text.contains("Requires-Dist: Jax-ROCm7_Plugin==0.10.2\n"));
    }
}
