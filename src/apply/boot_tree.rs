//! The replica engine's boot tree: a boot partition brought up to date with
//! the running system's (a full move's new one, empty; a full standby's):
//! new and changed files copied, each written under a temporary name and
//! renamed over, files the running system no longer has removed, and the
//! names the caller leaves out left alone on both sides (a standby's trial
//! and EEPROM files, the command line the replica writes itself). FAT
//! keeps no owners, links or xattrs, and its times have a two-second
//! grain, which the comparison allows for. The caller flushes the
//! filesystem once at the end.
//!
//! fs_extra copies onto the final names, which a cut can leave half
//! written, and neither compares nor removes: it does not fit here.

use super::atomic;
use anyhow::{Context, Result};
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one sync of the boot files did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BootStats {
    pub copied: u64,
    pub unchanged: u64,
    pub removed: u64,
    pub bytes: u64,
}

/// Writes on the copy's boot partition: flushed once at the end, not after
/// every file (the copy is not running, and the run records it done only
/// after the flush).
const BOOT_TREE_FILE: atomic::Points = atomic::Points {
    after_temp: "boot-tree-after-temp",
    after_rename: "boot-tree-after-rename",
    whole_filesystem: false,
};

/// Whether `name` matches one of `patterns`: `*X*` any name holding X,
/// else one `*` at most, standing for any run of characters.
pub fn left_out(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|pattern| {
        if let Some(middle) = pattern.strip_prefix('*').and_then(|p| p.strip_suffix('*')) {
            return name.contains(middle);
        }
        one_star(pattern, name)
    })
}

fn one_star(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// Brings `to` up to date with `from` (both directories of mounted boot
/// partitions). `checksum` compares contents, not only size and time.
pub fn sync(
    from: &Path,
    to: &Path,
    patterns: &[String],
    checksum: bool,
    cancel: &AtomicBool,
    heartbeat: &dyn Fn(),
) -> Result<BootStats> {
    let mut stats = BootStats::default();
    for entry in walkdir::WalkDir::new(from).min_depth(1).sort_by_file_name() {
        if cancel.load(Ordering::Relaxed) {
            return Err(crate::copy::Cancelled.into());
        }
        heartbeat();
        let entry =
            entry.with_context(|| format!("reading the boot files in {}", from.display()))?;
        let name = entry.file_name().to_string_lossy();
        if left_out(&name, patterns) {
            continue;
        }
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(relative);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target)
                .with_context(|| format!("creating {}", target.display()))?;
        } else if entry.file_type().is_file() {
            copy_if_changed(entry.path(), &target, checksum, &mut stats)?;
        }
    }
    remove_extra(from, to, patterns, &mut stats)?;
    Ok(stats)
}

fn copy_if_changed(
    source: &Path,
    target: &Path,
    checksum: bool,
    stats: &mut BootStats,
) -> Result<()> {
    let meta =
        std::fs::metadata(source).with_context(|| format!("reading {}", source.display()))?;
    if let Ok(existing) = std::fs::metadata(target) {
        let same_size = existing.is_file() && existing.len() == meta.len();
        let same_time = (existing.mtime() - meta.mtime()).abs() <= 2;
        let same = same_size
            && if checksum {
                same_bytes(source, target)?
            } else {
                same_time
            };
        if same {
            stats.unchanged += 1;
            return Ok(());
        }
        if existing.is_dir() {
            std::fs::remove_dir_all(target)
                .with_context(|| format!("removing the directory {}", target.display()))?;
        }
    }
    let bytes = std::fs::read(source).with_context(|| format!("reading {}", source.display()))?;
    atomic::replace(target, &bytes, BOOT_TREE_FILE)?;
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::new(meta.mtime().max(0) as u64, 0);
    std::fs::File::options()
        .write(true)
        .open(target)
        .and_then(|f| f.set_modified(mtime))
        .with_context(|| format!("setting the time of {}", target.display()))?;
    stats.copied += 1;
    stats.bytes += meta.len();
    Ok(())
}

fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    Ok(read(a)? == read(b)?)
}

