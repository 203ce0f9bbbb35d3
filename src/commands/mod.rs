//! One function per subcommand: build the host, read the system, print.

pub mod bench;
pub mod devices;
pub mod migrate;
pub mod plan;
pub mod recommend;
pub mod rollback;
pub mod status;
pub mod sync;
pub mod trial;
pub mod verify;
pub mod wizard;

use crate::cli::{Cli, Command};
use crate::host::Host;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

pub fn run(cli: &Cli) -> Result<u8> {
    let host = host_from(cli)?;
    let Some(command) = &cli.command else {
        return wizard::without_subcommand(cli, &host);
    };
    match command {
        Command::Devices(args) => devices::run(cli, args, &host),
        Command::Plan(args) => plan::run(cli, args, &host),
        Command::Bench(args) => bench::run(cli, args, &host),
        Command::Migrate(args) => migrate::run(cli, args, &host),
        Command::Rollback(args) => rollback::run(cli, args, &host),
        Command::Recommend(args) => recommend::run(cli, args, &host),
        Command::Verify(args) => verify::run(cli, args, &host),
        Command::Sync(args) => sync::run(cli, args, &host),
        Command::Wizard(args) => wizard::run(cli, args, &host),
        Command::Status(args) => status::run(cli, args, &host),
        Command::Trial(args) => trial::run(cli, args, &host),
    }
}

/// The one place where the paths the tool reads are decided.
fn host_from(cli: &Cli) -> Result<Host> {
    let mut host = match &cli.sysroot {
        Some(root) => {
            let root = std::fs::canonicalize(root)
                .with_context(|| format!("--sysroot {}: no such directory", root.display()))?;
            Host::with_root(root)
        }
        None => Host::live(),
    };
    if let Some(dir) = &cli.source_root {
        host.source_root = view_dir(&host, dir, "--source-root")?;
    }
    if let Some(dir) = &cli.boot_dir {
        host.boot_dir = Some(view_dir(&host, dir, "--boot-dir")?);
    }
    host.state_dir = cli.state_dir.clone();
    host.log_dir = cli.log_dir.clone();
    Ok(host)
}

/// A directory the user named: absolute and existing, as the inspected
/// system sees it.
fn view_dir(host: &Host, dir: &Path, flag: &str) -> Result<PathBuf> {
    if host.is_live() {
        let path = std::fs::canonicalize(dir)
            .with_context(|| format!("{flag} {}: no such directory", dir.display()))?;
        if !path.is_dir() {
            bail!("{flag} {}: not a directory", dir.display());
        }
        return Ok(path);
    }
    if !dir.is_absolute() {
        bail!(
            "{flag} {}: give an absolute path inside --sysroot",
            dir.display()
        );
    }
    if !host.path(dir).is_dir() {
        bail!(
            "{flag} {}: no such directory under --sysroot",
            dir.display()
        );
    }
    Ok(dir.to_path_buf())
}

/// Read-only commands run without root: one line on stderr naming the
/// disks that could not be opened, so what is shown is not taken for all
/// there is.
fn note_unreadable(system: &crate::system::System, host: &Host) {
    let unreadable = crate::privilege::unreadable_disks(system, host.is_live());
    if let Some(note) = crate::privilege::unreadable_note(&unreadable) {
        eprintln!("pimigrate: {note}");
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding the output as JSON")?;
    println!("{text}");
    Ok(())
}
