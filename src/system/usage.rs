//! How much the source root holds: what the copy will move and whether it
//! fits. A quick metadata walk, never reading file contents.

use crate::host::Host;
use crate::system::mounts::MountTable;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A path the copy leaves out, relative to the source root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    /// `/var/swap`: as the user would write it on the running system.
    pub path: PathBuf,
    /// Keep the directory itself (with its mode and owner), leave out what
    /// is in it: `/tmp` must exist on the new root.
    pub contents_only: bool,
    pub why: String,
}

impl Exclusion {
    pub fn new(path: &str, contents_only: bool, why: &str) -> Exclusion {
        Exclusion {
            path: PathBuf::from(path),
            contents_only,
            why: why.to_string(),
        }
    }

    /// Does this rule leave out `relative` (a path below the source root)?
    pub fn excludes(&self, relative: &Path) -> bool {
        let rule = self.path.strip_prefix("/").unwrap_or(&self.path);
        if self.contents_only {
            relative.starts_with(rule) && relative != rule
        } else {
            relative.starts_with(rule)
        }
    }
}

/// What the copy will not take, unless told otherwise.
pub fn default_exclusions() -> Vec<Exclusion> {
    vec![
        Exclusion::new("/lost+found", false, "mkfs.ext4 creates a fresh one"),
        Exclusion::new(
            "/var/swap",
            false,
            "swap file (dphys-swapfile recreates it)",
        ),
        Exclusion::new("/swapfile", false, "swap file"),
        Exclusion::new("/tmp", true, "temporary files"),
    ]
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Bytes allocated on disk (sparse files count what they really use).
    pub bytes: u64,
    pub files: u64,
    pub directories: u64,
    /// Mount points below the root the copy does not descend into.
    pub other_filesystems: Vec<PathBuf>,
}

/// Walks the source root without leaving its filesystem: mount points of
/// other filesystems (from the mount table, so fixture trees behave like a
/// live system) and the exclusions are skipped.
pub fn scan(host: &Host, mounts: &MountTable, exclusions: &[Exclusion]) -> std::io::Result<Usage> {
    scan_with_progress(host, mounts, exclusions, &mut |_| ControlFlow::Continue(()))
}

/// How often a scan reports how far it got, in entries.
const PROGRESS_EVERY: u64 = 2048;

/// [`scan`], calling `progress` with the running totals now and then: a
/// root filesystem on an SD card takes a while to walk. When `progress`
/// returns `Break` (the person pressed Ctrl-C), the walk stops there with
/// an error of kind `Interrupted`, so no half-counted total is mistaken
/// for the real one.
pub fn scan_with_progress(
    host: &Host,
    mounts: &MountTable,
    exclusions: &[Exclusion],
    progress: &mut dyn FnMut(&Usage) -> ControlFlow<()>,
) -> std::io::Result<Usage> {
    let root_view = host.source_root.clone();
    let other_filesystems = mounts.other_filesystems_below(&root_view);
    let root_real = host.path(&root_view);
    let mut usage = Usage {
        other_filesystems: other_filesystems.clone(),
        ..Usage::default()
    };
    // Staying on one filesystem is done here, not with walkdir's
    // `same_file_system`: walkdir yields a directory on another filesystem
    // without entering it, and when `filter_entry` then rejects that
    // directory (a mount point is in `other_filesystems`) it leaves the
    // *parent* instead (walkdir issue #166): a scan of a live `/` ended at
    // the first mount point it met, and planned a root of a few kilobytes.
    let root_device = if host.is_live() {
        let meta = std::fs::metadata(&root_real).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("reading {}: {err}", root_real.display()),
            )
        })?;
        Some(meta.dev())
    } else {
        None
    };
    let walker = walkdir::WalkDir::new(&root_real)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| {
            let Ok(relative) = entry.path().strip_prefix(&root_real) else {
                return true;
            };
            if relative.as_os_str().is_empty() {
                return true;
            }
            let view = root_view.join(relative);
            !other_filesystems.contains(&view)
                && !exclusions.iter().any(|e| e.excludes(relative))
                && !on_another_filesystem(entry, root_device)
        });
    let mut seen_links = std::collections::HashSet::new();
    for entry in walker {
        let entry = entry.map_err(|err| {
            let path = err
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            std::io::Error::other(format!("scanning {path}: {err}"))
        })?;
        let meta = entry.metadata().map_err(std::io::Error::other)?;
        if meta.is_dir() {
            usage.directories += 1;
        } else {
            usage.files += 1;
        }
        // A hard-linked file takes its space once, and is copied once.
        let first_link =
            meta.is_dir() || meta.nlink() < 2 || seen_links.insert((meta.dev(), meta.ino()));
        if first_link {
            usage.bytes += meta.blocks() * 512;
        }
        if (usage.files + usage.directories) % PROGRESS_EVERY == 0 && progress(&usage).is_break() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                format!("scanning {} was interrupted", root_view.display()),
            ));
        }
    }
    Ok(usage)
}

