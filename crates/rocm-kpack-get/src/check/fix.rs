//! The command a report gives to fix what it found: `kpack-get install
//! [--reinstall] NAME...` for a prefix, `kpack-get pip sync` for a Python
//! environment, repeating the arguments of the check that decide where
//! and for which GPUs (`--prefix`, the repositories, `--target`,
//! `--python`), as one argument vector and as a line for a shell.

use std::path::PathBuf;

use super::report::{Finding, FixCommand, Remedy};

/// The program the commands run.
pub const PROGRAM: &str = "kpack-get";

impl FixCommand {
    fn new(argv: Vec<String>) -> FixCommand {
        FixCommand {
            command: argv
                .iter()
                .map(|arg| quote(arg))
                .collect::<Vec<_>>()
                .join(" "),
            argv,
        }
    }
}

/// What a fix command repeats of the check's command line.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// Global arguments that choose the prefix, the repositories and the
    /// GPUs (`--prefix DIR`, `--repo R --key K`, `--target T`), as given.
    pub global: Vec<String>,
    /// `--python`, when given.
    pub python: Option<PathBuf>,
    /// `--all-targets`, when given.
    pub all_targets: bool,
}

impl Invocation {
    /// `kpack-get install [--reinstall] NAME...` for the packages of the
    /// findings a command fixes; `--reinstall` when one of them needs it.
    pub fn install(&self, findings: &[Finding]) -> Option<FixCommand> {
        let mut names: Vec<&str> = findings
            .iter()
            .filter(|f| matches!(f.remedy, Remedy::Install | Remedy::Reinstall))
            .map(|f| f.package.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return None;
        }
        let mut argv = vec![PROGRAM.to_owned(), "install".to_owned()];
        if findings.iter().any(|f| f.remedy == Remedy::Reinstall) {
            argv.push("--reinstall".to_owned());
        }
        argv.extend(names.into_iter().map(str::to_owned));
        argv.extend(self.global.iter().cloned());
        Some(FixCommand::new(argv))
    }

    /// `kpack-get pip sync [--python PY]` when a finding is fixed by it.
    pub fn sync(&self, findings: &[Finding]) -> Option<FixCommand> {
        if !findings.iter().any(|f| f.remedy == Remedy::Sync) {
            return None;
        }
        let mut argv = vec![PROGRAM.to_owned(), "pip".to_owned(), "sync".to_owned()];
        if let Some(python) = &self.python {
            argv.push("--python".to_owned());
            argv.push(python.display().to_string());
        }
        if self.all_targets {
            argv.push("--all-targets".to_owned());
        }
        argv.extend(self.global.iter().cloned());
        Some(FixCommand::new(argv))
    }
}

/// `arg` as a POSIX shell reads it back: as it is when it holds only
/// characters no shell treats specially, else in single quotes.
pub fn quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        return arg.to_owned();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kpack_gpu::Target;

    fn finding(package: &str, remedy: Remedy) -> Finding {
        Finding {
            gpu: Target::parse("gfx1100").unwrap(),
            package: package.to_owned(),
            version: "1.0.0".to_owned(),
            path: None,
            reason: super::super::Reason::WrongDevicePackage,
            detail: String::new(),
            remedy,
        }
    }

    #[test]
    fn one_install_names_every_package_a_command_fixes() {
        let invocation = Invocation {
            global: vec!["--prefix".into(), "/opt/my rocm".into()],
            ..Invocation::default()
        };
        let findings = [
            finding("rocm-rand", Remedy::Install),
            finding("rocm-blas", Remedy::Reinstall),
            finding("rocm-rand", Remedy::Install),
            finding("rocm-fft", Remedy::None),
        ];
        let fix = invocation.install(&findings).unwrap();
        assert_eq!(
            fix.argv,
            [
                "kpack-get",
                "install",
                "--reinstall",
                "rocm-blas",
                "rocm-rand",
                "--prefix",
                "/opt/my rocm"
            ]
        );
        assert_eq!(
            fix.command,
            "kpack-get install --reinstall rocm-blas rocm-rand --prefix '/opt/my rocm'"
        );
        assert_eq!(
            invocation.install(&findings[..1]).unwrap().argv[2],
            "rocm-rand"
        );
        assert_eq!(invocation.install(&findings[3..]), None);
        assert_eq!(invocation.sync(&findings), None);
    }

    #[test]
    fn sync_repeats_the_environment_and_the_gpus() {
        let invocation = Invocation {
            global: vec!["--target".into(), "gfx1100".into()],
            python: Some("/venv/bin/python".into()),
            all_targets: false,
        };
        let fix = invocation.sync(&[finding("torch", Remedy::Sync)]).unwrap();
        assert_eq!(
            fix.command,
            "kpack-get pip sync --python /venv/bin/python --target gfx1100"
        );
    }

    #[test]
    fn only_what_a_shell_would_change_is_quoted() {
        assert_eq!(quote("gfx90a:sramecc+:xnack-"), "gfx90a:sramecc+:xnack-");
        assert_eq!(quote("/opt/rocm"), "/opt/rocm");
        assert_eq!(quote("my prefix"), "'my prefix'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(
            quote("rocm=https://m.example/x?a&b"),
            "'rocm=https://m.example/x?a&b'"
        );
    }
}
