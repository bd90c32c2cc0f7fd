//! Checking installed files against the install record (`kpack-get
//! verify`): read only, never through a link inside the prefix.

use std::fmt;
use std::path::{Path, PathBuf};

use kpack_fs::confined::ConfinedDir;
use kpack_repo_index::{PackageName, RelativePath, Sha256};

use super::record::InstalledFile;
use super::{InstallError, Prefix};

/// A file whose contents differ from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub package: PackageName,
    pub path: RelativePath,
    pub problem: Problem,
}

/// How an installed file differs from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A symbolic link points elsewhere.
    Link { actual: PathBuf, recorded: String },
    /// A file's contents changed.
    Contents {
        actual: Sha256,
        size: u64,
        recorded: Sha256,
    },
    /// It is not there.
    Missing,
    /// It cannot be read.
    Unreadable(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Link { actual, recorded } => {
                write!(
                    f,
                    "modified: links to {}, recorded {recorded}",
                    actual.display()
                )
            }
            Problem::Contents {
                actual,
                size,
                recorded,
            } => write!(
                f,
                "modified: sha256 {actual} ({size} bytes), recorded {recorded}"
            ),
            Problem::Missing => f.write_str("missing"),
            Problem::Unreadable(error) => write!(f, "unreadable: {error}"),
        }
    }
}

impl Prefix {
    /// Re-hashes every installed file against the record; reads only, and
    /// never through a link inside the prefix.
    pub fn verify(&self) -> Result<(usize, Vec<Mismatch>), InstallError> {
        let record = self.record()?;
        let root = match self.paths.root() {
            Ok(root) => Some(root),
            Err(InstallError::Confined(error)) if error.is_not_found() => None,
            Err(error) => return Err(error),
        };
        let mut checked = 0;
        let mut mismatches = Vec::new();
        for (name, package) in &record.packages {
            for file in &package.files {
                checked += 1;
                let problem = match &root {
                    Some(root) => check_file(root, file),
                    None => Some(Problem::Unreadable(format!(
                        "{} does not exist",
                        self.paths.prefix.display()
                    ))),
                };
                if let Some(problem) = problem {
                    mismatches.push(Mismatch {
                        package: name.clone(),
                        path: file.path.clone(),
                        problem,
                    });
                }
            }
        }
        Ok((checked, mismatches))
    }
}

/// How an installed file differs from its record, if it does.
fn check_file(root: &ConfinedDir, file: &InstalledFile) -> Option<Problem> {
    let path = Path::new(file.path.as_str());
    let unreadable = |error: &std::io::Error| match error.kind() {
        std::io::ErrorKind::NotFound => Some(Problem::Missing),
        _ => Some(Problem::Unreadable(error.to_string())),
    };
    match (&file.link, file.sha256) {
        (Some(link), _) => match root.read_link(path).map_err(std::io::Error::from) {
            Ok(actual) if actual.to_str() == Some(link.as_str()) => None,
            Ok(actual) => Some(Problem::Link {
                actual,
                recorded: link.clone(),
            }),
            Err(error) => unreadable(&error),
        },
        (None, Some(recorded)) => {
            let hashed = root
                .open_file(path)
                .map_err(std::io::Error::from)
                .and_then(Sha256::of_reader);
            match hashed {
                Ok((actual, _)) if actual == recorded => None,
                Ok((actual, size)) => Some(Problem::Contents {
                    actual,
                    size,
                    recorded,
                }),
                Err(error) => unreadable(&error),
            }
        }
        (None, None) => None,
    }
}
