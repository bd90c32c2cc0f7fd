//! Download progress for people: a bar per file and a total on a terminal,
//! plain lines otherwise.

use std::collections::HashMap;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kpack_cli::ByteSize;
use kpack_repo_index::fetch::Progress;
use kpack_repo_index::Sha256;

use crate::printer::{write_err, Printer};

/// A file a download fetches: what users call it (the host part, kernels
/// for a target), its size, and how much of it the cache has already
/// (all of it when cached, a partial download's kept bytes).
#[derive(Debug, Clone)]
pub struct PlannedFile {
    pub label: String,
    pub size: u64,
    pub have: u64,
}

/// The files of a download, by the hash of the bytes served.
pub type Files = HashMap<Sha256, PlannedFile>;

/// Bars on a terminal: one per file, and a total of the bytes fetched in
/// this run against the bytes this run has to fetch.
#[derive(Debug)]
pub struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    planned: Files,
    files: Mutex<HashMap<Sha256, ProgressBar>>,
}

impl Bars {
    /// Bars for a download of `planned`, whose total is what the cache
    /// does not have.
    pub fn new(planned: Files) -> Bars {
        let to_fetch = planned
            .values()
            .map(|p| p.size.saturating_sub(p.have))
            .sum();
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let total = multi.add(ProgressBar::new(to_fetch));
        total.set_style(style(
            "{prefix} [{bar:20}] {bytes}/{total_bytes} {bytes_per_sec}, {eta} left",
        ));
        total.set_prefix("total");
        Bars {
            multi,
            total,
            planned,
            files: Mutex::new(HashMap::new()),
        }
    }

    pub fn finish(&self) {
        self.total.finish_and_clear();
    }
}

/// A bar style from `template`; the templates' lines fit 80 columns with
/// sizes up to `999.99 MiB`.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Progress for Bars {
    fn start(&self, id: &Sha256, name: &str, total: u64, position: u64) {
        let Ok(mut files) = self.files.lock() else {
            return;
        };
        let planned = self.planned.get(id);
        let label = planned.map_or(name, |p| p.label.as_str());
        let mut first = false;
        let bar = files.entry(*id).or_insert_with(|| {
            first = true;
            let bar = self
                .multi
                .insert_before(&self.total, ProgressBar::new(total));
            bar.set_style(style("{msg:30!} [{bar:20}] {bytes}/{total_bytes}"));
            bar.set_message(label.to_owned());
            bar
        });
        // The total was planned from where each file would start; a file
        // starting elsewhere (its partial bytes discarded, or fetched
        // meanwhile by another kpack-get), or restarting, moves its end.
        let expected = match first {
            true => planned.map_or(0, |p| p.have),
            false => bar.position(),
        };
        let length = (self.total.length().unwrap_or(0) + expected).saturating_sub(position);
        self.total.set_length(length.max(self.total.position()));
        bar.set_position(position);
    }

    fn advance(&self, id: &Sha256, bytes: u64) {
        if let Ok(files) = self.files.lock() {
            if let Some(bar) = files.get(id) {
                bar.inc(bytes);
            }
        }
        self.total.inc(bytes);
        crate::interrupt::fetched(bytes);
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
    planned: Files,
    names: Mutex<HashMap<Sha256, (String, u64)>>,
}

impl Lines {
    pub fn new(printer: Printer, planned: Files) -> Lines {
        Lines {
            printer,
            planned,
            names: Mutex::new(HashMap::new()),
        }
    }
}

impl Progress for Lines {
    fn start(&self, id: &Sha256, name: &str, total: u64, _position: u64) {
        let label = self.planned.get(id).map_or(name, |p| p.label.as_str());
        if let Ok(mut names) = self.names.lock() {
            names.insert(*id, (label.to_owned(), total));
        }
    }

    fn advance(&self, _id: &Sha256, bytes: u64) {
        crate::interrupt::fetched(bytes);
    }

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
