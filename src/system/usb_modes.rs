//! Which protocols a USB storage bridge offers: Bulk-Only (the
//! `usb-storage` driver) and USB Attached SCSI (`uas`), read from its raw
//! descriptors in sysfs.
//!
//! A UAS bridge offers Bulk-Only as its interface's alternate setting 0
//! and UAS as another; `uas` switches to the UAS setting when it binds,
//! and puts the device back to setting 0 "in usb-storage mode" on reboot
//! (drivers/usb/storage/uas.c, `uas_shutdown`). `usb-storage.quirks=…:u`
//! makes `uas` refuse the bridge so that `usb-storage` takes setting 0. A
//! device with no Bulk-Only setting is then driven by nothing at all: its
//! disk disappears. QEMU's `usb-uas` is such a device (hw/usb/dev-uas.c:
//! one interface, protocol 0x62 only), so the quirk is checked against
//! the descriptors before it is offered.

use crate::host::Host;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// bInterfaceClass of mass storage.
const CLASS_MASS_STORAGE: u8 = 0x08;
/// bInterfaceProtocol of Bulk-Only transport.
pub const PROTOCOL_BOT: u8 = 0x50;
/// bInterfaceProtocol of USB Attached SCSI.
pub const PROTOCOL_UAS: u8 = 0x62;

/// One mass-storage interface setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StorageSetting {
    pub interface: u8,
    pub alternate: u8,
    pub protocol: u8,
}

/// The mass-storage settings a device offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StorageModes {
    pub settings: Vec<StorageSetting>,
}

impl StorageModes {
    /// `usb-storage` can drive it.
    pub fn bulk_only(&self) -> bool {
        self.settings.iter().any(|s| s.protocol == PROTOCOL_BOT)
    }

    /// `uas` can drive it.
    pub fn uas(&self) -> bool {
        self.settings.iter().any(|s| s.protocol == PROTOCOL_UAS)
    }
}

/// Parses raw USB descriptors (the device descriptor, then each
/// configuration's descriptors, as the sysfs `descriptors` file holds
/// them): every descriptor is `bLength`, `bDescriptorType`, fields. An
/// interface descriptor (type 4, USB 2.0 9.6.5) has bInterfaceNumber at
/// byte 2, bAlternateSetting 3, bInterfaceClass 5, bInterfaceProtocol 7.
/// Parsing stops at a descriptor whose length cannot be right.
pub fn parse_descriptors(bytes: &[u8]) -> StorageModes {
    let mut settings = Vec::new();
    let mut at = 0;
    while at + 2 <= bytes.len() {
        let len = usize::from(bytes[at]);
        if len < 2 || at + len > bytes.len() {
            break;
        }
        let descriptor = &bytes[at..at + len];
        if descriptor[1] == 0x04 && len >= 9 && descriptor[5] == CLASS_MASS_STORAGE {
            settings.push(StorageSetting {
                interface: descriptor[2],
                alternate: descriptor[3],
                protocol: descriptor[7],
            });
        }
        at += len;
    }
    StorageModes { settings }
}

/// The USB device above a disk in sysfs (the directory with `idVendor`),
/// as a path to open.
pub fn usb_device_dir(host: &Host, disk: &str) -> Option<PathBuf> {
    let device = std::fs::canonicalize(host.sys(&format!("block/{disk}/device"))).ok()?;
    let sys = std::fs::canonicalize(host.sys("")).ok()?;
    device
        .ancestors()
        .take_while(|dir| dir.starts_with(&sys) && *dir != sys)
        .find(|dir| dir.join("idVendor").exists())
        .map(Path::to_path_buf)
}

/// The storage modes of the bridge in front of `disk`; `None` when it is
/// not behind USB or the descriptors cannot be read.
pub fn of_disk(host: &Host, disk: &str) -> Option<StorageModes> {
    let dir = usb_device_dir(host, disk)?;
    let bytes = std::fs::read(dir.join("descriptors")).ok()?;
    Some(parse_descriptors(&bytes))
}