/// A directory that is not on `root_device` (a mount the mount table did
/// not list, or one made since it was read). Files and symlinks are never
/// "on another filesystem": only a directory can be a mount point that
/// leads elsewhere.
fn on_another_filesystem(entry: &walkdir::DirEntry, root_device: Option<u64>) -> bool {
    let Some(root_device) = root_device else {
        return false;
    };
    entry.file_type().is_dir() && entry.metadata().is_ok_and(|meta| meta.dev() != root_device)
}

/// Used bytes of the source root: statfs when it is a whole mounted
/// filesystem (instant, for listing devices), a scan otherwise (a plain
/// directory holds only part of its filesystem, and a fixture tree's statfs
/// would describe the machine the tests run on).
pub fn used_bytes(host: &Host, mounts: &MountTable) -> Option<u64> {
    if host.is_live() && mounts.at(&host.source_root).is_some() {
        // 64-bit counts: on armhf the plain statvfs fails past 16 TiB.
        let space = crate::sys64::filesystem_space(&host.source_root).ok()?;
        Some(space.used_bytes())
    } else {
        scan(host, mounts, &default_exclusions())
            .ok()
            .map(|u| u.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_match_paths_below_the_root() {
        let tmp = Exclusion::new("/tmp", true, "");
        assert!(!tmp.excludes(Path::new("tmp")));
        assert!(tmp.excludes(Path::new("tmp/x")));
        let swap = Exclusion::new("/var/swap", false, "");
        assert!(swap.excludes(Path::new("var/swap")));
        assert!(!swap.excludes(Path::new("var/swapper")));
    }

    #[test]
    fn scan_counts_and_skips() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::create_dir_all(root.join("proc/1")).unwrap();
        std::fs::write(root.join("etc/hostname"), "pi\n").unwrap();
        std::fs::write(root.join("tmp/junk"), vec![1u8; 100_000]).unwrap();
        std::fs::write(root.join("proc/1/status"), "x").unwrap();
        let host = Host::with_root(root);
        let mounts = MountTable::parse(
            "1 0 179:2 / / rw - ext4 /dev/mmcblk0p2 rw\n2 1 0:5 / /proc rw - proc proc rw\n",
        );
        let usage = scan(&host, &mounts, &default_exclusions()).unwrap();
        assert_eq!(
            usage.files, 1,
            "only etc/hostname: tmp contents and /proc are skipped"
        );
        assert_eq!(usage.directories, 3, "/, /etc, /tmp");
        assert_eq!(usage.other_filesystems, vec![PathBuf::from("/proc")]);
    }

    /// Ctrl-C during a long scan stops it at the next progress report,
    /// not at the end of the walk.
    #[test]
    fn a_scan_stops_when_progress_says_break() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let files = PROGRESS_EVERY * 3;
        for n in 0..files {
            std::fs::write(root.join(format!("f{n}")), b"").unwrap();
        }
        let host = Host::with_root(root);
        let mut reports = 0;
        let result = scan_with_progress(&host, &MountTable::default(), &[], &mut |usage| {
            reports += 1;
            assert!(usage.files < files, "the walk went on to the end");
            ControlFlow::Break(())
        });
        let err = result.expect_err("a broken-off scan must not return a total");
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{err}");
        assert_eq!(reports, 1, "the scan went on after the first Break");
        let whole = scan_with_progress(&host, &MountTable::default(), &[], &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(whole.files, files, "Continue walks everything");
    }

    #[test]
    fn hard_links_count_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a"), vec![7u8; 64 * 1024]).unwrap();
        let single = scan(&Host::with_root(root), &MountTable::default(), &[]).unwrap();
        std::fs::hard_link(root.join("a"), root.join("b")).unwrap();
        let linked = scan(&Host::with_root(root), &MountTable::default(), &[]).unwrap();
        assert_eq!(linked.files, 2);
        assert_eq!(linked.bytes, single.bytes);
    }
}
