//! What a mount point hides: the entries of the directory underneath it,
//! on the filesystem that holds the mount point. A kernel update written
//! while the boot partition was not mounted lands there, where the
//! firmware never reads it (raspberrypi/linux#4616,
//! RPi-Distro/raspberrypi-sys-mods#111).
//!
//! Looked at through a detached copy of the parent directory's mount
//! alone (`open_tree` with `OPEN_TREE_CLONE` and without `AT_RECURSIVE`,
//! Linux 5.2): it shows the directory beneath whatever is mounted on it,
//! nothing is mounted anywhere, and the copy is gone when its descriptor
//! closes, however the process ends. It takes `CAP_SYS_ADMIN`, as any
//! mount does. The same works on an inspected tree whose boot directory
//! is itself a mount point here (an image's root with its boot partition
//! mounted on it).

use crate::host::Host;
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What lies under a directory that something is mounted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hidden {
    /// Nothing is mounted on the directory here (or it does not exist):
    /// nothing can hide under it.
    NotAMountPoint,
    /// The names in the directory underneath, sorted (empty: nothing).
    Entries(Vec<String>),
    /// Why it could not be looked at.
    Unreadable(String),
}

/// `open_tree(2)`'s flags (linux/mount.h), which the libc crate does not
/// name for every target.
const OPEN_TREE_CLONE: nix::libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: nix::libc::c_uint = nix::libc::O_CLOEXEC as nix::libc::c_uint;

/// What the view path `dir` of `host` hides, when something is mounted
/// on it.
pub fn under_mount_point(host: &Host, dir: &Path) -> Hidden {
    let here = host.path(dir);
    let (Some(parent), Some(name)) = (here.parent(), here.file_name()) else {
        return Hidden::NotAMountPoint;
    };
    match (std::fs::metadata(&here), std::fs::metadata(parent)) {
        (Ok(dir), Ok(parent)) if dir.is_dir() && dir.dev() != parent.dev() => {}
        _ => return Hidden::NotAMountPoint,
    }
    let tree = match clone_of_mount(parent) {
        Ok(tree) => tree,
        Err(Errno::EPERM) => {
            return Hidden::Unreadable(
                "looking under a mount point takes root (CAP_SYS_ADMIN)".into(),
            )
        }
        Err(Errno::ENOSYS) => {
            return Hidden::Unreadable(
                "this kernel has no open_tree (Linux 5.2 or later has it)".into(),
            )
        }
        Err(err) => {
            return Hidden::Unreadable(format!(
                "a detached copy of the mount at {}: {err}",
                parent.display()
            ))
        }
    };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
    let mut dir = match Dir::openat(Some(tree.as_raw_fd()), name, flags, Mode::empty()) {
        Ok(dir) => dir,
        Err(err) => {
            return Hidden::Unreadable(format!(
                "the directory {} beneath the mount: {err}",
                here.display()
            ))
        }
    };
    let mut names: Vec<String> = dir
        .iter()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "." && name != "..")
        .collect();
    names.sort();
    Hidden::Entries(names)
}

/// A detached, non-recursive copy of the mount at `dir`, as a descriptor
/// of `dir` in it.
fn clone_of_mount(dir: &Path) -> Result<OwnedFd, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: open_tree reads the NUL-terminated path and returns a new
    // descriptor (or -1), which is owned here from then on.
    let fd = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_open_tree,
            nix::libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    // SAFETY: the descriptor is new and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_nothing_is_mounted_on_hides_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("boot/firmware")).unwrap();
        std::fs::write(dir.path().join("boot/firmware/config.txt"), "x").unwrap();
        let host = Host::with_root(dir.path());
        assert_eq!(
            under_mount_point(&host, Path::new("/boot/firmware")),
            Hidden::NotAMountPoint
        );
        assert_eq!(
            under_mount_point(&host, Path::new("/no/such/dir")),
            Hidden::NotAMountPoint
        );
    }
}
