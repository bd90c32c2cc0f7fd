//! What binutils and gdb say about an ELF file the packer wrote.

use std::path::Path;

use fs_err as fs;

/// What `readelf -a` and `objdump -x` say is wrong with a file.
pub fn health_warnings(path: &Path) -> Vec<String> {
    health_warnings_with("objdump", path)
}

/// [`health_warnings`] with another objdump (a cross binutils one).
pub fn health_warnings_with(objdump: &str, path: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    let readelf = crate::tool("readelf")
        .arg("-a")
        .arg("-W")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        readelf.status.success(),
        "readelf failed on {}",
        path.display()
    );
    // readelf reports problems on stderr ("readelf: Warning: ...").
    for line in String::from_utf8_lossy(&readelf.stderr).lines() {
        warnings.push(format!("readelf: {line}"));
    }
    let objdump = crate::tool(objdump).arg("-x").arg(path).output().unwrap();
    if !objdump.status.success() || !objdump.stderr.is_empty() {
        warnings.push(format!(
            "objdump: {}",
            String::from_utf8_lossy(&objdump.stderr)
        ));
    }
    warnings
}

pub fn gdb_warnings(path: &Path) -> Vec<String> {
    let gdb = crate::tool("gdb")
        .args(["-batch", "-nx", "-ex", "info files"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&gdb.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&gdb.stderr).lines())
        .filter(|l| l.to_lowercase().contains("warning"))
        .map(|l| l.replace(&path.display().to_string(), "FILE"))
        .collect()
}

/// Copies `path` to `stripped` and runs GNU strip on it, which must succeed
/// without a message.
pub fn strip_copy(path: &Path, stripped: &Path) {
    strip_copy_with("strip", path, stripped);
}

/// [`strip_copy`] with another strip (a cross binutils one).
pub fn strip_copy_with(strip: &str, path: &Path, stripped: &Path) {
    fs::copy(path, stripped).unwrap();
    let strip = crate::tool(strip).arg(stripped).output().unwrap();
    assert!(
        strip.status.success() && strip.stderr.is_empty(),
        "strip {}: {}",
        path.display(),
        String::from_utf8_lossy(&strip.stderr)
    );
}
