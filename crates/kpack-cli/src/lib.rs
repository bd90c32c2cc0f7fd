//! What the kpack binaries (`kpack-get`, `kpack-pack`, `kpack-repo`) share
//! and their libraries never carry: the one renderer of a failure for
//! people (`error: ...`, `caused by: ...`, `hint: ...` on stderr, a closed
//! pipe ignored), the exit codes every binary documents, sizes and counts
//! as people read them, and the printer and report `schema` of the
//! publisher tools.
#![forbid(unsafe_code)]

mod bytes;
mod printer;
mod words;

pub use bytes::ByteSize;
pub use printer::{write_out, JsonArg, OutputArgs, Printer, SCHEMA};
pub use words::{counted, plural};

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

/// The command failed; a binary documents any more precise codes it has.
pub const FAILURE: u8 = 1;

/// The lines that tell `error` to a person: the error, each cause said
/// once (see [`kpack_error::messages`]), then the hint, if any.
pub fn render(error: &dyn Error, hint: Option<&str>) -> Vec<String> {
    let mut messages = kpack_error::messages(error).into_iter();
    let mut lines = Vec::new();
    if let Some(first) = messages.next() {
        lines.push(format!("error: {first}"));
    }
    lines.extend(messages.map(|cause| format!("  caused by: {cause}")));
    if let Some(hint) = hint {
        lines.push(format!("hint: {hint}"));
    }
    lines
}

/// Writes a line to stderr; a closed stderr is not a crash.
pub fn write_err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Tells `error` (and `hint`) on stderr and gives the exit `code`.
pub fn fail(error: &dyn Error, hint: Option<&str>, code: u8) -> ExitCode {
    for line in render(error, hint) {
        write_err(&line);
    }
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1
                .as_deref()
                .map(|layer| layer as &(dyn Error + 'static))
        }
    }

    #[test]
    fn a_failure_is_the_error_its_causes_and_the_hint() {
        let error = Layer(
            "cannot mirror",
            Some(Box::new(Layer("index.toml: bad signature", None))),
        );
        assert_eq!(
            render(&error, Some("check the key")),
            [
                "error: cannot mirror",
                "  caused by: index.toml: bad signature",
                "hint: check the key",
            ]
        );
    }
}
