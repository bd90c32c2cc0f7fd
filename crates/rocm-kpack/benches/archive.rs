//! Benchmarks for the kpack archive reader. Not tests: nothing here asserts
//! on timings; the figures are printed, with the goals they are compared to.
//!
//! ```text
//! cargo bench -p rocm-kpack --bench archive               # every open benchmark
//! cargo bench -p rocm-kpack --bench archive -- 100k       # parts whose name contains "100k"
//! bash crates/rocm-kpack/benches/decompress.sh                         # the rocRAND decompression part
//! ```
//!
//! Parts (the optional filter is matched as a substring of these names):
//!
//! * `open/100k-zstd`, `open/100k-none`: `Archive::open` on a generated
//!   archive of 100,000 entries (25,000 binary keys x gfx1100..gfx1103,
//!   small distinct code objects), and the growth of resident memory while
//!   the archive is held open.
//! * `open/1gib-zstd`: the same on a 1 GiB archive of 500 incompressible
//!   ~2 MiB zstd frames; `open/64mib-zstd` (32 frames of the same size) and
//!   `open/500x64kib-zstd` (500 frames of 64 KiB) separate the cost per
//!   frame from the cost per byte. RSS is measured in a fresh child process
//!   (this binary re-executed with a hidden argument); the file is hot in the
//!   page cache, the worst case for a mapping since fault-around then maps
//!   cached pages next to every page touched. The child also probes what
//!   touching the same frame-size prefixes through a bare mapping costs with
//!   and without `madvise` advice.
//! * `open/150k-targets`: `Archive::open` of ROCm's reference `test_noop`
//!   archive with one binary's TOC entry listing 150,000 distinct targets
//!   (refused at the 4,096-target cap) and 4,096 (accepted): the time to the
//!   answer, linear either way.
//! * `open/given`: `Archive::open` of the archive `--archive PATH` names (a
//!   real one: Debian's rocBLAS split by `kpack-pack`).
//! * `decompress/rocrand`: `Kernel::read_into` throughput on the real code
//!   objects of Debian's rocRAND (the fixture's, or `--bundle <.hip_fatbin
//!   dump>`); the script `decompress.sh` runs this part and times `zstd -d`
//!   on the same frames for comparison.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::ffi::CString;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use fs_err as fs;
use fs_err::os::unix::fs::FileExt;
use fs_err::File;
use rocm_kpack::format::BLOB_REGION_OFFSET;
use rocm_kpack::{Archive, ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};

/// Timed opens per archive (after `OPEN_WARMUP` untimed ones).
const OPEN_ROUNDS: usize = 30;
const OPEN_WARMUP: usize = 3;
/// Fresh child processes per RSS measurement.
const RSS_RUNS: usize = 3;
/// Timed rounds of reading every rocRAND code object.
const READ_ROUNDS: usize = 60;
const READ_WARMUP: usize = 10;
const MIB: f64 = 1024.0 * 1024.0;
/// Throughput is reported in decimal megabytes per second, like `zstd`.
const MB: f64 = 1e6;

const HIDDEN_RSS_CHILD: &str = "--rss-child";
const HIDDEN_RSS_PROBE: &str = "--rss-probe";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(HIDDEN_RSS_CHILD) => return rss_child(Path::new(&args[1])),
        Some(HIDDEN_RSS_PROBE) => return rss_probe(Path::new(&args[1]), &args[2]),
        _ => {}
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs bench
    // targets without it, and this is not a test: do nothing there.
    if !args.iter().any(|a| a == "--bench") {
        println!("archive benchmarks: run with `cargo bench -p rocm-kpack --bench archive`");
        return;
    }
    let options = Options::parse(args);
    let dir = tempfile::Builder::new()
        .prefix("kpack-bench-")
        .tempdir_in("/tmp")
        .expect("a temporary directory under /tmp");
    println!(
        "kpack archive benchmarks ({} build), {} CPUs, load average {}",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "optimised"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    println!("temporary files in {}", dir.path().display());

    let mut summary = Vec::new();
    let parts: [(&str, Part); 8] = [
        ("open/100k-zstd", |dir, _, rows| {
            rows.push(open_many_kernels(dir, Compression::Zstd { level: 3 }))
        }),
        ("open/100k-none", |dir, _, rows| {
            rows.push(open_many_kernels(dir, Compression::None))
        }),
        ("open/1gib-zstd", |dir, _, rows| {
            rows.push(open_big_frames(dir, "1gib", 500, BIG_OBJECT))
        }),
        ("open/64mib-zstd", |dir, _, rows| {
            rows.push(open_big_frames(dir, "64mib", 32, BIG_OBJECT))
        }),
        ("open/500x64kib-zstd", |dir, _, rows| {
            rows.push(open_big_frames(dir, "500x64kib", 500, 64 * 1024))
        }),
        ("open/150k-targets", |dir, _, _| open_many_targets(dir)),
        ("open/given", |_, options, _| open_given(options)),
        ("decompress/rocrand", |dir, options, _| {
            decompress_part(dir, options)
        }),
    ];
    let mut ran = 0;
    for (name, run) in parts {
        if !options.filter.as_ref().is_none_or(|f| name.contains(f)) {
            continue;
        }
        ran += 1;
        println!("\n=== {name} ===");
        run(dir.path(), &options, &mut summary);
    }
    if ran == 0 {
        println!(
            "no part matches {:?}; parts: open/100k-zstd open/100k-none open/1gib-zstd \
             open/64mib-zstd open/500x64kib-zstd open/150k-targets open/given decompress/rocrand",
            options.filter
        );
    }
    if !summary.is_empty() {
        print_open_summary(&summary);
    }
    println!("\nload average at the end: {}", load_average());
}