/// Removes what `to` has and `from` does not (names left out excepted).
fn remove_extra(from: &Path, to: &Path, patterns: &[String], stats: &mut BootStats) -> Result<()> {
    for entry in walkdir::WalkDir::new(to).min_depth(1).contents_first(true) {
        let entry = entry.with_context(|| format!("reading {}", to.display()))?;
        let relative = entry.path().strip_prefix(to).unwrap_or(entry.path());
        let kept = relative
            .components()
            .any(|c| left_out(&c.as_os_str().to_string_lossy(), patterns));
        // Only a name the running system certainly lacks is removed: a
        // source that cannot be read now keeps what the copy has.
        let gone = match from.join(relative).symlink_metadata() {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => true,
            Err(err) => {
                return Err(err).with_context(|| {
                    format!(
                        "reading {}; nothing was removed from {}",
                        from.join(relative).display(),
                        to.display()
                    )
                })
            }
            Ok(_) => false,
        };
        if kept || !gone {
            continue;
        }
        let removed = if entry.file_type().is_dir() {
            std::fs::remove_dir(entry.path())
        } else {
            std::fs::remove_file(entry.path())
        };
        removed.with_context(|| format!("removing {}", entry.path().display()))?;
        stats.removed += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(from: &Path, to: &Path, checksum: bool) -> BootStats {
        sync(
            from,
            to,
            &patterns(),
            checksum,
            &AtomicBool::new(false),
            &|| {},
        )
        .unwrap()
    }

    fn patterns() -> Vec<String> {
        crate::sync::plan::BOOT_LEFT_OUT
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn trial_eeprom_and_backup_files_are_left_out() {
        let p = patterns();
        for name in [
            "tryboot.txt",
            "pieeprom.upd",
            "pieeprom.sig",
            "recovery.bin",
            "RECOVERY.000",
            "cmdline.txt.pimigrate-backup",
            "cmdline.txt.pimigrate-backup.2",
            "cmdline.pimigrate.txt",
        ] {
            assert!(left_out(name, &p), "{name}");
        }
        for name in [
            "config.txt",
            "cmdline.txt",
            "kernel8.img",
            "bcm2711-rpi-4-b.dtb",
            "RECOVERY",
        ] {
            assert!(!left_out(name, &p), "{name}");
        }
    }

    #[test]
    fn changed_files_are_copied_extra_ones_removed_and_left_out_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        std::fs::create_dir_all(from.join("overlays")).unwrap();
        std::fs::create_dir_all(to.join("old-dir")).unwrap();
        std::fs::write(from.join("config.txt"), "arm_64bit=1\n").unwrap();
        std::fs::write(from.join("overlays/a.dtbo"), "dtbo").unwrap();
        std::fs::write(from.join("tryboot.txt"), "trial").unwrap();
        std::fs::write(from.join("pieeprom.upd"), "flash me").unwrap();
        std::fs::write(to.join("old-dir/x"), "x").unwrap();
        std::fs::write(to.join("stale.img"), "old").unwrap();
        std::fs::write(to.join("cmdline.txt.pimigrate-backup"), "mine").unwrap();
        let stats = run(&from, &to, false);
        assert_eq!(stats.copied, 2);
        assert_eq!(stats.removed, 3, "old-dir/x, old-dir and stale.img");
        assert_eq!(std::fs::read(to.join("overlays/a.dtbo")).unwrap(), b"dtbo");
        assert!(!to.join("tryboot.txt").exists());
        assert!(!to.join("pieeprom.upd").exists());
        assert_eq!(
            std::fs::read(to.join("cmdline.txt.pimigrate-backup")).unwrap(),
            b"mine"
        );
        // Nothing changed: nothing copied. A same-size change with the
        // same time is found by --checksum only.
        let again = run(&from, &to, false);
        assert_eq!((again.copied, again.unchanged), (0, 2));
        let time = std::fs::metadata(to.join("config.txt"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(to.join("config.txt"), "arm_64bit=0\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(to.join("config.txt"))
            .unwrap()
            .set_modified(time)
            .unwrap();
        let quick = run(&from, &to, false);
        assert_eq!(quick.copied, 0);
        let checked = run(&from, &to, true);
        assert_eq!(checked.copied, 1);
        assert_eq!(
            std::fs::read(to.join("config.txt")).unwrap(),
            b"arm_64bit=1\n"
        );
    }
}
