//! Counts said with their nouns: `1 package`, `2 packages`.

/// `one` for a count of 1, `many` otherwise.
pub fn plural<'a>(count: usize, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 {
        one
    } else {
        many
    }
}

/// `1 package`, `2 packages`: the count and its noun, regular or not
/// (`counted(2, "binary", "binaries")`).
pub fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", plural(count, one, many))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(0, "package", "packages"), "0 packages");
        assert_eq!(counted(1, "package", "packages"), "1 package");
        assert_eq!(counted(2, "binary", "binaries"), "2 binaries");
    }
}
