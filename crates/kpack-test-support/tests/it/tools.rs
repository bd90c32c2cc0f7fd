//! The set-up provides every program the tests run, and a missing one fails
//! the test with a message that says what to do.

use std::process::Command;

use kpack_test_support::{provided_files, provided_programs, tool, tool_path};

/// Run in a child process with nothing on its `PATH` by
/// `a_missing_tool_fails_naming_it_its_package_and_the_setup_command`.
#[test]
#[ignore = "run in a child process with an empty PATH"]
fn needs_minisign() {
    tool("minisign");
}

#[test]
fn a_missing_tool_fails_naming_it_its_package_and_the_setup_command() {
    let empty = tempfile::tempdir().unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tools::needs_minisign",
            "--ignored",
            "--nocapture",
        ])
        .env("PATH", empty.path())
        .env("KPACK_TEST_VENV", empty.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    let expected = "this test needs `minisign` (Debian package `minisign`), which is not \
                    installed: run `./test.sh`, which installs what the tests need and runs them";
    assert!(stderr.contains(expected), "{stderr}");
    assert!(!stderr.contains("No such file or directory"), "{stderr}");
}

#[test]
fn every_program_the_setup_provides_is_installed_and_runs() {
    for program in provided_programs() {
        let path = tool_path(program);
        // Each answers a harmless flag without touching anything.
        let flag = match program {
            "minisign" => "-v",
            "moto_server" => "--help",
            "unzip" => "-v",
            _ => "--version",
        };
        let status = Command::new(&path).arg(flag).output().unwrap().status;
        assert!(status.success(), "{} {flag}: {status}", path.display());
    }
}

#[test]
fn every_file_the_setup_provides_is_installed() {
    for file in provided_files() {
        assert!(
            file.exists(),
            "{} is missing: run `./test.sh`, which installs it",
            file.display()
        );
    }
}
