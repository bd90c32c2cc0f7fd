//! The loader's environment, read once into a value.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use kpack_env::EnvVars;

/// Where debug lines go (without the `kpack: ` prefix).
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Everything the loader takes from the environment.
#[derive(Clone, Default)]
pub struct LoaderConfig {
    /// `ROCM_KPACK_PATH`: when set and non-empty, the only archives tried.
    pub path: Option<Vec<PathBuf>>,
    /// `ROCM_KPACK_PATH_PREFIX`: tried before the marker's paths.
    pub path_prefix: Vec<PathBuf>,
    /// `ROCM_KPACK_DISABLE`.
    pub disabled: bool,
    /// Receives debug lines when `ROCM_KPACK_DEBUG` is on (stderr by
    /// default) or when set explicitly.
    pub log: Option<LogSink>,
}

impl fmt::Debug for LoaderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoaderConfig")
            .field("path", &self.path)
            .field("path_prefix", &self.path_prefix)
            .field("disabled", &self.disabled)
            .field("log", &self.log.is_some())
            .finish()
    }
}

impl LoaderConfig {
    /// Reads the four `ROCM_KPACK_*` variables from the process environment.
    pub fn from_env() -> LoaderConfig {
        LoaderConfig::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads the variables through `lookup`, so tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> LoaderConfig {
        let path = lookup(EnvVars::ROCM_KPACK_PATH)
            .map(|value| split_paths(&value))
            .filter(|paths| !paths.is_empty());
        let path_prefix = lookup(EnvVars::ROCM_KPACK_PATH_PREFIX)
            .map(|value| split_paths(&value))
            .unwrap_or_default();
        let on = |name| lookup(name).is_some_and(|value| is_truthy(&value));
        LoaderConfig {
            path,
            path_prefix,
            disabled: on(EnvVars::ROCM_KPACK_DISABLE),
            log: on(EnvVars::ROCM_KPACK_DEBUG).then(stderr_sink),
        }
    }
}

/// The default debug sink: one `kpack: ` line per message on stderr.
pub fn stderr_sink() -> LogSink {
    Arc::new(|line: &str| {
        use std::io::Write;
        // A closed stderr must not turn into a failure of the load.
        let _ = writeln!(std::io::stderr().lock(), "kpack: {line}");
    })
}

/// Set, non-empty and not starting with `0`.
fn is_truthy(value: &std::ffi::OsStr) -> bool {
    let bytes = value.as_encoded_bytes();
    !bytes.is_empty() && bytes[0] != b'0'
}

/// What separates the entries of `ROCM_KPACK_PATH` and
/// `ROCM_KPACK_PATH_PREFIX`: `;` on Windows, whose paths hold `:` after a
/// drive letter, `:` elsewhere.
const PATH_LIST_SEPARATOR: u8 = if cfg!(windows) { b';' } else { b':' };

/// Splits a search path list at [`PATH_LIST_SEPARATOR`], skipping empty
/// parts.
fn split_paths(value: &std::ffi::OsStr) -> Vec<PathBuf> {
    split_paths_at(value, PATH_LIST_SEPARATOR)
}

/// Splits a search path list at `separator`, skipping empty parts; each
/// entry is taken as it is (`\` or `/`, a drive letter or none).
fn split_paths_at(value: &std::ffi::OsStr, separator: u8) -> Vec<PathBuf> {
    value
        .as_encoded_bytes()
        .split(|&b| b == separator)
        .filter(|part| !part.is_empty())
        // SAFETY: splitting at an ASCII byte keeps each part valid encoded
        // OS-string bytes.
        .map(|part| PathBuf::from(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(part) }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> LoaderConfig {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        LoaderConfig::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    #[cfg(unix)]
    fn reads_paths_skipping_empty_parts() {
        let c = config(&[
            (EnvVars::ROCM_KPACK_PATH, ":/a.kpack::b.kpack:"),
            (EnvVars::ROCM_KPACK_PATH_PREFIX, "/p"),
        ]);
        assert_eq!(
            c.path.unwrap(),
            [PathBuf::from("/a.kpack"), PathBuf::from("b.kpack")]
        );
        assert_eq!(c.path_prefix, [PathBuf::from("/p")]);
    }

    fn split_windows(value: &str) -> Vec<PathBuf> {
        split_paths_at(std::ffi::OsStr::new(value), b';')
    }

    #[test]
    fn windows_lists_split_at_semicolons_keeping_drive_letters() {
        assert_eq!(
            split_windows(r"C:\kpack\a.kpack;;D:/b.kpack;\\server\share\c.kpack;"),
            [
                PathBuf::from(r"C:\kpack\a.kpack"),
                PathBuf::from("D:/b.kpack"),
                PathBuf::from(r"\\server\share\c.kpack"),
            ]
        );
        // One entry holding a drive letter's colon stays whole.
        assert_eq!(
            split_windows(r"C:\Program Files\app\.kpack\x.kpack"),
            [PathBuf::from(r"C:\Program Files\app\.kpack\x.kpack")]
        );
        assert!(split_windows(";;").is_empty());
    }

    #[test]
    fn this_platform_splits_at_its_separator() {
        let list = if cfg!(windows) {
            r"C:\a.kpack;D:\b.kpack"
        } else {
            "/a.kpack:/b.kpack"
        };
        assert_eq!(split_paths(std::ffi::OsStr::new(list)).len(), 2);
    }

    #[test]
    fn empty_path_is_unset() {
        assert!(config(&[(EnvVars::ROCM_KPACK_PATH, "")]).path.is_none());
        assert!(config(&[(EnvVars::ROCM_KPACK_PATH, "::")]).path.is_none());
    }

    #[test]
    fn truthiness_follows_the_reference() {
        for (value, on) in [
            ("1", true),
            ("yes", true),
            ("0", false),
            ("01", false),
            ("", false),
        ] {
            assert_eq!(
                config(&[(EnvVars::ROCM_KPACK_DISABLE, value)]).disabled,
                on,
                "{value:?}"
            );
            assert_eq!(
                config(&[(EnvVars::ROCM_KPACK_DEBUG, value)]).log.is_some(),
                on,
                "{value:?}"
            );
        }
        assert!(!config(&[]).disabled);
    }
}
