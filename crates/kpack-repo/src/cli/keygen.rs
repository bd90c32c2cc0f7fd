//! `kpack-repo keygen`: a minisign key pair, the secret key encrypted with
//! the password from the environment unless told not to.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kpack_cli::{JsonArg, Printer};
use kpack_sign::{keygen as make_keys, PublicKey};
use serde::Serialize;

use super::options::password;

#[derive(Debug, Args)]
pub(super) struct KeygenArgs {
    /// Path of the key pair without extension.
    key: PathBuf,
    /// Store the secret key without a password (for CI); otherwise the
    /// password comes from KPACK_REPO_PASSWORD.
    #[arg(long)]
    unencrypted: bool,
    #[command(flatten)]
    pub(super) json: JsonArg,
}

#[derive(Debug, Serialize)]
struct KeygenReport {
    secret_key_file: String,
    public_key_file: String,
    public_key: String,
}

pub(super) fn run(printer: &Printer, args: KeygenArgs) -> anyhow::Result<()> {
    let password = if args.unencrypted {
        None
    } else {
        Some(password().context(
            "set KPACK_REPO_PASSWORD to the secret key's password, or pass --unencrypted",
        )?)
    };
    let key = &args.key;
    let (secret_path, public_path) = (key.with_extension("key"), key.with_extension("pub"));
    make_keys(&secret_path, &public_path, password)?;
    // What users configure kpack-get with: the file or this line.
    let public = PublicKey::load(&public_path.to_string_lossy())?;
    let report = KeygenReport {
        secret_key_file: secret_path.display().to_string(),
        public_key_file: public_path.display().to_string(),
        public_key: public.to_base64(),
    };
    printer.line(format!(
        "wrote {} and {}",
        report.secret_key_file, report.public_key_file
    ));
    printer.line(format!(
        "public key: {} (kpack-get --key, or `key` in its configuration)",
        report.public_key
    ));
    printer.report(&report);
    Ok(())
}
