//! Shows the runtime end to end on a real archive: lists what the archive
//! holds, lays out a split install tree around it (a host binary, a marker,
//! `.kpack/`), then loads the binary's code object for a GPU target the way
//! a HIP runtime would, with the loader's debug log.
//!
//! ```text
//! cargo run -p rocm-kpack --example demo -- [--target gfx1101] [ARCHIVE]
//! ```
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use fs_err as fs;
use rocm_kpack::{Archive, Loader, LoaderConfig, Marker, Target};

const DEFAULT_ARCHIVE: &str = "../shared/fixtures/reference/test_zstd.kpack";
const DEFAULT_TARGET: &str = "gfx1101";

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut archive_path = PathBuf::from(DEFAULT_ARCHIVE);
    let mut target = DEFAULT_TARGET.to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--target" => target = args.next().ok_or("--target needs a value")?,
            _ => archive_path = PathBuf::from(arg),
        }
    }
    let target = Target::parse(&target)?;

    let archive = Archive::open(&archive_path)?;
    println!(
        "{}: group {}, family {}, scheme {}, targets [{}], {} entries in {} stored code objects",
        archive_path.display(),
        archive.group(),
        archive.family(),
        archive.scheme(),
        archive
            .architectures()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        archive.kernel_count(),
        archive.stored_count()
    );
    println!("  {:<28} {:<24} {:>10}", "binary", "target", "bytes");
    for binary in archive.binaries() {
        for t in archive.targets_of(binary).into_iter().flatten() {
            let size = archive.find(binary, t)?.size();
            println!("  {binary:<28} {:<24} {size:>10}", t.to_string());
        }
    }

    // A split install tree: lib/<binary> carries a marker pointing at the
    // archive in .kpack/, relative to the binary's directory.
    let Some(first) = archive.binaries().next() else {
        println!("the archive holds no code object");
        return Ok(());
    };
    let (binary_path, bundle) = first.rsplit_once('#').ok_or("binary key without #N")?;
    let bundle: u32 = bundle.parse()?;
    let prefix = std::env::temp_dir().join(format!("kpack-demo-{}", std::process::id()));
    let binary = prefix.join(binary_path);
    let archive_name = archive_path
        .file_name()
        .ok_or("archive path has no file name")?;
    fs::create_dir_all(prefix.join(".kpack"))?;
    fs::create_dir_all(binary.parent().ok_or("binary without directory")?)?;
    fs::copy(&archive_path, prefix.join(".kpack").join(archive_name))?;
    let depth = binary_path.matches('/').count();
    let marker = Marker {
        search_paths: vec![format!(
            "{}.kpack/{}",
            "../".repeat(depth),
            archive_name.to_string_lossy()
        )],
        kernel_name: binary_path.to_owned(),
    };
    fs::write(&binary, marker.to_bytes())?;

    println!(
        "\nloading {first} for {target} from {} (marker paths {:?}):",
        binary.display(),
        marker.search_paths
    );
    let loader = Loader::new(LoaderConfig {
        log: Some(Arc::new(|line: &str| println!("  kpack: {line}"))),
        ..LoaderConfig::from_env()
    });
    let marker = Marker::parse(&fs::read(&binary)?)?;
    let result = loader.load(&marker, &binary, bundle, std::slice::from_ref(&target));
    fs::remove_dir_all(&prefix)?;
    let code = result?;
    let shown: String = code
        .iter()
        .take(40)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
        .collect();
    println!("loaded {} bytes for {target}: {shown}...", code.len());
    Ok(())
}
