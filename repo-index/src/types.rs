//! Values an index carries that are parsed, not trusted: package names,
//! relative paths, hashes, the targets device code is listed for, the
//! component it belongs to, dependency requirements, timestamps.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a value from an index is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct InvalidValue {
    pub value: String,
    pub reason: &'static str,
}

fn invalid(value: &str, reason: &'static str) -> InvalidValue {
    InvalidValue {
        value: value.to_owned(),
        reason,
    }
}

/// Implements serde through `FromStr` and `Display`.
macro_rules! string_serde {
    ($type:ty) => {
        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A package name: `[a-z0-9][a-z0-9._-]*`, so it is safe as a path part.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageName(String);

impl PackageName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of a repository nobody named (publishing's).
    #[cfg(feature = "publish")]
    pub(crate) fn fallback() -> PackageName {
        PackageName("kpack".to_owned())
    }
}

/// Whether `s` is spelt as a name: `[a-z0-9][a-z0-9._-]*`.
fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && bytes.all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

impl FromStr for PackageName {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if is_name(s) {
            Ok(PackageName(s.to_owned()))
        } else {
            Err(invalid(s, "a package name is [a-z0-9][a-z0-9._-]*"))
        }
    }
}

impl fmt::Display for PackageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(PackageName);

/// The kind of device code an artifact carries for its targets
/// (04-repo-index.md): `kernels`, the kpack archive of a fat library (the
/// default), or a library's own per-target files such as `tensile`
/// (rocBLAS's kernel database). A GPU takes one artifact of each component
/// of a package version. Spelt like a name: `[a-z0-9][a-z0-9._-]*`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Component(Cow<'static, str>);

impl Component {
    /// `kernels`: what a device artifact that names no component carries.
    pub const KERNELS: Component = Component(Cow::Borrowed("kernels"));

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the default component, which an index leaves
    /// unsaid.
    pub fn is_default(&self) -> bool {
        *self == Component::KERNELS
    }
}

impl FromStr for Component {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if is_name(s) {
            Ok(Component(Cow::Owned(s.to_owned())))
        } else {
            Err(invalid(s, "a component is [a-z0-9][a-z0-9._-]*"))
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(Component);

/// A path inside a repository or a prefix: relative, `/`-separated, with
/// no empty, `.` or `..` parts, so joining it to a root stays inside.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativePath(String);

impl RelativePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `packages/<name>/<sha256>.toml`: valid by construction.
    pub fn usual_shard(name: &PackageName, sha256: &Sha256) -> RelativePath {
        RelativePath(format!("packages/{name}/{sha256}.toml"))
    }

    /// The directories above this path, outermost first (`a`, `a/b` for
    /// `a/b/c`): valid, as parts of a valid path.
    pub fn parents(&self) -> Vec<RelativePath> {
        self.0
            .match_indices('/')
            .map(|(at, _)| RelativePath(self.0[..at].to_owned()))
            .collect()
    }

    /// The last part: the file's own name.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }
}

impl FromStr for RelativePath {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(invalid(s, "empty path"));
        }
        // A colon in the first part could read as a URL scheme or a drive.
        let first = s.split('/').next().unwrap_or(s);
        if s.starts_with('/') || s.contains('\\') || first.contains(':') {
            return Err(invalid(s, "must be a relative path with / separators"));
        }
        if s.split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(invalid(s, "must not contain empty, . or .. parts"));
        }
        if s.bytes().any(|b| b.is_ascii_control()) {
            return Err(invalid(s, "must not contain control characters"));
        }
        Ok(RelativePath(s.to_owned()))
    }
}

impl fmt::Display for RelativePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(RelativePath);

/// A SHA-256 digest, written as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256([u8; 32]);

impl Sha256 {
    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Sha256 {
        use sha2::Digest;
        Sha256(sha2::Sha256::digest(data).into())
    }

    /// The digest and size of the file at `path`, read once in blocks.
    /// Errors name the path.
    pub fn of_file(path: &std::path::Path) -> std::io::Result<(Sha256, u64)> {
        Sha256::of_reader(fs_err::File::open(path)?)
    }

    /// The digest and size of everything `reader` yields.
    pub fn of_reader(reader: impl std::io::Read) -> std::io::Result<(Sha256, u64)> {
        let mut hashing = HashingReader::new(reader);
        std::io::copy(&mut hashing, &mut std::io::sink())?;
        Ok(hashing.finish())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Sha256 {
        Sha256(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// A reader that hashes and counts the bytes that pass through it, so a
/// copy and its check are one read.
#[derive(Debug)]
pub struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
    size: u64,
}

impl<R> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        use sha2::Digest;
        HashingReader {
            inner,
            hasher: sha2::Sha256::new(),
            size: 0,
        }
    }

    /// The digest and size of what was read.
    pub fn finish(self) -> (Sha256, u64) {
        use sha2::Digest;
        (Sha256(self.hasher.finalize().into()), self.size)
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
}

/// A writer that hashes and counts the bytes written through it, so a
/// download is written and checked in one pass.
#[derive(Debug)]
pub struct HashingWriter<W> {
    inner: W,
    hasher: sha2::Sha256,
    size: u64,
}

impl<W> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        use sha2::Digest;
        HashingWriter {
            inner,
            hasher: sha2::Sha256::new(),
            size: 0,
        }
    }

