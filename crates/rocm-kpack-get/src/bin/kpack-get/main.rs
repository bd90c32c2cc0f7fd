//! `kpack-get`: detects local GPUs and installs only the device code they
//! need. Parses the command line, resolves settings once, runs one command
//! and renders its failure for people.

mod cli;
mod commands;
mod interrupt;
mod printer;
mod progress;

use std::process::ExitCode;

use clap::Parser;
use rocm_kpack_get::config::{DetectionFlags, LimitSettings, Overrides, RepoConfig, Settings};
use rocm_kpack_get::detect::choice::TargetChoice;
use rocm_kpack_get::repo::Trust;

use cli::{CacheCommand, Cli, Command, PipCommand};
use commands::{Context, Failure};
use printer::Printer;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::HsaProbe { library } = &cli.command {
        let code = rocm_kpack_get::detect::hsa::probe_main(library.as_deref());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            kpack_cli::fail(&*failure.error, failure.hint.as_deref(), failure.code as u8)
        }
    }
}

fn run_pip(context: &Context, command: PipCommand) -> Result<(), Failure> {
    use commands::pip;
    match command {
        PipCommand::Resolve {
            requirements,
            options,
            installer_args,
        } => pip::resolve::resolve(context, &requirements, &options, &installer_args),
        PipCommand::Install {
            requirements,
            options,
            dry_run,
            installer_args,
        } => pip::install::install(context, &requirements, &options, dry_run, &installer_args),
        PipCommand::Sync {
            options,
            dry_run,
            prune,
            installer_args,
        } => pip::sync::sync(context, &options, dry_run, prune, &installer_args),
        PipCommand::Download {
            dest,
            requirements,
            options,
            installer_args,
        } => pip::download::download(context, &dest, &requirements, &options, &installer_args),
        PipCommand::VariantProperties => pip::variant_properties::variant_properties(context),
        PipCommand::Check { options } => pip::check::check(context, &options),
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let global = cli.global;
    let printer = Printer::new(
        global.quiet,
        global.verbose,
        global.json,
        global.no_progress,
    );
    let mut repos = Vec::new();
    if let Some(key) = &global.key {
        for repo in &global.repos {
            repos.push(RepoConfig::from_flag(repo, key)?);
        }
    }
    let settings = Settings::resolve(Overrides {
        config: global.config.clone(),
        repos,
        prefix: global.prefix.clone(),
        cache_dir: global.cache_dir.clone(),
        state_dir: global.state_dir.clone(),
        concurrency: global.concurrency,
        limits: LimitSettings {
            max_index_size: global.max_index_size,
            max_wheel_size: global.max_wheel_size,
            low_speed_limit: global.low_speed_limit,
            low_speed_time: global.low_speed_time,
            index_timeout: global.index_timeout,
        },
        layout: global.layout.map(Into::into),
        offline: global.offline,
        read_timeout: global.read_timeout,
        attempts: global.attempts,
        trust: Trust {
            allow_rollback: global.allow_rollback,
            allow_expired: global.allow_expired,
        },
        no_wait: global.no_wait,
        detection: DetectionFlags {
            hsa_library: global.hsa_library.clone(),
            no_hsa: global.no_hsa,
            hsa_timeout: global.hsa_timeout,
            sysfs_root: global.sysfs_root.clone(),
            pci_ids: global.pci_ids.clone(),
        },
    })?;
    let targets = match &cli.command {
        Command::Pip { .. } => TargetChoice::for_python(&global.target),
        _ => TargetChoice::for_prefix(&global.target),
    };
    let context = Context::new(settings, printer, targets, commands::repeated(&global));
    match cli.command {
        Command::Detect => commands::detect::detect(&context),
        Command::Update => commands::update::update(&context),
        Command::Search { text } => commands::search::search(&context, &text),
        Command::Info { package } => commands::info::info(&context, &package),
        Command::Install {
            packages,
            dry_run,
            reinstall,
        } => commands::install::install(&context, &packages, dry_run, reinstall),
        Command::Remove { packages, dry_run } => {
            commands::remove::remove(&context, &packages, dry_run)
        }
        Command::List => commands::list::list(&context),
        Command::Upgrade {
            packages,
            dry_run,
            allow_downgrade,
        } => commands::install::upgrade(&context, &packages, dry_run, allow_downgrade),
        Command::Verify => commands::verify::verify(&context),
        Command::Check => commands::check::check(&context),
        Command::Cache {
            command: CacheCommand::Clean,
        } => commands::cache::clean(&context),
        Command::Pip { command } => run_pip(&context, command),
        Command::HsaProbe { .. } => Ok(()),
    }
}
