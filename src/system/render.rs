//! `pimigrate devices` as text people read.

use super::disks::{Disk, Partition};
use super::listing::{Listing, SourceSummary};
use super::pi::{BootSupport, PiFamily, PiInfo};
use crate::units::{binary, join_present};
use std::fmt::Write;

fn support(s: BootSupport) -> &'static str {
    match s {
        BootSupport::Yes => "yes",
        BootSupport::NeedsOtp => "after the OTP setting",
        BootSupport::No => "no",
        BootSupport::Unknown => "unknown",
    }
}

/// The listing as text; `quiet` keeps one line a disk, `verbose` adds
/// the filesystem UUIDs.
pub fn text(listing: &Listing, quiet: bool, verbose: bool) -> String {
    let mut out = String::new();
    if !quiet {
        write_pi(&mut out, listing.pi);
        write_source(&mut out, &listing.source);
        let _ = writeln!(out);
    }
    if listing.disks.is_empty() {
        let _ = writeln!(out, "No disks found.");
    }
    for disk in &listing.disks {
        write_disk_line(&mut out, disk);
        if quiet {
            continue;
        }
        let _ = writeln!(out, "    {}", disk_facts(disk).join(", "));
        write_attachment(&mut out, disk);
        for part in &disk.partitions {
            write_partition(&mut out, part, verbose);
        }
    }
    out
}

/// The model and what its firmware boots from, or that this is no Pi.
fn write_pi(out: &mut String, pi: &PiInfo) {
    match &pi.model {
        Some(model) if pi.family != PiFamily::NotAPi => {
            let _ = writeln!(
                out,
                "{model}: boots from SD {}, USB {}, NVMe {}; {}",
                support(pi.can_boot.sd),
                support(pi.can_boot.usb),
                support(pi.can_boot.nvme),
                if pi.tryboot_available {
                    "trial boot (tryboot) available"
                } else {
                    "no trial boot"
                }
            );
            if let Some(line) = bootloader_line(pi) {
                let _ = writeln!(out, "{line}");
            }
        }
        _ => {
            let _ = writeln!(
                out,
                "Not a Raspberry Pi: what the firmware can boot from is not checked."
            );
        }
    }
}

/// The EEPROM bootloader, where the Pi tells: when it was built, its boot
/// order (`rpi-eeprom-config`), `PCIE_PROBE`, and the device it started
/// this boot from. `None` when nothing of it could be read.
fn bootloader_line(pi: &PiInfo) -> Option<String> {
    let mut facts = Vec::new();
    if let Some(built) = pi.bootloader_built {
        facts.push(format!("built {}", &crate::clock::rfc3339_utc(built)[..10]));
    }
    if let Some(order) = &pi.boot_order {
        facts.push(format!("BOOT_ORDER {}", order.describe()));
    }
    if pi.pcie_probe == Some(true) {
        facts.push("PCIE_PROBE=1".into());
    }
    if facts.is_empty() {
        return None;
    }
    if let Some(mode) = pi.boot_mode.and_then(|m| u8::try_from(m).ok()) {
        facts.push(format!(
            "started this boot from {}",
            crate::bootcfg::eeprom::mode_name(mode)
        ));
    }
    Some(format!("Bootloader: {}", facts.join(", ")))
}

/// The running system: its root, its boot files, what each of its
/// references resolves to, and its problems.
fn write_source(out: &mut String, source: &SourceSummary) {
    let root = source.root_device.as_deref().unwrap_or("an unknown device");
    let _ = write!(out, "System: {} on {root}", source.root_dir.display());
    match (&source.boot_dir, &source.boot_device) {
        (Some(dir), Some(dev)) => {
            let _ = writeln!(out, ", boot files in {} on {dev}", dir.display());
        }
        (Some(dir), None) => {
            let _ = writeln!(out, ", boot files in {}", dir.display());
        }
        (None, _) => {
            let _ = writeln!(out, ", no boot files found");
        }
    }
    for reference in &source.references {
        let matches = match reference.matches.len() {
            0 => "matches no attached device".to_string(),
            1 => format!("-> {}", reference.matches[0]),
            _ => format!(
                "matches {} devices: {}",
                reference.matches.len(),
                reference.matches.join(", ")
            ),
        };
        let _ = writeln!(out, "  {} {} {matches}", reference.place, reference.spec);
    }
    for problem in &source.problems {
        let _ = writeln!(out, "  problem: {problem}");
    }
}

