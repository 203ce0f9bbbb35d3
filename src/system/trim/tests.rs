//! TRIM facts and decisions on the fixture machines (tests/fixtures,
//! written by generate.py) and on pages handed in as bytes.

use super::decision::{decide, CannotTrim, TrimDecision};
use super::*;
use crate::system::inspect_fixture;

fn disk<'a>(system: &'a crate::system::System, name: &str) -> &'a Disk {
    system.disks.iter().find(|d| d.name == name).unwrap()
}

/// A device's answer to INQUIRY: `pages` by code; every page asked is noted.
fn device(
    pages: Vec<(u8, Vec<u8>)>,
    asked: &mut Vec<u8>,
) -> impl FnMut(u8) -> Result<Vec<u8>, String> + '_ {
    move |code| {
        asked.push(code);
        pages
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, p)| p.clone())
            .ok_or_else(|| format!("ILLEGAL REQUEST for page 0x{code:02x}"))
    }
}

fn page(code: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0, code, 0, payload.len() as u8];
    out.extend_from_slice(payload);
    out
}

/// QEMU 7.2's scsi-hd pages (hw/scsi/scsi-disk.c): all three listed,
/// 1 GiB of UNMAP in 255 descriptors, LBPU, LBPWS and LBPWS10 set.
fn qemu_pages() -> Vec<(u8, Vec<u8>)> {
    let mut limits = vec![0u8; 0x3c];
    limits[16..20].copy_from_slice(&2_097_152u32.to_be_bytes());
    limits[20..24].copy_from_slice(&255u32.to_be_bytes());
    limits[24..28].copy_from_slice(&8u32.to_be_bytes());
    vec![
        (0x00, page(0x00, &[0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2])),
        (0xb0, page(0xb0, &limits)),
        (0xb2, page(0xb2, &[0x00, 0xe0, 0x02, 0x00])),
    ]
}

