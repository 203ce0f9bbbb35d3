//! What a plan warns about: what the target loses, what MBR leaves unused,
//! a root-only move's card that must stay in, a Pi this version does not
//! know, a slow USB link, ids that resolve to no disk or to several.

use super::firmware::family_name;
use super::geometry::Geometry;
use super::Layout;
use crate::system::disks::{Disk, Partition};
use crate::system::pi::{BootSupport, PiFamily};
use crate::system::System;
use crate::units::binary;

pub(super) fn warnings(
    system: &System,
    target: &Disk,
    geometry: &Geometry,
    layout: Layout,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let existing: Vec<String> = target.partitions.iter().map(what_is_erased).collect();
    if !existing.is_empty() {
        warnings.push(format!(
            "everything on {} will be erased: {}",
            target.path.display(),
            existing.join(", ")
        ));
    }
    if geometry.limited_by_mbr {
        warnings.push(format!(
            "MBR describes only the first 2 TiB: {} of {} stays unused",
            binary(geometry.unused_bytes),
            target.path.display()
        ));
    }
    if layout == Layout::RootOnly {
        warnings.push(
            "root-only move: the SD card keeps the boot partition and must stay in the Pi".into(),
        );
    }
    match system.pi.family {
        PiFamily::NotAPi => warnings.push(
            "this is not a Raspberry Pi (no Pi model in the device tree): what the firmware can boot from is not checked".into(),
        ),
        PiFamily::UnknownPi => warnings.push(format!(
            "{} is a model this version does not know: boot support is not checked",
            family_name(system)
        )),
        _ => {}
    }
    if layout == Layout::Full
        && target.transport == crate::system::disks::Transport::Usb
        && system.pi.can_boot.usb == BootSupport::NeedsOtp
    {
        warnings.push(
            "this Pi boots from USB only after the one-time, irreversible OTP setting program_usb_boot_mode=1; \
             `vcgencmd otp_dump | grep 17:` shows 3020000a once it is set"
                .into(),
        );
    }
    if let Some(usb) = &target.usb {
        if let Some((generation, best)) = usb.slow_link() {
            warnings.push(format!(
                "{} runs at {generation} speed ({} Mbit/s): expect {best} at best; use a blue USB 3 port if the Pi has one",
                target.path.display(),
                usb.speed_mbps.unwrap_or(0)
            ));
        }
    }
    warnings.extend(unresolved_references(system));
    if !system.source.boot_is_mounted && system.host.boot_dir.is_none() {
        warnings.push("the boot partition is not mounted; the boot files were read from a directory of the root filesystem".into());
    }
    warnings
}

/// A partition the migration erases, as the warning names it: node,
/// size, filesystem and label.
fn what_is_erased(p: &Partition) -> String {
    let name = p
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or(format!("partition {}", p.number));
    let what = crate::units::join_present([p.fstype.as_deref(), p.label.as_deref()]);
    format!(
        "{name} ({}{}{})",
        binary(p.size_bytes),
        if what.is_empty() { "" } else { ", " },
        what
    )
}

/// The source's references that match no attached device, or several.
fn unresolved_references(system: &System) -> Vec<String> {
    let mut warnings = Vec::new();
    for reference in system.source.references(&system.disks) {
        match reference.matches.len() {
            1 => {}
            0 => warnings.push(format!(
                "{} names {}, which no attached disk has",
                reference.place, reference.spec
            )),
            _ => warnings.push(format!(
                "{} names {}, which several attached devices have ({}): the kernel may pick either",
                reference.place,
                reference.spec,
                reference.matches.join(", ")
            )),
        }
    }
    warnings
}