/// One benchmark part: runs in the temporary directory, may add a row to
/// the open summary.
type Part = fn(&Path, &Options, &mut Vec<OpenRow>);

#[derive(Debug, Default)]
struct Options {
    filter: Option<String>,
    /// A `.hip_fatbin` section holding one uncompressed offload bundle.
    bundle: Option<PathBuf>,
    /// Where to write the archive's zstd frames, concatenated.
    frames_out: Option<PathBuf>,
    /// Where to write `key=value` results for the script.
    results: Option<PathBuf>,
    /// An archive for `open/given`.
    archive: Option<PathBuf>,
}

impl Options {
    fn parse(args: Vec<String>) -> Options {
        let mut options = Options::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                PathBuf::from(
                    args.next()
                        .unwrap_or_else(|| panic!("{name} needs a value")),
                )
            };
            match arg.as_str() {
                "--bench" => {}
                "--bundle" => options.bundle = Some(value("--bundle")),
                "--frames-out" => options.frames_out = Some(value("--frames-out")),
                "--results" => options.results = Some(value("--results")),
                "--archive" => options.archive = Some(value("--archive")),
                flag if flag.starts_with("--") => panic!(
                    "unknown option {flag}; usage: archive [FILTER] \
                     [--bundle FATBIN --frames-out FILE --results FILE] [--archive KPACK]"
                ),
                _ if options.filter.is_none() => options.filter = Some(arg),
                _ => panic!("only one filter may be given"),
            }
        }
        options
    }
}

// ---------------------------------------------------------------------------
// Generated inputs

/// xorshift64*: fast, deterministic, and incompressible enough for zstd.
#[derive(Debug)]
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        let last = self.next().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }
}

fn t(name: &str) -> Target {
    Target::parse(name).unwrap()
}

fn writer(
    path: &Path,
    compression: Compression,
    arches: &[Target],
) -> ArchiveWriter<BufWriter<File>> {
    let file = File::create(path).unwrap();
    let options = ArchiveOptions {
        group: "bench".into(),
        family: arches[0].processor().to_owned(),
        arches: arches.to_vec(),
        compression,
    };
    ArchiveWriter::new(BufWriter::with_capacity(1 << 20, file), options).unwrap()
}

fn finish(writer: ArchiveWriter<BufWriter<File>>) {
    let file = writer.finish().unwrap().into_inner().unwrap();
    file.sync_all().unwrap();
}

/// A small code-object-like blob of 200-400 bytes: an ELF-ish header with
/// the entry's index (so every one is distinct), then 32-bit words drawn
/// mostly from a small set of "instructions", with random immediates mixed
/// in, so zstd has something to do but cannot collapse it.
fn small_code_object(rng: &mut XorShift, index: u64, opcodes: &[u32]) -> Vec<u8> {
    let len = 200 + (rng.next() % 201) as usize;
    let mut data = Vec::with_capacity(len + 4);
    data.extend_from_slice(b"\x7fELF\x02\x01\x01\x40");
    data.extend_from_slice(&index.to_le_bytes());
    while data.len() < len {
        let r = rng.next();
        let word = if r & 3 != 0 {
            opcodes[(r >> 2) as usize % opcodes.len()]
        } else {
            (r >> 32) as u32
        };
        data.extend_from_slice(&word.to_le_bytes());
    }
    data.truncate(len);
    data
}

const MANY_BINARIES: usize = 25_000;
const MANY_TARGETS: [&str; 4] = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"];

