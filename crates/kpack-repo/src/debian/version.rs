//! Debian versions (`[epoch:]upstream[-revision]`, Debian Policy 5.6.12)
//! and how they map to the repository's semver versions.
//!
//! The upstream version's leading numbers become major.minor.patch (missing
//! ones are 0); a `~` in it (Debian's "sorts before") becomes a semver
//! pre-release. Everything Debian adds after the numbers is kept, visible,
//! as **build metadata**: the rest of the upstream version, then `deb`,
//! then the revision, each split into Debian's own runs of digits and of
//! other characters, so `5.5.1+dfsg-7` is `5.5.1+dfsg.deb.7` and
//! `5.4.3-3+b1` is `5.4.3+deb.3.b.1`. Build metadata, not pre-release,
//! because requirements ignore it (`>=5.5.1` accepts every Debian build of
//! 5.5.1), while versions still order by it: semver compares build
//! metadata last, identifier by identifier and digits as numbers, which is
//! how Debian orders two builds of one upstream version (revisions, binNMUs
//! `+bN`, stable updates `+debNuM`). An epoch is kept as `e<N>` in front of
//! the metadata; it does not order ahead of the upstream version as in
//! Debian.

use std::fmt;
use std::str::FromStr;

/// A Debian version, as a control file states it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DebianVersion {
    epoch: u32,
    upstream: String,
    revision: Option<String>,
}

/// A version that is not a Debian version, or has no semver equivalent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Debian version {version:?}: {reason}")]
pub struct VersionError {
    pub version: String,
    pub reason: &'static str,
}

fn error(version: &str, reason: &'static str) -> VersionError {
    VersionError {
        version: version.to_owned(),
        reason,
    }
}

impl FromStr for DebianVersion {
    type Err = VersionError;

    fn from_str(text: &str) -> Result<Self, VersionError> {
        let (epoch, rest) = match text.split_once(':') {
            Some((epoch, rest)) => {
                let epoch = epoch
                    .parse()
                    .map_err(|_| error(text, "the epoch is not a number"))?;
                (epoch, rest)
            }
            None => (0, text),
        };
        let (upstream, revision) = match rest.rsplit_once('-') {
            Some((upstream, revision)) => (upstream, Some(revision)),
            None => (rest, None),
        };
        if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(error(text, "the upstream version must start with a digit"));
        }
        let allowed = |extra: &str, part: &str| {
            part.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".+~".contains(c) || extra.contains(c))
        };
        if !allowed(if revision.is_some() { "-" } else { "" }, upstream) {
            return Err(error(
                text,
                "the upstream version has a character Debian does not allow",
            ));
        }
        if let Some(revision) = revision {
            if revision.is_empty() || !allowed("", revision) {
                return Err(error(
                    text,
                    "the revision is empty or has a character Debian does not allow",
                ));
            }
        }
        Ok(DebianVersion {
            epoch,
            upstream: upstream.to_owned(),
            revision: revision.map(str::to_owned),
        })
    }
}

impl fmt::Display for DebianVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.epoch > 0 {
            write!(f, "{}:", self.epoch)?;
        }
        f.write_str(&self.upstream)?;
        if let Some(revision) = &self.revision {
            write!(f, "-{revision}")?;
        }
        Ok(())
    }
}

impl DebianVersion {
    /// The repository's version for this Debian version (see the module's
    /// documentation).
    pub fn to_semver(&self) -> Result<semver::Version, VersionError> {
        let text = self.to_string();
        let Upstream { core, pre, rest } = split_upstream(&self.upstream, &text)?;
        let mut build = Vec::new();
        if self.epoch > 0 {
            build.push(format!("e{}", self.epoch));
        }
        build.extend(runs(rest));
        if let Some(revision) = &self.revision {
            if revision.contains('~') {
                return Err(error(&text, "a revision with ~ has no semver order"));
            }
            build.push("deb".to_owned());
            build.extend(runs(revision));
        }
        let mut version = core;
        if let Some(pre) = pre {
            version.pre = semver::Prerelease::new(&pre)
                .map_err(|_| error(&text, "what follows ~ is no semver pre-release"))?;
        }
        version.build = semver::BuildMetadata::new(&build.join("."))
            .map_err(|_| error(&text, "its suffix makes no semver build metadata"))?;
        Ok(version)
    }

