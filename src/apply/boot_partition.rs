//! The one writer of the boot partition the firmware reads: the SD card's
//! (the last step of a root-only move, `verify --commit`, `verify
//! --apply-quirk`, `rollback`), or, once a full move runs, the target's.
//!
//! A [`BootWriter`] is the permission to write there (bootupd's
//! `StateLockGuard`): it exists only while the state directory's lock is
//! held. Every file is a [`PartitionPath`] (`/cmdline.txt`: plain names
//! inside the boot directory), turned into a path here and nowhere else;
//! every change is atomic (back up, write a temporary file, rename over,
//! flush the renamed file and the directory: [`atomic`] says why), and
//! backups are named by [`crate::plan::edits::backup_name`], the one rule.

use super::atomic;
use super::standing::Writing;
use super::state::StateLock;
use crate::host::Host;
use crate::plan::PartitionPath;
use crate::state::journal::Journal;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The boot partition's own fail points ([`crate::failpoint`]): a power cut
/// there is what the testbed's power-cut scenarios prove harmless.
pub const BOOT_FILE: atomic::Points = atomic::Points {
    after_temp: "boot-after-temp",
    after_rename: "boot-after-rename",
    whole_filesystem: true,
};
pub const BOOT_BACKUP: atomic::Points = atomic::Points {
    after_temp: "boot-backup-after-temp",
    after_rename: "boot-backup-after-rename",
    whole_filesystem: true,
};

/// The permission to change the files of one boot directory.
pub struct BootWriter<'lock> {
    lock: &'lock StateLock,
    /// The same directory as this process opens it.
    dir: PathBuf,
}

impl<'lock> BootWriter<'lock> {
    /// `boot_dir` as the inspected system sees it (the journal's `boot_dir`).
    pub fn new(lock: &'lock StateLock, host: &Host, boot_dir: &Path) -> BootWriter<'lock> {
        BootWriter {
            lock,
            dir: host.path(boot_dir),
        }
    }

    /// The lock this permission holds: the one writer of the journal that
    /// records each change made here.
    pub fn lock(&self) -> &'lock StateLock {
        self.lock
    }

    /// `/cmdline.txt` → the file to open: the one place a name inside the
    /// boot partition becomes a path on this machine ([`PartitionPath`]
    /// holds plain names only, so it cannot lead out of the directory).
    pub fn resolve(&self, file: &PartitionPath) -> PathBuf {
        file.under(&self.dir)
    }

    pub fn exists(&self, file: &PartitionPath) -> bool {
        self.resolve(file).exists()
    }

    pub fn read(&self, file: &PartitionPath) -> Result<Vec<u8>> {
        let path = self.resolve(file);
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// The backup of `file`: the one the journal already names (its first
    /// backup is the version that booted), or a new name by the one rule.
    pub fn backup_name(&self, journal: &Journal, file: &PartitionPath) -> PartitionPath {
        if let Some(backup) = journal.backups.get(file) {
            return backup.clone();
        }
        crate::plan::edits::backup_name(file, |candidate| self.exists(candidate))
    }

    /// Copies `file` to `backup`, unless that backup is there already.
    pub fn backup(&self, file: &PartitionPath, backup: &PartitionPath) -> Result<()> {
        atomic::backup(&self.resolve(file), &self.resolve(backup), BOOT_BACKUP)
    }

    /// Atomically replaces (or creates) `file`.
    pub fn replace(&self, file: &PartitionPath, bytes: &[u8]) -> Result<()> {
        atomic::replace(&self.resolve(file), bytes, BOOT_FILE)
    }

    /// Puts `backup` back as `file` and removes it; false when there is no
    /// such backup (then the file it guards was never replaced either).
    pub fn restore(&self, file: &PartitionPath, backup: &PartitionPath) -> Result<bool> {
        let saved = self.resolve(backup);
        if !saved.exists() {
            return Ok(false);
        }
        let bytes = std::fs::read(&saved)
            .with_context(|| format!("reading the backup {}", saved.display()))?;
        self.replace(file, &bytes)?;
        self.remove(backup)?;
        Ok(true)
    }

    /// Removes `file`; false when it was not there.
    pub fn remove(&self, file: &PartitionPath) -> Result<bool> {
        let path = self.resolve(file);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(err).with_context(|| format!("removing {}", path.display())),
        }
    }

