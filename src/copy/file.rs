//! Moving the bytes of one regular file, and comparing two files' bytes.
//!
//! The fastest call that works is used and remembered per worker:
//! `copy_file_range` (in-kernel, and a reflink where the filesystem can),
//! then `sendfile` (in-kernel too; `copy_file_range` refuses to cross
//! filesystems on most kernels since 5.19, which is exactly our case, an SD
//! card to an SSD), then plain read/write with a large buffer. Copies run in
//! chunks so a cancel request is noticed within one chunk.
//!
//! Each chunk of a large file is handed to writeback as soon as it is
//! written (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which starts the
//! writes and does not wait for them). Left alone, the kernel would keep
//! the data in memory until the dirty limits are reached, up to 10 % of
//! RAM, and the target would sit idle while the copier fills the cache and
//! then while the final flush drains it; started early, the target's writes
//! run alongside the copy, and a Pi with little memory is not flooded with
//! dirty pages.

use super::sparse::{self, FileSeeker};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes moved per system call; also how often cancellation is checked.
const CHUNK: usize = 8 << 20;
/// The read/write fallback's buffer: large enough for the disk to stream.
const BUFFER: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    CopyFileRange,
    Sendfile,
    ReadWrite,
}

/// The copy was cancelled: the target holds a partial file.
#[derive(Debug)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("copy cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// When to stop: the caller's cancel flag (Ctrl-C) or the copy's own
/// abort flag (another thread hit a fatal error such as a full target).
#[derive(Clone, Copy)]
pub struct StopFlags<'a> {
    pub cancel: &'a AtomicBool,
    pub abort: &'a AtomicBool,
}

impl StopFlags<'_> {
    pub fn raised(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.abort.load(Ordering::Relaxed)
    }
}

/// Copies file data; one per thread (it owns its buffers).
pub struct DataCopier<'a> {
    method: Method,
    buffer: Vec<u8>,
    other: Vec<u8>,
    stop: StopFlags<'a>,
    bytes: &'a AtomicU64,
}

