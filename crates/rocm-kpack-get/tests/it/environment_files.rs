//! An environment's METADATA and RECORD are untrusted input: anyone who
//! can write into a shared venv can put a FIFO, a link to `/dev/zero` or a
//! huge sparse file there. `kpack-get pip check` and `pip sync` open each
//! without following links and without blocking, read regular files only
//! and to 64 MiB, warn naming the file, skip that distribution, and finish
//! within seconds under 256 MiB whatever they find.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kpack_test_support::context::TestContext;
use kpack_test_support::measure::run_watched;
use kpack_test_support::venv::pip_venv;

use crate::common::{describe, success, Env};
use crate::pip_layout::kpack;

const MIB: u64 = 1 << 20;

/// A METADATA offering a device extra, so that RECORD is read too.
const METADATA: &str =
    "Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\nProvides-Extra: device-gfx90a\n";

/// How the hostile distribution's file is made.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    Fifo,
    LinkToZero,
    Sparse,
}

/// The venv's site-packages.
fn site(python: &Path) -> PathBuf {
    let out = success(std::process::Command::new(python).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['platlib'])",
    ]));
    PathBuf::from(out.trim())
}

/// Makes `file` (METADATA or RECORD) of a distribution `hostile` in
/// `site` hostile as `how`; the other file is a good one.
fn plant(site: &Path, file: &str, how: Hostile) -> PathBuf {
    let dist_info = site.join("hostile-1.0.dist-info");
    // What the last case planted goes first: writing into its FIFO would
    // wait for a reader.
    if dist_info.exists() {
        fs_err::remove_dir_all(&dist_info).unwrap();
    }
    fs_err::create_dir_all(&dist_info).unwrap();
    fs_err::write(dist_info.join("METADATA"), METADATA).unwrap();
    fs_err::write(
        dist_info.join("RECORD"),
        "hostile-1.0.dist-info/METADATA,,\n",
    )
    .unwrap();
    let path = dist_info.join(file);
    fs_err::remove_file(&path).unwrap();
    match how {
        Hostile::Fifo => success(kpack_test_support::tool("mkfifo").arg(&path)),
        Hostile::LinkToZero => {
            fs_err::os::unix::fs::symlink("/dev/zero", &path).unwrap();
            String::new()
        }
        Hostile::Sparse => {
            let sparse = fs_err::File::create(&path).unwrap();
            sparse.set_len(2048 * MIB).unwrap();
            String::new()
        }
    };
    path
}

/// `kpack-get --target gfx90a pip <verb> --python PY`, watched: killed
/// past 60 s or 256 MiB. Its output, which must name `file`.
fn run_pip(env: &Env, verb: &str, python: &Path, file: &Path) {
    let mut command = kpack(env);
    command
        .args(["--target", "gfx90a", "pip", verb, "--python"])
        .arg(python);
    let run = run_watched(&mut command, Duration::from_secs(60), 256 * MIB);
    let case = format!("pip {verb} with {}", file.display());
    assert_eq!(run.killed, None, "{case}: {}", describe(&run.output));
    assert!(
        run.elapsed < Duration::from_secs(30),
        "{case}: {:?}",
        run.elapsed
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.output.stdout),
        String::from_utf8_lossy(&run.output.stderr)
    );
    assert!(
        text.contains(&file.display().to_string()),
        "{case}: the file is not named: {text}"
    );
    assert!(text.contains("skipped"), "{case}: {text}");
    assert!(!text.contains("panicked"), "{case}: {text}");
    eprintln!(
        "{case}: {:?}, peak RSS {} MiB, exit {:?}",
        run.elapsed,
        run.peak_rss / MIB,
        run.output.status.code()
    );
}

#[test]
fn hostile_metadata_and_record_are_reported_and_skipped_in_bounded_time_and_memory() {
    let context = TestContext::new();
    let env = &context.env;
    let python = pip_venv(&env.home.path().join("venv"));
    let site = site(&python);
    for (file, how) in [
        ("METADATA", Hostile::Fifo),
        ("METADATA", Hostile::LinkToZero),
        ("METADATA", Hostile::Sparse),
        ("RECORD", Hostile::Fifo),
        ("RECORD", Hostile::LinkToZero),
    ] {
        let path = plant(&site, file, how);
        for verb in ["check", "sync"] {
            run_pip(env, verb, &python, &path);
        }
    }
}
