//! The udev rule that switches TRIM on for one USB bridge, generated from
//! what its VPD pages said.
//!
//! Two attributes decide whether the kernel sends discards to a SCSI disk:
//! `provisioning_mode` of its `scsi_disk` device (drivers/scsi/sd.c: `full`
//! sends none, `unmap` sends UNMAP) and `queue/discard_max_bytes` of its
//! block device, the most one discard may cover. Writing `unmap` sets the
//! latter to the bridge's limit when the kernel read one, else to 0x7fffff
//! blocks (`SD_MAX_WS16_BLOCKS`, 4 GiB less 512 bytes with 512-byte
//! blocks); a write to `discard_max_bytes` only ever lowers it, and must
//! be a multiple of `discard_granularity` (block/blk-sysfs.c). Both are
//! forgotten when the disk goes, hence udev.
//!
//! Order matters: `discard_max_bytes` can be lowered only once the mode is
//! `unmap`, and a disk's `scsi_disk` "add" event comes before the kernel
//! first reads its capacity (sd_probe adds the device, then
//! sd_revalidate_disk runs). So, as Raspberry Pi OS's own rule for its USB
//! flash drive does (RPi-Distro/raspberrypi-sys-mods, 86-rpi-trim.rules),
//! "add" only asks for a "change" a second later, "change" sets the mode
//! and asks for a "change" of the disk's block device, which sets the
//! limit. (`udevadm trigger` takes a device path as a parent match: the
//! device and its children, hence `DEVTYPE=disk` to leave the partitions
//! out; systemd 252, src/udev/udevadm-trigger.c.)

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The largest discard the rule lets the kernel send: what Raspberry Pi
/// OS's rule allows its own flash drive and QEMU's `max_unmap_size`
/// default. A bridge turns one UNMAP into work on the drive that must end
/// within the SCSI command timeout (30 s); a smaller command is safer than
/// the kernel's 4 GiB.
pub const DISCARD_MAX_CAP: u64 = 1 << 30;

/// A rule for the bridge `vendor_id:product_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimRule {
    /// As sysfs spells them: four lowercase hex digits.
    pub vendor_id: String,
    pub product_id: String,
    /// What the rule writes to `queue/discard_max_bytes`.
    pub discard_max_bytes: u64,
    /// The Block Limits page's figures it came from.
    pub max_unmap_lba_count: u32,
    pub logical_block_size: u32,
}

impl TrimRule {
    /// Where the rule goes on the new root. 60: after udev's own storage
    /// rules (50-udev-default, 60-persistent-storage share the number and
    /// sort after), before Raspberry Pi OS's 86-rpi-trim.rules.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/etc/udev/rules.d/60-pimigrate-trim-{}-{}.rules",
            self.vendor_id, self.product_id
        ))
    }

    /// The file's text.
    pub fn text(&self) -> String {
        let id = format!(
            "ATTRS{{idVendor}}==\"{}\", ATTRS{{idProduct}}==\"{}\"",
            self.vendor_id, self.product_id
        );
        format!(
            "# Written by pimigrate: TRIM for the disks behind the USB bridge {v}:{p}.\n\
             # Linux does not send TRIM (SCSI UNMAP) to USB disks by itself. This bridge\n\
             # reports UNMAP (Logical Block Provisioning VPD page, LBPU=1) and takes at most\n\
             # {count} blocks of {lbs} bytes in one (Block Limits VPD page), so these rules\n\
             # set provisioning_mode=unmap and let one discard cover {max} bytes;\n\
             # fstrim.timer then trims every week. Delete this file to stop it: that takes\n\
             # effect when the disk is next attached, or at the next boot.\n\
             ACTION==\"add\", SUBSYSTEM==\"scsi_disk\", {id}, \
             RUN+=\"/bin/sh -c 'sleep 1; udevadm trigger --action=change /sys%p'\"\n\
             ACTION==\"change\", SUBSYSTEM==\"scsi_disk\", {id}, ATTR{{provisioning_mode}}=\"unmap\", \
             RUN+=\"/bin/sh -c 'udevadm trigger --action=change --property-match=DEVTYPE=disk /sys%p/device/block/*'\"\n\
             ACTION==\"add|change\", SUBSYSTEM==\"block\", ENV{{DEVTYPE}}==\"disk\", {id}, \
             ATTR{{queue/discard_max_bytes}}=\"{max}\"\n",
            v = self.vendor_id,
            p = self.product_id,
            count = self.max_unmap_lba_count,
            lbs = self.logical_block_size,
            max = self.discard_max_bytes,
        )
    }
}