#[test]
fn a_uas_bridge_that_reports_unmap_gets_a_rule() {
    let (host, system) = inspect_fixture("pi4");
    let facts = TrimFacts::read(&host, disk(&system, "sda"), Inquiry::Never);
    assert_eq!(facts.usb_id.as_deref(), Some("174c:55aa"));
    assert_eq!(facts.usb_driver.as_deref(), Some("uas"));
    assert_eq!(facts.queue.max_bytes, Some(0));
    let scsi = facts.scsi.as_ref().unwrap();
    assert_eq!(scsi.address, "0:0:0:0");
    assert_eq!(scsi.provisioning_mode.as_deref(), Some("full"));
    assert_eq!(scsi.thin_provisioning, Some(false));
    assert_eq!(scsi.scsi_level, Some(7));
    let Vpd::Read {
        source,
        supported,
        block_limits,
        provisioning,
    } = &facts.vpd
    else {
        panic!("{:?}", facts.vpd);
    };
    assert_eq!(*source, VpdSource::Sysfs);
    assert_eq!(supported, &vec![0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
    assert_eq!(block_limits.unwrap().max_unmap_lba_count, Some(4_194_240));
    assert!(provisioning.unwrap().lbpu);
    let decision = decide(&facts);
    let TrimDecision::SwitchOn { rule } = &decision else {
        panic!("{decision:?}");
    };
    assert_eq!(
        (rule.vendor_id.as_str(), rule.product_id.as_str()),
        ("174c", "55aa")
    );
    // 4194240 blocks of 512 bytes is 2 GiB less 32 KiB: held to 1 GiB.
    assert_eq!(rule.discard_max_bytes, 1 << 30);
    assert!(decision.explain("/dev/sda").starts_with(
        "TRIM: the bridge 174c:55aa passes UNMAP; a udev rule for it on the new root"
    ));
    assert_eq!(
        serde_json::to_value(&decision).unwrap()["verdict"],
        "switch-on"
    );
}

#[test]
fn a_usb_storage_stick_is_not_asked_unless_allowed_and_idle() {
    let (host, system) = inspect_fixture("pi4");
    let sdb = disk(&system, "sdb");
    let facts = TrimFacts::read(&host, sdb, Inquiry::Never);
    assert_eq!(
        facts.vpd,
        Vpd::NotRead {
            why: VpdNotRead::NotAsked
        }
    );
    assert!(decide(&facts)
        .explain("/dev/sdb")
        .contains("the kernel does not read its VPD pages"));
    // Mounted at /media/pi/STICK: not asked, whatever the policy.
    let mut asked = Vec::new();
    let facts = TrimFacts::read_with(
        &host,
        sdb,
        Inquiry::WhenIdle,
        &mut device(qemu_pages(), &mut asked),
    );
    assert_eq!(
        facts.vpd,
        Vpd::NotRead {
            why: VpdNotRead::DiskInUse
        }
    );
    assert!(asked.is_empty(), "asked {asked:?}");
}

#[test]
fn an_idle_usb_storage_disk_is_asked_page_zero_first() {
    // A Pi Zero's ASMedia 174c:1156 on usb-storage, nothing mounted.
    let (host, system) = inspect_fixture("pizero");
    let sda = disk(&system, "sda");
    let mut asked = Vec::new();
    let facts = TrimFacts::read_with(
        &host,
        sda,
        Inquiry::WhenIdle,
        &mut device(qemu_pages(), &mut asked),
    );
    assert_eq!(asked, vec![0x00, 0xb0, 0xb2]);
    assert!(matches!(
        facts.vpd,
        Vpd::Read {
            source: VpdSource::Inquiry,
            ..
        }
    ));
    let TrimDecision::SwitchOn { rule } = decide(&facts) else {
        panic!("{:?}", decide(&facts));
    };
    assert_eq!(
        rule.path(),
        std::path::PathBuf::from("/etc/udev/rules.d/60-pimigrate-trim-174c-1156.rules")
    );
    assert_eq!(rule.discard_max_bytes, 1 << 30);
}

#[test]
fn an_idle_disk_whose_pages_say_no_gets_no_rule() {
    let (host, system) = inspect_fixture("pizero");
    let sda = disk(&system, "sda");
    // A device that lists no provisioning page is not asked for one.
    let mut asked = Vec::new();
    let short = vec![(0x00, page(0x00, &[0x00, 0x80, 0x83]))];
    let facts = TrimFacts::read_with(
        &host,
        sda,
        Inquiry::WhenIdle,
        &mut device(short, &mut asked),
    );
    assert_eq!(asked, vec![0x00]);
    assert_eq!(
        decide(&facts),
        TrimDecision::Cannot {
            why: CannotTrim::NoProvisioningPage
        }
    );

    // No UNMAP: said so, and no rule.
    let mut asked = Vec::new();
    let mut pages = qemu_pages();
    pages[2] = (0xb2, page(0xb2, &[0x00, 0x00, 0x01, 0x00]));
    let facts = TrimFacts::read_with(
        &host,
        sda,
        Inquiry::WhenIdle,
        &mut device(pages, &mut asked),
    );
    let decision = decide(&facts);
    assert_eq!(
        decision,
        TrimDecision::Cannot {
            why: CannotTrim::NoUnmap {
                lbpws: false,
                lbpws10: false
            }
        }
    );
    assert!(decision.explain("/dev/sda").contains("LBPU=0"));

    // A device that does not answer: the error is the reason.
    let mut asked = Vec::new();
    let facts = TrimFacts::read_with(
        &host,
        sda,
        Inquiry::WhenIdle,
        &mut device(Vec::new(), &mut asked),
    );
    assert!(matches!(
        &facts.vpd,
        Vpd::NotRead { why: VpdNotRead::Failed { error } } if error.contains("ILLEGAL REQUEST")
    ));
}

#[test]
fn unmap_without_a_limit_is_not_switched_on() {
    let (host, system) = inspect_fixture("pizero");
    let sda = disk(&system, "sda");
    let mut pages = qemu_pages();
    let mut limits = vec![0u8; 0x3c];
    limits[20..24].copy_from_slice(&255u32.to_be_bytes());
    pages[1] = (0xb0, page(0xb0, &limits));
    let mut asked = Vec::new();
    let facts = TrimFacts::read_with(
        &host,
        sda,
        Inquiry::WhenIdle,
        &mut device(pages, &mut asked),
    );
    assert_eq!(
        decide(&facts),
        TrimDecision::Cannot {
            why: CannotTrim::NoUnmapLimit {
                max_unmap_lba_count: Some(0)
            }
        }
    );
}

#[test]
fn a_device_before_spc_2_is_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (_, system) = inspect_fixture("pizero");
    let scsi = ScsiDisk {
        address: "0:0:0:0".into(),
        provisioning_mode: Some("full".into()),
        thin_provisioning: Some(false),
        scsi_level: Some(3),
    };
    let mut asked = Vec::new();
    let vpd = read_vpd(
        dir.path(),
        disk(&system, "sda"),
        Some(&scsi),
        Inquiry::WhenIdle,
        &mut device(qemu_pages(), &mut asked),
    );
    assert_eq!(
        vpd,
        Vpd::NotRead {
            why: VpdNotRead::BeforeSpc2 {
                scsi_level: Some(3)
            }
        }
    );
    assert!(asked.is_empty());
}

#[test]
fn trim_already_on_sd_cards_never_nvme_natively() {
    let (host, system) = inspect_fixture("pi4-migrated");
    let facts = TrimFacts::read(&host, disk(&system, "sda"), Inquiry::Never);
    assert_eq!(
        decide(&facts),
        TrimDecision::AlreadyOn {
            discard_max_bytes: 2_147_450_880
        }
    );
    // The card takes discards, and still: never.
    let (host, system) = inspect_fixture("pi4");
    let card = TrimFacts::read(&host, disk(&system, "mmcblk0"), Inquiry::WhenIdle);
    assert_eq!(card.queue.max_bytes, Some(2_199_023_255_040));
    assert_eq!(card.vpd, Vpd::NotScsi);
    let decision = decide(&card);
    assert_eq!(
        decision,
        TrimDecision::Cannot {
            why: CannotTrim::SdCard
        }
    );
    assert!(decision
        .explain("/dev/mmcblk0")
        .contains("raspberrypi/linux#6349"));
    let (host, system) = inspect_fixture("pi5");
    let nvme = TrimFacts::read(&host, disk(&system, "nvme0n1"), Inquiry::WhenIdle);
    assert_eq!(nvme.scsi, None);
    assert_eq!(
        decide(&nvme),
        TrimDecision::AlreadyOn {
            discard_max_bytes: 2_199_023_255_040
        }
    );
    let without = TrimFacts {
        queue: QueueDiscard {
            max_bytes: Some(0),
            ..nvme.queue
        },
        ..nvme.clone()
    };
    assert_eq!(
        decide(&without),
        TrimDecision::Cannot {
            why: CannotTrim::NoDiscard
        }
    );
    // The generic machine's NVMe has no queue attributes: not known.
    let (host, system) = inspect_fixture("generic");
    let unknown = TrimFacts::read(&host, disk(&system, "nvme0n1"), Inquiry::Never);
    assert!(matches!(decide(&unknown), TrimDecision::Unknown { .. }));
}

#[test]
fn a_disk_that_refused_a_discard_is_left_off() {
    let (host, system) = inspect_fixture("pi4");
    let mut facts = TrimFacts::read(&host, disk(&system, "sda"), Inquiry::Never);
    facts.scsi.as_mut().unwrap().provisioning_mode = Some("disabled".into());
    let decision = decide(&facts);
    assert_eq!(
        decision,
        TrimDecision::Cannot {
            why: CannotTrim::RefusedByDisk
        }
    );
    assert_eq!(
        serde_json::to_value(&decision).unwrap(),
        serde_json::json!({"verdict": "cannot", "why": {"reason": "refused-by-disk"}})
    );
}

#[test]
fn rules_and_links_land_inside_the_new_root() {
    assert_eq!(
        on_root(
            Path::new("/mnt/new"),
            Path::new("/etc/udev/rules.d/60-pimigrate-trim-174c-1156.rules")
        ),
        PathBuf::from("/mnt/new/etc/udev/rules.d/60-pimigrate-trim-174c-1156.rules")
    );
}
