//! Facts about the machine a report was taken on: kernel, Pi model and
//! whether the Pi was throttled (which skews every figure).

use crate::host::Host;
use crate::system::System;
use serde::{Deserialize, Serialize};
use std::ffi::CStr;

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

/// `vcgencmd get_throttled`, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throttled {
    pub raw: String,
    pub value: Option<u32>,
    pub under_voltage_now: bool,
    pub under_voltage_occurred: bool,
    pub throttled_now: bool,
    pub throttling_occurred: bool,
}

impl Throttled {
    /// Parses `throttled=0x50000`.
    pub fn parse(output: &str) -> Throttled {
        let raw = output.trim().to_string();
        let value = raw
            .rsplit('=')
            .next()
            .map(|v| v.trim().trim_start_matches("0x"))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok());
        let bit = |n: u32| value.is_some_and(|v| v & (1 << n) != 0);
        Throttled {
            under_voltage_now: bit(0),
            throttled_now: bit(2),
            under_voltage_occurred: bit(16),
            throttling_occurred: bit(18),
            value,
            raw,
        }
    }
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

/// `vcgencmd get_throttled` on this machine; `None` without the tool.
pub fn read_throttled() -> Option<Throttled> {
    let vcgencmd = crate::tools::which("vcgencmd")?;
    let output = std::process::Command::new(vcgencmd)
        .arg("get_throttled")
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| Throttled::parse(&String::from_utf8_lossy(&output.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_get_throttled() {
        let t = Throttled::parse("throttled=0x50005\n");
        assert_eq!(t.value, Some(0x50005));
        assert!(t.under_voltage_now && t.under_voltage_occurred);
        assert!(t.throttled_now && t.throttling_occurred);
        let ok = Throttled::parse("throttled=0x0");
        assert!(!ok.under_voltage_now && !ok.under_voltage_occurred);
    }
}
