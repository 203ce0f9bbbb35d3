//! Failures of reading the source, injected by unit tests at the places a
//! real disk fails (a directory block that does not verify, an inode that
//! cannot be read, a file whose read stops with EIO half-way), so the
//! copier's answer to each is tested without a failing device. Outside
//! tests [`check`] is always `Ok` and costs nothing.

use std::io;
use std::path::Path;

/// Where a read of the source can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Listing a directory.
    List,
    /// The entry's lstat.
    Stat,
    /// Opening a regular file.
    Open,
    /// Reading a regular file's data, after half of it was read.
    Read,
}

/// The injected failure of `op` on `path`, if a test asked for one.
#[inline]
pub fn check(path: &Path, op: Op) -> io::Result<()> {
    #[cfg(test)]
    if let Some(errno) = injected::find(path, op) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    let _ = (path, op);
    Ok(())
}

#[cfg(test)]
pub use injected::{clear, inject};

#[cfg(test)]
mod injected {
    use super::Op;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// Paths are those of a test's own temporary directory, so tests
    /// running in parallel never meet each other's faults.
    static FAULTS: Mutex<Vec<(PathBuf, Op, i32)>> = Mutex::new(Vec::new());

    /// From now on, `op` on `path` fails with `errno`.
    pub fn inject(path: &Path, op: Op, errno: i32) {
        FAULTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((path.to_path_buf(), op, errno));
    }

    /// The disk is good again: `path` reads as it is.
    pub fn clear(path: &Path) {
        FAULTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(p, _, _)| p != path);
    }

    pub fn find(path: &Path, op: Op) -> Option<i32> {
        FAULTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(p, o, _)| p == path && *o == op)
            .map(|(_, _, errno)| *errno)
    }
}
