//! An error and its causes on one line (`cannot open x: No such file`), for
//! notes and findings that carry an error as text in a report, where the
//! binary's renderer of errors is not in play.

/// `error` and each of its causes, joined with `: `.
pub fn error_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
