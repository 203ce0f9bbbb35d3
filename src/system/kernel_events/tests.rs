//! Kernel messages as trackers quoted them, each test naming its source.

use super::*;

/// `/dev/kmsg` records from messages, numbered from `first`.
fn records(first: u64, messages: &[&str]) -> Vec<Record> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| Record {
            seq: first + i as u64,
            usec: 1_000 * (first + i as u64),
            message: m.to_string(),
        })
        .collect()
}

fn usb_sda() -> DiskNames {
    DiskNames {
        disk: "sda".into(),
        partitions: vec!["sda1".into(), "sda2".into()],
        scsi_host: Some("host0".into()),
        scsi_address: Some("0:0:0:0".into()),
        usb_port: Some("2-2".into()),
        nvme_controller: None,
    }
}

fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

#[test]
fn kmsg_records_keep_their_sequence_and_drop_dictionary_lines() {
    let text = "6,820,2441110,-;scsi host0: uas\n \
                SUBSYSTEM=scsi\n\
                4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n\
                not a record\n";
    let parsed = parse_kmsg(text);
    assert_eq!(
        parsed,
        vec![
            Record {
                seq: 820,
                usec: 2441110,
                message: "scsi host0: uas".into()
            },
            Record {
                seq: 1201,
                usec: 81234567,
                message:
                    "sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT"
                        .into()
            },
        ]
    );
    let log = KernelLog {
        records: parsed,
        unreadable: None,
    };
    assert_eq!(log.last_seq(), Some(1201));
    assert_eq!(log.after(820).len(), 1, "only what came after the mark");
    assert_eq!(log.after(1201).len(), 0);
    assert_eq!(log.after(0).len(), 2);
}

/// raspberrypi/linux#6055 (a Pi 5, two disks on a hub, bridge on uas).
#[test]
fn uas_aborts_and_the_reset_after_them() {
    let sdb = DiskNames {
        disk: "sdb".into(),
        scsi_host: Some("host2".into()),
        scsi_address: Some("2:0:0:0".into()),
        usb_port: Some("2-1.2".into()),
        ..DiskNames::default()
    };
    let log = records(
        100,
        &[
            "sd 2:0:0:0: [sdb] tag#9 uas_eh_abort_handler 0 uas-tag 3 inflight: CMD",
            "sd 2:0:0:0: [sdb] tag#9 CDB: opcode=0x28 28 00 04 b4 78 18 00 01 00 00",
            "scsi host2: uas_eh_device_reset_handler start",
            "usb 2-1.2: reset SuperSpeed USB device number 36 using xhci-hcd",
            "scsi host2: uas_eh_device_reset_handler success",
        ],
    );
    let events = disk_events(&log, &sdb);
    assert_eq!(
        kinds(&events),
        vec![
            EventKind::UasAbort,
            EventKind::UasReset,
            EventKind::UsbReset,
            EventKind::UasReset
        ]
    );
    assert!(uas_trouble(&events));
    // None of it concerns the other disk.
    assert!(disk_events(&log, &usb_sda()).is_empty());
    let summary = summarise(&events);
    assert_eq!(summary[0].kind, EventKind::UasAbort);
    assert_eq!(summary[1].count, 2);
    assert_eq!(
        summary[1].first,
        "scsi host2: uas_eh_device_reset_handler start"
    );
}

/// raspberrypi/linux#3070 (JMicron 152d:0578 on a Pi 4): "SuperSpeed Gen 1".
#[test]
fn a_gen_1_reset_is_a_reset() {
    let log = records(
        1,
        &["usb 2-2: reset SuperSpeed Gen 1 USB device number 4 using xhci_hcd"],
    );
    assert_eq!(
        kinds(&disk_events(&log, &usb_sda())),
        vec![EventKind::UsbReset]
    );
    // A port with a longer name is another port.
    let other = records(
        1,
        &["usb 2-21: reset SuperSpeed USB device number 4 using xhci_hcd"],
    );
    assert!(disk_events(&other, &usb_sda()).is_empty());
}

/// raspberrypi/linux#5753 (Pi 5, LibreELEC): a bridge that stops answering.
#[test]
fn a_bridge_that_times_out_then_fails_reads() {
    let log = records(
        1,
        &[
            "usb 4-1: cmd cmplt err -71",
            "scsi host0: uas_pre_reset: timed out",
            "sd 0:0:0:0: [sda] tag#16 uas_zap_pending 0 uas-tag 1 inflight: CMD ",
            "I/O error, dev sda, sector 67153 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2",
            "device offline error, dev sda, sector 67153 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
            "I/O error, dev loop0, sector 36118 op 0x0:(READ) flags 0x800 phys_seg 2 prio class 2",
        ],
    );
    assert_eq!(
        kinds(&disk_events(&log, &usb_sda())),
        vec![
            EventKind::UasReset,
            EventKind::UasReset,
            EventKind::IoError,
            EventKind::DeviceOffline
        ]
    );
}

