//! RocJitsu's translation caches.
//!
//! Follows ROCm's reference handler (rocm-systems `shared/kpack`):
//! `share/rocjitsu/translations/<domain>/v1/<sha256>.man|.obj`, one domain
//! per GPU stepping (`gfx1250-b0-a0`), each a cache for that processor's
//! GPUs. The domain is a processor of the table followed by stepping parts
//! (`-b0`, `-a0`); the files go with the processor's package. Another
//! schema than `v1`, a name that is not a SHA-256, or another extension is
//! not RocJitsu's.

use kpack_gpu::gpus::PROCESSORS;
use kpack_gpu::Target;

use super::{Recogniser, Role};

/// RocJitsu: component `rocjitsu`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RocJitsu;

impl Recogniser for RocJitsu {
    fn library(&self) -> &'static str {
        "rocjitsu"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        let [.., "share", "rocjitsu", "translations", domain, "v1", file] = path else {
            return None;
        };
        let (digest, extension) = file.split_once('.')?;
        let is_digest = digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !is_digest || !matches!(extension, "man" | "obj") {
            return None;
        }
        Some(Role::Device {
            target: Target::bare(domain_processor(domain)?).ok()?,
            name: format!("{domain}/v1/{file}"),
        })
    }
}

/// The processor a translation domain is for: the longest processor of the
/// table it starts with, followed by one or more steppings (`-b0-a0`).
fn domain_processor(domain: &str) -> Option<&'static str> {
    let steppings = |rest: &str| {
        !rest.is_empty()
            && rest.split('-').skip(1).all(|part| {
                let bytes = part.as_bytes();
                bytes.len() >= 2
                    && bytes[0].is_ascii_lowercase()
                    && bytes[1..].iter().all(u8::is_ascii_digit)
            })
            && rest.starts_with('-')
    };
    PROCESSORS
        .iter()
        .filter(|p| p.name != "gfx1250-strict")
        .filter(|p| domain.strip_prefix(p.name).is_some_and(steppings))
        .max_by_key(|p| p.name.len())
        .map(|p| p.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(path: &str) -> Option<Role> {
        RocJitsu.recognise(&path.split('/').collect::<Vec<_>>())
    }

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn routes_a_steppings_cache_to_its_processor() {
        for extension in ["obj", "man"] {
            let path = format!("share/rocjitsu/translations/gfx1250-b0-a0/v1/{DIGEST}.{extension}");
            assert_eq!(
                role(&path),
                device("gfx1250", &format!("gfx1250-b0-a0/v1/{DIGEST}.{extension}"))
            );
            let below = format!("opt/rocm/{path}");
            assert!(role(&below).is_some(), "{below}");
        }
    }

    #[test]
    fn leaves_other_schemas_names_and_domains_alone() {
        for path in [
            format!("share/rocjitsu/translations/gfx1250-b0-a0/v2/{DIGEST}.obj"),
            "share/rocjitsu/translations/gfx1250-b0-a0/v1/not-a-digest.obj".to_owned(),
            format!("share/rocjitsu/translations/gfx1250-b0-a0/v1/{DIGEST}.txt"),
            format!("share/rocjitsu/translations/gfx1250-b0-a0/v1/nested/{DIGEST}.obj"),
            format!("share/other/translations/gfx1250-b0-a0/v1/{DIGEST}.obj"),
            format!("share/rocjitsu/translations/gfx1250/v1/{DIGEST}.obj"),
            format!("share/rocjitsu/translations/generic-b0/v1/{DIGEST}.obj"),
            format!("share/rocjitsu/translations/gfx1250-strict-b0/v1/{DIGEST}.obj"),
        ] {
            assert_eq!(role(&path), None, "{path}");
        }
    }
}
