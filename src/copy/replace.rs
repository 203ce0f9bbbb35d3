//! A file written beside the one it replaces, put in place by a rename only
//! once its data and metadata are complete: a second pass whose read of the
//! source fails (a bad sector, a file gone since it was listed) leaves the
//! target's previous bytes and metadata as they were.
//!
//! The new inode is made with `O_TMPFILE`, which has no name until it is
//! linked: a copy killed while it writes leaves nothing behind in the
//! target (a named temporary file would stay there, in a directory a later
//! pass may never list again). Only for the instant between the link and
//! the rename does it carry a temporary name. Filesystems without
//! `O_TMPFILE` get a named temporary file, removed if the copy fails.
//!
//! A rename replaces one name: a target inode with several names keeps its
//! other names on the old bytes, which is what the walker wants (it links
//! a source inode's later names to the first one's new inode itself).

use std::ffi::{CString, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The replacement being written. Dropped without [`Replacement::commit`],
/// it leaves the directory as it found it.
pub struct Replacement {
    file: File,
    dir: PathBuf,
    /// The temporary name of a file made without `O_TMPFILE`.
    named: Option<PathBuf>,
}

impl Replacement {
    /// A new, empty, owner-only file in `dir`, not yet visible under any
    /// name the walk knows.
    pub fn create_in(dir: &Path) -> io::Result<Replacement> {
        let unnamed = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_NOFOLLOW)
            .open(dir);
        match unnamed {
            Ok(file) => Ok(Replacement {
                file,
                dir: dir.to_path_buf(),
                named: None,
            }),
            // No O_TMPFILE on this filesystem or kernel.
            Err(err)
                if matches!(
                    err.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) =>
            {
                loop {
                    let path = dir.join(temporary_name());
                    let created = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&path);
                    match created {
                        Ok(file) => {
                            return Ok(Replacement {
                                file,
                                dir: dir.to_path_buf(),
                                named: Some(path),
                            })
                        }
                        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(err) => return Err(err),
                    }
                }
            }
            Err(err) => Err(err),
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Puts the file in place at `target` (a name in the same directory),
    /// replacing what is there; a directory in the way (the source's entry
    /// changed kind) is removed first, now that the data is complete.
    pub fn commit(mut self, target: &Path) -> io::Result<()> {
        let temporary = match self.named.take() {
            Some(path) => path,
            None => self.link()?,
        };
        let renamed = match std::fs::rename(&temporary, target) {
            Err(err)
                if matches!(
                    err.raw_os_error(),
                    Some(libc::EISDIR | libc::ENOTEMPTY | libc::EEXIST)
                ) =>
            {
                super::nodes::remove_any(target).and_then(|()| std::fs::rename(&temporary, target))
            }
            renamed => renamed,
        };
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        renamed
    }

    /// Gives the unnamed inode a temporary name in its directory.
    fn link(&self) -> io::Result<PathBuf> {
        loop {
            let path = self.dir.join(temporary_name());
            match link_open_file(&self.file, &path) {
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                linked => return linked.map(|()| path),
            }
        }
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if let Some(path) = self.named.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A name no entry of a copied tree is expected to have; unique in this
/// process, and tried again if something has it anyway.
fn temporary_name() -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    OsString::from(format!(".pimigrate-new.{}.{n}", std::process::id()))
}

/// Links the open (unnamed) `file` at `path`: `AT_EMPTY_PATH` where the
/// process may (root, CAP_DAC_READ_SEARCH), else through /proc.
fn link_open_file(file: &File, path: &Path) -> io::Result<()> {
    let to = c_path(path)?;
    // SAFETY: the descriptor is open and both strings are NUL-terminated.
    let linked = unsafe {
        libc::linkat(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::ENOENT | libc::EPERM)) {
        return Err(err);
    }
    let from = c_path(Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())))?;
    // SAFETY: both strings are NUL-terminated.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes().to_vec())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Whether `name` is one [`temporary_name`] makes (for tests).
#[cfg(test)]
pub fn is_temporary(name: &std::ffi::OsStr) -> bool {
    name.as_bytes().starts_with(b".pimigrate-new.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn names(dir: &Path) -> Vec<OsString> {
        let mut names: Vec<OsString> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_dropped_replacement_leaves_the_directory_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "old").unwrap();
        let replacement = Replacement::create_in(dir.path()).unwrap();
        replacement.file().write_all(b"half of the new").unwrap();
        drop(replacement);
        assert_eq!(names(dir.path()), [OsString::from("f")]);
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"old");
    }

    #[test]
    fn a_commit_replaces_one_name_and_leaves_other_links_on_the_old_inode() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "old").unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        let replacement = Replacement::create_in(dir.path()).unwrap();
        replacement.file().write_all(b"new").unwrap();
        replacement.commit(&a).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"new");
        assert_eq!(std::fs::read(&b).unwrap(), b"old");
        assert_eq!(std::fs::metadata(&b).unwrap().nlink(), 1);
        assert_eq!(
            names(dir.path()),
            [OsString::from("a"), OsString::from("b")]
        );
    }

    #[test]
    fn a_commit_over_a_directory_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("was-a-dir");
        std::fs::create_dir_all(target.join("inner")).unwrap();
        let replacement = Replacement::create_in(dir.path()).unwrap();
        replacement.file().write_all(b"file now").unwrap();
        replacement.commit(&target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"file now");
        assert_eq!(names(dir.path()), [OsString::from("was-a-dir")]);
    }

    #[test]
    fn temporary_names_are_unique_and_recognised() {
        let (a, b) = (temporary_name(), temporary_name());
        assert_ne!(a, b);
        assert!(is_temporary(&a));
        assert!(!is_temporary(std::ffi::OsStr::new("pimigrate-new")));
    }
}