impl<'a> DataCopier<'a> {
    /// `bytes` is increased as data is written, for progress reports.
    pub fn new(stop: StopFlags<'a>, bytes: &'a AtomicU64) -> DataCopier<'a> {
        DataCopier {
            method: Method::CopyFileRange,
            buffer: Vec::new(),
            other: Vec::new(),
            stop,
            bytes,
        }
    }

    /// Copies `size` bytes of `source` (positioned anywhere) into the empty
    /// `target`, leaving holes where the source has them. `blocks` is the
    /// source's `st_blocks`.
    pub fn copy(&mut self, source: &File, target: &File, size: u64, blocks: u64) -> io::Result<()> {
        if size == 0 {
            return Ok(());
        }
        if !sparse::may_have_holes(size, blocks) {
            rewind(source)?;
            rewind(target)?;
            self.copy_range(source, target, 0, size)?;
            return Ok(());
        }
        let mut at = 0;
        loop {
            let extent = match sparse::next_extent(&mut FileSeeker(source), at, size) {
                Ok(Some(extent)) => extent,
                Ok(None) => break,
                // No SEEK_DATA here: copy the rest densely.
                Err(err) if err.raw_os_error() == Some(libc::EINVAL) => sparse::Extent {
                    start: at,
                    end: size,
                },
                Err(err) => return Err(err),
            };
            (&*source).seek(SeekFrom::Start(extent.start))?;
            (&*target).seek(SeekFrom::Start(extent.start))?;
            let copied = self.copy_range(source, target, extent.start, extent.len())?;
            if copied < extent.len() {
                break; // the source shrank
            }
            at = extent.end;
        }
        // Extends the target over a trailing hole without allocating it.
        target.set_len(size)
    }

    /// Copies up to `len` bytes from the current positions (the target's
    /// is `start`); fewer when the source ends first. Returns the bytes
    /// copied.
    fn copy_range(
        &mut self,
        source: &File,
        target: &File,
        start: u64,
        len: u64,
    ) -> io::Result<u64> {
        let mut done = 0u64;
        while done < len {
            if self.stop.raised() {
                return Err(io::Error::other(Cancelled));
            }
            let want = usize::try_from(len - done).unwrap_or(CHUNK).min(CHUNK);
            let n = match self.method {
                Method::CopyFileRange => match copy_file_range(source, target, want) {
                    Ok(n) => n,
                    Err(err) if err.raw_os_error().is_some_and(in_kernel_copy_unsupported) => {
                        self.method = Method::Sendfile;
                        continue;
                    }
                    Err(err) => return Err(err),
                },
                Method::Sendfile => match sendfile(source, target, want) {
                    Ok(n) => n,
                    Err(err) if err.raw_os_error().is_some_and(in_kernel_copy_unsupported) => {
                        self.method = Method::ReadWrite;
                        continue;
                    }
                    Err(err) => return Err(err),
                },
                Method::ReadWrite => self.read_write(source, target, want)?,
            };
            if n == 0 {
                break;
            }
            if len >= CHUNK as u64 {
                start_writeback(target, start + done, n as u64);
            }
            done += n as u64;
            self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(done)
    }

    fn read_write(
        &mut self,
        mut source: &File,
        mut target: &File,
        want: usize,
    ) -> io::Result<usize> {
        if self.buffer.len() < BUFFER {
            self.buffer.resize(BUFFER, 0);
        }
        let want = want.min(BUFFER);
        let n = loop {
            match source.read(&mut self.buffer[..want]) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        target.write_all(&self.buffer[..n])?;
        Ok(n)
    }

    /// Do the two files hold the same bytes? Reads both from the start.
    pub fn same_contents(&mut self, mut a: &File, mut b: &File) -> io::Result<bool> {
        self.buffer.resize(BUFFER, 0);
        self.other.resize(BUFFER, 0);
        rewind(a)?;
        rewind(b)?;
        loop {
            if self.stop.raised() {
                return Err(io::Error::other(Cancelled));
            }
            let n = read_full(&mut a, &mut self.buffer)?;
            let m = read_full(&mut b, &mut self.other)?;
            if n != m || self.buffer[..n] != self.other[..m] {
                return Ok(false);
            }
            if n == 0 {
                return Ok(true);
            }
        }
    }
}

/// Errors that mean "this kernel or filesystem pair cannot do it": fall
/// back to the next method instead of failing the file.
fn in_kernel_copy_unsupported(errno: i32) -> bool {
    matches!(
        errno,
        libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM | libc::EBADF
    )
}

fn copy_file_range(source: &File, target: &File, want: usize) -> io::Result<usize> {
    loop {
        // SAFETY: both descriptors are open for the duration of the call;
        // null offsets use (and advance) both files' positions.
        let n = unsafe {
            libc::copy_file_range(
                source.as_raw_fd(),
                std::ptr::null_mut(),
                target.as_raw_fd(),
                std::ptr::null_mut(),
                want,
                0,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn sendfile(source: &File, target: &File, want: usize) -> io::Result<usize> {
    loop {
        // SAFETY: both descriptors are open for the duration of the call;
        // a null offset uses (and advances) the source's file position.
        let n = unsafe {
            libc::sendfile(
                target.as_raw_fd(),
                source.as_raw_fd(),
                std::ptr::null_mut(),
                want,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Starts writing back `len` bytes of `file` from `offset` without waiting
/// (see the module comment). Only a hint: an error, such as a vanished
/// disk, shows again at the next write or at the final flush.
fn start_writeback(file: &File, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (offset.try_into(), len.try_into()) else {
        return;
    };
    // SAFETY: the descriptor is open for the duration of the call.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

fn rewind(mut file: &File) -> io::Result<()> {
    file.seek(SeekFrom::Start(0)).map(drop)
}

fn read_full(file: &mut &File, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn copy_with(method: Method, data: &[u8]) -> Vec<u8> {
        let (cancel, abort) = (AtomicBool::new(false), AtomicBool::new(false));
        let stop = StopFlags {
            cancel: &cancel,
            abort: &abort,
        };
        let bytes = AtomicU64::new(0);
        let mut source = tempfile::tempfile().unwrap();
        source.write_all(data).unwrap();
        let target = tempfile::tempfile().unwrap();
        let meta = source.metadata().unwrap();
        let mut copier = DataCopier::new(stop, &bytes);
        copier.method = method;
        copier
            .copy(&source, &target, meta.size(), meta.blocks())
            .unwrap();
        let mut out = Vec::new();
        rewind(&target).unwrap();
        (&target).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn every_method_copies_the_same_bytes() {
        let data: Vec<u8> = (0..3 * BUFFER + 17).map(|i| (i * 7 % 251) as u8).collect();
        for method in [Method::CopyFileRange, Method::Sendfile, Method::ReadWrite] {
            assert_eq!(copy_with(method, &data), data, "{method:?}");
        }
    }

    #[test]
    fn cancel_stops_a_copy() {
        let (cancel, abort) = (AtomicBool::new(true), AtomicBool::new(false));
        let stop = StopFlags {
            cancel: &cancel,
            abort: &abort,
        };
        let bytes = AtomicU64::new(0);
        let mut source = tempfile::tempfile().unwrap();
        source.write_all(&[1u8; 4096]).unwrap();
        let target = tempfile::tempfile().unwrap();
        let err = DataCopier::new(stop, &bytes)
            .copy(&source, &target, 4096, 8)
            .unwrap_err();
        assert!(err.get_ref().is_some_and(|e| e.is::<Cancelled>()));
    }

    #[test]
    fn contents_compare_byte_for_byte() {
        let (cancel, abort) = (AtomicBool::new(false), AtomicBool::new(false));
        let stop = StopFlags {
            cancel: &cancel,
            abort: &abort,
        };
        let bytes = AtomicU64::new(0);
        let mut copier = DataCopier::new(stop, &bytes);
        let mut a = tempfile::tempfile().unwrap();
        let mut b = tempfile::tempfile().unwrap();
        a.write_all(&vec![5u8; BUFFER + 3]).unwrap();
        b.write_all(&vec![5u8; BUFFER + 3]).unwrap();
        assert!(copier.same_contents(&a, &b).unwrap());
        b.seek(SeekFrom::Start(BUFFER as u64 + 1)).unwrap();
        b.write_all(&[6]).unwrap();
        assert!(!copier.same_contents(&a, &b).unwrap());
    }
}
