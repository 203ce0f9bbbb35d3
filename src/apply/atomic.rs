//! Replacing a file so that a power cut at any moment leaves either the old
//! file or the new one, never half of either: back up, write a temporary
//! file next to it, flush, rename over, flush the renamed file and its
//! directory.
//!
//! The flush of the renamed file is for FAT, where the SD card's boot files
//! live: vfat keeps a file's first cluster and size in its directory entry,
//! which the kernel writes with the file's inode, not with the directory. A
//! rename followed by a flush of the directory alone leaves on the card an
//! entry that still points at the old clusters (already freed) or, for a
//! new name, at none: after a power cut the file is empty or torn and fsck
//! finds lost clusters. The power-cut scenarios of the testbed found it.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The fail points of one kind of atomic write ([`crate::failpoint`]): after
/// its temporary file is written and flushed, and after the rename (before
/// the flushes that make the rename durable).
#[derive(Debug, Clone, Copy)]
pub struct Points {
    pub after_temp: &'static str,
    pub after_rename: &'static str,
    /// Each flush is followed by one of the whole filesystem (syncfs): on
    /// FAT the free-cluster count (the FSInfo sector) is written only so,
    /// and a power cut otherwise leaves it wrong for fsck to correct.
    pub whole_filesystem: bool,
}

/// A file on the target or in the state directory (fstab, the journal).
pub const FILE: Points = Points {
    after_temp: "atomic-after-temp",
    after_rename: "atomic-after-rename",
    whole_filesystem: false,
};

/// A backup made before a file on the target is first replaced.
pub const BACKUP: Points = Points {
    after_temp: "backup-after-temp",
    after_rename: "backup-after-rename",
    whole_filesystem: false,
};

/// The temporary name a new version is written under before the rename.
pub fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".pimigrate-new");
    path.with_file_name(name)
}

fn sync_path(path: &Path, what: &str) -> Result<()> {
    #[cfg(test)]
    tests::FLUSHED.with(|f| f.borrow_mut().push(path.to_path_buf()));
    File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("flushing {what} {}", path.display()))
}

/// Writes what the filesystem of `path` holds in memory to its disk.
pub fn sync_filesystem(path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    #[cfg(test)]
    tests::FLUSHED.with(|f| f.borrow_mut().push(Path::new("syncfs").join(path)));
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    nix::unistd::syncfs(file.as_raw_fd())
        .with_context(|| format!("flushing the filesystem of {}", path.display()))
}

fn write_synced(path: &Path, bytes: &[u8], points: Points) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(test)]
    tests::FLUSHED.with(|f| f.borrow_mut().push(path.to_path_buf()));
    if points.whole_filesystem {
        sync_filesystem(path)?;
    }
    Ok(())
}

/// Renames the flushed `temp` to `dest` and makes the rename durable: the
/// renamed file (its directory entry, on FAT) and then the directory.
fn rename_durably(temp: &Path, dest: &Path, points: Points) -> Result<()> {
    std::fs::rename(temp, dest)
        .with_context(|| format!("renaming {} to {}", temp.display(), dest.display()))?;
    crate::failpoint::hit(points.after_rename)?;
    sync_path(dest, "the file")?;
    sync_path(dest.parent().unwrap_or(Path::new(".")), "the directory")?;
    if points.whole_filesystem {
        sync_filesystem(dest)?;
    }
    Ok(())
}

/// Copies `path` to `backup` (flushed) unless that backup exists already: the
/// first backup is the version that booted, and a resumed run must not
/// overwrite it with a half-migrated one.
pub fn backup(path: &Path, backup: &Path, points: Points) -> Result<()> {
    if backup.exists() {
        return Ok(());
    }
    let bytes =
        std::fs::read(path).with_context(|| format!("reading {} to back it up", path.display()))?;
    let temp = temp_name(backup);
    write_synced(&temp, &bytes, points)?;
    crate::failpoint::hit(points.after_temp)?;
    rename_durably(&temp, backup, points)
}

/// Atomically replaces `path` with `bytes`, keeping its permissions.
pub fn replace(path: &Path, bytes: &[u8], points: Points) -> Result<()> {
    let temp = temp_name(path);
    write_synced(&temp, bytes, points)?;
    if let Ok(meta) = std::fs::metadata(path) {
        // FAT has no permissions to keep; ignore what it cannot do.
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    crate::failpoint::hit(points.after_temp)?;
    rename_durably(&temp, path, points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// What this thread flushed, in order.
        pub(super) static FLUSHED: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
    }

    fn flushed() -> Vec<PathBuf> {
        FLUSHED.with(|f| f.take())
    }

    /// The power-cut scenarios' finding, pinned: on FAT a renamed file's
    /// directory entry is written with the file, so the file is flushed
    /// after the rename and before its directory, for a replacement and for
    /// a backup (a new name) alike.
    #[test]
    fn the_renamed_file_is_flushed_after_the_rename_then_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cmdline.txt");
        let saved = dir.path().join("cmdline.txt.pimigrate-backup");
        std::fs::write(&file, "root=OLD\n").unwrap();
        flushed();
        backup(&file, &saved, BACKUP).unwrap();
        assert_eq!(
            flushed(),
            [temp_name(&saved), saved.clone(), dir.path().to_path_buf()]
        );
        replace(&file, b"root=NEW\n", FILE).unwrap();
        assert_eq!(
            flushed(),
            [temp_name(&file), file.clone(), dir.path().to_path_buf()]
        );
    }

    /// The power-cut scenarios' second finding: on the boot partition each
    /// flush is followed by one of the whole filesystem, or FAT's
    /// free-cluster count stays wrong after a cut.
    #[test]
    fn the_boot_partitions_writes_flush_the_whole_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tryboot.txt");
        let whole = Points {
            whole_filesystem: true,
            ..FILE
        };
        flushed();
        replace(&file, b"[all]\n", whole).unwrap();
        let syncfs = |p: &Path| Path::new("syncfs").join(p);
        let temp = temp_name(&file);
        assert_eq!(
            flushed(),
            [
                temp.clone(),
                syncfs(&temp),
                file.clone(),
                dir.path().to_path_buf(),
                syncfs(&file)
            ]
        );
    }

    #[test]
    fn backs_up_once_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cmdline.txt");
        let saved = dir.path().join("cmdline.txt.pimigrate-backup");
        std::fs::write(&file, "root=OLD\n").unwrap();
        backup(&file, &saved, BACKUP).unwrap();
        replace(&file, b"root=NEW\n", FILE).unwrap();
        // A second run must not replace the first backup with the new file.
        backup(&file, &saved, BACKUP).unwrap();
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), "root=OLD\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "root=NEW\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary files left: {names:?}");
    }

    #[test]
    fn a_leftover_temporary_file_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fstab");
        std::fs::write(&file, "old").unwrap();
        std::fs::write(temp_name(&file), "half-writ").unwrap();
        replace(&file, b"new", FILE).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert!(!temp_name(&file).exists());
    }
}