/// Writes the 100,000-entry archive; returns (file size, code object bytes).
fn build_many_kernels(path: &Path, compression: Compression) -> (u64, u64) {
    let targets: Vec<Target> = MANY_TARGETS.iter().map(|a| t(a)).collect();
    let opcodes: Vec<u32> = (0..32u32)
        .map(|i| 0xBF80_0000 ^ i.wrapping_mul(0x0101_3457))
        .collect();
    let mut rng = XorShift::new(100_000);
    let mut writer = writer(path, compression, &targets);
    let mut total = 0u64;
    for binary in 0..MANY_BINARIES {
        let key = BinaryKey::new(&format!("lib/libbench{binary}.so"), 0);
        for (index, target) in targets.iter().enumerate() {
            let data = small_code_object(&mut rng, (binary * 4 + index) as u64, &opcodes);
            total += data.len() as u64;
            writer.add(&key, target, &data).unwrap();
        }
    }
    finish(writer);
    (fs::metadata(path).unwrap().len(), total)
}

/// Size of each code object in the big archive: 500 of them make 1 GiB.
const BIG_OBJECT: usize = (1 << 30) / 500;

/// Writes `count` incompressible code objects of `size` bytes as zstd
/// level 1 frames (stored size ~ input size).
fn build_big_frames(path: &Path, count: usize, size: usize) -> u64 {
    let target = t("gfx1100");
    let mut writer = writer(
        path,
        Compression::Zstd { level: 1 },
        std::slice::from_ref(&target),
    );
    let mut data = vec![0u8; size];
    for index in 0..count {
        XorShift::new(index as u64 + 1).fill(&mut data);
        let key = BinaryKey::new(&format!("lib/libbig{index}.so"), 0);
        writer.add(&key, &target, &data).unwrap();
    }
    finish(writer);
    fs::metadata(path).unwrap().len()
}

/// The header's `toc_offset` (bytes 8..16).
fn toc_offset(path: &Path) -> u64 {
    let mut bytes = [0u8; 8];
    File::open(path)
        .unwrap()
        .read_exact_at(&mut bytes, 8)
        .unwrap();
    u64::from_le_bytes(bytes)
}

// ---------------------------------------------------------------------------
// Open time and resident memory

#[derive(Debug)]
struct OpenRow {
    name: String,
    file_bytes: u64,
    entries: usize,
    frames: usize,
    times: Stats,
    rss: RssGrowth,
    goal: String,
}

#[derive(Debug, Clone, Copy)]
struct Stats {
    median: Duration,
    min: Duration,
    max: Duration,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort();
        let n = samples.len();
        let median = if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2
        };
        Stats {
            median,
            min: samples[0],
            max: samples[n - 1],
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Times `Archive::open` (the drop that unmaps is not timed).
fn time_opens(path: &Path) -> (Stats, usize, usize) {
    let mut samples = Vec::with_capacity(OPEN_ROUNDS);
    let mut counts = (0, 0);
    for round in 0..OPEN_WARMUP + OPEN_ROUNDS {
        let start = Instant::now();
        let archive = Archive::open(path).unwrap();
        let elapsed = start.elapsed();
        counts = (archive.kernel_count(), archive.stored_count());
        drop(std::hint::black_box(archive));
        if round >= OPEN_WARMUP {
            samples.push(elapsed);
        }
    }
    (Stats::of(samples), counts.0, counts.1)
}

/// The reference `test_noop` archive with `lib/libtest.so#0` listing
/// `count` distinct targets, each pointing at its first entry.
fn with_targets(count: usize) -> Vec<u8> {
    use rmpv::Value;
    let path = kpack_test_support::fixtures().join("reference/test_noop.kpack");
    let bytes = fs::read(&path).unwrap();
    let at = toc_offset(&path) as usize;
    let mut toc = rmpv::decode::read_value(&mut &bytes[at..]).unwrap();
    fn entry<'a>(value: &'a mut Value, key: &str) -> &'a mut Value {
        let Value::Map(map) = value else {
            panic!("not a map")
        };
        &mut map
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .unwrap()
            .1
    }
    let Value::Map(targets) = entry(entry(&mut toc, "toc"), "lib/libtest.so#0") else {
        panic!("not a map")
    };
    let first = targets[0].1.clone();
    *targets = (0..count)
        .map(|n| (Value::from(format!("gfx{:x}", 0x10000 + n)), first.clone()))
        .collect();
    let mut out = bytes[..at].to_vec();
    rmpv::encode::write_value(&mut out, &toc).unwrap();
    out
}

