//! Finding the data of a sparse file, so its holes stay holes in the copy.
//!
//! `lseek(SEEK_DATA)` / `lseek(SEEK_HOLE)` name the ranges that hold data;
//! only those are copied, and the target is truncated to the source's size
//! at the end, which leaves every hole (also a trailing one) unallocated.
//! Filesystems without hole tracking report the whole file as one extent,
//! which is still correct.

use std::io;
use std::os::fd::AsRawFd;

/// A range of a file that holds data: `start..end`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub start: u64,
    pub end: u64,
}

impl Extent {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
}

/// Does the file use fewer blocks than its size needs? Only then is it
/// worth asking for its holes: a dense file is copied in one stream.
/// (`blocks` counts 512-byte units, as `st_blocks` does.)
pub fn may_have_holes(size: u64, blocks: u64) -> bool {
    blocks.saturating_mul(512) < size
}

/// Where data and holes start, as the kernel tells it.
pub trait HoleSeeker {
    /// The first offset at or after `from` that holds data; `None` when
    /// only a hole follows (ENXIO).
    fn next_data(&mut self, from: u64) -> io::Result<Option<u64>>;
    /// The first offset at or after `from` in a hole (the end of the file
    /// counts as one).
    fn next_hole(&mut self, from: u64) -> io::Result<u64>;
}

/// The next data extent at or after `from`, clipped to `size` (the size the
/// copy promised to copy; a file growing meanwhile is the second pass's
/// business).
pub fn next_extent(
    seeker: &mut dyn HoleSeeker,
    from: u64,
    size: u64,
) -> io::Result<Option<Extent>> {
    if from >= size {
        return Ok(None);
    }
    let Some(start) = seeker.next_data(from)? else {
        return Ok(None);
    };
    if start >= size {
        return Ok(None);
    }
    let end = seeker.next_hole(start)?.min(size);
    if end <= start {
        // A file truncated between the two calls: nothing more to copy.
        return Ok(None);
    }
    Ok(Some(Extent { start, end }))
}

/// [`HoleSeeker`] on an open file, with 64-bit offsets on every
/// architecture (`off_t` is 32 bits on armhf).
pub struct FileSeeker<'a>(pub &'a std::fs::File);

impl HoleSeeker for FileSeeker<'_> {
    fn next_data(&mut self, from: u64) -> io::Result<Option<u64>> {
        match nix::unistd::lseek64(
            self.0.as_raw_fd(),
            offset(from)?,
            nix::unistd::Whence::SeekData,
        ) {
            Ok(at) => Ok(Some(at as u64)),
            Err(nix::errno::Errno::ENXIO) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    fn next_hole(&mut self, from: u64) -> io::Result<u64> {
        let at = nix::unistd::lseek64(
            self.0.as_raw_fd(),
            offset(from)?,
            nix::unistd::Whence::SeekHole,
        )?;
        Ok(at as u64)
    }
}

fn offset(at: u64) -> io::Result<libc::off64_t> {
    libc::off64_t::try_from(at).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file described as its data extents, like ext4 would answer.
    struct FakeFile {
        data: Vec<(u64, u64)>,
        len: u64,
    }

    impl HoleSeeker for FakeFile {
        fn next_data(&mut self, from: u64) -> io::Result<Option<u64>> {
            Ok(self
                .data
                .iter()
                .find(|(_, end)| *end > from)
                .map(|(start, _)| (*start).max(from)))
        }
        fn next_hole(&mut self, from: u64) -> io::Result<u64> {
            Ok(self
                .data
                .iter()
                .find(|(start, end)| *start <= from && from < *end)
                .map(|(_, end)| *end)
                .unwrap_or(from)
                .min(self.len))
        }
    }

    fn all_extents(file: &mut FakeFile, size: u64) -> Vec<(u64, u64)> {
        let mut at = 0;
        let mut found = Vec::new();
        while let Some(extent) = next_extent(file, at, size).unwrap() {
            found.push((extent.start, extent.end));
            at = extent.end;
        }
        found
    }

    #[test]
    fn extents_between_holes_and_a_trailing_hole() {
        let mut file = FakeFile {
            data: vec![(4096, 8192), (1 << 20, (1 << 20) + 4096)],
            len: 10 << 20,
        };
        assert_eq!(
            all_extents(&mut file, 10 << 20),
            vec![(4096, 8192), (1 << 20, (1 << 20) + 4096)]
        );
    }

    #[test]
    fn a_file_that_is_all_hole_has_no_extents() {
        let mut file = FakeFile {
            data: vec![],
            len: 1 << 30,
        };
        assert!(all_extents(&mut file, 1 << 30).is_empty());
    }

    #[test]
    fn extents_are_clipped_to_the_promised_size() {
        // The file grew after it was measured: copy what was promised.
        let mut file = FakeFile {
            data: vec![(0, 100), (200, 1000)],
            len: 1000,
        };
        assert_eq!(all_extents(&mut file, 300), vec![(0, 100), (200, 300)]);
    }

    #[test]
    fn only_files_with_missing_blocks_are_scanned() {
        assert!(may_have_holes(1 << 20, 8));
        assert!(!may_have_holes(4096, 8));
        assert!(!may_have_holes(0, 0));
        // Small files stored inline use no blocks yet hold data: scanning
        // them is harmless, SEEK_DATA reports their data.
        assert!(may_have_holes(60, 0));
    }

    #[test]
    fn real_sparse_file_keeps_its_layout() {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = tempfile::tempfile().unwrap();
        file.seek(SeekFrom::Start(1 << 20)).unwrap();
        file.write_all(&[1u8; 4096]).unwrap();
        file.set_len(4 << 20).unwrap();
        let mut at = 0;
        let mut data = 0;
        while let Some(extent) = next_extent(&mut FileSeeker(&file), at, 4 << 20).unwrap() {
            data += extent.len();
            at = extent.end;
        }
        // tmpfs and ext4 track holes to the page/block: at most a few KiB
        // around the written range; a filesystem without SEEK_HOLE support
        // reports the whole file.
        assert!(data >= 4096);
        assert!(data == 4 << 20 || data <= 64 * 1024, "data {data}");
    }
}
