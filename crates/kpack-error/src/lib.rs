//! An error and its causes, each said once: the one walk of an error chain
//! that every tool's messages use, on one line (`cannot open x: No such
//! file`) for notes and logs, or one message a line for the binaries'
//! renderer (`error:`, `caused by:`).
//!
//! A cause whose text a message before it already says (an error that
//! names its cause in its own message, as minisign's and reqwest's do) is
//! left out, so nothing is printed twice.
#![forbid(unsafe_code)]

use std::error::Error;
use std::fmt;

/// The messages of `error` and of each of its causes, outermost first,
/// leaving out a cause a message before it already says.
pub fn messages(error: &dyn Error) -> Vec<String> {
    let mut messages = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !messages.iter().any(|said| said.contains(text.trim_end())) {
            messages.push(text);
        }
        cause = next.source();
    }
    messages
}

/// An error and its causes on one line, joined with `: `.
#[derive(Debug, Clone, Copy)]
pub struct OneLine<'a>(pub &'a dyn Error);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&messages(self.0).join(": "))
    }
}

/// `error` and its causes on one line (see [`OneLine`]).
pub fn one_line(error: &dyn Error) -> String {
    OneLine(error).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
    fn each_cause_is_said_once() {
        let inner = Layer("refused", None);
        let middle = Layer("connect: refused", Some(Box::new(inner)));
        let outer = Layer("cannot fetch", Some(Box::new(middle)));
        assert_eq!(messages(&outer), ["cannot fetch", "connect: refused"]);
        assert_eq!(one_line(&outer), "cannot fetch: connect: refused");
    }

    #[test]
    fn a_cause_said_by_any_earlier_message_is_left_out() {
        let inner = Layer("refused", None);
        let middle = Layer("connect", Some(Box::new(inner)));
        let outer = Layer("cannot fetch: refused", Some(Box::new(middle)));
        assert_eq!(messages(&outer), ["cannot fetch: refused", "connect"]);
    }
}
