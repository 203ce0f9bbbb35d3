//! Does the package that rebuilds cmdline.txt agree with it? Debian's
//! raspi-firmware writes `root=$ROOTPART` from /etc/default/raspi-firmware
//! into the boot partition's cmdline.txt on every kernel or initramfs
//! update: where the two name different devices, the next upgrade boots
//! the other one without a word.

use super::expected::Expected;
use super::Warning;
use crate::bootcfg::defaults::Defaults;
use crate::bootcfg::{Cmdline, DeviceSpec};
use crate::plan::regenerated::{RASPI_FIRMWARE_DEFAULTS, ROOTPART};
use crate::system::source::resolve;
use crate::system::System;

pub fn raspi_firmware(system: &System, expected: &Expected) -> Option<Warning> {
    // In a pending trial cmdline.txt still boots the SD card, on purpose;
    // `verify --commit` makes the two agree.
    if expected.trial_pending() {
        return None;
    }
    let host = &system.host;
    let defaults_view = host
        .source_root
        .join(RASPI_FIRMWARE_DEFAULTS.trim_start_matches('/'));
    let bytes = std::fs::read(host.path(&defaults_view)).ok()?;
    let setting = Defaults::parse(&bytes).ok()?.get(ROOTPART);
    // The hook writes cmdline.txt by that very name, whatever config.txt says.
    let cmdline_view = expected.on_boot_named("cmdline.txt");
    let cmdline_root = std::fs::read(host.path(&cmdline_view))
        .ok()
        .and_then(|b| Cmdline::parse(&b).and_then(|c| c.root()).ok())?;
    let fix = format!(
        "set {ROOTPART}={cmdline_root} in {RASPI_FIRMWARE_DEFAULTS} (or `sudo pimigrate rollback` if cmdline.txt is what is wrong)"
    );
    let rootpart = match setting {
        Ok(Some(value)) => value,
        // Unset: the hook writes what `findmnt /` reports, the running root.
        Ok(None) => return None,
        Err(err) => {
            return Some(
                Warning::new(
                    "regenerated-cmdline-differs",
                    format!("{RASPI_FIRMWARE_DEFAULTS}: {err}; raspi-firmware rewrites cmdline.txt from it on the next kernel update"),
                )
                .fix(fix),
            )
        }
    };
    let devices = |spec: &DeviceSpec| resolve(spec, &system.disks);
    let agree = match DeviceSpec::parse(&rootpart) {
        Ok(spec) => {
            spec == cmdline_root || {
                let (a, b) = (devices(&spec), devices(&cmdline_root));
                a.len() == 1 && a == b
            }
        }
        Err(_) => false,
    };
    if agree {
        return None;
    }
    Some(
        Warning::new(
            "regenerated-cmdline-differs",
            format!(
                "{} boots root={cmdline_root}, but {RASPI_FIRMWARE_DEFAULTS} says {ROOTPART}={rootpart}: \
                 the next kernel or initramfs update rewrites cmdline.txt with root={rootpart}",
                cmdline_view.display()
            ),
        )
        .fix(fix),
    )
}
