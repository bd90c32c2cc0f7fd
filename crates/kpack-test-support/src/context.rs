//! The one context a test of kpack-get works in, as uv's `TestContext`,
//! in kpack-get's tests and the whole-chain tests alike: a home of its own
//! (cache, state, config, prefix, no GPUs, no HIP runtimes), a repository
//! served over loopback (the shared rocRAND one, a copy of it, or one the
//! test builds), and the filters that turn what kpack-get prints into a
//! snapshot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::chain::{
    build_rocrand_repo, copy_dir, pool_gets, shared_rocrand_repo, Env, RocrandRepo,
};
use crate::server::TestServer;
use crate::transcript;

#[derive(Debug)]
pub struct TestContext {
    pub env: Env,
    pub repo: RocrandRepo,
    pub server: TestServer,
}

impl Default for TestContext {
    fn default() -> TestContext {
        TestContext::new()
    }
}

impl TestContext {
    /// The rocRAND repository (built once per test process, shared
    /// read-only), served.
    pub fn new() -> TestContext {
        TestContext::serving(shared_rocrand_repo().clone(), Env::new())
    }

    /// A copy of the rocRAND repository of this test's own (signed with the
    /// same key), to publish into and tamper with, served.
    pub fn private() -> TestContext {
        let env = Env::new();
        let shared = shared_rocrand_repo();
        let repo = RocrandRepo {
            dir: env.home.path().join("repo"),
            ..shared.clone()
        };
        copy_dir(&shared.dir, &repo.dir);
        TestContext::serving(repo, env)
    }

    /// A copy of a rocRAND repository signed with a key of its own (built
    /// once per test process), its key pair beside it in this test's home:
    /// to republish, re-sign and tamper with. Served.
    pub fn own_key() -> TestContext {
        static BUILT: OnceLock<PathBuf> = OnceLock::new();
        let built = BUILT.get_or_init(|| {
            let dir =
                crate::chain::target_tmp().join(format!("own-key-repo-{}", std::process::id()));
            let _ = fs_err::remove_dir_all(&dir);
            build_rocrand_repo(&dir);
            dir
        });
        let env = Env::new();
        let own = env.home.path().join("own");
        copy_dir(built, &own);
        let repo = RocrandRepo {
            dir: own.join("repo"),
            public_key: own.join("key.pub"),
            secret_key: own.join("key.key"),
        };
        TestContext::serving(repo, env)
    }

    /// `repo` served, for kpack-get run in `env`.
    pub fn serving(repo: RocrandRepo, env: Env) -> TestContext {
        TestContext {
            server: TestServer::start(&repo.dir),
            env,
            repo,
        }
    }

    /// The repository's directory, as a mirror address.
    pub fn repo_path(&self) -> String {
        self.repo.dir.display().to_string()
    }

    /// `kpack-get --repo rocm=<server> --key <key> ARGS`.
    pub fn kpack_get(&self, args: &[&str]) -> Command {
        self.env
            .with_repo(&self.server.url(), &self.repo.public_key, args)
    }

    /// `kpack-get --target TARGET install rocm-rand`, which must succeed;
    /// its stdout.
    pub fn install_for(&self, target: &str) -> String {
        crate::chain::success(&mut self.kpack_get(&["--target", target, "install", "rocm-rand"]))
    }

    /// The pool files fetched so far, in order.
    pub fn pool_gets(&self) -> Vec<String> {
        pool_gets(&self.server)
    }

    /// Where the test's own files go.
    pub fn home(&self) -> &Path {
        self.env.home.path()
    }

    /// The exit code, stdout and stderr of `output` as one text, with what
    /// differs between runs masked: the server's address, the home, the
    /// repository's key and directory, times and durations, the pid holding
    /// a busy prefix's lock; downloads run at once, so each run of
    /// `downloaded ...` lines is sorted.
    pub fn transcript(&self, output: &Output) -> String {
        self.transcript_masking(output, &[])
    }

    /// As [`TestContext::transcript`], with `more` masks applied first.
    pub fn transcript_masking(&self, output: &Output, more: &[(&str, &str)]) -> String {
        let url = self.server.url();
        let home = self.home().display().to_string();
        let key = self.repo.public_key.display().to_string();
        let repo = self.repo.dir.display().to_string();
        let mut masks = more.to_vec();
        masks.extend([
            (url.as_str(), "<URL>"),
            (home.as_str(), "<HOME>"),
            (key.as_str(), "<KEY>"),
            (repo.as_str(), "<REPO>"),
        ]);
        let text = transcript(output, &masks);
        let text = crate::mask_run(&text, "changed by pid ", "changed by pid <PID>", |c| {
            c.is_ascii_digit()
        });
        let text = crate::mask_run(&text, "kpack-get (pid ", "kpack-get (pid <PID>", |c| {
            c.is_ascii_digit()
        });
        sorted_downloads(&text)
    }

    /// `kpack-get --repo rocm=<directory> --key <key> ARGS`: the repository
    /// read from its directory, not the server.
    pub fn kpack_get_local(&self, args: &[&str]) -> Command {
        self.env
            .with_repo(&self.repo_path(), &self.repo.public_key, args)
    }

    /// `text` (a command's stdout, say) with what differs between runs
    /// masked as [`TestContext::transcript`] masks it.
    pub fn filter(&self, text: &str) -> String {
        let output = Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(0),
            stdout: text.as_bytes().to_vec(),
            stderr: Vec::new(),
        };
        let whole = self.transcript(&output);
        let body = whole
            .split_once("--- stdout\n")
            .map_or("", |(_, rest)| rest);
        body.strip_suffix("--- stderr\n").unwrap_or(body).to_owned()
    }

    /// Runs `command` and returns its transcript.
    pub fn run(&self, command: &mut Command) -> String {
        self.transcript(&crate::chain::output(command))
    }
}

/// `text` with each run of `downloaded ...` lines in sorted order.
fn sorted_downloads(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run: Vec<&str> = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("downloaded ") {
            run.push(line);
            continue;
        }
        run.sort_unstable();
        out.extend(run.drain(..));
        out.push_str(line);
    }
    run.sort_unstable();
    out.extend(run);
    out
}
