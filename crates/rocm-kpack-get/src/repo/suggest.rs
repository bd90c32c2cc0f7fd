//! "Did you mean": the packages a name typed may stand for, by spelling
//! and by the distribution packages the indexes record their versions
//! were built from (`librocrand1` -> `rocm-rand`).

use kpack_repo_index::PackageName;

use super::Repo;

/// How near in spelling a name must be to be suggested: one edit in
/// four or fewer (normalised Damerau-Levenshtein).
const NEAR: f64 = 0.75;

/// At most this many suggestions are made.
const MOST: usize = 3;

/// The packages of `repos` that `typed` may stand for, nearest first:
/// those built from a distribution package of that name, then names
/// spelled nearly alike.
pub fn suggestions(repos: &[Repo], typed: &PackageName) -> Vec<PackageName> {
    let typed = typed.as_str();
    let mut built: Vec<PackageName> = Vec::new();
    let mut near: Vec<(f64, PackageName)> = Vec::new();
    for (name, entry) in repos.iter().flat_map(|r| &r.root.packages) {
        if entry.built_from.iter().any(|source| source == typed) {
            built.push(name.clone());
            continue;
        }
        let score = likeness(typed, name.as_str());
        if score >= NEAR {
            near.push((score, name.clone()));
        }
    }
    near.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    built.extend(near.into_iter().map(|(_, name)| name));
    let mut seen = Vec::new();
    built.retain(|name| {
        let new = !seen.contains(name);
        seen.push(name.clone());
        new
    });
    built.truncate(MOST);
    built
}

/// How alike two names are, 0 to 1; separators do not count, so
/// `rocrand` is near `rocm-rand`.
fn likeness(typed: &str, name: &str) -> f64 {
    let bare = |s: &str| s.replace(['-', '_', '.'], "");
    let alike = strsim::normalized_damerau_levenshtein;
    alike(typed, name).max(alike(&bare(typed), &bare(name)))
}

#[cfg(test)]
mod tests {
    use super::likeness;

    #[test]
    fn typos_and_short_forms_are_near_unrelated_names_are_not() {
        for (typed, name) in [
            ("rocm-rnad", "rocm-rand"),
            ("rocrand", "rocm-rand"),
            ("rocm-blass", "rocm-blas"),
        ] {
            assert!(likeness(typed, name) >= super::NEAR, "{typed} {name}");
        }
        for (typed, name) in [
            ("rocm-rand", "rocm-blas"),
            ("rocm-rand", "rocm-fft"),
            ("torch", "rocm-rand"),
        ] {
            assert!(likeness(typed, name) < super::NEAR, "{typed} {name}");
        }
    }
}
