//! The two changes verify makes to the boot partition, both through the
//! boot partition's one writer, as the migration's: `--commit` (the trial's
//! command line becomes cmdline.txt) and `--apply-quirk` (usb-storage for
//! a uas bridge). The journal learns of each backup before the file
//! changes, so `rollback` can always restore the pre-migration cmdline.txt.

use super::expected::Expected;
use crate::apply::boot_partition::BootWriter;
use crate::apply::bootloader;
use crate::apply::sd_boot::SdBoot;
use crate::apply::standing::Writing;
use crate::apply::state::StateLock;
use crate::bootcfg::usb_quirks::{add_ignore_uas, effective_quirks, UsbId};
use crate::bootcfg::Cmdline;
use crate::plan::{EditSite, EepromTakesEffect, Handover, TrialBoot};
use crate::state::journal::Journal;
use crate::system::System;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Makes a verified trial boot permanent; returns what it did, line by line.
pub fn commit(
    boot: &BootWriter,
    journal: &mut Journal,
    expected: &Expected,
    state_dir: &Path,
    still_answers: &dyn Fn() -> Result<()>,
) -> Result<Vec<String>> {
    let Some(trial) = &expected.trial else {
        bail!("this migration had no trial boot: nothing to commit");
    };
    let cmdline = &expected.cmdline_file;
    if expected.commit_interrupted && !boot.exists(&trial.cmdline_file) {
        return finish_interrupted(boot, journal, expected, trial, state_dir);
    }
    let backup = boot.backup_name(journal, cmdline);
    let trial_cmdline = boot.resolve(&trial.cmdline_file);
    let new = std::fs::read(&trial_cmdline).with_context(|| {
        format!(
            "reading the trial's command line {}",
            trial_cmdline.display()
        )
    })?;
    let parsed = Cmdline::parse(&new)
        .with_context(|| format!("{} is not a usable command line", trial_cmdline.display()))?;
    let root = parsed
        .root()
        .with_context(|| format!("{} is not a usable command line", trial_cmdline.display()))?;
    // The normal command line: the trial's without what only resets a
    // trial (`plan::trial_guard`), the words it stood in for put back.
    let new = match &trial.guard {
        Some(guard) => guard.normal(&parsed).to_bytes(),
        None => new,
    };
    if root != expected.root_spec() && !root_is_planned(journal, &root) {
        bail!(
            "{} boots root={root}, not the target's {}; nothing was changed",
            trial_cmdline.display(),
            expected.root_spec()
        );
    }
    // Journal first: a power cut after the backup must leave a journal
    // that restores from it.
    journal.backups.insert(cmdline.clone(), backup.clone());
    boot.lock().save_journal(journal, state_dir)?;

    let mut done = Vec::new();
    boot.backup(cmdline, &backup)?;
    // Whole, the one or the other, whatever stops it (`Writing`).
    boot.replace(cmdline, &new)
        .context(Writing::SdCardBootFiles)?;
    // The next boot starts the new root whatever happens now; a power cut
    // before the journal says so is finished by `verify --commit` in that
    // boot (see `Expected::commit_interrupted`).
    crate::failpoint::hit(crate::failpoint::COMMIT_AFTER_SWAP).context(Writing::Tidying)?;
    // The new drive gone as the swap was made (it answered just before):
    // the SD card's own command line goes back, and its next boot is the
    // SD card's as before.
    if let Err(why) = still_answers() {
        let original = boot.read(&backup)?;
        boot.replace(cmdline, &original)
            .context(Writing::SdCardBootFiles)?;
        bail!(
            "not committed: {why:#} once {} was swapped; it holds its original command line \
             again, so the SD card starts next",
            boot.resolve(cmdline).display()
        );
    }
    done.push(format!(
        "{} now holds the trial's command line{} (the original is in {})",
        boot.resolve(cmdline).display(),
        match trial.guard {
            Some(_) => ", less the words that only reset a failed trial",
            None => "",
        },
        boot.resolve(&backup).display()
    ));
    tidy_up(boot, journal, trial, state_dir, &mut done).context(Writing::Tidying)?;
    Ok(done)
}

/// After the swap: the trial's files gone, the commit recorded.
fn tidy_up(
    boot: &BootWriter,
    journal: &mut Journal,
    trial: &TrialBoot,
    state_dir: &Path,
    done: &mut Vec<String>,
) -> Result<()> {
    done.extend(remove_trial_files(boot, journal, trial)?);
    journal.committed = Some(crate::clock::now());
    boot.lock().save_journal(journal, state_dir)?;
    done.push(format!(
        "recorded in {}: `pimigrate rollback` still restores the pre-migration cmdline.txt",
        Journal::path(state_dir).display()
    ));
    Ok(())
}