/// Descriptors to put in a fixture's `descriptors` file.
#[cfg(test)]
pub(crate) mod tests_support {
    /// A bridge whose one interface has a setting for each of `protocols`
    /// (0x50 Bulk-Only, 0x62 UAS), in that order.
    pub fn descriptors(protocols: &[u8]) -> Vec<u8> {
        let body: Vec<u8> = protocols
            .iter()
            .enumerate()
            .flat_map(|(alternate, &protocol)| {
                vec![9, 0x04, 0, alternate as u8, 0, 0x08, 0x06, protocol, 0]
            })
            .collect();
        let mut out = vec![
            18, 0x01, 0x20, 0x03, 0, 0, 0, 9, 0x4c, 0x17, 0x56, 0x11, 0, 1, 1, 2, 3, 1,
        ];
        let total = (9 + body.len()) as u16;
        out.extend([9, 0x02, total as u8, (total >> 8) as u8, 1, 1, 0, 0x80, 0]);
        out.extend(body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interface descriptor.
    fn interface(number: u8, alternate: u8, endpoints: u8, protocol: u8) -> Vec<u8> {
        vec![
            9, 0x04, number, alternate, endpoints, 0x08, 0x06, protocol, 0,
        ]
    }

    fn endpoint(address: u8) -> Vec<u8> {
        vec![7, 0x05, address, 0x02, 0x00, 0x04, 0]
    }

    /// The device descriptor and a configuration holding `body`.
    fn device(body: Vec<Vec<u8>>) -> Vec<u8> {
        let mut out = vec![
            18, 0x01, 0x20, 0x03, 0, 0, 0, 9, 0x4c, 0x17, 0x56, 0x11, 0, 1, 1, 2, 3, 1,
        ];
        let body: Vec<u8> = body.concat();
        let total = (9 + body.len()) as u16;
        out.extend([9, 0x02, total as u8, (total >> 8) as u8, 1, 1, 0, 0x80, 0]);
        out.extend(body);
        out
    }

    #[test]
    fn a_uas_bridge_offers_bulk_only_at_setting_zero() {
        // As a typical bridge lays it out: alternate 0 Bulk-Only with two
        // endpoints, alternate 1 UAS with four and their pipe usage.
        let pipe = |id: u8| vec![4, 0x24, id, 0];
        let bytes = device(vec![
            interface(0, 0, 2, PROTOCOL_BOT),
            endpoint(0x81),
            endpoint(0x02),
            interface(0, 1, 4, PROTOCOL_UAS),
            endpoint(0x01),
            pipe(1),
            endpoint(0x82),
            pipe(2),
            endpoint(0x83),
            pipe(3),
            endpoint(0x04),
            pipe(4),
        ]);
        let modes = parse_descriptors(&bytes);
        assert_eq!(
            modes.settings,
            vec![
                StorageSetting {
                    interface: 0,
                    alternate: 0,
                    protocol: PROTOCOL_BOT
                },
                StorageSetting {
                    interface: 0,
                    alternate: 1,
                    protocol: PROTOCOL_UAS
                },
            ]
        );
        assert!(modes.bulk_only() && modes.uas());
    }

    #[test]
    fn qemus_usb_uas_offers_uas_alone() {
        // hw/usb/dev-uas.c: one interface, protocol 0x62, four endpoints
        // each followed by its pipe usage (and at SuperSpeed a companion).
        let companion = vec![6, 0x30, 15, 0, 0, 0];
        let pipe = |id: u8| vec![4, 0x24, id, 0];
        let mut body = vec![interface(0, 0, 4, PROTOCOL_UAS)];
        for (address, id) in [(0x01, 1), (0x82, 2), (0x83, 3), (0x04, 4)] {
            body.extend([endpoint(address), companion.clone(), pipe(id)]);
        }
        let modes = parse_descriptors(&device(body));
        assert!(modes.uas());
        assert!(!modes.bulk_only(), "the u quirk would leave it driverless");
    }

    #[test]
    fn broken_descriptors_end_the_parse_without_a_panic() {
        assert_eq!(parse_descriptors(&[]), StorageModes::default());
        assert_eq!(parse_descriptors(&[0, 0, 0]), StorageModes::default());
        let mut cut = device(vec![interface(0, 0, 2, PROTOCOL_BOT)]);
        cut.truncate(cut.len() - 3);
        assert!(!parse_descriptors(&cut).bulk_only());
        // A non-storage interface (a hub) is no storage setting.
        let hub = device(vec![vec![9, 0x04, 0, 0, 1, 0x09, 0, 0, 0]]);
        assert!(parse_descriptors(&hub).settings.is_empty());
    }

    #[test]
    fn the_fixtures_bridge_is_found_above_its_disk() {
        let host =
            Host::with_root(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4"));
        let dir = usb_device_dir(&host, "sda").unwrap();
        assert!(dir.ends_with("usb2/2-2"), "{}", dir.display());
        let modes = of_disk(&host, "sda").unwrap();
        assert!(modes.bulk_only() && modes.uas());
        assert_eq!(usb_device_dir(&host, "mmcblk0"), None);
    }
}
