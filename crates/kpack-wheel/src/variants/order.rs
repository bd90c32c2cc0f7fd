//! Choosing among a release's wheels for one machine (PEP 825): a variant
//! wheel is compatible if every feature it lists has a value the machine
//! supports; compatible variants are ordered by the ranks of their best
//! supported values (namespace, then feature, then value order, most
//! preferred first), more matching features winning a tie, then by label;
//! the property-less `null` variant comes next and non-variant wheels last.

use std::cmp::Ordering;

use super::property::{VariantProperties, VariantProperty};
use crate::filename::VariantLabel;

/// One feature's supported values, most preferred first.
type Feature = (String, Vec<String>);

/// What a machine supports, in preference order: namespaces, each with its
/// features, each with its values, most preferred first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SupportedProperties {
    namespaces: Vec<(String, Vec<Feature>)>,
}

/// (namespace, feature, value) positions: lower is preferred.
type Rank = (usize, usize, usize);

fn position_or_push<T>(list: &mut Vec<(String, T)>, key: &str, new: impl FnOnce() -> T) -> usize {
    match list.iter().position(|(k, _)| k == key) {
        Some(i) => i,
        None => {
            list.push((key.to_owned(), new()));
            list.len() - 1
        }
    }
}

impl SupportedProperties {
    /// From properties in preference order: a namespace ranks where it first
    /// appears, a feature where it first appears in its namespace, a value
    /// where it appears in its feature.
    pub fn new(ordered: impl IntoIterator<Item = VariantProperty>) -> SupportedProperties {
        let mut namespaces: Vec<(String, Vec<Feature>)> = Vec::new();
        for property in ordered {
            let n = position_or_push(&mut namespaces, property.namespace(), Vec::new);
            let features = &mut namespaces[n].1;
            let f = position_or_push(features, property.feature(), Vec::new);
            let values = &mut features[f].1;
            if !values.iter().any(|v| v == property.value()) {
                values.push(property.value().to_owned());
            }
        }
        SupportedProperties { namespaces }
    }

    /// Every supported property, most preferred first.
    pub fn properties(&self) -> Vec<VariantProperty> {
        let mut out = Vec::new();
        for (namespace, features) in &self.namespaces {
            for (feature, values) in features {
                for value in values {
                    if let Ok(property) = VariantProperty::new(namespace, feature, value) {
                        out.push(property);
                    }
                }
            }
        }
        out
    }

    /// Reorders namespaces by a document's `default-priorities.namespace`:
    /// those it lists first, in its order; the others after, as they were.
    pub fn with_namespace_priority(mut self, order: &[String]) -> SupportedProperties {
        let key = |name: &str| order.iter().position(|n| n == name).unwrap_or(order.len());
        self.namespaces.sort_by_key(|(name, _)| key(name));
        self
    }

    /// Whether nothing is supported (a machine without GPUs).
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// The rank of the best supported value among `values`, if any is supported.
    fn rank(&self, namespace: &str, feature: &str, values: &[String]) -> Option<Rank> {
        let n = self
            .namespaces
            .iter()
            .position(|(name, _)| name == namespace)?;
        let features = &self.namespaces[n].1;
        let f = features.iter().position(|(name, _)| name == feature)?;
        let supported = &features[f].1;
        let v = values
            .iter()
            .filter_map(|value| supported.iter().position(|s| s == value))
            .min()?;
        Some((n, f, v))
    }

    /// The sorted ranks of a variant's features; `None` if one feature has
    /// no supported value.
    fn ranks(&self, properties: &VariantProperties) -> Option<Vec<Rank>> {
        let mut ranks = properties
            .features()
            .map(|(namespace, feature, values)| self.rank(namespace, feature, values))
            .collect::<Option<Vec<Rank>>>()?;
        ranks.sort_unstable();
        Some(ranks)
    }
}