/// An earlier commit swapped cmdline.txt and had begun to tidy up (the
/// trial's command line is gone) when it stopped, before the journal said
/// so: what is left of it, when cmdline.txt does start the target.
fn finish_interrupted(
    boot: &BootWriter,
    journal: &mut Journal,
    expected: &Expected,
    trial: &TrialBoot,
    state_dir: &Path,
) -> Result<Vec<String>> {
    let cmdline = boot.resolve(&expected.cmdline_file);
    let now = boot.read(&expected.cmdline_file)?;
    let root = Cmdline::parse(&now).ok().and_then(|c| c.root().ok());
    if !root.is_some_and(|root| root == expected.root_spec() || root_is_planned(journal, &root)) {
        bail!(
            "the trial's command line {} is gone, and {} does not start the target {}: nothing was changed",
            boot.resolve(&trial.cmdline_file).display(),
            cmdline.display(),
            expected.root_spec()
        );
    }
    let mut done = vec![format!(
        "{} holds the trial's command line already (a commit that stopped part way): finishing it",
        cmdline.display()
    )];
    tidy_up(boot, journal, trial, state_dir, &mut done).context(Writing::Tidying)?;
    Ok(done)
}

/// The trial's files gone from the boot partition `boot` holds (a
/// tryboot.txt that was there before the migration put back).
fn remove_trial_files(
    boot: &BootWriter,
    journal: &mut Journal,
    trial: &TrialBoot,
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    // tryboot.txt goes before the command line it points at, so a trial
    // boot never finds a tryboot.txt whose cmdline= file is missing.
    let tryboot = boot.resolve(&trial.tryboot_file);
    let restored = match &trial.backup {
        Some(saved) => boot.restore(&trial.tryboot_file, saved)?,
        None => false,
    };
    match &trial.backup {
        Some(saved) if restored => {
            journal.backups.remove(&trial.tryboot_file);
            done.push(format!(
                "{} restored from {}",
                tryboot.display(),
                boot.resolve(saved).display()
            ));
        }
        _ => {
            if boot.remove(&trial.tryboot_file)? {
                done.push(format!("removed {}", tryboot.display()));
            }
        }
    }
    if boot.remove(&trial.cmdline_file)? {
        done.push(format!(
            "removed {}",
            boot.resolve(&trial.cmdline_file).display()
        ));
    }
    boot.sync();
    let gone = [&trial.tryboot_file, &trial.cmdline_file];
    journal.created.retain(|file| !gone.contains(&file));
    Ok(done)
}

/// A full move's hand-over, once its trial ran (or its new drive booted by
/// itself): the permanent boot order first, with the SD card kept as the
/// fallback (or the owner told to take it out), then the trial's files
/// gone. In that order: a power cut between the two leaves a Pi that
/// boots the new drive, where `verify --commit` finishes.
pub fn commit_full(
    system: &System,
    lock: &StateLock,
    journal: &mut Journal,
    expected: &Expected,
    state_dir: &Path,
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let bootloader = expected.bootloader.as_ref();
    // The hand-over's change (the permanent order, the trial's [tryboot]
    // order gone), on the config in the EEPROM now, read back; made or
    // not, whatever stops it (`Writing`).
    if let Some(change) = bootloader
        .filter(|b| b.consent)
        .and_then(|b| b.at_commit.as_ref())
    {
        let (_, line) = bootloader::make(system, journal, change).context(Writing::Bootloader)?;
        // The hand-over is made: what follows tidies up.
        crate::failpoint::hit("commit-after-bootloader").context(Writing::Tidying)?;
        done.push(line);
    }
    let mut tidy = || -> Result<()> {
        if let Some(trial) = &expected.trial {
            let files = match trial.site {
                EditSite::TargetBoot => remove_trial_files(
                    &BootWriter::new(lock, &system.host, &expected.boot_dir),
                    journal,
                    trial,
                )?,
                _ => {
                    let sd_boot = SdBoot::open(system, journal)?;
                    remove_trial_files(
                        &BootWriter::new(lock, &system.host, sd_boot.dir()),
                        journal,
                        trial,
                    )?
                }
            };
            done.extend(files);
        }
        journal.committed = Some(crate::clock::now());
        lock.save_journal(journal, state_dir)
    };
    tidy().context(Writing::Tidying)?;
    let staged_cleanup = bootloader.is_some_and(|b| {
        b.consent && b.at_commit.is_some() && b.takes_effect == EepromTakesEffect::NextReboot
    });
    done.push(match bootloader.map(|b| b.handover) {
        Some(Handover::BootOrder) => {
            "the SD card stays in as the fallback: the bootloader tries it when the new drive does not boot".into()
        }
        _ if staged_cleanup => "reboot once with the SD card still in, so the bootloader writes its config \
              (recovery.bin; the SD card's old system comes up), then shut down, take the SD card out and power on: \
              the bootloader then starts the new drive (keep the card: putting it back boots the old system)"
            .into(),
        _ => "shut down, take the SD card out and power on: the bootloader then starts the new drive \
              (keep the card: putting it back boots the old system)"
            .into(),
    });
    done.push(format!(
        "recorded in {}: `pimigrate rollback` still puts back the bootloader's config",
        Journal::path(state_dir).display()
    ));
    Ok(done)
}

