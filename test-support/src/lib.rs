//! What the workspace's tests share.
//!
//! [`tool`] finds the programs tests run (compilers, binutils, `minisign`,
//! the Python tools of the project's test environment). A missing program
//! fails the test with a message naming it, its package and the set-up
//! command, never a bare "No such file or directory" and never a skip.
#![allow(clippy::panic)]

mod tools;

pub use tools::{
    find_tool, provided_files, provided_programs, tool, tool_path, MissingTool, Origin, SearchPath,
    SETUP_COMMAND,
};

use std::path::PathBuf;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// `../shared/fixtures` beside the checkout (or `$KPACK_FIXTURES`).
pub fn fixtures() -> PathBuf {
    std::env::var_os("KPACK_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/fixtures"))
}
