//! The one ids rule of a replica: every id its files name (PARTUUIDs,
//! filesystem UUIDs, the disk's own id) is carried by no other attached
//! disk, or the kernel and systemd mount either. Fresh ids are drawn
//! outside [`elsewhere`] (`migrate`'s target, a first sync's standby); an
//! existing standby's are checked against the same set ([`check_own`]).
//! Another way into the disk itself (a loop device over it, or over the
//! same image file) is the disk, not another one. Labels repeat on every
//! card of a distribution: a new label is only made unlike the others.

use super::super::ids::KnownIds;
use super::super::{Reason, TargetIdentity};
use crate::bootcfg::DeviceSpec;
use crate::system::disks::{Disk, Transport};
use crate::system::source::resolve;
use crate::system::System;

/// Whether `disk` is another way into `of`: a loop device over it (a
/// partition of a loop disk on a kernel without partition support) or
/// over the same image file. Its ids are `of`'s own.
pub fn is_view_of(disk: &Disk, of: &TargetIdentity, disks: &[Disk]) -> bool {
    if disk.devno == of.devno || disk.transport != Transport::Virtual {
        return false;
    }
    let Some(backing) = &disk.backing_file else {
        return false;
    };
    let of_backing = disks
        .iter()
        .find(|d| d.devno == of.devno)
        .and_then(|d| d.backing_file.as_ref());
    *backing == of.path || Some(backing) == of_backing
}

/// The attached disks but the views of `of` (`of` itself stays).
pub fn without_views(disks: &[Disk], of: &TargetIdentity) -> Vec<Disk> {
    disks
        .iter()
        .filter(|d| !is_view_of(d, of, disks))
        .cloned()
        .collect()
}

/// Every id and label on the attached disks but `of` and its views: what
/// the replica's ids must not be.
pub fn elsewhere(system: &System, of: &TargetIdentity) -> KnownIds {
    let others: Vec<Disk> = without_views(&system.disks, of)
        .into_iter()
        .filter(|d| d.devno != of.devno)
        .collect();
    KnownIds::from_disks(&others)
}

/// Each id an existing copy on `of` names (`specs`, its partitions' ids)
/// that another disk carries too: refused.
pub fn check_own(system: &System, of: &TargetIdentity, specs: &[DeviceSpec]) -> Vec<Reason> {
    let known = elsewhere(system, of);
    let disks = without_views(&system.disks, of);
    specs
        .iter()
        .filter(|spec| match spec {
            DeviceSpec::PartUuid(id) | DeviceSpec::Uuid(id) => known.has_id(id),
            _ => false,
        })
        .map(|spec| collision(spec, &resolve(spec, &disks)))
        .collect()
}

/// The refusal of an id that is not the copy's own: `devices` all carry
/// `spec`.
pub fn collision(spec: &DeviceSpec, devices: &[String]) -> Reason {
    Reason::new(
        "id-collision",
        format!(
            "{spec} is on {}: with two disks carrying one id the kernel or systemd mounts either",
            devices.join(" and ")
        ),
    )
    .hint("detach the clone, or give the copy fresh ids: sudo pimigrate sync --target DISK --erase")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Pi 4 fixture with a clone of its SSD (sdd, its partition's ids
    /// and all) attached beside it.
    fn with_a_clone_of_sda() -> System {
        let mut system = crate::system::inspect_fixture("pi4").1;
        let mut twin = system
            .disks
            .iter()
            .find(|d| d.name == "sda")
            .unwrap()
            .clone();
        twin.name = "sdd".into();
        twin.path = "/dev/sdd".into();
        twin.devno.minor = 48;
        for part in &mut twin.partitions {
            part.devno = None;
            part.path = None;
            part.mountpoints.clear();
        }
        system.disks.push(twin);
        system
    }

    #[test]
    fn an_id_another_disk_carries_is_refused_and_its_own_are_not() {
        let system = with_a_clone_of_sda();
        let sda = system.disks.iter().find(|d| d.name == "sda").unwrap();
        let of = crate::plan::identity(sda);
        let found = check_own(&system, &of, &[DeviceSpec::PartUuid("0a1b2c3d-01".into())]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].code, "id-collision");
        assert_eq!(
            found[0].message,
            "PARTUUID=0a1b2c3d-01 is on /dev/sda1 and /dev/sdd partition 1: with two disks carrying one id \
             the kernel or systemd mounts either"
        );
        let alone = crate::system::inspect_fixture("pi4").1;
        assert!(check_own(&alone, &of, &[DeviceSpec::PartUuid("0a1b2c3d-01".into())]).is_empty());
        // Fresh ids are drawn outside the same set.
        assert!(elsewhere(&system, &of).has_id("0a1b2c3d-01"));
        assert!(!elsewhere(&alone, &of).has_id("0a1b2c3d-01"));
    }
}
