//! Replacing a boot file so that a power cut at any moment leaves either the
//! old file or the new one, never half of either: back up, write a temporary
//! file next to it, flush, rename over, flush the directory.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The temporary name a new version is written under before the rename.
pub fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".pimigrate-new");
    path.with_file_name(name)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("flushing the directory {}", dir.display()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// Copies `path` to `backup` (flushed) unless that backup exists already: the
/// first backup is the version that booted, and a resumed run must not
/// overwrite it with a half-migrated one.
pub fn backup(path: &Path, backup: &Path) -> Result<()> {
    if backup.exists() {
        return Ok(());
    }
    let bytes =
        std::fs::read(path).with_context(|| format!("reading {} to back it up", path.display()))?;
    let temp = temp_name(backup);
    write_synced(&temp, &bytes)?;
    crate::failpoint::hit("backup-after-temp");
    std::fs::rename(&temp, backup)
        .with_context(|| format!("renaming {} to {}", temp.display(), backup.display()))?;
    sync_dir(backup.parent().unwrap_or(Path::new(".")))
}

/// Atomically replaces `path` with `bytes`, keeping its permissions.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = temp_name(path);
    write_synced(&temp, bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        // FAT has no permissions to keep; ignore what it cannot do.
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    crate::failpoint::hit("atomic-after-temp");
    std::fs::rename(&temp, path)
        .with_context(|| format!("renaming {} over {}", temp.display(), path.display()))?;
    crate::failpoint::hit("atomic-after-rename");
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backs_up_once_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cmdline.txt");
        let saved = dir.path().join("cmdline.txt.pimigrate-backup");
        std::fs::write(&file, "root=OLD\n").unwrap();
        backup(&file, &saved).unwrap();
        replace(&file, b"root=NEW\n").unwrap();
        // A second run must not replace the first backup with the new file.
        backup(&file, &saved).unwrap();
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
        replace(&file, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert!(!temp_name(&file).exists());
    }
}
