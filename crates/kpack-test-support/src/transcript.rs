//! A command's output as one text for a snapshot: exit code, stdout and
//! stderr, with what differs between runs (temporary paths, ports, times)
//! replaced by placeholders.

use std::error::Error;
use std::process::Output;

/// Exit code, stdout and stderr; each `(text, placeholder)` of `masks`
/// replaced, then every `YYYY-MM-DDTHH:MM:SSZ` time by `<TIME>`, every
/// `N.N s` duration by `<SECONDS> s` and every minisign key id by
/// `<KEYID>`.
pub fn transcript(output: &Output, masks: &[(&str, &str)]) -> String {
    let mut text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for (from, to) in masks {
        text = text.replace(from, to);
    }
    mask_key_ids(&mask_durations(&mask_times(&text)))
}

/// A library error as the tools print it, for a snapshot: its message,
/// then each cause on a `caused by:` line, each `(text, placeholder)` of
/// `masks` replaced and key ids masked.
pub fn error_chain(error: &dyn Error, masks: &[(&str, &str)]) -> String {
    let mut text = kpack_error::messages(error).join("\n  caused by: ");
    for (from, to) in masks {
        text = text.replace(from, to);
    }
    mask_key_ids(&text)
}

/// Replaces each `prefix` and the run of characters `part` accepts after
/// it with `placeholder`: for what changes between runs after a fixed
/// start (`0x4008`, a temporary directory's random suffix).
pub fn mask_run(text: &str, prefix: &str, placeholder: &str, part: fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        out.push_str(placeholder);
        rest = rest[at + prefix.len()..].trim_start_matches(part);
    }
    out.push_str(rest);
    out
}

/// Replaces every minisign key id (a word of 16 upper-case hexadecimal
/// digits, new with every key pair) with `<KEYID>`.
pub fn mask_key_ids(text: &str) -> String {
    text.split_inclusive(|c: char| !c.is_ascii_alphanumeric())
        .map(|word| {
            let id = word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            let is_id = id.len() == 16 && id.chars().all(|c| matches!(c, '0'..='9' | 'A'..='F'));
            if is_id {
                word.replacen(id, "<KEYID>", 1)
            } else {
                word.to_owned()
            }
        })
        .collect()
}

/// Replaces every duration in seconds with a decimal point (`1.2 s`) with
/// `<SECONDS> s`.
pub fn mask_durations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" s") {
        let (before, after) = rest.split_at(at);
        let number = before.len()
            - before
                .bytes()
                .rev()
                .take_while(|b| b.is_ascii_digit() || *b == b'.')
                .count();
        let duration = &before[number..];
        let ends = !after[2..].starts_with(|c: char| c.is_alphanumeric());
        let whole = number == 0 || !before[..number].ends_with(|c: char| c.is_alphanumeric());
        if ends && whole && duration.contains('.') && !duration.starts_with('.') {
            out.push_str(&before[..number]);
            out.push_str("<SECONDS>");
        } else {
            out.push_str(before);
        }
        out.push_str(" s");
        rest = &after[2..];
    }
    out.push_str(rest);
    out
}

/// Replaces every `YYYY-MM-DDTHH:MM:SSZ` time with `<TIME>`.
pub fn mask_times(text: &str) -> String {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:ddZ";
    let bytes = text.as_bytes();
    let fits = |at: usize| {
        bytes.len() >= at + SHAPE.len()
            && SHAPE.iter().zip(&bytes[at..]).all(|(s, b)| match s {
                b'd' => b.is_ascii_digit(),
                _ => s == b,
            })
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(ch) = text[at..].chars().next() {
        if fits(at) {
            out.push_str("<TIME>");
            at += SHAPE.len();
        } else {
            out.push(ch);
            at += ch.len_utf8();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_masked_and_the_rest_kept() {
        assert_eq!(
            super::mask_times("expires 2026-12-23T13:43:42Z) é 2026-12-23"),
            "expires <TIME>) é 2026-12-23"
        );
    }

    #[test]
    fn a_run_after_its_prefix_is_masked() {
        assert_eq!(
            super::mask_run("at 0x4008, not 0x2000x", "0x", "<ADDR>", |c| c
                .is_ascii_hexdigit()),
            "at <ADDR>, not <ADDR>x"
        );
    }

    #[test]
    fn key_ids_are_masked_and_other_words_kept() {
        assert_eq!(
            super::mask_key_ids("key id: BEA3B35A16DDBC3A differs; DEADBEEF, 0123456789abcdef"),
            "key id: <KEYID> differs; DEADBEEF, 0123456789abcdef"
        );
    }

    #[test]
    fn durations_are_masked_and_other_numbers_kept() {
        assert_eq!(
            super::mask_durations("built in 1.25 s, 3 s, v1.2 s; 10.5 MiB; 0.3 seconds"),
            "built in <SECONDS> s, 3 s, v1.2 s; 10.5 MiB; 0.3 seconds"
        );
    }
}
