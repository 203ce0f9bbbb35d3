//! INQUIRY for one VPD page through SG_IO on a disk's `/dev` node: for the
//! disks whose pages the kernel did not read (it skips VPD pages behind
//! usb-storage, drivers/usb/storage/scsiglue.c: "Some devices don't handle
//! VPD pages correctly"). No tool is needed; the ioctl is the kernel's
//! (include/scsi/sg.h), answered by the SCSI disk driver on any `sd` node.
//!
//! The risk is the bridge's, not the disk's: a bridge that chokes on an
//! INQUIRY it has never been sent may stop answering and be reset, and
//! with it whatever is mounted from it. The caller decides when that is
//! acceptable (`TrimFacts::read` asks only of a disk nothing uses); here,
//! only page 0x00 may be asked of a device before its list is known, and
//! every command has a short timeout.

use std::os::fd::AsRawFd;
use std::path::Path;

/// How long one INQUIRY may take before the kernel aborts it.
pub const INQUIRY_TIMEOUT_MS: u32 = 5_000;

/// The kernel's `struct sg_io_hdr` (include/scsi/sg.h), field for field.
#[repr(C)]
struct SgIoHdr {
    interface_id: libc::c_int,
    dxfer_direction: libc::c_int,
    cmd_len: libc::c_uchar,
    mx_sb_len: libc::c_uchar,
    iovec_count: libc::c_ushort,
    dxfer_len: libc::c_uint,
    dxferp: *mut libc::c_void,
    cmdp: *mut libc::c_uchar,
    sbp: *mut libc::c_uchar,
    timeout: libc::c_uint,
    flags: libc::c_uint,
    pack_id: libc::c_int,
    usr_ptr: *mut libc::c_void,
    status: libc::c_uchar,
    masked_status: libc::c_uchar,
    msg_status: libc::c_uchar,
    sb_len_wr: libc::c_uchar,
    host_status: libc::c_ushort,
    driver_status: libc::c_ushort,
    resid: libc::c_int,
    duration: libc::c_uint,
    info: libc::c_uint,
}

const SG_IO: libc::c_ulong = 0x2285;
const SG_DXFER_FROM_DEV: libc::c_int = -3;
const SG_INFO_OK_MASK: libc::c_uint = 0x1;

nix::ioctl_readwrite_bad!(sg_io, SG_IO, SgIoHdr);

/// Why a page could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InquiryError {
    #[error("opening {device}: {error}")]
    Open { device: String, error: String },
    #[error("{device} is not a SCSI disk (SG_IO: {error})")]
    NotScsi { device: String, error: String },
    #[error(
        "{device} did not return VPD page 0x{page:02x}: SCSI status 0x{status:02x}, \
         host status 0x{host:04x}, driver status 0x{driver:04x}{sense}"
    )]
    Failed {
        device: String,
        page: u8,
        status: u8,
        host: u16,
        driver: u16,
        sense: String,
    },
}

/// The INQUIRY command for VPD page `page` (SPC-4 6.6): EVPD set,
/// allocation length 255, the most any page here needs.
fn inquiry_cdb(page: u8) -> [u8; 6] {
    [0x12, 0x01, page, 0x00, 0xff, 0x00]
}

/// The sense key of fixed or descriptor sense data, for the error.
fn sense_text(sense: &[u8]) -> String {
    let key = match sense.first().map(|b| b & 0x7f) {
        Some(0x70 | 0x71) => sense.get(2).map(|b| b & 0x0f),
        Some(0x72 | 0x73) => sense.get(1).map(|b| b & 0x0f),
        _ => None,
    };
    match key {
        // ILLEGAL REQUEST: the device does not know the page.
        Some(0x5) => ", sense key ILLEGAL REQUEST (the page is not supported)".to_string(),
        Some(key) => format!(", sense key 0x{key:x}"),
        None => String::new(),
    }
}

/// Reads VPD page `page` of the disk at `device` (`/dev/sda`).
pub fn inquiry_vpd(device: &Path, page: u8) -> Result<Vec<u8>, InquiryError> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = device.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(device)
        .map_err(|e| InquiryError::Open {
            device: name.clone(),
            error: e.to_string(),
        })?;
    let mut data = vec![0u8; 255];
    let mut cdb = inquiry_cdb(page);
    let mut sense = [0u8; 32];
    let mut hdr = SgIoHdr {
        interface_id: libc::c_int::from(b'S'),
        dxfer_direction: SG_DXFER_FROM_DEV,
        cmd_len: cdb.len() as libc::c_uchar,
        mx_sb_len: sense.len() as libc::c_uchar,
        iovec_count: 0,
        dxfer_len: data.len() as libc::c_uint,
        dxferp: data.as_mut_ptr().cast(),
        cmdp: cdb.as_mut_ptr(),
        sbp: sense.as_mut_ptr(),
        timeout: INQUIRY_TIMEOUT_MS,
        flags: 0,
        pack_id: 0,
        usr_ptr: std::ptr::null_mut(),
        status: 0,
        masked_status: 0,
        msg_status: 0,
        sb_len_wr: 0,
        host_status: 0,
        driver_status: 0,
        resid: 0,
        duration: 0,
        info: 0,
    };
    // SAFETY: every pointer in hdr points at a live buffer of the length
    // it states, for the duration of the call.
    unsafe { sg_io(file.as_raw_fd(), &mut hdr) }.map_err(|e| InquiryError::NotScsi {
        device: name.clone(),
        error: e.desc().to_string(),
    })?;
    if hdr.info & SG_INFO_OK_MASK != 0 || hdr.status != 0 {
        let written = usize::from(hdr.sb_len_wr).min(sense.len());
        return Err(InquiryError::Failed {
            device: name,
            page,
            status: hdr.status,
            host: hdr.host_status,
            driver: hdr.driver_status,
            sense: sense_text(&sense[..written]),
        });
    }
    let got = data
        .len()
        .saturating_sub(usize::try_from(hdr.resid).unwrap_or(0));
    data.truncate(got);
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_an_evpd_inquiry_for_the_page() {
        assert_eq!(inquiry_cdb(0xb2), [0x12, 0x01, 0xb2, 0x00, 0xff, 0x00]);
        // The header is the kernel's: 88 bytes on a 64-bit target.
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<SgIoHdr>(), 88);
        #[cfg(target_pointer_width = "32")]
        assert_eq!(std::mem::size_of::<SgIoHdr>(), 64);
    }

    #[test]
    fn sense_data_names_an_unknown_page() {
        // Fixed format, ILLEGAL REQUEST, INVALID FIELD IN CDB (24h).
        let fixed = [0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0];
        assert!(sense_text(&fixed).contains("ILLEGAL REQUEST"));
        let descriptor = [0x72, 0x03, 0x29, 0x00];
        assert_eq!(sense_text(&descriptor), ", sense key 0x3");
        assert_eq!(sense_text(&[]), "");
    }

    #[test]
    fn a_file_that_is_not_a_scsi_disk_is_said_so() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = inquiry_vpd(file.path(), 0x00).unwrap_err();
        assert!(matches!(&err, InquiryError::NotScsi { .. }), "{err:?}");
        assert!(err.to_string().contains("is not a SCSI disk"), "{err}");
        let missing = inquiry_vpd(Path::new("/nonexistent/sdz"), 0x00).unwrap_err();
        assert!(matches!(missing, InquiryError::Open { .. }), "{missing:?}");
    }
}
