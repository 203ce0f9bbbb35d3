//! `pimigrate rollback`: the SD card's boot files as they were before the
//! migration. Works from the SD system and from the migrated system (the
//! journal travels to the new root).

use super::{print_json, EXIT_OK};
use crate::apply::atomic;
use crate::apply::journal::Journal;
use crate::cli::{Cli, RollbackArgs};
use crate::host::Host;
use anyhow::{bail, Context, Result};
use std::io::IsTerminal;
use std::path::PathBuf;

pub fn run(cli: &Cli, args: &RollbackArgs, host: &Host) -> Result<u8> {
    let state_dir = host.path(&host.state_dir);
    let Some(journal) = Journal::load(&state_dir)? else {
        // No journal: no migration got as far as changing anything.
        if cli.json {
            print_json(&serde_json::json!({"schema": "pimigrate.rollback/1", "restored": []}))?;
        } else {
            println!(
                "Nothing to roll back: no migration journal in {}.",
                state_dir.display()
            );
        }
        return Ok(EXIT_OK);
    };
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("rollback changes the SD card's boot files: confirm with --yes when not on a terminal");
        }
        let go = dialoguer::Confirm::new()
            .with_prompt("Restore the SD card's boot files as they were before the migration?")
            .default(false)
            .interact()
            .context("reading the confirmation; nothing was changed")?;
        if !go {
            bail!("not confirmed; nothing was changed");
        }
    }
    let restored = restore(host, &journal)?;
    let done = state_dir.join("migration.rolled-back.json");
    std::fs::rename(Journal::path(&state_dir), &done)
        .with_context(|| format!("retiring the journal to {}", done.display()))?;
    if cli.json {
        print_json(&serde_json::json!({"schema": "pimigrate.rollback/1", "restored": restored}))?;
    } else {
        for line in &restored {
            println!("{line}");
        }
        println!(
            "The SD card boots as it did before the migration. The target disk was not touched."
        );
    }
    Ok(EXIT_OK)
}

/// Puts back every backed-up file and removes every file the migration
/// created on the boot partition. Each step is atomic; running it twice is
/// harmless.
fn restore(host: &Host, journal: &Journal) -> Result<Vec<String>> {
    let boot = host.path(&journal.boot_dir);
    let inside = |p: &PathBuf| boot.join(p.strip_prefix("/").unwrap_or(p));
    let mut done = Vec::new();
    for (file, backup) in &journal.backups {
        let saved = inside(backup);
        // A backup the journal announces but that is not there was never
        // written, so the file it guards was never replaced either.
        if !saved.exists() {
            continue;
        }
        let bytes = std::fs::read(&saved)
            .with_context(|| format!("reading the backup {}", saved.display()))?;
        atomic::replace(&inside(file), &bytes)?;
        std::fs::remove_file(&saved).with_context(|| format!("removing {}", saved.display()))?;
        done.push(format!(
            "restored {} from {}",
            inside(file).display(),
            saved.display()
        ));
    }
    for created in &journal.created {
        let path = host.path(created);
        if journal.backups.keys().any(|f| inside(f) == path) {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => done.push(format!("removed {}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("removing {}", path.display())),
        }
    }
    if let Some(parent) = Some(&boot) {
        std::fs::File::open(parent).and_then(|d| d.sync_all()).ok();
    }
    Ok(done)
}
