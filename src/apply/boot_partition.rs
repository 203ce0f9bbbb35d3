//! The one writer of the boot partition the firmware reads: the SD card's
//! (the last step of a root-only move, `verify --commit`, `verify
//! --apply-quirk`, `rollback`), or, once a full move runs, the target's.
//!
//! A [`BootWriter`] is the permission to write there (bootupd's
//! `StateLockGuard`): it exists only while the state directory's lock is
//! held. Every file is named relative to the boot directory (`/cmdline.txt`)
//! and resolved inside it component by component; every change is atomic
//! (back up, write a temporary file, rename over, flush the renamed file
//! and the directory: [`atomic`] says why), and
//! backups are named by [`crate::plan::edits::backup_name`], the one rule.

use super::atomic;
use super::journal::Journal;
use crate::host::Host;
use anyhow::{bail, Context, Result};
use std::path::{Component, Path, PathBuf};

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

/// One pimigrate at a time: an exclusive lock in the state directory, held
/// for as long as this value lives.
pub struct StateLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl StateLock {
    pub fn acquire(state_dir: &Path) -> Result<StateLock> {
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        let path = state_dir.join("lock");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, err)| err)
            .with_context(|| {
                format!("another pimigrate is running (it holds {})", path.display())
            })?;
        Ok(StateLock { _lock: lock })
    }
}

/// The permission to change the files of one boot directory.
pub struct BootWriter<'lock> {
    _lock: &'lock StateLock,
    /// The boot directory as seen by the inspected system (`/boot/firmware`).
    view: PathBuf,
    /// The same directory as this process opens it.
    dir: PathBuf,
}

impl<'lock> BootWriter<'lock> {
    /// `boot_dir` as the inspected system sees it (the journal's `boot_dir`).
    pub fn new(lock: &'lock StateLock, host: &Host, boot_dir: &Path) -> BootWriter<'lock> {
        BootWriter {
            _lock: lock,
            view: boot_dir.to_path_buf(),
            dir: host.path(boot_dir),
        }
    }

    /// `/cmdline.txt` → the file to open. Only plain names below the boot
    /// directory: a `..` or a prefix is refused, never followed out.
    pub fn resolve(&self, file: &Path) -> Result<PathBuf> {
        let mut path = self.dir.clone();
        for component in file.components() {
            match component {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => path.push(name),
                Component::ParentDir | Component::Prefix(_) => bail!(
                    "{} is not a file inside the boot directory {}",
                    file.display(),
                    self.dir.display()
                ),
            }
        }
        if path == self.dir {
            bail!("{} names the boot directory itself", file.display());
        }
        Ok(path)
    }

    /// A path the journal records (`/boot/firmware/tryboot.txt`, as the
    /// inspected system sees it) as a name inside the boot directory.
    pub fn relative<'p>(&self, recorded: &'p Path) -> Result<&'p Path> {
        recorded.strip_prefix(&self.view).with_context(|| {
            format!(
                "{} is not on the boot partition {}",
                recorded.display(),
                self.view.display()
            )
        })
    }

    pub fn exists(&self, file: &Path) -> Result<bool> {
        Ok(self.resolve(file)?.exists())
    }

    pub fn read(&self, file: &Path) -> Result<Vec<u8>> {
        let path = self.resolve(file)?;
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// The backup of `file`: the one the journal already names (its first
    /// backup is the version that booted), or a new name by the one rule.
    pub fn backup_name(&self, journal: &Journal, file: &Path) -> PathBuf {
        if let Some(backup) = journal.backups.get(file) {
            return backup.clone();
        }
        crate::plan::edits::backup_name(file, |candidate| {
            self.resolve(candidate).is_ok_and(|path| path.exists())
        })
    }

    /// Copies `file` to `backup`, unless that backup is there already.
    pub fn backup(&self, file: &Path, backup: &Path) -> Result<()> {
        atomic::backup(&self.resolve(file)?, &self.resolve(backup)?, BOOT_BACKUP)
    }

    /// Atomically replaces (or creates) `file`.
    pub fn replace(&self, file: &Path, bytes: &[u8]) -> Result<()> {
        atomic::replace(&self.resolve(file)?, bytes, BOOT_FILE)
    }

    /// Puts `backup` back as `file` and removes it; false when there is no
    /// such backup (then the file it guards was never replaced either).
    pub fn restore(&self, file: &Path, backup: &Path) -> Result<bool> {
        let saved = self.resolve(backup)?;
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
    pub fn remove(&self, file: &Path) -> Result<bool> {
        let path = self.resolve(file)?;
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
                writer.resolve(file)?.display(),
                writer.resolve(backup)?.display()
            ));
        }
    }
    for created in &journal.created {
        let file = writer.relative(created)?;
        // A created file that also has a backup was put back above.
        if journal
            .backups
            .keys()
            .any(|f| f.strip_prefix("/").unwrap_or(f) == file)
        {
            continue;
        }
        if writer.remove(file)? {
            done.push(format!("removed {}", writer.resolve(file)?.display()));
        }
    }
    writer.sync();
    Ok(done)
}

/// `pimigrate rollback`: with the state directory locked, the boot
/// partition as it was before the migration, and the journal retired (to
/// `migration.rolled-back.json`) so a new migration may start.
pub fn roll_back(host: &Host, journal: &Journal, state_dir: &Path) -> Result<Vec<String>> {
    let lock = StateLock::acquire(state_dir)?;
    let restored = restore(&BootWriter::new(&lock, host, &journal.boot_dir), journal)?;
    let done = state_dir.join("migration.rolled-back.json");
    std::fs::rename(Journal::path(state_dir), &done)
        .with_context(|| format!("retiring the journal to {}", done.display()))?;
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
            writer.resolve(Path::new("/cmdline.txt")).unwrap(),
            root.path().join("boot/firmware/cmdline.txt")
        );
        assert!(writer.resolve(Path::new("/../etc/fstab")).is_err());
        assert!(writer.resolve(Path::new("/")).is_err());
        assert_eq!(
            writer
                .relative(Path::new("/boot/firmware/tryboot.txt"))
                .unwrap(),
            Path::new("tryboot.txt")
        );
        assert!(writer.relative(Path::new("/etc/fstab")).is_err());
    }

    #[test]
    fn a_second_lock_is_refused_while_the_first_is_held() {
        let state = tempfile::tempdir().unwrap();
        let _first = StateLock::acquire(state.path()).unwrap();
        let second = StateLock::acquire(state.path()).err().unwrap();
        assert!(
            format!("{second:#}").contains("another pimigrate is running"),
            "{second:#}"
        );
    }
}
