//! The options `split` and `wheel split` share: how archives are named,
//! compressed and signed, and the memory their writing may use.

use std::path::PathBuf;

use anyhow::bail;
use clap::ValueEnum;
use rocm_kpack::Compression;

use kpack_packer::pipeline::MemoryBudget;
use kpack_sign::SecretKey;

/// How archives store code objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompressionArg {
    Zstd,
    None,
}

#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    /// Archive group name (`<group>_<processor>.kpack`).
    #[arg(long, default_value = "rocm")]
    group: String,
    /// How archives store code objects.
    #[arg(long, value_enum, default_value = "zstd")]
    compression: CompressionArg,
    /// zstd level.
    #[arg(long, default_value_t = 3)]
    level: i32,
    /// Sign every archive with this minisign secret key
    /// (`<archive>.minisig` beside it, in its device wheel for a wheel); a
    /// password-protected key's password is read from
    /// `KPACK_SIGN_PASSWORD`.
    #[arg(long = "secret-key", alias = "sign", value_name = "SECRET_KEY")]
    sign: Option<PathBuf>,
    /// Memory the code objects being compressed may use (256M, 1G):
    /// fewer run at once with less; about 40 MiB per thread.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = MemoryBudget::parse)]
    pub memory: MemoryBudget,
}

impl ArchiveArgs {
    /// The group name, refused when it could not be part of a file name.
    pub fn group(&self) -> anyhow::Result<&str> {
        if self.group.is_empty() || self.group.contains(['/', '\\']) {
            bail!(
                "invalid group name {:?}: it begins archive file names (`<group>_<processor>.kpack`), so it must be non-empty, without / or \\",
                self.group
            );
        }
        Ok(&self.group)
    }

    pub fn compression(&self) -> Compression {
        match self.compression {
            CompressionArg::Zstd => Compression::Zstd { level: self.level },
            CompressionArg::None => Compression::None,
        }
    }

    /// The signing key, loaded before any work so that a bad key fails
    /// fast.
    pub fn signer(&self) -> anyhow::Result<Option<SecretKey>> {
        self.sign
            .as_deref()
            .map(|key| SecretKey::load(key, super::env(kpack_env::EnvVars::KPACK_SIGN_PASSWORD)))
            .transpose()
            .map_err(Into::into)
    }
}