    /// Continues a file whose first bytes are already in place (a resumed
    /// download): what `existing` yields is hashed and counted, not written.
    pub fn resume(inner: W, existing: impl std::io::Read) -> std::io::Result<Self> {
        let mut reader = HashingReader::new(existing);
        std::io::copy(&mut reader, &mut std::io::sink())?;
        Ok(HashingWriter {
            inner,
            hasher: reader.hasher,
            size: reader.size,
        })
    }

    /// The bytes hashed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The digest and size of what was written, and the writer.
    pub fn finish(self) -> (Sha256, u64, W) {
        use sha2::Digest;
        (Sha256(self.hasher.finalize().into()), self.size, self.inner)
    }
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl FromStr for Sha256 {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(invalid(s, "a sha256 is 64 lowercase hex digits"));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            match (digit(pair[0]), digit(pair[1])) {
                (Some(high), Some(low)) => out[i] = high << 4 | low,
                _ => return Err(invalid(s, "a sha256 is 64 lowercase hex digits")),
            }
        }
        Ok(Sha256(out))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({self})")
    }
}

string_serde!(Sha256);

/// What an artifact's device code is listed for: a GPU target
/// (`gfx90a:sramecc+:xnack-`, `gfx1100`, a generic `gfx11-generic`) or a
/// family name (`gfx110X-dgpu`, or a repository's own), told apart once,
/// when the index is read. A target is written back in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listed {
    Target(rocm_kpack::Target),
    Family(String),
}

impl Listed {
    /// Whether `processor` is spelt as a GPU processor (`gfx` and hex
    /// digits) or a generic target (`gfx10-3-generic`), not a family.
    fn is_processor(processor: &str) -> bool {
        let Some(rest) = processor.strip_prefix("gfx") else {
            return false;
        };
        match rest.strip_suffix("-generic") {
            Some(version) => {
                !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit() || b == b'-')
            }
            None => {
                !rest.is_empty() && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            }
        }
    }
}

impl FromStr for Listed {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match rocm_kpack::Target::parse(s) {
            Ok(target) if Listed::is_processor(target.processor()) => Ok(Listed::Target(target)),
            Ok(target) if target.features().is_empty() => Ok(Listed::Family(s.to_owned())),
            _ => Err(invalid(
                s,
                "a GPU target (gfx90a:xnack-), a generic target or a family name",
            )),
        }
    }
}

impl fmt::Display for Listed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listed::Target(target) => target.fmt(f),
            Listed::Family(name) => f.write_str(name),
        }
    }
}

string_serde!(Listed);

/// A dependency: `"rocm-core >=5.5, <6"` (a name, then a semver
/// requirement; no requirement means any version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: PackageName,
    pub requirement: semver::VersionReq,
}

impl FromStr for Dependency {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        let (name, requirement) =
            match trimmed.find(|c: char| c.is_whitespace() || "<>=^~*".contains(c)) {
                Some(at) => (&trimmed[..at], trimmed[at..].trim()),
                None => (trimmed, ""),
            };
        let name: PackageName = name
            .parse()
            .map_err(|_| invalid(s, "a dependency starts with a package name"))?;
        let requirement = if requirement.is_empty() {
            semver::VersionReq::STAR
        } else {
            requirement
                .parse()
                .map_err(|_| invalid(s, "the requirement is not a semver requirement"))?
        };
        Ok(Dependency { name, requirement })
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirement == semver::VersionReq::STAR {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{} {}", self.name, self.requirement)
        }
    }
}

string_serde!(Dependency);

/// A point in time, written as a TOML datetime in UTC
/// (`2026-11-21T10:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub jiff::Timestamp);

impl Timestamp {
    /// Seconds since the Unix epoch.
    pub fn from_second(seconds: i64) -> Option<Timestamp> {
        jiff::Timestamp::from_second(seconds).ok().map(Timestamp)
    }

    pub fn now() -> Timestamp {
        Timestamp(jiff::Timestamp::now())
    }

