//! What a copy did: counters shared by the walker and the data workers, the
//! snapshot handed to callers, and the errors that did not stop the copy.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One entry the copy could not copy faithfully. The copy goes on: a root
/// filesystem holds many entries, and one odd file should not leave the
/// user with nothing. Callers decide whether any error is acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyError {
    /// The source path (or the target path when only the target is involved).
    pub path: PathBuf,
    /// What was being done: "copy data", "set xattr security.capability", ...
    pub operation: String,
    /// The errno, when the failure came from the kernel.
    pub errno: Option<i32>,
    pub message: String,
}

impl CopyError {
    pub fn new(path: &Path, operation: impl Into<String>, err: &std::io::Error) -> CopyError {
        CopyError {
            path: path.to_path_buf(),
            operation: operation.into(),
            errno: err.raw_os_error(),
            message: err.to_string(),
        }
    }
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.path.display(),
            self.operation,
            self.message
        )
    }
}

impl std::error::Error for CopyError {}

/// Totals of one pass, as reported to the progress callback and returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Regular files whose data was written (a hard link counts once).
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Extra names of an inode already copied, made with link(2).
    pub hardlinks: u64,
    /// Device nodes, FIFOs and sockets.
    pub specials: u64,
    /// Bytes of file data written (holes of sparse files are not written).
    pub bytes: u64,
    /// Entries left out by an exclusion (the subtree counts once).
    pub excluded: u64,
    /// Entries that were listed but gone when the copy reached them.
    pub vanished: u64,
    /// Second pass: entries found unchanged, whose data was not copied again.
    pub unchanged: u64,
    /// Second pass: target entries removed because the source no longer
    /// has them.
    pub deleted: u64,
    /// Directories on another filesystem, created empty (mount points).
    pub mount_points: u64,
    /// Entries that could not be copied; see [`CopyError`]. At most
    /// [`MAX_KEPT_ERRORS`] are kept, `error_count` counts them all.
    pub errors: Vec<CopyError>,
    pub error_count: u64,
}

impl CopyStats {
    /// Entries handled so far, of any kind.
    pub fn entries(&self) -> u64 {
        self.files + self.dirs + self.symlinks + self.hardlinks + self.specials + self.unchanged
    }

    /// The first `shown` failed entries, one indented line each, for an
    /// error message.
    pub fn errors_shown(&self, shown: usize) -> String {
        let lines: Vec<String> = self
            .errors
            .iter()
            .take(shown)
            .map(|e| format!("  {e}"))
            .collect();
        lines.join("\n")
    }
}

/// A tree where every entry fails would otherwise fill memory with errors.
pub const MAX_KEPT_ERRORS: usize = 1000;

/// The live counters behind [`CopyStats`]: the walker and the workers add
/// to them concurrently; `snapshot` reads them for progress reports.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub files: AtomicU64,
    pub dirs: AtomicU64,
    pub symlinks: AtomicU64,
    pub hardlinks: AtomicU64,
    pub specials: AtomicU64,
    pub bytes: AtomicU64,
    pub excluded: AtomicU64,
    pub vanished: AtomicU64,
    pub unchanged: AtomicU64,
    pub deleted: AtomicU64,
    pub mount_points: AtomicU64,
    errors: Mutex<Vec<CopyError>>,
    error_count: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn record_error(&self, error: CopyError) {
        self.error_count.fetch_add(1, Ordering::Relaxed);
        // A poisoned lock only means another thread panicked while pushing;
        // the list itself is still usable.
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errors.len() < MAX_KEPT_ERRORS {
            errors.push(error);
        }
    }

    pub fn snapshot(&self) -> CopyStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CopyStats {
            files: get(&self.files),
            dirs: get(&self.dirs),
            symlinks: get(&self.symlinks),
            hardlinks: get(&self.hardlinks),
            specials: get(&self.specials),
            bytes: get(&self.bytes),
            excluded: get(&self.excluded),
            vanished: get(&self.vanished),
            unchanged: get(&self.unchanged),
            deleted: get(&self.deleted),
            mount_points: get(&self.mount_points),
            errors: self
                .errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            error_count: get(&self.error_count),
        }
    }
}