/// One wheel of a release, as the ordering sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate<'a> {
    /// A variant wheel: its label, and its properties when the variant
    /// metadata lists the label (a label it does not list is incompatible).
    Variant(&'a VariantLabel, Option<&'a VariantProperties>),
    /// A wheel without a label.
    Plain,
}

/// Where a compatible candidate sorts.
#[derive(Debug, PartialEq, Eq)]
enum Key<'a> {
    Matched(Vec<Rank>, &'a VariantLabel),
    Null(&'a VariantLabel),
    Plain,
}

fn compare_ranks(a: &[Rank], b: &[Rank]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.cmp(y) {
            Ordering::Equal => continue,
            other => return other,
        }
    }
    // Equal so far: more matching features is better (sorts first).
    b.len().cmp(&a.len())
}

impl Key<'_> {
    fn compare(&self, other: &Key<'_>) -> Ordering {
        match (self, other) {
            (Key::Matched(a, la), Key::Matched(b, lb)) => {
                compare_ranks(a, b).then_with(|| la.cmp(lb))
            }
            (Key::Matched(..), _) => Ordering::Less,
            (_, Key::Matched(..)) => Ordering::Greater,
            (Key::Null(a), Key::Null(b)) => a.cmp(b),
            (Key::Null(_), Key::Plain) => Ordering::Less,
            (Key::Plain, Key::Null(_)) => Ordering::Greater,
            (Key::Plain, Key::Plain) => Ordering::Equal,
        }
    }
}

