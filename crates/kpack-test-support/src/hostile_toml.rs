//! The TOML shapes that cost a parser the most memory per byte, each
//! filling a root index to the byte count asked for: what a mirror without
//! the key can serve in place of `index.toml` (with any signature) to make
//! a client that parses before it verifies hold gigabytes.
//!
//! Each starts as a root does (`format`, then `[repo]` with its version),
//! so a reader looking for the version finds one. Each is written as it
//! is made, so a test never holds one: a child's peak memory as `wait4`
//! reports it starts from what its parent held when it was spawned.

use std::io::{BufWriter, Write};
use std::path::Path;

/// The start of every shape: a root's own first lines.
const HEAD: &str = "format = 1\n\n[repo]\nname = \"rocm\"\nversion = 3\n\
                    generated = 2026-01-01T00:00:00Z\nexpires = 2027-01-01T00:00:00Z\n\n[x]\n";

/// One shape: `start`, items while they fit, each item's `closer` (in
/// reverse, for nesting), then `end`.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub name: &'static str,
    start: &'static str,
    item: fn(usize) -> String,
    closer: &'static str,
    end: &'static str,
}

/// Every shape.
pub const WORST_TOML_SHAPES: [Shape; 6] = [
    Shape {
        name: "dotted keys",
        start: "",
        item: |i| format!("a{i}.b.c.d.e.f.g = 1\n"),
        closer: "",
        end: "",
    },
    Shape {
        name: "one long dotted key",
        start: "",
        item: |_| "a.".into(),
        closer: "",
        end: "a = 1\n",
    },
    Shape {
        name: "arrays of tables",
        start: "",
        item: |_| "[[t]]\n".into(),
        closer: "",
        end: "",
    },
    Shape {
        name: "empty inline tables",
        start: "k = [",
        item: |_| "{},".into(),
        closer: "",
        end: "]\n",
    },
    Shape {
        name: "integers",
        start: "k = [",
        item: |_| "1,".into(),
        closer: "",
        end: "]\n",
    },
    Shape {
        name: "nested arrays",
        start: "k = ",
        item: |_| "[".into(),
        closer: "]",
        end: "\n",
    },
];

impl Shape {
    /// Writes the shape to `path`, at most `size` bytes.
    pub fn write(&self, path: &Path, size: usize) {
        let mut out = BufWriter::new(fs_err::File::create(path).unwrap());
        let mut written = HEAD.len() + self.start.len() + self.end.len();
        out.write_all(HEAD.as_bytes()).unwrap();
        out.write_all(self.start.as_bytes()).unwrap();
        let mut items = 0;
        loop {
            let item = (self.item)(items);
            written += item.len() + self.closer.len();
            if written > size {
                break;
            }
            out.write_all(item.as_bytes()).unwrap();
            items += 1;
        }
        for _ in 0..items {
            out.write_all(self.closer.as_bytes()).unwrap();
        }
        out.write_all(self.end.as_bytes()).unwrap();
        out.flush().unwrap();
    }
}