/// Times opening archives whose TOC lists 150,000 targets (refused) and
/// 4,096 (the most accepted).
fn open_many_targets(dir: &Path) {
    for (count, refused) in [
        (150_000, true),
        (rocm_kpack::format::MAX_TARGETS - 1, false),
    ] {
        let path = dir.join(format!("targets-{count}.kpack"));
        let bytes = with_targets(count);
        fs::write(&path, &bytes).unwrap();
        let mut samples = Vec::with_capacity(OPEN_ROUNDS);
        for round in 0..OPEN_WARMUP + OPEN_ROUNDS {
            let start = Instant::now();
            let opened = Archive::open(&path);
            let elapsed = start.elapsed();
            assert_eq!(opened.is_err(), refused, "{count} targets");
            drop(std::hint::black_box(opened));
            if round >= OPEN_WARMUP {
                samples.push(elapsed);
            }
        }
        let stats = Stats::of(samples);
        println!(
            "{count} targets ({:.1} MB), {}: median {:.3} ms (min {:.3}, max {:.3})",
            bytes.len() as f64 / MB,
            if refused { "refused" } else { "opened" },
            ms(stats.median),
            ms(stats.min),
            ms(stats.max)
        );
    }
}

/// Times opening the archive `--archive` names.
fn open_given(options: &Options) {
    let Some(path) = &options.archive else {
        println!("no --archive given: nothing to open");
        return;
    };
    let (stats, kernels, stored) = time_opens(path);
    println!(
        "{}: {:.1} MB, {kernels} kernels, {stored} stored: median {:.3} ms (min {:.3}, max {:.3})",
        path.display(),
        fs::metadata(path).unwrap().len() as f64 / MB,
        ms(stats.median),
        ms(stats.min),
        ms(stats.max)
    );
}

fn open_many_kernels(dir: &Path, compression: Compression) -> OpenRow {
    let scheme = match compression {
        Compression::None => "none",
        Compression::Zstd { .. } => "zstd",
    };
    let path = dir.join(format!("many-{scheme}.kpack"));
    let start = Instant::now();
    let (file_bytes, original) = build_many_kernels(&path, compression);
    let toc_offset = toc_offset(&path);
    println!(
        "built {} in {:.1} s: 100,000 entries ({compression:?}), {:.1} MiB of code objects; \
         file {:.1} MiB = blob region {:.1} MiB + TOC {:.1} MiB",
        path.display(),
        start.elapsed().as_secs_f64(),
        original as f64 / MIB,
        file_bytes as f64 / MIB,
        (toc_offset - BLOB_REGION_OFFSET) as f64 / MIB,
        (file_bytes - toc_offset) as f64 / MIB,
    );
    let (times, entries, frames) = time_opens(&path);
    print_times(&times, frames);
    let rss = measure_rss(&path);
    let goal = if times.median < Duration::from_millis(50) {
        "open < 50 ms: met"
    } else {
        "open < 50 ms: NOT met"
    };
    println!("goal {goal}");
    OpenRow {
        name: format!("100k entries, {scheme}"),
        file_bytes,
        entries,
        frames,
        times,
        rss,
        goal: goal.into(),
    }
}

fn open_big_frames(dir: &Path, name: &str, count: usize, size: usize) -> OpenRow {
    let path = dir.join(format!("{name}.kpack"));
    let start = Instant::now();
    let file_bytes = build_big_frames(&path, count, size);
    println!(
        "built {} in {:.1} s: {count} incompressible objects of {size} bytes, file {:.1} MiB \
         (stored/original {:.4}); the file is hot in the page cache",
        path.display(),
        start.elapsed().as_secs_f64(),
        file_bytes as f64 / MIB,
        file_bytes as f64 / (count * size) as f64,
    );
    let (times, entries, frames) = time_opens(&path);
    print_times(&times, frames);
    let rss = measure_rss(&path);
    println!(
        "madvise probe: touch the same {} frame-size prefixes through a bare mapping",
        frames + 1
    );
    for mode in ["none", "random", "random+dontneed"] {
        let probe = run_child(&[HIDDEN_RSS_PROBE, &path.display().to_string(), mode]);
        let growth = RssGrowth::from_child(&probe);
        println!(
            "  advice {mode:<16} RssFile +{:.2} MiB, VmRSS +{:.2} MiB",
            growth.file, growth.vm
        );
    }
    let goal = if size == BIG_OBJECT && count == 500 {
        if rss.vm < 16.0 {
            format!("RSS growth < 16 MiB: met ({:.2} MiB)", rss.vm)
        } else {
            format!(
                "RSS growth < 16 MiB: NOT met ({:.2} MiB: RssFile {:.2}, RssAnon {:.2})",
                rss.vm, rss.file, rss.anon
            )
        }
    } else {
        "(comparison for the 1 GiB archive)".to_owned()
    };
    println!("goal {goal}");
    // Free the disk and page cache now rather than at the end.
    let _ = fs::remove_file(&path);
    OpenRow {
        name: format!("{name} ({count} x {} KiB)", size / 1024),
        file_bytes,
        entries,
        frames,
        times,
        rss,
        goal,
    }
}

