//! Planner refusals that need a system state no fixture machine has.

use crate::common;

use pimigrate::host::Host;
use pimigrate::plan::{plan, Options};
use pimigrate::system::System;

#[test]
fn refuses_a_target_that_holds_the_boot_partition() {
    let mut system = System::inspect(&Host::with_root(common::fixture("pi4"))).unwrap();
    // As if the Pi booted from a USB stick's FAT partition (sdb1) while its
    // root stayed on the SD card.
    let sdb1 = system
        .disks
        .iter()
        .find(|d| d.name == "sdb")
        .unwrap()
        .partitions[0]
        .devno;
    system.source.boot_devno = sdb1;
    for disk in &mut system.disks {
        disk.partitions
            .iter_mut()
            .for_each(|p| p.mountpoints.clear());
    }
    let refusal = plan(&system, &Options::new("/dev/sdb")).unwrap_err();
    let codes: Vec<&str> = refusal.reasons.iter().map(|r| r.code).collect();
    assert_eq!(codes, ["target-holds-boot"]);
    assert!(refusal.to_string().contains("boot partition"));
}

#[test]
fn a_plan_survives_the_journal_round_trip() {
    let system = System::inspect(&Host::with_root(common::fixture("pi4"))).unwrap();
    let mut options = Options::new("/dev/sda");
    options.layout = pimigrate::plan::Layout::Full;
    options.seed = Some(5);
    let plan = plan(&system, &options).unwrap();
    let text = serde_json::to_string(&plan).unwrap();
    let back: pimigrate::plan::Plan = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), text);
}
