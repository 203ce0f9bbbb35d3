//! The 64-bit forms of the calls whose plain libc forms are 32-bit on
//! armhf (32-bit Raspberry Pi OS): times after January 2038, file offsets
//! of 2 GiB and more, filesystems over 16 TiB. On 64-bit targets they are
//! the plain calls. What cannot be done exactly is an error, never a value
//! cut to 32 bits (a 2040 mtime set through a 32-bit `time_t` becomes
//! 1903, and the call still succeeds).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Seconds and nanoseconds since 1970, as `Metadata::mtime()` and
/// `mtime_nsec()` give them.
pub type Timestamp = (i64, i64);

/// What [`set_times`] acts on.
#[derive(Clone, Copy)]
pub enum TimesOf<'a> {
    /// An open file.
    File(&'a File),
    /// A path; a symlink there is changed itself, never what it points to.
    Path(&'a Path),
}

/// Sets the access and modification times, to the nanosecond.
pub fn set_times(of: TimesOf, atime: Timestamp, mtime: Timestamp) -> io::Result<()> {
    let path;
    let (dirfd, path, flags) = match of {
        TimesOf::File(file) => (file.as_raw_fd(), None, 0),
        TimesOf::Path(p) => {
            path = CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            (
                libc::AT_FDCWD,
                Some(path.as_c_str()),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        }
    };
    utimensat(dirfd, path, [atime, mtime], flags)
}

/// The C library's `utimensat`, or `futimens` of `dirfd` when there is no
/// path, with its own `timespec`s.
fn libc_utimensat(
    dirfd: libc::c_int,
    path: Option<&CStr>,
    times: &[libc::timespec; 2],
    flags: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `times` is two initialised timespecs, `path` a C string.
    let rc = unsafe {
        match path {
            Some(path) => libc::utimensat(dirfd, path.as_ptr(), times.as_ptr(), flags),
            None => libc::futimens(dirfd, times.as_ptr()),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// 64-bit `time_t`: the plain call holds every time.
#[cfg(not(any(target_arch = "arm", target_arch = "x86")))]
fn utimensat(
    dirfd: libc::c_int,
    path: Option<&CStr>,
    times: [Timestamp; 2],
    flags: libc::c_int,
) -> io::Result<()> {
    let times = times.map(|(seconds, nanoseconds)| libc::timespec {
        tv_sec: seconds as libc::time_t,
        tv_nsec: nanoseconds as libc::c_long,
    });
    libc_utimensat(dirfd, path, &times, flags)
}

/// `utimensat_time64`, the same number on every 32-bit Linux architecture
/// (Linux 5.1 and later). Called directly: glibc 2.31, the oldest the Pi
/// packages are built for, has no 64-bit `utimensat` to link against.
#[cfg(any(target_arch = "arm", target_arch = "x86"))]
const SYS_UTIMENSAT_TIME64: libc::c_long = 412;

/// The kernel's `struct __kernel_timespec`: 64-bit fields on every
/// architecture.
#[cfg(any(target_arch = "arm", target_arch = "x86"))]
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// 32-bit `time_t`: the kernel's 64-bit call, or on a kernel without it
/// the 32-bit one for the times it can hold.
#[cfg(any(target_arch = "arm", target_arch = "x86"))]
fn utimensat(
    dirfd: libc::c_int,
    path: Option<&CStr>,
    times: [Timestamp; 2],
    flags: libc::c_int,
) -> io::Result<()> {
    let path_ptr = path.map_or(std::ptr::null(), |p| p.as_ptr());
    let wide = times.map(|(tv_sec, tv_nsec)| KernelTimespec { tv_sec, tv_nsec });
    // SAFETY: the kernel reads two timespecs and, when not null, a C
    // string; a null path with dirfd sets the times of that descriptor.
    let rc = unsafe { libc::syscall(SYS_UTIMENSAT_TIME64, dirfd, path_ptr, wide.as_ptr(), flags) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    let narrow = |(seconds, nanoseconds): Timestamp| {
        let tv_sec = libc::time_t::try_from(seconds).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the time {seconds} s since 1970 is past what a 32-bit time holds (2038), and this kernel is older than Linux 5.1, which sets 64-bit times on 32-bit systems"
                ),
            )
        })?;
        Ok::<_, io::Error>(libc::timespec {
            tv_sec,
            tv_nsec: nanoseconds as libc::c_long,
        })
    };
    let times = [narrow(times[0])?, narrow(times[1])?];
    libc_utimensat(dirfd, path, &times, flags)
}

/// The size and free space of a filesystem, in 64-bit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// The unit of the block counts (`f_frsize`).
    pub fragment_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    /// Free to unprivileged users (without the root reserve).
    pub blocks_available: u64,
}

impl Space {
    pub fn total_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.fragment_size)
    }

    pub fn used_bytes(&self) -> u64 {
        self.blocks
            .saturating_sub(self.blocks_free)
            .saturating_mul(self.fragment_size)
    }

    pub fn available_bytes(&self) -> u64 {
        self.blocks_available.saturating_mul(self.fragment_size)
    }

    /// Widens what `statvfs64` filled in (its fields are 64 bits on every
    /// architecture; the conversions are no-ops where they already are u64).
    #[allow(clippy::useless_conversion)]
    fn from_raw(raw: &libc::statvfs64) -> Space {
        Space {
            fragment_size: u64::from(raw.f_frsize),
            blocks: u64::from(raw.f_blocks),
            blocks_free: u64::from(raw.f_bfree),
            blocks_available: u64::from(raw.f_bavail),
        }
    }
}