/// The indices of the compatible candidates, best first.
pub fn order_candidates(
    candidates: &[Candidate<'_>],
    supported: &SupportedProperties,
) -> Vec<usize> {
    let mut keyed: Vec<(usize, Key<'_>)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(index, candidate)| {
            let key = match *candidate {
                Candidate::Plain => Key::Plain,
                Candidate::Variant(label, Some(properties)) if properties.is_empty() => {
                    Key::Null(label)
                }
                Candidate::Variant(label, Some(properties)) => {
                    Key::Matched(supported.ranks(properties)?, label)
                }
                Candidate::Variant(_, None) => return None,
            };
            Some((index, key))
        })
        .collect();
    keyed.sort_by(|(ia, a), (ib, b)| a.compare(b).then(ia.cmp(ib)));
    keyed.into_iter().map(|(index, _)| index).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(list: &[&str]) -> VariantProperties {
        list.iter()
            .map(|p| p.parse::<VariantProperty>().unwrap())
            .collect()
    }

    fn supported(list: &[&str]) -> SupportedProperties {
        SupportedProperties::new(list.iter().map(|p| p.parse::<VariantProperty>().unwrap()))
    }

    /// Orders (label, properties) rows (`None` label: a plain wheel;
    /// `Some(None)` properties: a label the metadata does not list) and
    /// returns the labels, `-` standing for a plain wheel.
    fn order(rows: &[(Option<&str>, Option<&[&str]>)], machine: &[&str]) -> Vec<String> {
        let labels: Vec<Option<VariantLabel>> = rows
            .iter()
            .map(|(l, _)| l.map(|l| VariantLabel::new(l).unwrap()))
            .collect();
        let sets: Vec<Option<VariantProperties>> = rows.iter().map(|(_, p)| p.map(props)).collect();
        let candidates: Vec<Candidate<'_>> = labels
            .iter()
            .zip(&sets)
            .map(|(label, set)| match label {
                Some(label) => Candidate::Variant(label, set.as_ref()),
                None => Candidate::Plain,
            })
            .collect();
        order_candidates(&candidates, &supported(machine))
            .into_iter()
            .map(|i| rows[i].0.unwrap_or("-").to_owned())
            .collect()
    }

    const GFX1100: &str = "amd :: gfx_arch :: gfx1100";
    const GFX90A: &str = "amd :: gfx_arch :: gfx90a";
    const GFX1101: &str = "amd :: gfx_arch :: gfx1101";

    #[test]
    fn each_rule_of_the_ordering() {
        type Row<'a> = (Option<&'a str>, Option<&'a [&'a str]>);
        /// (rule, wheels, machine, expected order)
        type Case<'a> = (&'a str, &'a [Row<'a>], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                "an unsupported value makes a variant incompatible",
                &[(Some("a"), Some(&[GFX90A])), (Some("b"), Some(&[GFX1100]))],
                &[GFX1100],
                &["b"],
            ),
            (
                "one supported value of a multi-valued feature is enough",
                &[(Some("a"), Some(&[GFX90A, GFX1100]))],
                &[GFX1100],
                &["a"],
            ),
            (
                "the more preferred value wins",
                &[(Some("a"), Some(&[GFX1101])), (Some("b"), Some(&[GFX1100]))],
                &[GFX1100, GFX1101],
                &["b", "a"],
            ),
            (
                "a multi-valued variant ranks by its best value",
                &[
                    (Some("a"), Some(&[GFX1101])),
                    (Some("b"), Some(&[GFX1101, GFX1100])),
                ],
                &[GFX1100, GFX1101],
                &["b", "a"],
            ),
            (
                "the more preferred namespace wins",
                &[
                    (Some("a"), Some(&["x86_64 :: level :: v3"])),
                    (Some("b"), Some(&[GFX1100])),
                ],
                &[GFX1100, "x86_64 :: level :: v3"],
                &["b", "a"],
            ),
            (
                "the more preferred feature wins",
                &[
                    (Some("a"), Some(&["amd :: rocm :: v7"])),
                    (Some("b"), Some(&[GFX1100])),
                ],
                &[GFX1100, "amd :: rocm :: v7"],
                &["b", "a"],
            ),
            (
                "more matching features win a tie",
                &[
                    (Some("a"), Some(&[GFX1100])),
                    (Some("b"), Some(&[GFX1100, "amd :: rocm :: v7"])),
                ],
                &[GFX1100, "amd :: rocm :: v7"],
                &["b", "a"],
            ),
            (
                "a feature the machine lacks makes it incompatible",
                &[
                    (Some("a"), Some(&[GFX1100, "amd :: rocm :: v7"])),
                    (Some("b"), Some(&[GFX1100])),
                ],
                &[GFX1100],
                &["b"],
            ),
            (
                "equal ranks are ordered by label",
                &[
                    (Some("zz"), Some(&[GFX1100])),
                    (Some("aa"), Some(&[GFX1100])),
                ],
                &[GFX1100],
                &["aa", "zz"],
            ),
            (
                "the null variant follows matched ones, plain wheels come last",
                &[
                    (None, None),
                    (Some("null"), Some(&[])),
                    (Some("g"), Some(&[GFX1100])),
                ],
                &[GFX1100],
                &["g", "null", "-"],
            ),
            (
                "without GPUs only the null variant and plain wheels remain",
                &[
                    (None, None),
                    (Some("g"), Some(&[GFX1100])),
                    (Some("null"), Some(&[])),
                ],
                &[],
                &["null", "-"],
            ),
            (
                "a label the metadata does not describe is not chosen",
                &[(Some("x"), None), (None, None)],
                &[GFX1100],
                &["-"],
            ),
        ];
        for (rule, rows, machine, expected) in cases {
            assert_eq!(order(rows, machine), *expected, "{rule}");
        }
    }

    #[test]
    fn namespace_priorities_reorder_namespaces() {
        let machine = supported(&["x86_64 :: level :: v3", GFX1100])
            .with_namespace_priority(&["amd".to_owned()]);
        let first = machine.properties()[0].to_string();
        assert_eq!(first, GFX1100);
    }

    #[test]
    fn properties_come_back_in_preference_order() {
        let machine = supported(&[GFX90A, GFX1100, GFX90A]);
        let printed: Vec<String> = machine
            .properties()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(printed, [GFX90A, GFX1100]);
    }
}