    /// Flushes the boot partition (after removals): its directory entries,
    /// and on FAT the free-cluster count, which only a flush of the whole
    /// filesystem writes. A failure costs nothing but the durability of a
    /// removal that is harmless to repeat.
    pub fn sync(&self) {
        let _ = std::fs::File::open(&self.dir).and_then(|d| d.sync_all());
        let _ = atomic::sync_filesystem(&self.dir);
    }
}

/// Undoes a migration's changes to the boot partition: puts back every
/// backed-up file and removes every file the migration created. Each step
/// is atomic; running it twice is harmless. Returns what it did, line by
/// line.
pub fn restore(writer: &BootWriter, journal: &Journal) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for (file, backup) in &journal.backups {
        if writer.restore(file, backup)? {
            done.push(format!(
                "restored {} from {}",
                writer.resolve(file).display(),
                writer.resolve(backup).display()
            ));
        }
    }
    // A created file that also has a backup was put back above.
    for file in journal
        .created
        .iter()
        .filter(|f| !journal.backups.contains_key(f))
    {
        if writer.remove(file)? {
            done.push(format!("removed {}", writer.resolve(file).display()));
        }
    }
    writer.sync();
    Ok(done)
}

/// `pimigrate rollback`: with the state directory locked, the boot
/// partition as it was before the migration, and the journal retired (to
/// `migration.rolled-back.json`) so a new migration may start.
///
/// A full move's changes are the bootloader's config (put back first) and
/// a trial's files on the SD card's boot partition, which is then mounted
/// when the new drive runs.
pub fn roll_back(host: &Host, journal: &Journal, state_dir: &Path) -> Result<Vec<String>> {
    let lock = StateLock::acquire(state_dir)?;
    let full = journal.plan.layout == crate::plan::Layout::Full;
    let system = full
        .then(|| crate::system::System::inspect(host))
        .transpose()?;
    let mut restored = Vec::new();
    // What each error leaves is said by what it stopped writing (`Writing`).
    if let (Some(before), Some(system)) = (&journal.bootloader_before, &system) {
        let put_back = super::bootloader::restore(system, journal, before);
        restored.extend(put_back.context(Writing::Bootloader)?);
    }
    let touched_sd_card = !journal.backups.is_empty() || !journal.created.is_empty();
    let files = match &system {
        Some(system) if touched_sd_card => {
            let sd_boot = super::sd_boot::SdBoot::open(system, journal)?;
            restore(&BootWriter::new(&lock, host, sd_boot.dir()), journal)
        }
        Some(_) => Ok(Vec::new()),
        None => restore(&BootWriter::new(&lock, host, &journal.boot_dir), journal),
    };
    restored.extend(files.context(Writing::SdCardBootFiles)?);
    let done = state_dir.join("migration.rolled-back.json");
    std::fs::rename(Journal::path(state_dir), &done)
        .with_context(|| format!("retiring the journal to {}", done.display()))
        .context(Writing::Tidying)?;
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_resolve_inside_the_boot_directory_only() {
        let state = tempfile::tempdir().unwrap();
        let lock = StateLock::acquire(state.path()).unwrap();
        let root = tempfile::tempdir().unwrap();
        let host = Host::with_root(root.path());
        let writer = BootWriter::new(&lock, &host, Path::new("/boot/firmware"));
        assert_eq!(
            writer.resolve(&PartitionPath::known("/cmdline.txt")),
            root.path().join("boot/firmware/cmdline.txt")
        );
        // A name that leaves the directory is not a PartitionPath at all.
        assert!(PartitionPath::new("/../etc/fstab").is_err());
        assert!(PartitionPath::new("/").is_err());
    }
}
