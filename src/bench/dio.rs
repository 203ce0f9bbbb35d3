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

/// The alignment direct I/O on `file` needs.
pub fn alignment(file: &File, path: &Path, is_block_device: bool) -> Result<DirectIoAlignment> {
    if let Some((memory, offset)) = statx_dio_align(file) {
        if offset == 0 {
            bail!(
                "{}: this filesystem does not support direct I/O; benchmark a directory on another filesystem, or the disk itself",
                path.display()
            );
        }
        return Ok(DirectIoAlignment {
            memory,
            offset,
            source: AlignmentSource::Statx,
        });
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
