//! Facts about the machine a report was taken on: kernel, Pi model and
//! whether the Pi was throttled (which skews every figure).

use crate::host::Host;
use crate::system::System;
use serde::{Deserialize, Serialize};
use std::ffi::CStr;

// The decoding lives with the other power facts, which the planner reads
// too; benchmark reports and their readers keep these names.
pub use crate::system::power::{read_throttled, Throttled};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `uname -m`.
    pub arch: String,
    pub pi_model: Option<String>,
    pub throttled: Option<Throttled>,
}

pub fn collect(system: &System, host: &Host) -> MachineInfo {
    let (kernel_release, kernel_version, arch) = uname();
    MachineInfo {
        kernel_release,
        kernel_version,
        arch,
        pi_model: system.pi.model.clone(),
        throttled: host.is_live().then(read_throttled).flatten(),
    }
}

fn uname() -> (String, String, String) {
    // SAFETY: uname fills the zeroed struct with NUL-terminated strings.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut name) } != 0 {
        return Default::default();
    }
    let text = |field: &[libc::c_char]| {
        // SAFETY: the kernel NUL-terminates every field.
        unsafe { CStr::from_ptr(field.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    (
        text(&name.release),
        text(&name.version),
        text(&name.machine),
    )
}