/// The plan's own `root=` edit may use another kind of name (UUID=) for
/// the same partition.
fn root_is_planned(journal: &Journal, root: &crate::bootcfg::DeviceSpec) -> bool {
    journal.plan.edits.iter().any(|edit| {
        edit.operations.iter().any(
            |op| matches!(op, crate::plan::EditOperation::CmdlineSetRoot { spec } if spec == root),
        )
    })
}

/// The command line the next boots read, which `--apply-quirk` changes:
/// the trial's while a trial is pending (the commit carries it over),
/// cmdline.txt otherwise.
pub fn quirk_file(expected: &Expected) -> crate::plan::PartitionPath {
    match (&expected.trial, expected.committed) {
        (Some(trial), None) => trial.cmdline_file.clone(),
        _ => expected.cmdline_file.clone(),
    }
}

/// Keeps uas off the bridge `id`: its `u` merged into the one
/// `usb-storage.quirks=` argument of [`quirk_file`] (`bootcfg::usb_quirks`),
/// after a backup of the version that booted.
pub fn apply_quirk(
    boot: &BootWriter,
    journal: &mut Journal,
    expected: &Expected,
    state_dir: &Path,
    id: UsbId,
) -> Result<Vec<String>> {
    let file = quirk_file(expected);
    let path = boot.resolve(&file);
    let bytes = boot.read(&file)?;
    let mut cmdline =
        Cmdline::parse(&bytes).with_context(|| format!("{} cannot be edited", path.display()))?;
    let changed = add_ignore_uas(&mut cmdline, id).with_context(|| {
        format!(
            "adding the quirk for {id} to {}; nothing was changed",
            path.display()
        )
    })?;
    let value = effective_quirks(&cmdline).unwrap_or_default();
    if !changed {
        return Ok(vec![format!(
            "{} already keeps uas off {id} (usb-storage.quirks={value})",
            path.display()
        )]);
    }
    let is_created = expected
        .trial
        .as_ref()
        .is_some_and(|t| t.cmdline_file == file);
    if !is_created {
        let backup = boot.backup_name(journal, &file);
        // Root-only: the file is the SD card's, which rollback restores. A
        // full move's cmdline.txt is the target's own copy: no rollback
        // entry for it.
        if expected.layout == crate::plan::Layout::RootOnly && !journal.backups.contains_key(&file)
        {
            journal.backups.insert(file.clone(), backup.clone());
            boot.lock().save_journal(journal, state_dir)?;
        }
        boot.backup(&file, &backup)?;
    }
    boot.replace(&file, &cmdline.to_bytes())?;
    Ok(vec![format!(
        "set usb-storage.quirks={value} in {}: reboot for it to take effect",
        path.display()
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;

    const ORIGINAL: &str =
        "console=serial0,115200 root=PARTUUID=0b4c1d2e-02 rootfstype=ext4 rootwait\n";

    /// The root-only move of the "pi4" fixture, migrated and waiting for
    /// its commit; its boot partition in `root`, as the migration left it.
    fn migrated(root: &Path) -> (Journal, Expected) {
        let journal = crate::verify::test_journal::pi4_root_only();
        let expected = Expected::from_journal(&journal).unwrap();
        let trial = expected.trial.as_ref().expect("a trial boot");
        let boot = root.join("boot/firmware");
        std::fs::create_dir_all(&boot).unwrap();
        std::fs::write(boot.join("cmdline.txt"), ORIGINAL).unwrap();
        std::fs::write(
            boot.join(trial.cmdline_file.to_string().trim_start_matches('/')),
            format!(
                "console=serial0,115200 root={} rootfstype=ext4 rootwait\n",
                expected.root_spec()
            ),
        )
        .unwrap();
        (journal, expected)
    }

    /// The new drive stops answering as cmdline.txt is swapped: the SD
    /// card's own command line goes back, nothing is committed, and the
    /// error says so.
    #[test]
    fn a_drive_gone_at_the_swap_puts_the_original_command_line_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, expected) = migrated(dir.path());
        let host = Host::with_root(dir.path());
        let state_dir = dir.path().join("var/lib/pimigrate");
        let lock = StateLock::acquire(&state_dir).unwrap();
        let boot = BootWriter::new(&lock, &host, Path::new("/boot/firmware"));
        let gone = || -> Result<()> { bail!("/dev/sda1 does not answer") };
        let err = commit(&boot, &mut journal, &expected, &state_dir, &gone).unwrap_err();
        let said = format!("{err:#}");
        assert!(
            said.contains("not committed: /dev/sda1 does not answer")
                && said.contains("the SD card starts next"),
            "{said}"
        );
        let cmdline = dir.path().join("boot/firmware/cmdline.txt");
        assert_eq!(std::fs::read_to_string(cmdline).unwrap(), ORIGINAL);
        assert!(journal.committed.is_none());

        // Answering, the same commit is made.
        let answers = || -> Result<()> { Ok(()) };
        commit(&boot, &mut journal, &expected, &state_dir, &answers).unwrap();
        let cmdline = dir.path().join("boot/firmware/cmdline.txt");
        assert_ne!(std::fs::read_to_string(cmdline).unwrap(), ORIGINAL);
        assert!(journal.committed.is_some());
    }
}