/// The limit for a bridge that takes `max_unmap_lba_count` blocks of
/// `logical_block_size` bytes per UNMAP: capped at [`DISCARD_MAX_CAP`] and
/// rounded down to a multiple of the discard granularity the kernel will
/// hold (the physical block size, or the bridge's optimal unmap
/// granularity if larger, as a power of two), since a write that is not a
/// multiple is refused. `None` when less than one granule is left.
pub fn discard_max_bytes(
    max_unmap_lba_count: u32,
    logical_block_size: u32,
    physical_block_size: u32,
    optimal_unmap_granularity: Option<u32>,
) -> Option<u64> {
    let lbs = u64::from(logical_block_size.max(512));
    let bytes = u64::from(max_unmap_lba_count).saturating_mul(lbs);
    let granularity = u64::from(optimal_unmap_granularity.unwrap_or(0)) * lbs;
    let align = granularity
        .max(u64::from(physical_block_size))
        .max(lbs)
        .next_power_of_two();
    let value = bytes.min(DISCARD_MAX_CAP) / align * align;
    (value > 0).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> TrimRule {
        TrimRule {
            vendor_id: "174c".into(),
            product_id: "1156".into(),
            discard_max_bytes: DISCARD_MAX_CAP,
            max_unmap_lba_count: 4_194_240,
            logical_block_size: 512,
        }
    }

    #[test]
    fn the_limit_is_the_bridges_capped_and_aligned() {
        // QEMU: 1 GiB of 512-byte blocks, granularity 8 blocks.
        assert_eq!(
            discard_max_bytes(2_097_152, 512, 512, Some(8)),
            Some(1 << 30)
        );
        // A bridge that takes 2 GiB is held to 1 GiB.
        assert_eq!(
            discard_max_bytes(4_194_240, 512, 4096, Some(1)),
            Some(1 << 30)
        );
        // One that takes less keeps its limit, rounded to its 4 KiB blocks:
        // 65535 blocks of 512 bytes is 33553920 bytes, 33550336 in 4 KiB.
        assert_eq!(discard_max_bytes(65_535, 512, 4096, None), Some(33_550_336));
        // 0xFFFFFFFF ("no limit") is the cap.
        assert_eq!(
            discard_max_bytes(crate::system::trim::vpd::UNMAP_UNLIMITED, 4096, 4096, None),
            Some(1 << 30)
        );
        // Less than a granule: nothing the kernel would take.
        assert_eq!(discard_max_bytes(4, 512, 4096, None), None);
        assert_eq!(discard_max_bytes(0, 512, 512, None), None);
    }

    #[test]
    fn the_rule_file_is_named_for_the_bridge() {
        assert_eq!(
            rule().path(),
            PathBuf::from("/etc/udev/rules.d/60-pimigrate-trim-174c-1156.rules")
        );
    }

    #[test]
    fn the_rule_sets_the_mode_then_the_limit_for_this_bridge_only() {
        let text = rule().text();
        let rules: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(rules.len(), 3, "{text}");
        for line in &rules {
            assert!(
                line.contains("ATTRS{idVendor}==\"174c\", ATTRS{idProduct}==\"1156\""),
                "{line}"
            );
            check_udev_syntax(line);
        }
        assert!(rules[0].starts_with("ACTION==\"add\", SUBSYSTEM==\"scsi_disk\""));
        assert!(rules[1].contains("ATTR{provisioning_mode}=\"unmap\""));
        assert!(rules[2].contains("ATTR{queue/discard_max_bytes}=\"1073741824\""));
        assert!(text.starts_with(
            "# Written by pimigrate: TRIM for the disks behind the USB bridge 174c:1156.\n"
        ));
        assert!(text.contains("takes at most\n# 4194240 blocks of 512 bytes"));
        assert!(text.ends_with('\n'));
    }

    /// Checks one rule line against udev's grammar (udev(7)): comma-separated
    /// `KEY`, `KEY{attr}` with an operator and a double-quoted value; match
    /// keys with `==`/`!=`, assignments with `=`/`+=`.
    fn check_udev_syntax(line: &str) {
        let mut rest = line;
        while !rest.is_empty() {
            let key_end = rest
                .find(['=', '!', '+'])
                .unwrap_or_else(|| panic!("no operator in {rest:?}"));
            let key = &rest[..key_end];
            let after_key = &rest[key_end..];
            let op = ["==", "!=", "+=", "="]
                .into_iter()
                .find(|op| after_key.starts_with(op))
                .unwrap_or_else(|| panic!("bad operator in {after_key:?}"));
            let value_start = &after_key[op.len()..];
            assert!(value_start.starts_with('"'), "unquoted value in {line}");
            let close = value_start[1..].find('"').expect("unclosed value") + 1;
            let name = key.split('{').next().unwrap();
            let known_match = ["ACTION", "SUBSYSTEM", "ATTRS", "ENV", "KERNEL"];
            let known_assign = ["ATTR", "RUN", "ENV"];
            match op {
                "==" | "!=" => assert!(known_match.contains(&name), "{name} matched"),
                _ => assert!(known_assign.contains(&name), "{name} assigned"),
            }
            if key.contains('{') {
                assert!(key.ends_with('}'), "{key}");
            }
            rest = value_start[close + 1..].trim_start_matches(", ");
        }
    }
}
