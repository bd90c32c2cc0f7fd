//! Where the library's steps say what they find and do for people: the
//! binary's printer implements [`Output`], so no library module writes
//! to stdout or stderr itself.

/// Lines for people, as a step works and when it is done.
pub trait Output {
    /// A line of the command's normal output.
    fn line(&self, text: &str);
    /// A line shown only when more is asked for (`-v`).
    fn detail(&self, text: &str);
    /// Something the user should know about.
    fn note(&self, text: &str);
    /// A warning, shown even when asked to be quiet.
    fn warn(&self, text: &str);
    /// Whether a person watches on a terminal (not quiet, not JSON), so a
    /// tool run for them may show its own progress there.
    fn watched(&self) -> bool {
        false
    }
}
