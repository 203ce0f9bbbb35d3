//! FITRIM on a mounted filesystem: what `fstrim` does, without the tool,
//! so a check can prove that TRIM reaches the disk and say how much it
//! freed. It changes no file; it tells the disk which blocks hold none.
//!
//! Never on an SD card: some cards corrupt data under fstrim
//! (raspberrypi/linux#6349), and pimigrate adds no discard to one.

use crate::system::disks::Transport;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The kernel's `struct fstrim_range` (include/uapi/linux/fs.h).
#[repr(C)]
struct FstrimRange {
    start: u64,
    len: u64,
    minlen: u64,
}

// FITRIM is _IOWR('X', 121, struct fstrim_range).
nix::ioctl_readwrite!(fitrim, b'X', 121, FstrimRange);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrimError {
    #[error(
        "{mountpoint} is on an SD card: pimigrate never trims one (some cards corrupt \
         data under fstrim, raspberrypi/linux#6349)"
    )]
    SdCard { mountpoint: String },
    #[error("opening {mountpoint}: {error}")]
    Open { mountpoint: String, error: String },
    #[error("the disk under {mountpoint} does not take discards (FITRIM: {error})")]
    NotSupported { mountpoint: String, error: String },
    #[error("trimming {mountpoint}: {error}")]
    Failed { mountpoint: String, error: String },
}

/// Trims the free space of the filesystem mounted at `mountpoint`, whose
/// disk is attached by `transport`; returns the bytes the filesystem
/// reported trimmed.
pub fn trim_mounted(mountpoint: &Path, transport: Transport) -> Result<u64, TrimError> {
    let name = mountpoint.display().to_string();
    if transport == Transport::Mmc {
        return Err(TrimError::SdCard { mountpoint: name });
    }
    let dir = std::fs::File::open(mountpoint).map_err(|e| TrimError::Open {
        mountpoint: name.clone(),
        error: e.to_string(),
    })?;
    let mut range = FstrimRange {
        start: 0,
        len: u64::MAX,
        minlen: 0,
    };
    // SAFETY: range is a live fstrim_range the kernel reads and writes back.
    match unsafe { fitrim(dir.as_raw_fd(), &mut range) } {
        Ok(_) => Ok(range.len),
        Err(errno @ (nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::ENOTTY)) => {
            Err(TrimError::NotSupported {
                mountpoint: name,
                error: errno.desc().to_string(),
            })
        }
        Err(errno) => Err(TrimError::Failed {
            mountpoint: name,
            error: errno.desc().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sd_card_is_never_trimmed() {
        let err = trim_mounted(Path::new("/"), Transport::Mmc).unwrap_err();
        assert!(matches!(err, TrimError::SdCard { .. }));
        assert!(err.to_string().contains("raspberrypi/linux#6349"));
    }

    #[test]
    fn the_request_is_the_kernels_fitrim() {
        // _IOWR('X', 121, 24 bytes): direction 3, size 24, type 'X', nr 121.
        assert_eq!(std::mem::size_of::<FstrimRange>(), 24);
        let expected = (3u64 << 30) | (24 << 16) | (u64::from(b'X') << 8) | 121;
        assert_eq!(
            nix::request_code_readwrite!(b'X', 121, std::mem::size_of::<FstrimRange>()) as u64,
            expected
        );
    }

    #[test]
    fn a_missing_mountpoint_is_an_error_not_a_trim() {
        let err = trim_mounted(Path::new("/nonexistent/mnt"), Transport::Usb).unwrap_err();
        assert!(matches!(err, TrimError::Open { .. }), "{err:?}");
    }
}
