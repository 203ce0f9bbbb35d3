//! Applies a plan, one journaled step at a time: the only code that writes
//! to the target; the SD card's boot files through [`BootWriter`].
//!
//! Order is what keeps the source safe: everything happens on the target
//! first; the source's boot files change last, atomically, after a backup,
//! so an interruption at any point leaves a Pi that boots as before.

use super::atomic;
use super::boot_partition::{BootWriter, StateLock};
use super::boot_tree;
use super::bootloader;
use super::copy_root::{copy_root, RootCopy};
use super::edit_files::write_edited;
use super::journal::{Journal, Step};
use super::layout::{lay_out, LayoutRecord};
use super::log::MigrationLog;
use super::mount::{mount_device, Mounted};
use crate::host::Host;
use crate::plan::trial::{self, CONFIG_TXT};
use crate::plan::{edits, EditSite, FileEdit, PartitionPath, PartitionRole, Plan, TargetIdentity};
use crate::system::System;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the executor tells the user about, and how it learns of Ctrl-C.
pub struct ApplyContext<'a> {
    pub cancel: &'a AtomicBool,
    /// A new step begins.
    pub step: &'a dyn Fn(&str),
    /// The copy's progress: bytes copied and entries looked at so far.
    pub progress: &'a dyn Fn(u64, u64),
    /// The migration's log, copied onto the new root with the journal.
    pub log: Option<&'a MigrationLog>,
}

impl ApplyContext<'_> {
    pub(crate) fn check_cancel(&self) -> Result<()> {
        if self.cancel.load(Ordering::SeqCst) {
            bail!("interrupted; the source is unchanged. `pimigrate migrate --resume` carries on, `pimigrate rollback` undoes");
        }
        Ok(())
    }
}

/// Applies `plan` (a fresh journal), or carries on with `journal` (resume).
pub fn apply(system: &System, journal: Journal, ctx: &ApplyContext) -> Result<Journal> {
    let planned = journal.plan.target.clone();
    apply_steps(system, journal, ctx)
        .map_err(|err| explain_lost_target(&system.host, &planned, err))
}

/// How long a target that failed with a device's kind of error (I/O error,
/// read-only filesystem, no such device) gets to leave the bus before it
/// counts as present. After an unplug the filesystem can see the errors and
/// turn read-only before the kernel has finished removing the disk, which
/// its SCSI error handling can take seconds to do.
const LOST_TARGET_GRACE: Duration = Duration::from_secs(15);

/// A target that vanished mid-way (unplugged, lost power, bridge reset)
/// shows up as I/O errors on some file deep in the copy; the user needs to
/// hear that the disk is gone, that the SD card is as it was, and what to do.
fn explain_lost_target(host: &Host, planned: &TargetIdentity, err: anyhow::Error) -> anyhow::Error {
    let node = host.sys(&format!("dev/block/{}", planned.devno));
    let grace = if device_trouble(&err) {
        LOST_TARGET_GRACE
    } else {
        Duration::ZERO
    };
    if !gone_within(&node, grace) {
        return err;
    }
    let serial = planned
        .serial
        .as_deref()
        .map(|s| format!(", serial {s}"))
        .unwrap_or_default();
    err.context(format!(
        "the target {}{serial} is gone: it was unplugged or lost power during the migration. \
         The SD card's boot files are unchanged, so the Pi still boots from the SD card. \
         Plug the disk in again and run `pimigrate migrate --resume` to carry on, \
         or `pimigrate rollback` to give up",
        planned.path.display()
    ))
}

/// Whether `err` comes from the kernel's errors of a failing or vanishing
/// disk, anywhere in its chain (the copy's own errors keep their errno).
fn device_trouble(err: &anyhow::Error) -> bool {
    use nix::libc::{EIO, ENODEV, ENXIO, EROFS};
    err.chain().any(|e| {
        let errno = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .or_else(|| {
                e.downcast_ref::<crate::copy::CopyError>()
                    .and_then(|e| e.errno)
            });
        matches!(errno, Some(EIO | ENODEV | ENXIO | EROFS))
    })
}

