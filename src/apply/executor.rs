//! Applies a plan, one journaled step at a time: the target laid out and
//! made a replica of the running system ([`super::replica::run`], the
//! engine a sync's standby is made with too), then what only a migration
//! does: the trial's guard and the journal on the new root, the
//! bootloader's config, and the SD card's boot files through
//! [`BootWriter`].
//!
//! Order is what keeps the source safe: everything happens on the target
//! first; the source's boot files change last, atomically, after a backup,
//! so an interruption at any point leaves a Pi that boots as before.

use super::atomic;
use super::boot_partition::BootWriter;
use super::bootloader;
use super::layout::lay_out;
use super::log::MigrationLog;
use super::replica::{self, BootWrite, Points, Record, Replica, ReplicaSpec, Words};
use super::standing::Writing;
use super::state::StateLock;
use crate::failpoint;
use crate::host::Host;
use crate::plan::trial::{self, CONFIG_TXT};
use crate::plan::{edits, EditSite, FileEdit, PartitionPath, PartitionRole, Plan, TargetIdentity};
use crate::state::journal::{Journal, Step};
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
            bail!("interrupted (Ctrl-C or SIGTERM)");
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
        "the target {}{serial} is gone: it was unplugged or lost power during the migration; \
         plug it in again before going on",
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
    lock.save_journal(&mut journal, &state_dir)?;
    check_identity(system, &plan.target)?;
    bootloader::remember(system, &lock, &mut journal, &state_dir)?;
    ctx.check_cancel()?;
    let mut record = JournalAt {
        lock: &lock,
        journal: &mut journal,
        dir: &state_dir,
    };
    let devices = lay_out(&plan.target, &plan.disk, &mut record, ctx)?;
    ctx.check_cancel()?;
    let source_root = host.path(&record.journal.source_root);
    let source_boot = host.path(&record.journal.boot_dir);
    let target_trial = |boot: &Path| write_target_trial(&plan, boot, system.pi.config_filter);
    let spec = replica_spec(&plan, &source_root, &source_boot, &target_trial)?;
    let replica = replica::run(&devices, &spec, &mut record, ctx)?;
    set_up_trim(&lock, &mut journal, &state_dir, &replica, ctx)?;
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
    lock.save_journal(&mut journal, &state_dir)?;
    leave_target(&lock, &journal, &state_dir, replica, ctx)?;
    drop(devices);
    ctx.check_cancel()?;
    configure_bootloader(system, &lock, &mut journal, &state_dir, ctx)?;
    if !journal.is_done(Step::SourceBootEdited) {
        match source_boot {
            Some(writes) => {
                (ctx.step)("updating the SD card's boot files (last, atomically, after a backup)");
                crate::failpoint::hit("source-edit-start")?;
                // From here on an error may leave either version of each
                // file: the standing says so (`Writing`).
                write_source_boot(&sd_boot, &writes)
                    // The SD card now starts the new root; the journal does
                    // not know yet. A power cut here boots the new root,
                    // where `migrate --resume` completes the journal.
                    .and_then(|()| Ok(crate::failpoint::hit("source-boot-written")?))
                    .and_then(|()| lock.mark_step(&mut journal, Step::SourceBootEdited, &state_dir))
                    .context(Writing::SdCardBootFiles)?;
            }
            None => lock.mark_step(&mut journal, Step::SourceBootEdited, &state_dir)?,
        }
    }
    Ok(journal)
}

/// A migration's replica: a fresh copy onto the target's new filesystems,
/// its own boot tree (a full move), the plan's edits of the target's files
/// and, with them, a full move's tryboot.txt.
fn replica_spec<'a>(
    plan: &'a Plan,
    source_root: &'a Path,
    source_boot: &'a Path,
    target_trial: BootWrite<'a>,
) -> Result<ReplicaSpec<'a>> {
    Ok(ReplicaSpec {
        root: part_number(plan, PartitionRole::Root)?,
        boot: plan.disk.part(PartitionRole::Boot).map(|(p, _)| p.number),
        mount_names: ["target-root", "target-boot"],
        source_root,
        source_boot,
        exclusions: &plan.copy.exclusions,
        checksum: plan.copy.checksum,
        changed_since: None,
        fresh: true,
        boot_left_out: &[],
        edits: &plan.edits,
        with_edits: Some(target_trial),
        words: Words {
            copy: "copying the root filesystem",
            boot: "copying the boot files to the new boot partition",
            edits: "editing fstab (and cmdline.txt) on the target",
            flush: None,
        },
        points: Points {
            mounted: failpoint::point("after-mount"),
            copied: failpoint::point("after-copy"),
            edited: None,
            flushed: failpoint::point("after-target-edits"),
        },
        then: "the source keeps them as they are; fix these first",
    })
}