    pub fn as_second(&self) -> i64 {
        self.0.as_second()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Whole seconds, UTC, as the index writes them.
        write!(f, "{}", self.0.strftime("%Y-%m-%dT%H:%M:%SZ"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let datetime: toml::value::Datetime = self
            .to_string()
            .parse()
            .map_err(serde::ser::Error::custom)?;
        datetime.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let datetime = toml::value::Datetime::deserialize(deserializer)?;
        if datetime.date.is_none() || datetime.time.is_none() || datetime.offset.is_none() {
            return Err(serde::de::Error::custom(
                "a timestamp needs a date, a time and a UTC offset (2026-11-21T10:00:00Z)",
            ));
        }
        datetime
            .to_string()
            .parse::<jiff::Timestamp>()
            .map(Timestamp)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashing_reader_sees_what_a_copy_moves() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut hashing = HashingReader::new(&data[..]);
        let mut copied = Vec::new();
        std::io::copy(&mut hashing, &mut copied).unwrap();
        assert_eq!(copied, data);
        assert_eq!(hashing.finish(), (Sha256::of(&data), data.len() as u64));
        assert_eq!(
            Sha256::of_reader(&data[..]).unwrap(),
            (Sha256::of(&data), 300_000)
        );
    }

    #[test]
    fn a_resumed_hashing_writer_hashes_the_whole_file_but_writes_only_the_rest() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (existing, rest) = data.split_at(123_457);
        let mut writer = HashingWriter::resume(Vec::new(), existing).unwrap();
        std::io::Write::write_all(&mut writer, rest).unwrap();
        assert_eq!(writer.size(), 300_000);
        let (sha256, size, written) = writer.finish();
        assert_eq!((sha256, size), (Sha256::of(&data), 300_000));
        assert_eq!(written, rest);
    }

    #[test]
    fn package_names_are_path_safe() {
        for good in ["rocm-blas", "rocm.core_2", "0ad"] {
            assert!(good.parse::<PackageName>().is_ok(), "{good}");
        }
        for bad in ["", "Rocm", "-x", "a/b", "..", "a b", "rocm/../x"] {
            assert!(bad.parse::<PackageName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn components_are_names_and_kernels_is_the_default() {
        let tensile: Component = "tensile".parse().unwrap();
        assert_eq!(tensile.as_str(), "tensile");
        assert!(!tensile.is_default());
        assert_eq!("kernels".parse::<Component>().unwrap(), Component::KERNELS);
        assert!(Component::KERNELS.is_default());
        for good in ["hipblaslt", "aotriton-0.9", "miopen_db"] {
            assert!(good.parse::<Component>().is_ok(), "{good}");
        }
        for bad in ["", "Tensile", "-x", "a/b", "a b", ".."] {
            assert!(bad.parse::<Component>().is_err(), "{bad}");
        }
    }

    #[test]
    fn relative_paths_stay_inside() {
        for good in ["pool/rocm/5.5.1/a.kpack", "share/man/man3/Foo::Bar.3pm"] {
            assert!(good.parse::<RelativePath>().is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "pool/../../x",
            "a//b",
            "./a",
            "a\\b",
            "c:/x",
            "https:/x",
            "a/",
        ] {
            assert!(bad.parse::<RelativePath>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_relative_path_knows_its_parents_and_name() {
        let path: RelativePath = "lib/rocm/librocrand.so".parse().unwrap();
        let parents: Vec<String> = path.parents().iter().map(ToString::to_string).collect();
        assert_eq!(parents, ["lib", "lib/rocm"]);
        assert_eq!(path.file_name(), "librocrand.so");
        let top: RelativePath = "README".parse().unwrap();
        assert!(top.parents().is_empty());
        assert_eq!(top.file_name(), "README");
    }

    #[test]
    fn listed_names_are_targets_or_families() {
        let listed = |text: &str| text.parse::<Listed>().unwrap();
        for target in [
            "gfx90a:xnack-",
            "gfx1100",
            "gfx11-generic",
            "gfx10-3-generic",
        ] {
            assert!(matches!(listed(target), Listed::Target(_)), "{target}");
            assert_eq!(listed(target).to_string(), target);
        }
        for family in ["gfx110X-dgpu", "gfx94x", "gfx90X-all", "mi300"] {
            assert_eq!(listed(family), Listed::Family(family.to_owned()));
        }
        assert_eq!(
            listed("gfx90a:xnack-:sramecc+").to_string(),
            "gfx90a:sramecc+:xnack-"
        );
        for bad in ["", "gfx110X-dgpu:xnack+", "gfx90a:xnack", "a b"] {
            assert!(bad.parse::<Listed>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sha256_round_trips_as_hex() {
        let digest = Sha256::of(b"abc");
        let text = digest.to_string();
        assert_eq!(
            text,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(text.parse::<Sha256>().unwrap(), digest);
        assert!(text.to_uppercase().parse::<Sha256>().is_err());
        assert!(text[..63].parse::<Sha256>().is_err());
    }

    #[test]
    fn dependencies_parse_name_and_requirement() {
        let dependency: Dependency = "rocm-core >=5.5, <6".parse().unwrap();
        assert_eq!(dependency.name.as_str(), "rocm-core");
        assert!(dependency
            .requirement
            .matches(&semver::Version::new(5, 7, 0)));
        assert!(!dependency
            .requirement
            .matches(&semver::Version::new(6, 0, 0)));
        assert_eq!(dependency.to_string(), "rocm-core >=5.5, <6");
        let any: Dependency = "rocm-core".parse().unwrap();
        assert_eq!(any.to_string(), "rocm-core");
        assert!("rocm-core >= banana".parse::<Dependency>().is_err());
        assert!("Bad>=1".parse::<Dependency>().is_err());
    }
}
