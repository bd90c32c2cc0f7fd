//! Wheel file names and distribution names, as much as splitting needs:
//! `{dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl` (PEP 427)
//! and PEP 503 normalisation.

/// A wheel's file name, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelFileName {
    /// The escaped distribution name as it appears in the file name.
    pub distribution: String,
    pub version: String,
    pub build: Option<String>,
    /// `{python}-{abi}-{platform}`.
    pub tags: String,
}

impl WheelFileName {
    /// Parses a file name ending in `.whl`; `None` when it is not one.
    pub fn parse(file_name: &str) -> Option<WheelFileName> {
        let stem = file_name.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.iter().any(|part| part.is_empty()) {
            return None;
        }
        let (build, tags) = match parts.len() {
            5 => (None, &parts[2..]),
            6 => (Some(parts[2].to_owned()), &parts[3..]),
            _ => return None,
        };
        Some(WheelFileName {
            distribution: parts[0].to_owned(),
            version: parts[1].to_owned(),
            build,
            tags: tags.join("-"),
        })
    }

    /// The file name of the wheel of distribution `name` (escaped here)
    /// with this wheel's version, build and tags.
    pub fn with_distribution(&self, name: &str) -> String {
        let build = self
            .build
            .as_ref()
            .map(|b| format!("-{b}"))
            .unwrap_or_default();
        format!("{}-{}{build}-{}.whl", escape(name), self.version, self.tags)
    }
}

/// PEP 503 normalisation: lower case, runs of `-`, `_` and `.` made one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut separator = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            separator = true;
            continue;
        }
        if separator && !out.is_empty() {
            out.push('-');
        }
        separator = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A distribution name as file names spell it (normalised, `-` as `_`).
pub fn escape(name: &str) -> String {
    normalize(name).replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_split_into_name_version_build_and_tags() {
        let name =
            WheelFileName::parse("jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl")
                .unwrap();
        assert_eq!(name.distribution, "jax_rocm7_plugin");
        assert_eq!(name.version, "0.10.2");
        assert_eq!(name.build, None);
        assert_eq!(name.tags, "cp311-cp311-manylinux_2_27_x86_64");
        assert_eq!(
            name.with_distribution("jax-rocm7-plugin-device-gfx90a"),
            "jax_rocm7_plugin_device_gfx90a-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"
        );
        let built = WheelFileName::parse("a-1-7-py3-none-any.whl").unwrap();
        assert_eq!(built.with_distribution("B.c"), "b_c-1-7-py3-none-any.whl");
    }

    #[test]
    fn other_names_are_not_wheels() {
        for name in [
            "a-1-py3-none.whl",
            "a-1-py3-none-any.zip",
            "a--1-py3-none-any.whl",
        ] {
            assert_eq!(WheelFileName::parse(name), None, "{name}");
        }
    }

    #[test]
    fn names_normalise_as_pep_503_says() {
        assert_eq!(normalize("Jax_ROCm7.-Plugin"), "jax-rocm7-plugin");
        assert_eq!(
            escape("jax-rocm7-plugin-device-gfx90a"),
            "jax_rocm7_plugin_device_gfx90a"
        );
    }
}