fn print_times(times: &Stats, frames: usize) {
    println!(
        "Archive::open over {OPEN_ROUNDS} opens: median {:.3} ms, min {:.3} ms, max {:.3} ms \
         ({:.2} us per stored blob)",
        ms(times.median),
        ms(times.min),
        ms(times.max),
        ms(times.median) * 1e3 / frames.max(1) as f64
    );
}

/// RSS growth in MiB (medians over the child runs).
#[derive(Debug, Clone, Copy, Default)]
struct RssGrowth {
    vm: f64,
    anon: f64,
    file: f64,
}

impl RssGrowth {
    /// Parses a child's `before: VmRSS RssAnon RssFile` / `after: ...` (kB).
    fn from_child(output: &str) -> RssGrowth {
        let line = |prefix: &str| -> Vec<f64> {
            output
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("child output lacks {prefix:?}: {output}"))
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect()
        };
        let (before, after) = (line("before:"), line("after:"));
        let growth = |i: usize| (after[i] - before[i]) / 1024.0;
        RssGrowth {
            vm: growth(0),
            anon: growth(1),
            file: growth(2),
        }
    }
}

fn run_child(args: &[&str]) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn measure_rss(path: &Path) -> RssGrowth {
    let mut runs: Vec<RssGrowth> = (0..RSS_RUNS)
        .map(|_| {
            RssGrowth::from_child(&run_child(&[HIDDEN_RSS_CHILD, &path.display().to_string()]))
        })
        .collect();
    let all: Vec<String> = runs.iter().map(|r| format!("{:.2}", r.vm)).collect();
    runs.sort_by(|a, b| a.vm.total_cmp(&b.vm));
    let median = runs[runs.len() / 2];
    println!(
        "RSS growth while held open (fresh process, median of {RSS_RUNS}: {}): \
         VmRSS +{:.2} MiB = RssAnon +{:.2} MiB + RssFile +{:.2} MiB",
        all.join(", "),
        median.vm,
        median.anon,
        median.file
    );
    median
}

/// `VmRSS RssAnon RssFile` in kB from /proc/self/status.
fn rss_now() -> String {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    format!(
        "{} {} {}",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:")
    )
}

/// Child: open the archive and report RSS before and while holding it.
fn rss_child(path: &Path) {
    // Page in the reader's code and warm the allocator on a tiny archive
    // first, so the binary's own text is not counted as growth.
    let target = t("gfx1100");
    let options = ArchiveOptions {
        group: "warm".into(),
        family: "gfx1100".into(),
        arches: vec![target.clone()],
        compression: Compression::Zstd { level: 1 },
    };
    let mut warm = ArchiveWriter::new(std::io::Cursor::new(Vec::new()), options).unwrap();
    warm.add(&BinaryKey::new("lib/warm.so", 0), &target, &[1, 2, 3])
        .unwrap();
    let bytes = warm.finish().unwrap().into_inner();
    let warm = Archive::from_bytes("warm", &bytes).unwrap();
    std::hint::black_box(warm.kernel("lib/warm.so#0", &target).unwrap());
    drop(warm);

    let before = rss_now();
    let archive = Archive::open(path).unwrap();
    let after = rss_now();
    std::hint::black_box(&archive);
    println!("before: {before}\nafter: {after}");
    drop(archive);
}

/// Child: map the archive without `Archive`, touch the 4-byte frame count
/// and frame-size prefixes the reader touches at open, under `mode`
/// advice, and report RSS before and after.
fn rss_probe(path: &Path, mode: &str) {
    // Find the prefixes with pread, which does not touch the mapping.
    let file = File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    let mut word = [0u8; 4];
    let mut at = BLOB_REGION_OFFSET;
    file.read_exact_at(&mut word, at).unwrap();
    let count = u32::from_le_bytes(word);
    let mut prefixes = vec![at];
    at += 4;
    for _ in 0..count {
        prefixes.push(at);
        file.read_exact_at(&mut word, at).unwrap();
        at += 4 + u64::from(u32::from_le_bytes(word));
    }
    let region = (at - BLOB_REGION_OFFSET) as usize;
    assert!(at <= len);

    // SAFETY: a private read-only mapping of a file nobody modifies.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let before = rss_now();
    if mode.starts_with("random") {
        map.advise_range(memmap2::Advice::Random, BLOB_REGION_OFFSET as usize, region)
            .unwrap();
    }
    let mut sum = 0u64;
    for &p in &prefixes {
        let p = p as usize;
        sum += u64::from(u32::from_le_bytes(map[p..p + 4].try_into().unwrap()));
    }
    std::hint::black_box(sum);
    if mode.ends_with("dontneed") {
        // SAFETY: the mapping is read-only and file-backed: dropped pages
        // are read back from the file if touched again.
        unsafe {
            map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                BLOB_REGION_OFFSET as usize,
                region,
            )
        }
        .unwrap();
    }
    let after = rss_now();
    println!("before: {before}\nafter: {after}");
}

