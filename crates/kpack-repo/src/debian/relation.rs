//! Debian relationship fields (`Depends`, `Pre-Depends`; Debian Policy
//! 7.1): comma-separated groups of `|`-separated alternatives, each a
//! package name with an optional `:arch` qualifier and `(op version)`.

use std::fmt;

use super::version::{DebianVersion, VersionError};

/// One package a relation names, with its version constraint if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub package: String,
    pub constraint: Option<(Operator, DebianVersion)>,
}

/// A version operator of a relation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `<<`
    Earlier,
    /// `<=` (and the obsolete `<`)
    EarlierOrEqual,
    /// `=`
    Exactly,
    /// `>=` (and the obsolete `>`)
    LaterOrEqual,
    /// `>>`
    Later,
}

/// A group of alternatives (`a | b`): met by any one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternatives(pub Vec<Relation>);

/// A relationship field Debian would not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelationError {
    #[error("relation {relation:?}: {reason}")]
    Syntax {
        relation: String,
        reason: &'static str,
    },
    #[error("relation {relation:?}")]
    Version {
        relation: String,
        #[source]
        source: VersionError,
    },
}

/// Parses a relationship field's value.
pub fn parse_relations(field: &str) -> Result<Vec<Alternatives>, RelationError> {
    field
        .split(',')
        .map(str::trim)
        .filter(|group| !group.is_empty())
        .map(|group| {
            group
                .split('|')
                .map(|one| parse_relation(one.trim()))
                .collect::<Result<_, _>>()
                .map(Alternatives)
        })
        .collect()
}

fn parse_relation(text: &str) -> Result<Relation, RelationError> {
    let syntax = |reason| RelationError::Syntax {
        relation: text.to_owned(),
        reason,
    };
    let (name, constraint) = match text.split_once('(') {
        Some((name, constraint)) => (name.trim(), Some(constraint)),
        None => (text, None),
    };
    if text.contains('[') || name.contains('<') {
        return Err(syntax(
            "architecture lists and build profiles belong to source packages",
        ));
    }
    // `:any` and `:native` qualify which architecture may satisfy it.
    let package = name.split_once(':').map_or(name, |(package, _)| package);
    let valid = package.len() >= 2
        && package.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && package
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    if !valid {
        return Err(syntax("not a Debian package name"));
    }
    let constraint = match constraint {
        None => None,
        Some(rest) => {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| syntax("the version constraint is not closed"))?
                .trim();
            let (operator, version) = [
                ("<<", Operator::Earlier),
                ("<=", Operator::EarlierOrEqual),
                (">=", Operator::LaterOrEqual),
                (">>", Operator::Later),
                ("=", Operator::Exactly),
                ("<", Operator::EarlierOrEqual),
                (">", Operator::LaterOrEqual),
            ]
            .into_iter()
            .find_map(|(symbol, operator)| inner.strip_prefix(symbol).map(|v| (operator, v)))
            .ok_or_else(|| syntax("the version constraint has no operator"))?;
            let version = version
                .trim()
                .parse()
                .map_err(|source| RelationError::Version {
                    relation: text.to_owned(),
                    source,
                })?;
            Some((operator, version))
        }
    };
    Ok(Relation {
        package: package.to_owned(),
        constraint,
    })
}

impl Relation {
    /// The semver requirement for the repository's mapped versions, which
    /// compares upstream versions: the Debian revision and upstream
    /// suffixes of the constraint are dropped, so `>= 6.1.2-1` is
    /// `>=6.1.2`, `= 5.5.1-7` is `=5.5.1` (every build of 5.5.1), and
    /// `<< 5.5.1-7` is `<=5.5.1` (looser than Debian, never stricter).
    pub fn requirement(&self) -> Result<semver::VersionReq, RelationError> {
        let Some((operator, version)) = &self.constraint else {
            return Ok(semver::VersionReq::STAR);
        };
        let mapped = version
            .requirement_version()
            .map_err(|source| RelationError::Version {
                relation: self.to_string(),
                source,
            })?;
        // Nothing dropped: no revision, nothing after the numbers.
        let exact = version.to_semver().is_ok_and(|v| v.build.is_empty());
        let op = match operator {
            Operator::Earlier if exact => semver::Op::Less,
            Operator::Later if exact => semver::Op::Greater,
            Operator::Earlier | Operator::EarlierOrEqual => semver::Op::LessEq,
            Operator::Later | Operator::LaterOrEqual => semver::Op::GreaterEq,
            Operator::Exactly => semver::Op::Exact,
        };
        Ok(semver::VersionReq {
            comparators: vec![semver::Comparator {
                op,
                major: mapped.major,
                minor: Some(mapped.minor),
                patch: Some(mapped.patch),
                pre: mapped.pre,
            }],
        })
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.package)?;
        if let Some((operator, version)) = &self.constraint {
            let symbol = match operator {
                Operator::Earlier => "<<",
                Operator::EarlierOrEqual => "<=",
                Operator::Exactly => "=",
                Operator::LaterOrEqual => ">=",
                Operator::Later => ">>",
            };
            write!(f, " ({symbol} {version})")?;
        }
        Ok(())
    }
}

impl fmt::Display for Alternatives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, relation) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{relation}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(relation: &str) -> String {
        let groups = parse_relations(relation).unwrap();
        groups[0].0[0].requirement().unwrap().to_string()
    }

    #[test]
    fn operators_map_to_semver_requirements_on_the_upstream_version() {
        assert_eq!(requirement("librocfft0 (>= 6.1.2-1)"), ">=6.1.2");
        assert_eq!(requirement("libamdhip64-5 (>= 5.6.1~)"), ">=5.6.1-0");
        assert_eq!(
            requirement("libamd-comgr2 (>= 6.0+git20231212.4510c28)"),
            ">=6.0.0"
        );
        assert_eq!(requirement("librocblas0 (= 5.5.1+dfsg-7)"), "=5.5.1");
        assert_eq!(requirement("librocblas0 (<< 5.6)"), "<5.6.0");
        assert_eq!(requirement("librocblas0 (<< 5.6-1)"), "<=5.6.0");
        assert_eq!(requirement("librocblas0 (>> 5.5.1)"), ">5.5.1");
        assert_eq!(requirement("librocblas0 (> 5.5.1)"), ">=5.5.1");
        assert_eq!(requirement("librocblas0:any"), "*");
    }

    #[test]
    fn alternatives_and_groups_keep_their_order() {
        let groups =
            parse_relations("libc6 (>= 2.38), libblas3 | libblas.so.3, libgcc-s1").unwrap();
        let shown: Vec<String> = groups.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["libc6 (>= 2.38)", "libblas3 | libblas.so.3", "libgcc-s1"]
        );
    }

    #[test]
    fn malformed_relations_are_refused_with_the_relation() {
        for bad in [
            "Libc6",
            "libc6 (>= 2.38",
            "libc6 (2.38)",
            "libc6 (>= x1)",
            "libc6 [amd64]",
        ] {
            let error = parse_relations(bad).unwrap_err();
            assert!(
                error.to_string().contains(bad.split(' ').next().unwrap()),
                "{error}"
            );
        }
    }
}