    /// The upstream version as a semver version for a requirement:
    /// major.minor.patch and the pre-release only. `5.6.1~` (any version
    /// from 5.6.1's pre-releases on) is `5.6.1-0`.
    pub fn requirement_version(&self) -> Result<semver::Version, VersionError> {
        let text = self.to_string();
        let Upstream { mut core, pre, .. } = split_upstream(&self.upstream, &text)?;
        if let Some(pre) = pre {
            let pre = if pre.is_empty() { "0".to_owned() } else { pre };
            core.pre = semver::Prerelease::new(&pre)
                .map_err(|_| error(&text, "what follows ~ is no semver pre-release"))?;
        }
        Ok(core)
    }
}

/// An upstream version taken apart.
struct Upstream<'a> {
    core: semver::Version,
    /// What follows a `~` in the numbers' suffix, as dot-separated runs
    /// (empty for a trailing `~`).
    pre: Option<String>,
    /// The rest, after the numbers and any `~` part.
    rest: &'a str,
}

fn split_upstream<'a>(upstream: &'a str, text: &str) -> Result<Upstream<'a>, VersionError> {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut core = [0u64; 3];
    let mut at = 0;
    for (index, slot) in core.iter_mut().enumerate() {
        let len = digits(&upstream[at..]);
        *slot = upstream[at..at + len]
            .parse()
            .map_err(|_| error(text, "a version number is too large"))?;
        at += len;
        // Another number follows: take its dot (a fourth stays in the rest).
        let more = upstream[at..].starts_with('.')
            && upstream[at + 1..].starts_with(|c: char| c.is_ascii_digit());
        if index == 2 || !more {
            break;
        }
        at += 1;
    }
    let mut rest = &upstream[at..];
    let mut pre = None;
    if let Some(after) = rest.strip_prefix('~') {
        let end = after.find(['+', '~']).unwrap_or(after.len());
        pre = Some(runs(&after[..end]).join("."));
        rest = &after[end..];
    }
    Ok(Upstream {
        core: semver::Version::new(core[0], core[1], core[2]),
        pre,
        rest,
    })
}

/// Debian's comparison units: runs of digits and runs of letters, other
/// characters (`.`, `+`, `~`) separating them.
fn runs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut digits = false;
    for c in text.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() && c.is_ascii_digit() != digits {
            out.push(std::mem::take(&mut current));
        }
        digits = c.is_ascii_digit();
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn semver(debian: &str) -> String {
        debian
            .parse::<DebianVersion>()
            .unwrap()
            .to_semver()
            .unwrap()
            .to_string()
    }

    #[test]
    fn real_trixie_versions_map_with_their_revision_visible() {
        assert_eq!(semver("5.5.1+dfsg-7"), "5.5.1+dfsg.deb.7");
        assert_eq!(semver("5.4.3-3+b1"), "5.4.3+deb.3.b.1");
        assert_eq!(semver("5.7.1-6+deb13u1"), "5.7.1+deb.6.deb.13.u.1");
        assert_eq!(
            semver("6.0+git20231212.4510c28+dfsg-3+b2"),
            "6.0.0+git.20231212.4510.c.28.dfsg.deb.3.b.2"
        );
        assert_eq!(semver("6.2.4+ds-1"), "6.2.4+ds.deb.1");
        assert_eq!(semver("5.7.1"), "5.7.1");
    }

    #[test]
    fn epochs_tildes_and_fourth_numbers() {
        assert_eq!(semver("1:1.2.13.dfsg-1"), "1.2.13+e1.dfsg.deb.1");
        assert_eq!(semver("1.0~rc2-1"), "1.0.0-rc.2+deb.1");
        assert_eq!(semver("1.2.3.4-1"), "1.2.3+4.deb.1");
        let requirement = |v: &str| {
            v.parse::<DebianVersion>()
                .unwrap()
                .requirement_version()
                .unwrap()
                .to_string()
        };
        assert_eq!(requirement("5.6.1~"), "5.6.1-0");
        assert_eq!(requirement("6.0+git20231212.4510c28"), "6.0.0");
        assert_eq!(requirement("1:1.2.2"), "1.2.2");
    }

    #[test]
    fn versions_debian_does_not_allow_are_refused() {
        for bad in ["", "a1.0", "1.0-", "x:1.0", "1.0_2", "1.0-1~bpo12+1"] {
            let mapped = bad.parse::<DebianVersion>().and_then(|v| v.to_semver());
            assert!(mapped.is_err(), "{bad:?}: {mapped:?}");
        }
    }
}