fn print_open_summary(rows: &[OpenRow]) {
    println!("\n=== Summary: Archive::open ({OPEN_ROUNDS} opens after {OPEN_WARMUP} warm-up; RSS growth in a fresh process, file hot in page cache) ===");
    println!(
        "{:<28} {:>9} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}  goal",
        "archive",
        "file MiB",
        "entries",
        "blobs",
        "median ms",
        "min ms",
        "max ms",
        "us/blob",
        "VmRSS+",
        "Anon+",
        "File+"
    );
    for row in rows {
        println!(
            "{:<28} {:>9.1} {:>8} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.2} {:>8.2} {:>8.2} {:>8.2}  {}",
            row.name,
            row.file_bytes as f64 / MIB,
            row.entries,
            row.frames,
            ms(row.times.median),
            ms(row.times.min),
            ms(row.times.max),
            ms(row.times.median) * 1e3 / row.frames.max(1) as f64,
            row.rss.vm,
            row.rss.anon,
            row.rss.file,
            row.goal
        );
    }
    println!("(RSS columns in MiB)");
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

// ---------------------------------------------------------------------------
// Decompression throughput on real code objects

/// One device code object of an offload bundle.
#[derive(Debug)]
struct BundleEntry<'a> {
    triple: &'a str,
    data: &'a [u8],
}

/// A deliberately minimal reader for one *uncompressed* clang offload
/// bundle, enough to feed this benchmark. The packer crate will own bundle
/// parsing (compressed bundles, several bundles per section, proper
/// errors); this one panics on anything unexpected.
///
/// Layout (all integers little-endian u64, offsets from the bundle start):
///
/// ```text
/// "__CLANG_OFFLOAD_BUNDLE__"            24-byte magic
/// entry count
/// per entry: offset, size, triple length, triple bytes
/// ```
///
/// The host entry (`host-x86_64-...`) has size 0 and is skipped.
fn parse_bundle(bundle: &[u8]) -> Vec<BundleEntry<'_>> {
    const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
    assert!(
        bundle.starts_with(MAGIC),
        "not an uncompressed clang offload bundle"
    );
    let mut at = MAGIC.len();
    let u64_at = |at: &mut usize| -> usize {
        let bytes: [u8; 8] = bundle[*at..*at + 8].try_into().unwrap();
        *at += 8;
        usize::try_from(u64::from_le_bytes(bytes)).unwrap()
    };
    let count = u64_at(&mut at);
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let offset = u64_at(&mut at);
        let size = u64_at(&mut at);
        let triple_len = u64_at(&mut at);
        let triple = std::str::from_utf8(&bundle[at..at + triple_len]).unwrap();
        at += triple_len;
        if size == 0 {
            continue;
        }
        entries.push(BundleEntry {
            triple,
            data: &bundle[offset..offset + size],
        });
    }
    entries
}

/// The zstd frames of an archive, in ordinal order, read from the file's
/// blob region (`u32 count`, then `u32 size` + frame per code object).
fn archive_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = BLOB_REGION_OFFSET as usize;
    let count = word(at);
    at += 4;
    (0..count)
        .map(|_| {
            let size = word(at);
            at += 4;
            let frame = &bytes[at..at + size];
            at += size;
            frame
        })
        .collect()
}

const ROCRAND_KEY: &str = "lib/librocrand.so.1.1#0";