/// `statvfs64`: the plain `statvfs` of armhf counts blocks in 32 bits, so
/// a filesystem over 16 TiB (4 KiB blocks) fails with EOVERFLOW there.
pub fn filesystem_space(path: &Path) -> io::Result<Space> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs64 fills the zeroed struct from a C string path.
    let mut raw: libc::statvfs64 = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs64(path.as_ptr(), &mut raw) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Space::from_raw(&raw))
}

/// Reserves `len` bytes of `file` from the start (`posix_fallocate64`,
/// whose offsets are 64 bits on every architecture).
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    let len =
        libc::off64_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: plain call on an open descriptor; it returns the error number.
    match unsafe { libc::posix_fallocate64(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// 2040-01-01 00:00:00 UTC: past what a 32-bit time_t holds.
    const IN_2040: i64 = 2_208_988_800;

    #[test]
    fn times_past_2038_are_kept_on_files_and_symlinks() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        set_times(
            TimesOf::File(&file),
            (IN_2040 + 1, 5),
            (IN_2040, 123_456_789),
        )
        .unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.mtime(), meta.mtime_nsec()), (IN_2040, 123_456_789));
        assert_eq!((meta.atime(), meta.atime_nsec()), (IN_2040 + 1, 5));

        let link = dir.path().join("link");
        std::os::unix::fs::symlink("f", &link).unwrap();
        set_times(TimesOf::Path(&link), (1, 2), (IN_2040 * 2, 7)).unwrap();
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert_eq!((meta.mtime(), meta.mtime_nsec()), (IN_2040 * 2, 7));
        // The file it points to kept its own.
        assert_eq!(std::fs::metadata(&path).unwrap().mtime(), IN_2040);
    }

    #[test]
    fn a_missing_path_is_an_error() {
        let err = set_times(TimesOf::Path(Path::new("/nonexistent/x")), (0, 0), (0, 0));
        assert_eq!(err.unwrap_err().raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn block_counts_past_32_bits_are_widened_exactly() {
        // SAFETY: an all-zero statvfs64 is valid.
        let mut raw: libc::statvfs64 = unsafe { std::mem::zeroed() };
        raw.f_frsize = 4096;
        // 20 TiB in 4 KiB blocks: 5,368,709,120 blocks, over u32::MAX.
        raw.f_blocks = 20 << 28;
        raw.f_bfree = 3 << 30;
        raw.f_bavail = (3 << 30) - 1000;
        let space = Space::from_raw(&raw);
        assert_eq!(space.total_bytes(), 20 << 40);
        assert_eq!(space.used_bytes(), (20 << 40) - (12 << 40));
        assert_eq!(space.available_bytes(), (12 << 40) - 4096 * 1000);
    }

    #[test]
    fn the_filesystem_of_a_directory_has_a_size() {
        let space = filesystem_space(Path::new("/var/tmp")).unwrap();
        assert!(space.fragment_size > 0 && space.blocks > 0, "{space:?}");
        assert!(space.blocks_available <= space.blocks_free);
        let err = filesystem_space(Path::new("/nonexistent/x")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn allocating_past_2_gib_reserves_the_length() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let file = File::create(dir.path().join("big")).unwrap();
        let len = (2u64 << 30) + 4096;
        match allocate(&file, len) {
            Ok(()) => assert_eq!(file.metadata().unwrap().len(), len),
            // A filesystem that cannot preallocate, or is too small: an
            // error, never a shorter file.
            Err(err) => {
                assert!(
                    matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSPC)),
                    "{err}"
                );
            }
        }
    }
}