/// Whether `node` is gone now or within `grace`, looked at every 100 ms.
fn gone_within(node: &Path, grace: Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if !node.exists() {
            return true;
        }
        if start.elapsed() >= grace {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn apply_steps(system: &System, journal: Journal, ctx: &ApplyContext) -> Result<Journal> {
    let host = &system.host;
    let state_dir = host.path(&host.state_dir);
    let lock = StateLock::acquire(&state_dir)?;
    let sd_boot = BootWriter::new(&lock, host, &journal.boot_dir);
    super::mount::clean_up_stale_mounts()?;
    let mut journal = journal;
    let plan = journal.plan.clone();
    journal.save(&state_dir)?;
    check_identity(system, &plan.target)?;
    bootloader::remember(system, &mut journal, &state_dir)?;
    ctx.check_cancel()?;

    let devices = lay_out(
        &plan.target,
        &plan.disk,
        &mut JournalAt {
            journal: &mut journal,
            dir: &state_dir,
        },
        ctx,
    )?;
    ctx.check_cancel()?;

    let root_device = devices.of(part_number(&plan, PartitionRole::Root)?)?;
    let target_root = mount_device(root_device, "ext4", "target-root")?;
    crate::failpoint::hit("after-mount");
    if !journal.is_done(Step::Copied) {
        copy_root_step(host, &mut journal, &target_root, &state_dir, ctx)?;
    }
    ctx.check_cancel()?;

    let source_boot_dir = host.path(&journal.boot_dir);
    let target_boot = match &plan.boot_copy {
        Some(_) => {
            let boot_device = devices.of(part_number(&plan, PartitionRole::Boot)?)?;
            let mounted = mount_device(boot_device, "vfat", "target-boot")?;
            if !journal.is_done(Step::BootFilesCopied) {
                (ctx.step)("copying the boot files to the new boot partition");
                boot_tree::sync(
                    &source_boot_dir,
                    mounted.path(),
                    &own_names(&plan, EditSite::TargetBoot),
                    false,
                    ctx.cancel,
                    &|| {},
                )?;
                mounted.sync()?;
                journal.mark(Step::BootFilesCopied, &state_dir)?;
            }
            Some(mounted)
        }
        None => None,
    };

    if !journal.is_done(Step::TargetEdited) {
        (ctx.step)("editing fstab (and cmdline.txt) on the target");
        let source_root = host.path(&journal.source_root);
        edit_target(
            &plan,
            &source_root,
            &source_boot_dir,
            &target_root,
            target_boot.as_ref(),
        )?;
        target_root.sync()?;
        if let Some(boot) = &target_boot {
            write_target_trial(&plan, boot, system.pi.config_filter)?;
            boot.sync()?;
        }
        crate::failpoint::hit("after-target-edits");
        journal.mark(Step::TargetEdited, &state_dir)?;
    }
    // The SD card's changes are journaled before the journal travels to the
    // new root, so `rollback` there knows them too.
    let source_boot = match plan.edits.iter().find(|e| e.site == EditSite::SourceBoot) {
        Some(edit) if !journal.is_done(Step::SourceBootEdited) => Some(prepare_source_boot(
            &sd_boot,
            &mut journal,
            edit,
            &plan,
            system.pi.config_filter,
        )?),
        _ => None,
    };
    journal.save(&state_dir)?;
    super::trial_guard::install(&plan, target_root.path())?;
    copy_journal_to_target(&journal, &state_dir, target_root.path(), ctx.log)?;
    crate::failpoint::hit("after-journal-copy");
    nix::unistd::sync();
    if let Some(boot) = target_boot {
        boot.unmount()?;
    }
    target_root.unmount()?;
    crate::failpoint::hit("after-unmount");
    drop(devices);
    ctx.check_cancel()?;

    if !journal.is_done(Step::BootloaderConfigured) {
        if let Some(change) = plan
            .bootloader
            .as_ref()
            .filter(|b| b.consent)
            .and_then(|b| b.at_migrate.as_ref())
        {
            (ctx.step)(&format!(
                "changing the bootloader's config through rpi-eeprom-config: {}",
                change.purpose
            ));
            let (said, done) = bootloader::make(system, &journal, change)?;
            if let Some(log) = ctx.log {
                log.block(&said);
                log.line(&done);
            }
            crate::failpoint::hit("after-bootloader");
        }
        journal.mark(Step::BootloaderConfigured, &state_dir)?;
    }

    if !journal.is_done(Step::SourceBootEdited) {
        if let Some(writes) = source_boot {
            (ctx.step)("updating the SD card's boot files (last, atomically, after a backup)");
            crate::failpoint::hit("source-edit-start");
            write_source_boot(&sd_boot, &writes)?;
            // The SD card now starts the new root; the journal does not
            // know yet. A power cut here boots the new root, where
            // `migrate --resume` completes the journal.
            crate::failpoint::hit("source-boot-written");
        }
        journal.mark(Step::SourceBootEdited, &state_dir)?;
    }
    Ok(journal)
}

/// A full move's one-shot boot of the new drive: tryboot.txt on its own
/// boot partition (its config.txt, a copy of the SD card's, pointing at
/// the trial's command line, which the edits wrote beside cmdline.txt).
fn write_target_trial(plan: &Plan, boot: &Mounted, model: Option<&str>) -> Result<()> {
    let Some(trial) = plan
        .trial_boot
        .as_ref()
        .filter(|t| t.site == EditSite::TargetBoot)
    else {
        return Ok(());
    };
    let dir = boot.path();
    let config_path = PartitionPath::known(CONFIG_TXT).under(dir);
    let config = std::fs::read(&config_path)
        .with_context(|| format!("reading {}", config_path.display()))?;
    let mut read = |name: &str| -> std::io::Result<Option<Vec<u8>>> {
        let file = PartitionPath::new(name)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?
            .under(dir);
        match std::fs::read(&file) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    };
    let tryboot = trial::tryboot_contents(&config, model, &mut read)?.bytes;
    let file = trial.tryboot_file.under(dir);
    if let Some(backup) = &trial.backup {
        atomic::backup(&file, &backup.under(dir), atomic::BACKUP)?;
    }
    atomic::replace(&file, &tryboot, atomic::FILE)
}

/// Right before the first write: is the target still the disk the user saw?
pub(crate) fn check_identity(system: &System, planned: &TargetIdentity) -> Result<()> {
    let now = System::inspect(&system.host).context("reading the disks again before writing")?;
    let Some(disk) = now.disks.iter().find(|d| d.devno == planned.devno) else {
        bail!("{} is gone; nothing was written", planned.path.display());
    };
    let same = disk.size_bytes == planned.size_bytes
        && disk.model == planned.model
        && disk.serial == planned.serial
        && disk.path == planned.path;
    if !same {
        bail!(
            "{} is no longer the disk in the plan (was {} {:?} serial {:?}, now {} {:?} serial {:?}); \
             nothing was written: make the plan again",
            planned.path.display(),
            planned.size_bytes,
            planned.model,
            planned.serial,
            disk.size_bytes,
            disk.model,
            disk.serial
        );
    }
    Ok(())
}

/// The live root copied onto the mounted target root (both passes), and
/// on the target's disk before the journal says so: after a power cut a
/// resume trusts this step and copies nothing again.
fn copy_root_step(
    host: &Host,
    journal: &mut Journal,
    target_root: &Mounted,
    state_dir: &Path,
    ctx: &ApplyContext,
) -> Result<()> {
    (ctx.step)("copying the root filesystem");
    let plan = &journal.plan;
    let own = own_files(plan);
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    copy_root(
        &RootCopy {
            source: &host.path(&journal.source_root),
            exclusions: &plan.copy.exclusions,
            own_files: &own,
            checksum: plan.copy.checksum,
            changed_since: None,
            fresh: true,
            then: "the source is unchanged; fix these and run `pimigrate migrate --resume`",
        },
        target_root.path(),
        ctx,
    )?;
    target_root.sync()?;
    crate::failpoint::hit("after-copy");
    journal.mark(Step::Copied, state_dir)
}

/// The files on the new root the plan edits: the copy leaves them out and
/// the edits write them.
fn own_files(plan: &Plan) -> Vec<String> {
    plan.edits
        .iter()
        .filter(|e| e.site == EditSite::TargetRoot)
        .map(|e| e.output.to_string())
        .collect()
}

/// The names on the new boot partition the plan edits, which the boot
/// tree's copy leaves to the edits.
fn own_names(plan: &Plan, site: EditSite) -> Vec<String> {
    plan.edits
        .iter()
        .filter(|e| e.site == site)
        .map(|e| e.output.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The plan's edits of the target's files (fstab, ROOTPART, and a full
/// move's cmdline.txt on the new boot partition), made on the running
/// system's files as they are now.
fn edit_target(
    plan: &Plan,
    source_root: &Path,
    source_boot: &Path,
    target_root: &Mounted,
    target_boot: Option<&Mounted>,
) -> Result<()> {
    for edit in plan.edits.iter().filter(|e| e.site != EditSite::SourceBoot) {
        let (from, to) = match edit.site {
            EditSite::TargetBoot => (
                source_boot,
                target_boot
                    .map(Mounted::path)
                    .context("the plan edits a target boot partition it does not have")?,
            ),
            _ => (source_root, target_root.path()),
        };
        write_edited(from, to, edit)?;
    }
    Ok(())
}

/// The number of the plan's partition with `role`.
fn part_number(plan: &Plan, role: PartitionRole) -> Result<u32> {
    plan.disk
        .part(role)
        .map(|(p, _)| p.number)
        .with_context(|| format!("the plan has no {role:?} partition"))
}

/// The migration's journal as the record of its layout steps.
struct JournalAt<'a> {
    journal: &'a mut Journal,
    dir: &'a Path,
}

impl LayoutRecord for JournalAt<'_> {
    fn is_done(&self, step: Step) -> bool {
        self.journal.is_done(step)
    }

    fn mark(&mut self, step: Step) -> Result<()> {
        self.journal.mark(step, self.dir)
    }
}

/// What the last step writes to the SD card's boot partition: paths as seen
/// from the partition's root.
struct SourceBootWrites {
    backups: Vec<(PartitionPath, PartitionPath)>,
    writes: Vec<(PartitionPath, Vec<u8>)>,
}

/// Works out the last step of a root-only move (a trial boot's files, or
/// the new cmdline.txt itself) and records in the journal what it will
/// create and back up, before a byte is written, so `rollback` finds it
/// after a crash.
fn prepare_source_boot(
    sd_boot: &BootWriter,
    journal: &mut Journal,
    edit: &FileEdit,
    plan: &Plan,
    model: Option<&str>,
) -> Result<SourceBootWrites> {
    let current = sd_boot.read(&edit.file)?;
    let edited = edits::apply(&current, &edit.operations)?;
    let (backups, created, writes) = match &plan.trial_boot {
        Some(trial) if trial.site == EditSite::SourceBoot => {
            let config = sd_boot
                .read(&PartitionPath::known(CONFIG_TXT))
                .context("reading config.txt")?;
            // Includes are read from the SD card as they are now, like
            // config.txt itself, through the boot partition's one reader.
            let mut read = |name: &str| -> std::io::Result<Option<Vec<u8>>> {
                let file = PartitionPath::new(name)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                match sd_boot.exists(&file) {
                    false => Ok(None),
                    true => sd_boot
                        .read(&file)
                        .map(Some)
                        .map_err(|e| std::io::Error::other(format!("{e:#}"))),
                }
            };
            let tryboot = trial::tryboot_contents(&config, model, &mut read)?.bytes;
            let mut created = vec![trial.cmdline_file.clone()];
            let mut backups = Vec::new();
            match &trial.backup {
                Some(backup) => backups.push((trial.tryboot_file.clone(), backup.clone())),
                None => created.push(trial.tryboot_file.clone()),
            }
            let writes = vec![
                (trial.cmdline_file.clone(), edited),
                (trial.tryboot_file.clone(), tryboot),
            ];
            (backups, created, writes)
        }
        _ => {
            let backups = edit
                .backup
                .iter()
                .map(|b| (edit.file.clone(), b.clone()))
                .collect();
            (backups, Vec::new(), vec![(edit.output.clone(), edited)])
        }
    };
    for (file, backup) in &backups {
        journal.backups.insert(file.clone(), backup.clone());
    }
    for path in created {
        if !journal.created.contains(&path) {
            journal.created.push(path);
        }
    }
    Ok(SourceBootWrites { backups, writes })
}

/// Backs up, then replaces, each file atomically.
fn write_source_boot(sd_boot: &BootWriter, prepared: &SourceBootWrites) -> Result<()> {
    for (file, backup) in &prepared.backups {
        sd_boot.backup(file, backup)?;
    }
    for (file, bytes) in &prepared.writes {
        sd_boot.replace(file, bytes)?;
    }
    Ok(())
}

/// The journal goes along to the new system, so `rollback` and `verify`
/// work from there too; so do the benchmark reports, which hold the
/// "before" figures `verify` compares the new root with, and the log, so
/// the new system's /var/log/pimigrate tells how it was made.
fn copy_journal_to_target(
    journal: &Journal,
    state_dir: &Path,
    target_root: &Path,
    log: Option<&MigrationLog>,
) -> Result<()> {
    let dir = target_root.join("var/lib/pimigrate");
    let mut copy = journal.clone();
    copy.save(&dir)?;
    copy_reports(&state_dir.join("reports"), &dir.join("reports"))?;
    if let Some(log) = log {
        // The last steps (unmounting, the SD card's boot files) happen after
        // this copy; the log on the old root has them.
        log.line(&format!(
            "copying this log to the new root; the lines after this one are in {} on the old root",
            log.path().display()
        ));
        log.copy_into(&target_root.join("var/log/pimigrate"))?;
    }
    Ok(())
}

/// Copies every saved report (a missing directory means none were saved).
fn copy_reports(from: &Path, to: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("listing {}", from.display())),
    };
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("listing {}", from.display()))?
            .path();
        if path.extension().is_some_and(|ext| ext == "json") {
            let dest = to.join(path.file_name().unwrap_or_default());
            std::fs::copy(&path, &dest).with_context(|| {
                format!(
                    "copying the report {} to {}",
                    path.display(),
                    dest.display()
                )
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::disks::Transport;
    use crate::system::mounts::DevNo;
    use std::path::PathBuf;

    fn usb_ssd() -> TargetIdentity {
        TargetIdentity {
            path: PathBuf::from("/dev/sda"),
            name: "sda".into(),
            devno: DevNo { major: 8, minor: 0 },
            vendor: Some("ASMedia".into()),
            model: Some("SSD".into()),
            serial: Some("TB-SSD".into()),
            size_bytes: 8 << 30,
            logical_sector_size: 512,
            transport: Transport::Usb,
        }
    }

    #[test]
    fn a_vanished_target_is_named_with_what_to_do() {
        let root = tempfile::tempdir().unwrap();
        let host = Host::with_root(root.path());
        let io = std::io::Error::from_raw_os_error(nix::libc::EIO);
        let err = anyhow::Error::new(io).context("writing /run/pimigrate/x/usr/bin/ls");
        let text = format!("{:#}", explain_lost_target(&host, &usb_ssd(), err));
        assert!(
            text.starts_with("the target /dev/sda, serial TB-SSD is gone"),
            "{text}"
        );
        assert!(text.contains("unplugged"), "{text}");
        assert!(text.contains("pimigrate migrate --resume"), "{text}");
        // The original error stays, for the log and bug reports.
        assert!(
            text.contains("writing /run/pimigrate/x/usr/bin/ls"),
            "{text}"
        );
    }

    #[test]
    fn a_present_target_leaves_the_error_alone() {
        let root = tempfile::tempdir().unwrap();
        let node = root.path().join("sys/dev/block/8:0");
        std::fs::create_dir_all(&node).unwrap();
        let host = Host::with_root(root.path());
        let err = anyhow::anyhow!("No space left on device");
        let text = format!("{:#}", explain_lost_target(&host, &usb_ssd(), err));
        assert_eq!(text, "No space left on device");
    }

    /// The scenario unplug-mid-copy met it: ext4 had turned read-only
    /// (EROFS, the copy's fatal error) while the kernel was still removing
    /// the disk, so the device was there when the error came back.
    #[test]
    fn a_target_that_leaves_the_bus_just_after_the_error_is_named() {
        let root = tempfile::tempdir().unwrap();
        let node = root.path().join("sys/dev/block/8:0");
        std::fs::create_dir_all(&node).unwrap();
        let host = Host::with_root(root.path());
        let erofs = std::io::Error::from_raw_os_error(nix::libc::EROFS);
        let copy =
            crate::copy::CopyError::new(Path::new("/x/usr/bin/apt-get"), "create file", &erofs);
        let err = anyhow::Error::new(copy).context("copying / to /run/pimigrate/target-root");
        let removal = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            std::fs::remove_dir(&node).unwrap();
        });
        let text = format!("{:#}", explain_lost_target(&host, &usb_ssd(), err));
        removal.join().unwrap();
        assert!(
            text.starts_with("the target /dev/sda, serial TB-SSD is gone"),
            "{text}"
        );
        assert!(text.contains("Read-only file system"), "{text}");
    }

    #[test]
    fn only_a_devices_errors_wait_for_it_to_leave() {
        let eio = std::io::Error::from_raw_os_error(nix::libc::EIO);
        assert!(device_trouble(&anyhow::Error::new(eio).context("writing")));
        let enospc = std::io::Error::from_raw_os_error(nix::libc::ENOSPC);
        let copy = crate::copy::CopyError::new(Path::new("/x"), "copy data", &enospc);
        assert!(!device_trouble(&anyhow::Error::new(copy)));
        assert!(!device_trouble(&anyhow::anyhow!("no root= in cmdline.txt")));
    }
}