/// A disk's one line: path, size, transport, name and role.
fn write_disk_line(out: &mut String, disk: &Disk) {
    let name = join_present([disk.vendor.as_deref(), disk.model.as_deref()]);
    let _ = writeln!(
        out,
        "{:<14} {:<20} {:<7} {:<28} {}",
        disk.path.display(),
        disk.size_human,
        disk.transport.to_string(),
        name,
        disk.role_text()
    );
}

/// What the kernel says about a disk: serial, sectors, flags, its
/// partition table and a whole-disk filesystem.
fn disk_facts(disk: &Disk) -> Vec<String> {
    let mut facts = Vec::new();
    if let Some(serial) = &disk.serial {
        facts.push(format!("serial {serial}"));
    }
    facts.push(format!(
        "sectors {}/{}",
        disk.logical_sector_size, disk.physical_sector_size
    ));
    if disk.removable {
        facts.push("removable".into());
    }
    facts.push(if disk.rotational {
        "rotational".into()
    } else {
        "non-rotational".into()
    });
    if disk.read_only {
        facts.push("read-only".into());
    }
    match (&disk.table, &disk.disk_id) {
        (Some(kind), Some(id)) => facts.push(format!(
            "{} table, id {id}",
            kind.to_string().to_uppercase()
        )),
        (Some(kind), None) => facts.push(format!("{} table", kind.to_string().to_uppercase())),
        _ => facts.push("no partition table".into()),
    }
    if let Some(fs) = &disk.filesystem {
        let label = fs
            .label
            .as_ref()
            .map(|l| format!(" LABEL={l}"))
            .unwrap_or_default();
        facts.push(format!("whole-disk {}{label}", fs.fstype));
    }
    facts
}

/// How the disk is attached: its USB bridge and link speed, its
/// controller, or the file behind a loop device.
fn write_attachment(out: &mut String, disk: &Disk) {
    if let Some(usb) = &disk.usb {
        let speed = match (usb.speed_mbps, usb.slow_link()) {
            (Some(s), Some((generation, _))) => format!("{s} Mbit/s ({generation}: slow)"),
            (Some(s), None) => format!("{s} Mbit/s (USB 3)"),
            (None, _) => "unknown speed".into(),
        };
        let product = join_present([usb.manufacturer.as_deref(), usb.product.as_deref()]);
        let _ = writeln!(
            out,
            "    USB bridge {} {product}, driver {}, {speed}",
            usb.id(),
            usb.driver.as_deref().unwrap_or("none"),
        );
    }
    if let Some(c) = &disk.controller {
        let _ = writeln!(out, "    controller {} ({} {})", c.driver, c.bus, c.device);
    }
    if let Some(file) = &disk.backing_file {
        let _ = writeln!(out, "    backed by {}", file.display());
    }
}

/// A partition's line: number, node, start, size, filesystem, ids (the
/// filesystem UUID only when `verbose`) and where it is used.
fn write_partition(out: &mut String, part: &Partition, verbose: bool) {
    let name = part
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("(partition {}, no device node)", part.number));
    let mut ids = Vec::new();
    if let Some(label) = &part.label {
        ids.push(format!("LABEL={label}"));
    }
    if verbose {
        if let Some(uuid) = &part.uuid {
            ids.push(format!("UUID={uuid}"));
        }
    }
    if let Some(partuuid) = &part.partuuid {
        ids.push(format!("PARTUUID={partuuid}"));
    }
    let mut uses: Vec<String> = part
        .mountpoints
        .iter()
        .map(|m| m.display().to_string())
        .collect();
    if part.swap {
        uses.push("[swap]".into());
    }
    let _ = writeln!(
        out,
        "    {:<2} {:<18} {:>10} {:>10}  {:<5} {} {}",
        part.number,
        name,
        format!("@{}", part.start),
        binary(part.size_bytes),
        part.fstype.as_deref().unwrap_or("-"),
        ids.join(" "),
        uses.join(" ")
    );
}