/// The TRIM rule and fstrim.timer's link on the new root, flushed and
/// then journaled (done again on a resume until then).
fn set_up_trim(
    lock: &StateLock,
    journal: &mut Journal,
    state_dir: &Path,
    replica: &Replica,
    ctx: &ApplyContext,
) -> Result<()> {
    if journal.is_done(Step::TrimSetUp) {
        return Ok(());
    }
    let trim = &journal.plan.after_move.trim;
    if trim.writes() {
        (ctx.step)("setting up TRIM on the new root (the udev rule, fstrim.timer)");
    }
    let done = super::trim_setup::install(trim, replica.root.path())?;
    if let Some(log) = ctx.log {
        for line in &done {
            log.line(line);
        }
    }
    replica.root.sync()?;
    crate::failpoint::hit("after-trim-setup")?;
    lock.mark_step(journal, Step::TrimSetUp, state_dir)
}

/// What the new root gets before it is let go (the trial's guard, the
/// journal, the reports and the log), then both filesystems flushed and
/// unmounted.
fn leave_target(
    lock: &StateLock,
    journal: &Journal,
    state_dir: &Path,
    replica: Replica,
    ctx: &ApplyContext,
) -> Result<()> {
    super::trial_guard::install(&journal.plan, replica.root.path())?;
    copy_journal_to_target(lock, journal, state_dir, replica.root.path(), ctx.log)?;
    crate::failpoint::hit("after-journal-copy")?;
    nix::unistd::sync();
    if let Some(boot) = replica.boot {
        boot.unmount()?;
    }
    replica.root.unmount()?;
    crate::failpoint::hit("after-unmount")?;
    Ok(())
}

/// A full move's change to the bootloader's config (`--boot-order
/// apply`), made once, through rpi-eeprom-config.
fn configure_bootloader(
    system: &System,
    lock: &StateLock,
    journal: &mut Journal,
    state_dir: &Path,
    ctx: &ApplyContext,
) -> Result<()> {
    if journal.is_done(Step::BootloaderConfigured) {
        return Ok(());
    }
    let change = journal
        .plan
        .bootloader
        .as_ref()
        .and_then(|b| b.at_migrate_made());
    let Some(change) = change else {
        return lock.mark_step(journal, Step::BootloaderConfigured, state_dir);
    };
    (ctx.step)(&format!(
        "changing the bootloader's config through rpi-eeprom-config: {}",
        change.purpose
    ));
    // An error from here on may leave the change made or not (`Writing`).
    let mut made = || -> Result<()> {
        let (said, done) = bootloader::make(system, journal, &change)?;
        if let Some(log) = ctx.log {
            log.block(&said);
            log.line(&done);
        }
        crate::failpoint::hit("after-bootloader")?;
        lock.mark_step(journal, Step::BootloaderConfigured, state_dir)
    };
    made().context(Writing::Bootloader)
}

/// A full move's one-shot boot of the new drive: tryboot.txt on its own
/// boot partition (its config.txt, a copy of the SD card's, pointing at
/// the trial's command line, which the edits wrote beside cmdline.txt).
fn write_target_trial(plan: &Plan, dir: &Path, model: Option<&str>) -> Result<()> {
    let Some(trial) = plan
        .trial_boot
        .as_ref()
        .filter(|t| t.site == EditSite::TargetBoot)
    else {
        return Ok(());
    };
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
        let seen = |size: u64, model: Option<&str>, serial: Option<&str>| {
            format!(
                "{}, {}, serial {}",
                crate::units::binary(size),
                model.unwrap_or("no model"),
                serial.unwrap_or("none")
            )
        };
        bail!(
            "{} is no longer the disk in the plan (it was {}, now {}); nothing was written: make the plan again",
            planned.path.display(),
            seen(planned.size_bytes, planned.model.as_deref(), planned.serial.as_deref()),
            seen(disk.size_bytes, disk.model.as_deref(), disk.serial.as_deref())
        );
    }
    Ok(())
}

/// The number of the plan's partition with `role`.
fn part_number(plan: &Plan, role: PartitionRole) -> Result<u32> {
    plan.disk
        .part(role)
        .map(|(p, _)| p.number)
        .with_context(|| format!("the plan has no {} partition", role_name(role)))
}

/// A partition's role, in words.
fn role_name(role: PartitionRole) -> &'static str {
    match role {
        PartitionRole::Root => "root",
        PartitionRole::Boot => "boot",
    }
}

/// The migration's journal as the record of the replica's steps.
struct JournalAt<'a> {
    lock: &'a StateLock,
    journal: &'a mut Journal,
    dir: &'a Path,
}

impl Record for JournalAt<'_> {
    fn is_done(&self, step: Step) -> bool {
        self.journal.is_done(step)
    }

    fn mark(&mut self, step: Step) -> Result<()> {
        self.lock.mark_step(self.journal, step, self.dir)
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
    lock: &StateLock,
    journal: &Journal,
    state_dir: &Path,
    target_root: &Path,
    log: Option<&MigrationLog>,
) -> Result<()> {
    let dir = target_root.join("var/lib/pimigrate");
    let mut copy = journal.clone();
    lock.save_journal(&mut copy, &dir)?;
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
        assert!(text.contains("plug it in again"), "{text}");
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
