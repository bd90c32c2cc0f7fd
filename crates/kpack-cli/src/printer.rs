//! The one way the publisher tools speak: lines of text on stdout (fewer
//! with `-q`, more with `-v`), warnings and notes on stderr, or, with
//! `--json`, one report document on stdout.

use std::io::Write;

use serde::Serialize;

use crate::write_err;

/// The format version of every report's JSON (`schema`, its first field):
/// fields are added, never repurposed.
pub const SCHEMA: u32 = 1;

/// Options every reporting command takes, listed under their own heading.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct OutputArgs {
    /// Say only warnings and errors.
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = "Global options"
    )]
    pub quiet: bool,
    /// Say more: each item checked or written.
    #[arg(short, long, global = true, help_heading = "Global options")]
    pub verbose: bool,
}

/// `--json`, for a command that reports.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct JsonArg {
    /// Print the report as one JSON object (with its `schema` version)
    /// instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How much to say, and in what form.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printer {
    pub quiet: bool,
    pub verbose: bool,
    pub json: bool,
}

impl Printer {
    /// The printer `output` and `json` ask for.
    pub fn new(output: OutputArgs, json: bool) -> Printer {
        Printer {
            quiet: output.quiet,
            verbose: output.verbose,
            json,
        }
    }

    /// Whether text lines are shown (not with `-q` or `--json`).
    pub fn says(&self) -> bool {
        !self.quiet && !self.json
    }

    /// A line of the command's text output (not with `-q` or `--json`).
    pub fn line(&self, text: impl AsRef<str>) {
        if self.says() {
            write_out(text.as_ref());
        }
    }

    /// A line only with `-v` (never with `--json`).
    pub fn detail(&self, text: impl AsRef<str>) {
        if self.verbose && !self.json {
            write_out(text.as_ref());
        }
    }

    /// A result line that `-q` keeps (a failure, a problem found), not
    /// with `--json`, which carries it in the report.
    pub fn problem(&self, text: impl AsRef<str>) {
        if !self.json {
            write_out(text.as_ref());
        }
    }

    /// Something worth knowing, on stderr (not with `-q`).
    pub fn note(&self, text: impl AsRef<str>) {
        if !self.quiet {
            write_err(&format!("note: {}", text.as_ref()));
        }
    }

    /// A warning, on stderr even with `-q`.
    pub fn warn(&self, text: impl AsRef<str>) {
        write_err(&format!("warning: {}", text.as_ref()));
    }

    /// The command's typed report, with `--json`: one object, its
    /// [`SCHEMA`] version first.
    pub fn report(&self, report: &impl Serialize) {
        if self.json {
            let versioned = Versioned {
                schema: SCHEMA,
                report,
            };
            match serde_json::to_string_pretty(&versioned) {
                Ok(text) => write_out(&text),
                Err(error) => write_err(&format!("error: cannot write the report: {error}")),
            }
        }
    }
}

/// A report with its format version.
#[derive(Serialize)]
struct Versioned<'a, T> {
    schema: u32,
    #[serde(flatten)]
    report: &'a T,
}

/// Writes a line to stdout; a closed pipe (`| head`) ends quietly.
pub fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").is_err() {
        std::process::exit(0);
    }
}
