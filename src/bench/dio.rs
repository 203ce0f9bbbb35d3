//! What O_DIRECT needs from a file: buffer address, offset and length
//! alignment.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Where the alignment figures came from, recorded in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlignmentSource {
    /// statx(STATX_DIOALIGN), Linux 6.1 and later.
    Statx,
    /// The device's logical block size (BLKSSZGET).
    LogicalBlockSize,
    /// Neither was available: a page, which every filesystem accepts.
    PageSize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectIoAlignment {
    /// Buffers must start at a multiple of this.
    pub memory: u32,
    /// File offsets and I/O lengths must be multiples of this.
    pub offset: u32,
    pub source: AlignmentSource,
}

impl DirectIoAlignment {
    /// The alignment to allocate buffers with: at least a page, which keeps
    /// the kernel from splitting a buffer across pages needlessly.
    pub fn buffer_align(&self) -> usize {
        (self.memory as usize).max(4096)
    }

    pub fn check_block_size(&self, block_size: u32, path: &Path) -> Result<()> {
        if block_size % self.offset != 0 {
            bail!(
                "{}: direct I/O needs lengths in multiples of {} bytes, so a {} byte test cannot run there",
                path.display(),
                self.offset,
                block_size
            );
        }
        Ok(())
    }
}

nix::ioctl_read_bad!(
    block_logical_size,
    nix::request_code_none!(0x12, 104),
    libc::c_int
);

/// The alignment direct I/O on `file` (opened with O_DIRECT) needs.
pub fn alignment(file: &File, path: &Path, is_block_device: bool) -> Result<DirectIoAlignment> {
    match statx_dio_align(file) {
        Some((memory, offset)) if offset != 0 => {
            return Ok(DirectIoAlignment {
                memory,
                offset,
                source: AlignmentSource::Statx,
            })
        }
        // A kernel reports a zero offset alignment for a file whose
        // O_DIRECT silently falls back to the page cache (ext4 with
        // data=journal, encrypted or verity files), but emulators such as
        // qemu-user pass the STATX_DIOALIGN bit on with zero alignments
        // too. So a zero is "unknown": ask the file itself.
        Some(_) => match misaligned_read(file) {
            Probe::BufferedFallback => bail!(
                "{}: this filesystem does not support direct I/O; benchmark a directory on another filesystem, or the disk itself",
                path.display()
            ),
            Probe::DirectIo | Probe::Inconclusive => {}
        },
        None => {}
    }
    if is_block_device {
        let mut size: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer.
        unsafe { block_logical_size(file.as_raw_fd(), &mut size) }
            .with_context(|| format!("{}: reading the logical block size", path.display()))?;
        let size = u32::try_from(size).unwrap_or(512).max(512);
        return Ok(DirectIoAlignment {
            memory: size,
            offset: size,
            source: AlignmentSource::LogicalBlockSize,
        });
    }
    Ok(DirectIoAlignment {
        memory: 4096,
        offset: 4096,
        source: AlignmentSource::PageSize,
    })
}

/// What a one-byte read at offset 1 into an odd address tells about an
/// O_DIRECT descriptor.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// Refused with EINVAL: the kernel does direct I/O and checks alignment.
    DirectIo,
    /// Read a byte: the I/O went through the page cache after all.
    BufferedFallback,
    /// Nothing to read (an empty file) or another error: no answer, and the
    /// caller falls back to an alignment every filesystem accepts.
    Inconclusive,
}

fn misaligned_read(file: &File) -> Probe {
    let mut buffer = [0u8; 2];
    // SAFETY: reads at most one byte into the two-byte buffer's second
    // byte; the read neither moves the file offset nor writes.
    let rc = unsafe { libc::pread64(file.as_raw_fd(), buffer.as_mut_ptr().add(1).cast(), 1, 1) };
    match rc {
        1 => Probe::BufferedFallback,
        -1 if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) => {
            Probe::DirectIo
        }
        _ => Probe::Inconclusive,
    }
}

/// (memory, offset) alignment from statx, when the kernel and the
/// filesystem report it.
fn statx_dio_align(file: &File) -> Option<(u32, u32)> {
    // SAFETY: statx fills the zeroed struct; the empty path with
    // AT_EMPTY_PATH refers to the open descriptor.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align, stx.stx_dio_offset_align))
}

/// The size of a block device in bytes. Seeking to the end works for block
/// devices on every architecture, without BLKGETSIZE64, whose request number
/// depends on the size of `size_t`.
pub fn device_size(file: &File, path: &Path) -> Result<u64> {
    let mut handle = file;
    handle
        .seek(SeekFrom::End(0))
        .with_context(|| format!("{}: finding the size of the device", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn a_file_has_a_usable_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        match alignment(&file, &path, false) {
            Ok(a) => {
                assert!(a.offset.is_power_of_two() && a.memory.is_power_of_two());
                assert!(a.check_block_size(1 << 20, &path).is_ok());
            }
            // tmpfs and the like: the error names the path and what to do.
            Err(e) => assert!(e.to_string().contains("direct I/O"), "{e}"),
        }
    }

    fn direct(path: &Path) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .unwrap()
    }

    /// Under qemu-user statx reports STATX_DIOALIGN with zero alignments:
    /// the probe must still tell that a file on a disk filesystem does
    /// direct I/O, and a buffered descriptor that it does not.
    #[test]
    fn the_probe_tells_direct_io_from_the_page_cache() {
        // /var/tmp is on a disk filesystem, unlike a tmpfs /tmp.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let buffered = File::open(&path).unwrap();
        assert_eq!(misaligned_read(&buffered), Probe::BufferedFallback);
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        {
            Ok(file) => {
                assert_eq!(misaligned_read(&file), Probe::DirectIo);
                // An empty file has nothing to read: no answer either way.
                let empty = dir.path().join("empty");
                File::create(&empty).unwrap();
                assert_eq!(misaligned_read(&direct(&empty)), Probe::Inconclusive);
            }
            // A /var/tmp without direct I/O (tmpfs on an older kernel).
            Err(err) => assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}"),
        }
    }

    #[test]
    fn odd_block_sizes_are_refused() {
        let a = DirectIoAlignment {
            memory: 512,
            offset: 4096,
            source: AlignmentSource::Statx,
        };
        assert!(a.check_block_size(512, Path::new("/x")).is_err());
        assert!(a.check_block_size(8192, Path::new("/x")).is_ok());
    }
}
