//! The source scan on a live filesystem with other filesystems mounted
//! inside it, as a running `/` always has (/proc, /sys, /boot/firmware):
//! the walk must skip each mount point and go on with the rest. Needs root
//! (tmpfs mounts).

use crate::common;

use common::require_root;
use pimigrate::host::Host;
use pimigrate::system::mounts::MountTable;
use pimigrate::system::usage::scan;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted at a path, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(at)
            .status()
            .expect("running mount");
        assert!(status.success(), "mount -t tmpfs {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn mount_points_inside_the_root_are_skipped_and_the_walk_goes_on() {
    if !require_root("the live scan test (tmpfs mounts)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    // The source root is a filesystem of its own, as / is.
    let _root_fs = Tmpfs::mount(&root);
    for n in 0..20 {
        let sub = root.join(format!("d{n:02}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("file"), vec![7u8; 4096]).unwrap();
    }
    // Mounted over d10 (hiding its file), with files of its own.
    let listed = Tmpfs::mount(&root.join("d10"));
    std::fs::write(listed.0.join("not-root"), b"x").unwrap();
    let host = Host {
        source_root: root.clone(),
        ..Host::live()
    };
    let mounts = MountTable::read(&host).unwrap();
    let usage = scan(&host, &mounts, &[]).unwrap();
    assert!(
        usage.other_filesystems.contains(&listed.0),
        "{:?}",
        usage.other_filesystems
    );
    // Every directory but the mount point, with its file: before the fix
    // the walk ended at the mount point (walkdir issue #166).
    assert_eq!((usage.files, usage.directories), (19, 20), "{usage:?}");

    // A mount the table read above does not list is not entered either.
    let unlisted = Tmpfs::mount(&root.join("d15"));
    std::fs::write(unlisted.0.join("not-root"), b"x").unwrap();
    let usage = scan(&host, &mounts, &[]).unwrap();
    assert_eq!((usage.files, usage.directories), (18, 19), "{usage:?}");
}