/// luxonis/depthai-python#532 (Pi 4, USB 3 SSD) and MichaIng/DietPi#6613
/// (Pi 3B+, kernel 6.1.21, USB stick): errors until ext4 gives up.
#[test]
fn write_errors_and_the_filesystem_going_read_only() {
    let names = DiskNames {
        partitions: vec!["sda1".into()],
        ..usb_sda()
    };
    let log = records(
        1,
        &[
            "EXT4-fs error (device sda1) in ext4_writepages:2921: Journal has aborted",
            "Buffer I/O error on dev sda1, logical block 0, lost sync page write",
            "EXT4-fs (sda1): I/O error while writing superblock",
            "EXT4-fs error (device sda1): ext4_journal_check_start:61: Detected aborted journal",
            "EXT4-fs (sda1): Remounting filesystem read-only",
            "critical target error, dev sda, sector 6626560 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2",
            "Buffer I/O error on device sda1, logical block 795296",
            "EXT4-fs (sda11): Remounting filesystem read-only",
        ],
    );
    assert_eq!(
        kinds(&disk_events(&log, &names)),
        vec![
            EventKind::FsError,
            EventKind::IoError,
            EventKind::FsError,
            EventKind::FsReadOnly,
            EventKind::IoError,
            EventKind::IoError
        ]
    );
}

/// The format strings of drivers/nvme/host/pci.c (Linux 6.1), the
/// controller of raspberrypi/linux#6661, and starfive-tech/linux#98.
#[test]
fn nvme_resets_and_late_commands() {
    let nvme = DiskNames {
        disk: "nvme0n1".into(),
        partitions: vec!["nvme0n1p1".into(), "nvme0n1p2".into()],
        nvme_controller: Some("nvme0".into()),
        ..DiskNames::default()
    };
    let log = records(
        1,
        &[
            "nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff",
            "nvme nvme0: I/O 448 QID 3 timeout, reset controller",
            "nvme nvme0: I/O 897 QID 2 timeout, completion polled",
            "nvme nvme1: I/O 12 QID 1 timeout, aborting",
            "I/O error, dev nvme0n1, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2",
            "EXT4-fs (nvme0n1p2): Remounting filesystem read-only",
        ],
    );
    assert_eq!(
        kinds(&disk_events(&log, &nvme)),
        vec![
            EventKind::NvmeReset,
            EventKind::NvmeReset,
            EventKind::NvmeTimeout,
            EventKind::IoError,
            EventKind::FsReadOnly
        ]
    );
}

/// home-assistant/operating-system#4610 (Realtek 0bda:9201 with the quirk).
#[test]
fn the_quirk_taking_effect_is_seen() {
    let log = records(
        1,
        &[
            "usb 2-2: UAS is ignored for this device, using usb-storage instead",
            "usb-storage 2-2:1.0: USB Mass Storage device detected",
            "usb-storage 2-2:1.0: Quirks match for vid 0bda pid 9201: 800000",
        ],
    );
    let events = disk_events(&log, &usb_sda());
    assert_eq!(kinds(&events), vec![EventKind::UasIgnored]);
    assert!(!uas_trouble(&events));
}

/// MichaIng/DietPi#1900 (Raspberry Pi's kernel) and the mainline
/// raspberrypi-hwmon driver's words (drivers/hwmon/raspberrypi-hwmon.c, 6.1).
#[test]
fn under_voltage_in_both_spellings() {
    let log = records(
        1,
        &[
            "Under-voltage detected! (0x00050005)",
            "Voltage normalised (0x00000000)",
            "rpi_firmware_get_throttled: 3 callbacks suppressed",
            "hwmon hwmon1: Undervoltage detected!",
            "usb usb2-port2: over-current change #1",
        ],
    );
    let kinds: Vec<PowerEventKind> = power_events(&log).iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            PowerEventKind::UnderVoltage,
            PowerEventKind::VoltageNormalised,
            PowerEventKind::UnderVoltage,
            PowerEventKind::UsbOverCurrent
        ]
    );
    assert!(disk_events(&log, &usb_sda()).is_empty());
}

fn fixture(name: &str) -> Host {
    Host::with_root(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
}

#[test]
fn names_come_from_sysfs() {
    assert_eq!(
        DiskNames::of_disk(&fixture("pi4-migrated"), "sda"),
        DiskNames {
            partitions: vec!["sda1".into()],
            ..usb_sda()
        }
    );
    let nvme = DiskNames::of_disk(&fixture("pi5"), "nvme0n1");
    assert_eq!(nvme.nvme_controller.as_deref(), Some("nvme0"));
    assert_eq!(nvme.scsi_host, None);
    assert_eq!(nvme.usb_port, None);
}

#[test]
fn the_fixtures_log_is_read_through_the_host() {
    let log = KernelLog::read(&fixture("pi4-migrated"));
    assert_eq!(log.unreadable, None);
    assert_eq!(
        log.records[1].message,
        "usb 2-2: new SuperSpeed USB device number 2 using xhci_hcd"
    );
    assert!(disk_events(&log.records, &usb_sda()).is_empty());
    let missing = KernelLog::read(&fixture("pi3b"));
    assert!(missing.unreadable.is_some());
}
