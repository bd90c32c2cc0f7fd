//! Download progress for people: a bar per file and a total on a terminal,
//! plain lines otherwise.

use std::collections::HashMap;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kpack_cli::ByteSize;
use kpack_repo_index::fetch::Progress;
use kpack_repo_index::Sha256;

use crate::printer::{write_err, Printer};

/// Bars on a terminal.
#[derive(Debug)]
pub struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    files: Mutex<HashMap<Sha256, ProgressBar>>,
}

impl Bars {
    pub fn new(total_bytes: u64) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let total = multi.add(ProgressBar::new(total_bytes));
        total.set_style(
            ProgressStyle::with_template(
                "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        total.set_prefix("total");
        Bars {
            multi,
            total,
            files: Mutex::new(HashMap::new()),
        }
    }

    pub fn finish(&self) {
        self.total.finish_and_clear();
    }
}

impl Progress for Bars {
    fn start(&self, id: &Sha256, name: &str, total: u64, position: u64) {
        let Ok(mut files) = self.files.lock() else {
            return;
        };
        let bar = files.entry(*id).or_insert_with(|| {
            let bar = self
                .multi
                .insert_before(&self.total, ProgressBar::new(total));
            bar.set_style(
                ProgressStyle::with_template("{msg:>40!} [{bar:20}] {bytes}/{total_bytes}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_message(name.rsplit('/').next().unwrap_or(name).to_owned());
            bar
        });
        let previous = bar.position();
        bar.set_position(position);
        // A restart takes back what the file had counted.
        self.total
            .set_position((self.total.position() + position).saturating_sub(previous));
    }

    fn advance(&self, id: &Sha256, bytes: u64) {
        if let Ok(files) = self.files.lock() {
            if let Some(bar) = files.get(id) {
                bar.inc(bytes);
            }
        }
        self.total.inc(bytes);
    }

    fn finish(&self, id: &Sha256, _cached: bool) {
        if let Ok(mut files) = self.files.lock() {
            if let Some(bar) = files.remove(id) {
                bar.finish_and_clear();
            }
        }
    }

    fn note(&self, text: &str) {
        let _ = self.multi.println(format!("note: {text}"));
    }
}

/// Plain lines, one per finished file (not with -q or --json).
#[derive(Debug)]
pub struct Lines {
    printer: Printer,
    names: Mutex<HashMap<Sha256, (String, u64)>>,
}

impl Lines {
    pub fn new(printer: Printer) -> Lines {
        Lines {
            printer,
            names: Mutex::new(HashMap::new()),
        }
    }
}

impl Progress for Lines {
    fn start(&self, id: &Sha256, name: &str, total: u64, _position: u64) {
        if let Ok(mut names) = self.names.lock() {
            names.insert(*id, (name.to_owned(), total));
        }
    }

    fn advance(&self, _id: &Sha256, _bytes: u64) {}

    fn finish(&self, id: &Sha256, cached: bool) {
        let entry = self.names.lock().ok().and_then(|mut n| n.remove(id));
        if let Some((name, total)) = entry {
            if !self.printer.quiet && !self.printer.json {
                let how = if cached { "cached" } else { "downloaded" };
                write_err(&format!("{how} {name} ({})", ByteSize(total)));
            }
        }
    }

    fn note(&self, text: &str) {
        self.printer.note(text);
    }
}
