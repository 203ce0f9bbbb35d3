//! Mount guards on real mounts (root).

use crate::common;

use pimigrate::apply::mount::{bind_read_only, mount_device};
use std::process::Command;

#[test]
fn a_read_only_bind_shows_files_hidden_under_mount_points() {
    if !common::require_root("bind mounts") {
        return;
    }
    let source = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(source.path().join("dev")).unwrap();
    std::fs::write(source.path().join("dev/console"), "hidden under a mount").unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(source.path().join("dev"))
        .status()
        .unwrap();
    assert!(status.success());
    let bind = bind_read_only(source.path(), "test-bind").unwrap();
    let seen = std::fs::read_to_string(bind.path().join("dev/console"));
    let write = std::fs::write(bind.path().join("new"), "x");
    let point = bind.path().to_path_buf();
    bind.unmount().unwrap();
    let _ = Command::new("umount")
        .arg(source.path().join("dev"))
        .status();
    assert_eq!(seen.unwrap(), "hidden under a mount");
    assert_eq!(write.unwrap_err().raw_os_error(), Some(nix::libc::EROFS));
    assert!(
        !point.exists(),
        "the mount point is removed after unmounting"
    );
}

/// A read-only bind of a fresh directory holding `file`, mounted as `name`.
fn bound_file(name: &str) -> (tempfile::TempDir, pimigrate::apply::mount::Mounted) {
    let source = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(source.path().join("file"), "x").unwrap();
    let bind = bind_read_only(source.path(), name).unwrap();
    (source, bind)
}

#[test]
fn an_unmount_waits_out_a_moments_holder() {
    if !common::require_root("bind mounts") {
        return;
    }
    let (_source, bind) = bound_file("test-held");
    // Held open for a moment, as by something statting every mount point.
    let held = std::fs::File::open(bind.path().join("file")).unwrap();
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(held);
    });
    let point = bind.path().to_path_buf();
    bind.unmount().unwrap();
    holder.join().unwrap();
    assert!(
        !point.exists(),
        "the mount point is removed after unmounting"
    );
}

#[test]
fn a_mount_in_use_is_reported_busy_and_left_in_place() {
    if !common::require_root("bind mounts") {
        return;
    }
    let (_source, bind) = bound_file("test-busy");
    let point = bind.path().to_path_buf();
    let held = std::fs::File::open(point.join("file")).unwrap();
    let started = std::time::Instant::now();
    let err = bind.unmount().unwrap_err();
    assert!(
        format!("{err:#}").contains("EBUSY"),
        "not reported busy: {err:#}"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "gave up on a busy mount after {:?}",
        started.elapsed()
    );
    // Still mounted (the file is still read through it), so not removed.
    assert_eq!(std::fs::read_to_string(point.join("file")).unwrap(), "x");
    drop(held);
    assert!(Command::new("umount")
        .arg(&point)
        .status()
        .unwrap()
        .success());
    std::fs::remove_dir(&point).unwrap();
}

#[test]
fn a_dropped_mount_is_unmounted_and_its_directory_removed() {
    if !common::require_root("mounting ext4") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let image = dir.path().join("fs.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image)
        .status()
        .unwrap()
        .success());
    let attached = common::Loop::attach(&image, None, false);
    let device = attached.device.clone();
    let point = {
        let mounted = mount_device(device.as_ref(), "ext4", "test-ext4").unwrap();
        std::fs::write(mounted.path().join("hello"), "world").unwrap();
        mounted.path().to_path_buf()
    };
    let still_mounted = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .contains(point.to_str().unwrap());
    drop(attached);
    assert!(!still_mounted);
    assert!(!point.exists());
}

#[test]
fn an_empty_mount_point_left_by_a_killed_run_with_the_same_pid_is_reused() {
    if !common::require_root("bind mounts") {
        return;
    }
    // The test binary's pid is the one the mount point will be named after.
    let leftover = std::path::Path::new(pimigrate::system::mounts::RUN_DIR)
        .join(format!("test-leftover-{}", std::process::id()));
    std::fs::create_dir_all(&leftover).unwrap();
    let source = tempfile::tempdir_in("/var/tmp").unwrap();
    let bind = bind_read_only(source.path(), "test-leftover").unwrap();
    assert_eq!(bind.path(), leftover);
    bind.unmount().unwrap();
    assert!(!leftover.exists());
}
