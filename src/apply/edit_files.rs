//! The replica engine's own files: a plan's edits made again on the
//! running system's file as it is now (`from`) and written onto the copy
//! (`to`), atomically, byte for byte but for the edit. The copy of the
//! root and of the boot tree leaves these files out, so the copy never
//! holds the running system's version of them: its fstab, command line and
//! ROOTPART= name its own ids or are not there yet, whenever a run stops.

use super::atomic;
use crate::plan::{edits, FileEdit};
use anyhow::{Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Writes `edit` from the file under `from` to its output under `to`,
/// with the original kept as the edit's backup first.
pub fn write_edited(from: &Path, to: &Path, edit: &FileEdit) -> Result<()> {
    let source = edit.file.under(from);
    let current =
        std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
    let edited = edits::apply(&current, &edit.operations)
        .with_context(|| format!("editing the copy's {}", edit.file))?;
    let target = edit.output.under(to);
    let dir = target.parent().unwrap_or(to);
    // The copy gave the directory the running system's times, and the
    // rename would move them: they are put back, so only the file differs.
    keeping_times(dir, || {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if let Some(backup) = &edit.backup {
            let backup = backup.under(to);
            if !backup.exists() {
                write_like(&backup, &current, &source, atomic::BACKUP)?;
            }
        }
        if std::fs::read(&target).ok().as_deref() != Some(edited.as_slice()) {
            write_like(&target, &edited, &source, atomic::FILE)?;
        }
        Ok(())
    })
}

/// Atomically writes `bytes` to `path`, which takes the owner and mode of
/// `like` when it is new (a replaced file keeps its own).
fn write_like(path: &Path, bytes: &[u8], like: &Path, points: atomic::Points) -> Result<()> {
    let new = !path.exists();
    atomic::replace(path, bytes, points)?;
    if new {
        if let Ok(meta) = std::fs::metadata(like) {
            // FAT has neither owners nor modes: what it cannot keep is moot.
            let _ = std::os::unix::fs::chown(path, Some(meta.uid()), Some(meta.gid()));
            let _ = std::fs::set_permissions(path, meta.permissions());
        }
    }
    Ok(())
}

/// Runs `change` inside `dir` and puts `dir`'s times back afterwards.
pub fn keeping_times(dir: &Path, change: impl FnOnce() -> Result<()>) -> Result<()> {
    let times = std::fs::metadata(dir).ok();
    change()?;
    if let Some(meta) = times {
        crate::sys64::set_times(
            crate::sys64::TimesOf::Path(dir),
            (meta.atime(), meta.atime_nsec()),
            (meta.mtime(), meta.mtime_nsec()),
        )
        .with_context(|| format!("setting the times of {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootcfg::DeviceSpec;
    use crate::plan::{EditOperation, EditSite, PartitionPath};

    fn fstab_edit(backup: bool) -> FileEdit {
        FileEdit {
            site: EditSite::TargetRoot,
            file: PartitionPath::known("/etc/fstab"),
            output: PartitionPath::known("/etc/fstab"),
            backup: backup.then(|| PartitionPath::known("/etc/fstab.pimigrate-backup")),
            device: "the copy".into(),
            operations: vec![EditOperation::FstabSetSpec {
                mountpoint: "/".into(),
                spec: DeviceSpec::PartUuid("1a2b3c4d-02".into()),
            }],
            diff: String::new(),
        }
    }

    #[test]
    fn the_edit_is_made_on_the_running_file_and_written_with_its_backup_and_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        std::fs::create_dir_all(from.join("etc")).unwrap();
        let running = "PARTUUID=6c586e13-02 / ext4 defaults 0 1\n";
        std::fs::write(from.join("etc/fstab"), running).unwrap();
        std::fs::set_permissions(
            from.join("etc/fstab"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        write_edited(&from, &to, &fstab_edit(true)).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("etc/fstab")).unwrap(),
            "PARTUUID=1a2b3c4d-02 / ext4 defaults 0 1\n"
        );
        assert_eq!(
            std::fs::read_to_string(to.join("etc/fstab.pimigrate-backup")).unwrap(),
            running
        );
        let mode = std::fs::metadata(to.join("etc/fstab"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        // The running file changed since: the next write makes the edit on
        // it, and the first backup (the version that booted) stays.
        std::fs::write(
            from.join("etc/fstab"),
            format!("{running}tmpfs /tmp tmpfs defaults 0 0\n"),
        )
        .unwrap();
        write_edited(&from, &to, &fstab_edit(true)).unwrap();
        assert!(std::fs::read_to_string(to.join("etc/fstab"))
            .unwrap()
            .ends_with("tmpfs /tmp tmpfs defaults 0 0\n"));
        assert_eq!(
            std::fs::read_to_string(to.join("etc/fstab.pimigrate-backup")).unwrap(),
            running
        );
    }
}