/// The `.hip_fatbin` of Debian's rocRAND package fixture, dumped into
/// `dir` (as `decompress.sh` does); the bench fails if it cannot be.
fn rocrand_bundle(dir: &Path) -> PathBuf {
    use kpack_test_support::{fixtures, run, tool};
    let deb = fixtures().join("debian/librocrand1_5.3.3-4_amd64.deb");
    let unpacked = dir.join("rocrand-deb");
    run(tool("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    let out = dir.join("rocrand.hip_fatbin");
    run(tool("objcopy")
        .args(["-O", "binary", "--only-section=.hip_fatbin"])
        .arg(unpacked.join("usr/lib/x86_64-linux-gnu/librocrand.so.1.1"))
        .arg(&out));
    out
}

fn decompress_part(dir: &Path, options: &Options) {
    let bundle_path = match &options.bundle {
        Some(path) => path.clone(),
        None => rocrand_bundle(dir),
    };
    let bundle_path = &bundle_path;
    let bundle = fs::read(bundle_path).unwrap();
    let entries = parse_bundle(&bundle);
    println!(
        "{}: {} bytes, {} code objects",
        bundle_path.display(),
        bundle.len(),
        entries.len()
    );

    // Build a zstd level 3 archive: one entry per code object.
    let path = dir.join("rocrand.kpack");
    let targets: Vec<Target> = entries
        .iter()
        .map(|e| Target::from_bundle_triple(e.triple).unwrap())
        .collect();
    let mut writer = writer(&path, Compression::Zstd { level: 3 }, &targets);
    let key = BinaryKey::new("lib/librocrand.so.1.1", 0);
    for (entry, target) in entries.iter().zip(&targets) {
        writer.add(&key, target, entry.data).unwrap();
    }
    finish(writer);
    let archive_bytes = fs::read(&path).unwrap();
    let frames = archive_frames(&archive_bytes);
    let archive = Archive::open(&path).unwrap();

    println!(
        "{:<44} {:>12} {:>12} {:>7}",
        "triple", "bytes", "zstd -3", "ratio"
    );
    let mut original = 0usize;
    for (entry, target) in entries.iter().zip(&targets) {
        let kernel = archive.find(ROCRAND_KEY, target).unwrap();
        let stored = frames[kernel.ordinal() as usize].len();
        original += entry.data.len();
        println!(
            "{:<44} {:>12} {:>12} {:>7.3}",
            entry.triple,
            entry.data.len(),
            stored,
            stored as f64 / entry.data.len() as f64
        );
    }
    let stored: usize = frames.iter().map(|f| f.len()).sum();
    println!(
        "{:<44} {:>12} {:>12} {:>7.3}   (archive file {} bytes, {} frames)",
        "total",
        original,
        stored,
        stored as f64 / original as f64,
        archive_bytes.len(),
        frames.len()
    );
    // Bytes `zstd -d` produces from frames.zst (fewer than `original` only
    // if the writer deduplicated identical code objects).
    let frames_original: u64 = frames
        .iter()
        .map(|f| zstd::zstd_safe::get_frame_content_size(f).unwrap().unwrap())
        .sum();
    if let Some(out) = &options.frames_out {
        let mut file = BufWriter::new(File::create(out).unwrap());
        for frame in &frames {
            file.write_all(frame).unwrap();
        }
        file.into_inner().unwrap().sync_all().unwrap();
        println!(
            "wrote {} ({stored} bytes, {frames_original} bytes decompressed)",
            out.display()
        );
    }

    // Correctness once, outside any timing.
    for (entry, target) in entries.iter().zip(&targets) {
        assert_eq!(&*archive.kernel(ROCRAND_KEY, target).unwrap(), entry.data);
    }

    let single = read_rounds(&archive, &targets);
    let single_mbps = original as f64 / single.median.as_secs_f64() / MB;
    print_throughput("Kernel::read_into, 1 thread", &single, original);

    let double = read_rounds_threads(&archive, &targets, 2);
    let double_mbps = 2.0 * original as f64 / double.median.as_secs_f64() / MB;
    print_throughput(
        "Kernel::read_into, 2 threads (total)",
        &double,
        2 * original,
    );

    let capi = capi_rounds(&path, &targets);
    let capi_mbps = original as f64 / capi.median.as_secs_f64() / MB;
    print_throughput(
        "kpack_get_kernel (C ABI, malloc), 1 thread",
        &capi,
        original,
    );

    let raw = raw_zstd_rounds(&frames);
    let raw_mbps = frames_original as f64 / raw.median.as_secs_f64() / MB;
    print_throughput(
        "libzstd DCtx, no archive (same frames)",
        &raw,
        frames_original as usize,
    );

    println!(
        "2-thread scaling: {:.2}x of 1 thread (the machine has {} CPUs; load average {})",
        double_mbps / single_mbps,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    if let Some(results) = &options.results {
        let text = format!(
            "code_objects={}\noriginal_bytes={original}\nstored_bytes={stored}\n\
             frames_decompressed_bytes={frames_original}\nsingle_mbps={single_mbps:.1}\n\
             single_min_ms={:.3}\nsingle_median_ms={:.3}\nsingle_max_ms={:.3}\n\
             two_thread_mbps={double_mbps:.1}\ncapi_mbps={capi_mbps:.1}\nraw_zstd_mbps={raw_mbps:.1}\n",
            entries.len(),
            ms(single.min),
            ms(single.median),
            ms(single.max),
        );
        fs::write(results, text).unwrap();
    }
}

fn print_throughput(what: &str, stats: &Stats, bytes: usize) {
    let rate = |d: Duration| bytes as f64 / d.as_secs_f64() / MB;
    println!(
        "{what:<44} median {:>8.1} MB/s (best {:.1}, worst {:.1}; {:.3} ms per round of {bytes} bytes, {READ_ROUNDS} rounds)",
        rate(stats.median),
        rate(stats.min),
        rate(stats.max),
        ms(stats.median)
    );
}

/// Buffers of each code object's exact size, written once so page faults
/// are not timed.
fn buffers(archive: &Archive, targets: &[Target]) -> Vec<Vec<u8>> {
    targets
        .iter()
        .map(|target| vec![1u8; archive.find(ROCRAND_KEY, target).unwrap().size() as usize])
        .collect()
}

/// One round: look up and decompress every code object.
fn read_all(archive: &Archive, targets: &[Target], buffers: &mut [Vec<u8>]) {
    for (target, buffer) in targets.iter().zip(buffers.iter_mut()) {
        archive
            .find(ROCRAND_KEY, target)
            .unwrap()
            .read_into(buffer)
            .unwrap();
    }
    std::hint::black_box(buffers);
}

fn read_rounds(archive: &Archive, targets: &[Target]) -> Stats {
    let mut buffers = buffers(archive, targets);
    let mut samples = Vec::new();
    for round in 0..READ_WARMUP + READ_ROUNDS {
        let start = Instant::now();
        read_all(archive, targets, &mut buffers);
        if round >= READ_WARMUP {
            samples.push(start.elapsed());
        }
    }
    Stats::of(samples)
}

/// Every thread reads every code object per round; a round lasts from the
/// first thread's start to the last thread's end.
fn read_rounds_threads(archive: &Archive, targets: &[Target], threads: usize) -> Stats {
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut buffers = buffers(archive, targets);
                    let mut spans = Vec::new();
                    for _ in 0..READ_WARMUP + READ_ROUNDS {
                        barrier.wait();
                        let start = Instant::now();
                        read_all(archive, targets, &mut buffers);
                        spans.push((start, Instant::now()));
                    }
                    spans
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let samples = (READ_WARMUP..READ_WARMUP + READ_ROUNDS)
        .map(|round| {
            let start = per_thread.iter().map(|s| s[round].0).min().unwrap();
            let end = per_thread.iter().map(|s| s[round].1).max().unwrap();
            end - start
        })
        .collect();
    Stats::of(samples)
}

/// The same rounds through `kpack_open` / `kpack_get_kernel`, which
/// allocates (and zeroes) a fresh `malloc` buffer per call; freeing it is
/// timed too.
fn capi_rounds(path: &Path, targets: &[Target]) -> Stats {
    use rocm_kpack::capi::{kpack_close, kpack_free_kernel, kpack_get_kernel, kpack_open};
    use rocm_kpack::ErrorCode;

    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let binary = CString::new(ROCRAND_KEY).unwrap();
    let arches: Vec<CString> = targets
        .iter()
        .map(|t| CString::new(t.to_string()).unwrap())
        .collect();
    let mut handle = std::ptr::null_mut();
    // SAFETY: valid C string and output pointer.
    let code = unsafe { kpack_open(c_path.as_ptr(), &mut handle) };
    assert_eq!(code, ErrorCode::Success);
    let mut samples = Vec::new();
    for round in 0..READ_WARMUP + READ_ROUNDS {
        let start = Instant::now();
        for arch in &arches {
            let mut data = std::ptr::null_mut();
            let mut size = 0usize;
            // SAFETY: live handle, valid C strings and output pointers.
            let code = unsafe {
                kpack_get_kernel(handle, binary.as_ptr(), arch.as_ptr(), &mut data, &mut size)
            };
            assert_eq!(code, ErrorCode::Success);
            std::hint::black_box((data, size));
            // SAFETY: a buffer from kpack_get_kernel, freed once.
            unsafe { kpack_free_kernel(data) };
        }
        if round >= READ_WARMUP {
            samples.push(start.elapsed());
        }
    }
    // SAFETY: the handle from kpack_open, not used afterwards.
    unsafe { kpack_close(handle) };
    Stats::of(samples)
}

/// The ceiling inside this process: the same frames through one reused
/// libzstd context into preallocated buffers, with no archive around them.
fn raw_zstd_rounds(frames: &[&[u8]]) -> Stats {
    let mut context = zstd::zstd_safe::DCtx::create();
    let mut buffers: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let size = zstd::zstd_safe::get_frame_content_size(f).unwrap().unwrap();
            vec![1u8; size as usize]
        })
        .collect();
    let mut samples = Vec::new();
    for round in 0..READ_WARMUP + READ_ROUNDS {
        let start = Instant::now();
        for (frame, buffer) in frames.iter().zip(buffers.iter_mut()) {
            let written = context.decompress(&mut buffer[..], frame).unwrap();
            assert_eq!(written, buffer.len());
        }
        std::hint::black_box(&mut buffers);
        if round >= READ_WARMUP {
            samples.push(start.elapsed());
        }
    }
    Stats::of(samples)
}
