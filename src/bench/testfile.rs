//! The test file on a mounted filesystem: sized to the free space, laid out
//! with random data before anything is read, and always removed.

use super::buffer::AlignedBuf;
use super::random::FastRng;
use crate::units::{binary, MIB};
use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Never use less than this: smaller files measure the drive's cache.
pub const MIN_TEST_FILE: u64 = 16 * MIB;

/// Removes the file when dropped: at the end, on an error, and after
/// Ctrl-C (the signal handler only sets a flag, so unwinding reaches here).
#[derive(Debug)]
pub struct TestFile {
    pub path: PathBuf,
    pub file: File,
    pub size: u64,
}

impl Drop for TestFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!(
                    "pimigrate: could not remove the test file {}: {e}; remove it by hand",
                    self.path.display()
                );
            }
        }
    }
}

/// How large the test file will be, and why it is smaller than asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    pub bytes: u64,
    pub note: Option<String>,
}

/// Leaves at least a tenth of the free space (and 64 MiB) to the system.
pub fn size_for(requested: u64, free: u64, dir: &Path) -> Result<Sizing> {
    let reserve = (free / 10).max(64 * MIB);
    let usable = free.saturating_sub(reserve) / MIB * MIB;
    let requested = requested.max(MIB) / MIB * MIB;
    if requested <= usable {
        return Ok(Sizing {
            bytes: requested,
            note: None,
        });
    }
    if usable < MIN_TEST_FILE {
        bail!(
            "{}: only {} free, not enough for a test file of at least {}; free some space or benchmark another directory",
            dir.display(),
            binary(free),
            binary(MIN_TEST_FILE)
        );
    }
    Ok(Sizing {
        bytes: usable,
        note: Some(format!(
            "test file is {} instead of {}: only {} free",
            binary(usable),
            binary(requested),
            binary(free)
        )),
    })
}

pub fn free_bytes(dir: &Path) -> Result<u64> {
    // 64-bit counts: on armhf the plain statvfs fails past 16 TiB.
    let space = crate::sys64::filesystem_space(dir)
        .with_context(|| format!("{}: reading the free space", dir.display()))?;
    Ok(space.available_bytes())
}

/// Creates the test file with O_DIRECT; a fresh name, never an existing file.
pub fn create(dir: &Path, size: u64) -> Result<TestFile> {
    let path = dir.join(format!(".pimigrate-bench-{}.tmp", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| {
            format!(
                "{}: creating the test file (is the filesystem writable and does it support direct I/O?)",
                path.display()
            )
        })?;
    Ok(TestFile { path, file, size })
}

/// Writes the whole file once with random data and flushes it, so reads
/// hit real blocks and no write lands on unallocated space.
pub fn lay_out(
    test: &TestFile,
    align: usize,
    interrupted: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Duration> {
    let started = Instant::now();
    // Reserve the blocks first, as fio does, so the file is not fragmented
    // by writing it piece by piece. 64-bit offsets: on armhf the plain
    // call cannot reserve 2 GiB or more. Best effort: the writes below
    // allocate what this could not.
    let _ = crate::sys64::allocate(&test.file, test.size);
    let chunk = (4 * MIB).min(test.size) as usize;
    let mut buf = AlignedBuf::new(chunk, align);
    let mut rng = FastRng::from_entropy();
    let mut offset = 0u64;
    while offset < test.size {
        if interrupted.load(Ordering::Relaxed) {
            bail!("interrupted while laying out the test file");
        }
        let len = (test.size - offset).min(chunk as u64) as usize;
        rng.fill(&mut buf.as_mut_slice()[..len]);
        test.file
            .write_all_at(&buf.as_slice()[..len], offset)
            .with_context(|| format!("{}: writing the test file", test.path.display()))?;
        offset += len as u64;
        progress(offset);
    }
    test.file
        .sync_all()
        .with_context(|| format!("{}: flushing the test file", test.path.display()))?;
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::GIB;

    #[test]
    fn full_size_when_there_is_room() {
        let s = size_for(GIB, 100 * GIB, Path::new("/")).unwrap();
        assert_eq!(
            s,
            Sizing {
                bytes: GIB,
                note: None
            }
        );
    }

    #[test]
    fn smaller_when_space_is_short_and_says_so() {
        let s = size_for(GIB, 500 * MIB, Path::new("/")).unwrap();
        assert_eq!(s.bytes, 436 * MIB);
        assert!(s.note.unwrap().contains("only 500.0 MiB free"));
    }

    #[test]
    fn refused_when_almost_full() {
        let e = size_for(GIB, 70 * MIB, Path::new("/data")).unwrap_err();
        assert!(e.to_string().contains("/data"));
    }

    #[test]
    fn the_file_is_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = match create(dir.path(), MIB) {
            Ok(test) => test.path.clone(),
            Err(_) => return, // tmpfs without O_DIRECT: nothing to check
        };
        assert!(!path.exists());
    }
}
