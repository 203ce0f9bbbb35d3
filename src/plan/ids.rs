//! Fresh ids for the target. Two attached disks sharing a PARTUUID, UUID or
//! LABEL make the kernel or systemd pick either one, so every new id is
//! checked against every id on every attached disk.

use super::geometry::Geometry;
use super::refusal::Reason;
use super::PartitionRole;
use crate::system::disks::Disk;
use crate::system::probe::TableKind;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::collections::HashSet;

/// Every id and label in use on the attached disks, lowercased.
#[derive(Debug, Default)]
pub struct KnownIds {
    ids: HashSet<String>,
    labels: HashSet<String>,
}

impl KnownIds {
    pub fn from_disks(disks: &[Disk]) -> KnownIds {
        let mut known = KnownIds::default();
        for disk in disks {
            known
                .ids
                .extend(disk.disk_id.iter().map(|id| id.to_lowercase()));
            if let Some(fs) = &disk.filesystem {
                known.ids.extend(fs.uuid.iter().map(|id| id.to_lowercase()));
                known
                    .labels
                    .extend(fs.label.iter().map(|l| l.to_lowercase()));
            }
            for part in &disk.partitions {
                let ids = [&part.partuuid, &part.uuid];
                known
                    .ids
                    .extend(ids.into_iter().flatten().map(|id| id.to_lowercase()));
                let labels = [&part.label, &part.partlabel];
                known
                    .labels
                    .extend(labels.into_iter().flatten().map(|l| l.to_lowercase()));
            }
        }
        known
    }

    pub fn has_id(&self, id: &str) -> bool {
        self.ids.contains(&id.to_lowercase())
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.labels.contains(&label.to_lowercase())
    }

    /// Records an id handed out, so two new ids never equal each other.
    pub fn claim(&mut self, id: &str) {
        self.ids.insert(id.to_lowercase());
    }
}

pub struct IdGenerator {
    rng: StdRng,
}

/// Random draws before we conclude something is wrong with the randomness.
const ATTEMPTS: usize = 64;

impl IdGenerator {
    pub fn new(seed: Option<u64>) -> IdGenerator {
        IdGenerator {
            rng: match seed {
                Some(seed) => StdRng::seed_from_u64(seed),
                None => StdRng::from_entropy(),
            },
        }
    }

    /// A non-zero MBR disk signature whose PARTUUIDs (`sig-01`...) are all
    /// new. A pinned signature that collides is refused, not replaced.
    pub fn mbr_signature(
        &mut self,
        known: &mut KnownIds,
        pinned: Option<u32>,
        partitions: &[u32],
    ) -> Result<u32, Reason> {
        let collides = |known: &KnownIds, sig: u32| {
            known.has_id(&format!("{sig:08x}"))
                || partitions
                    .iter()
                    .any(|&n| known.has_id(&crate::system::probe::mbr_partuuid(sig, n)))
        };
        if let Some(sig) = pinned {
            if sig == 0 {
                return Err(Reason::new(
                    "id-collision",
                    "a disk signature of 00000000 means 'none' to Linux",
                )
                .hint("leave out --disk-signature to get a random one"));
            }
            if collides(known, sig) {
                return Err(Reason::new(
                    "id-collision",
                    format!("disk signature {sig:08x} (PARTUUIDs {sig:08x}-0N) is already used by an attached disk"),
                )
                .hint("two disks with the same PARTUUID make the kernel mount either one; leave out --disk-signature to get a fresh one"));
            }
            return Ok(self.claim_signature(known, sig, partitions));
        }
        for _ in 0..ATTEMPTS {
            let sig: u32 = self.rng.gen();
            if sig != 0 && !collides(known, sig) {
                return Ok(self.claim_signature(known, sig, partitions));
            }
        }
        Err(Reason::new(
            "id-collision",
            "could not find an unused MBR disk signature",
        ))
    }

    fn claim_signature(&mut self, known: &mut KnownIds, sig: u32, partitions: &[u32]) -> u32 {
        known.claim(&format!("{sig:08x}"));
        for &n in partitions {
            known.claim(&crate::system::probe::mbr_partuuid(sig, n));
        }
        sig
    }

    /// A random (version 4) GUID not seen on any attached disk.
    pub fn guid(&mut self, known: &mut KnownIds) -> Result<uuid::Uuid, Reason> {
        for _ in 0..ATTEMPTS {
            let guid = uuid::Builder::from_random_bytes(self.rng.gen()).into_uuid();
            let text = guid.hyphenated().to_string();
            if !known.has_id(&text) {
                known.claim(&text);
                return Ok(guid);
            }
        }
        Err(Reason::new("id-collision", "could not find an unused GUID"))
    }

    /// A FAT volume serial, written `XXXX-XXXX` as blkid shows it.
    pub fn vfat_serial(&mut self, known: &mut KnownIds) -> Result<u32, Reason> {
        for _ in 0..ATTEMPTS {
            let serial: u32 = self.rng.gen();
            let text = vfat_uuid_text(serial);
            if serial != 0 && !known.has_id(&text) {
                known.claim(&text);
                return Ok(serial);
            }
        }
        Err(Reason::new(
            "id-collision",
            "could not find an unused FAT volume id",
        ))
    }
}

pub fn vfat_uuid_text(serial: u32) -> String {
    format!("{:04X}-{:04X}", serial >> 16, serial & 0xFFFF)
}

/// `base`, or `base2`, `base3`... whichever no attached disk uses.
pub fn fresh_label(base: &str, known: &KnownIds) -> String {
    std::iter::once(base.to_string())
        .chain((2..100).map(|n| format!("{base}{n}")))
        .find(|label| !known.has_label(label))
        .unwrap_or_else(|| base.to_string())
}

/// Ids for the new table and filesystems.
pub struct NewIds {
    pub disk_id: String,
    pub partuuids: Vec<String>,
    pub gpt_types: Vec<(String, String)>,
    pub root_fs_uuid: String,
    pub boot_fs_serial: Option<u32>,
}

/// Fresh ids for a table of `kind` over `geometry`'s partitions, each new
/// to `known` (which learns them).
pub fn new_ids(
    known: &mut KnownIds,
    kind: TableKind,
    geometry: &Geometry,
    seed: Option<u64>,
    disk_signature: Option<u32>,
) -> Result<NewIds, Reason> {
    let mut ids = IdGenerator::new(seed);
    let numbers: Vec<u32> = (1..=geometry.extents.len() as u32).collect();
    let (disk_id, partuuids) = match kind {
        TableKind::Mbr => {
            let sig = ids.mbr_signature(known, disk_signature, &numbers)?;
            let parts = numbers
                .iter()
                .map(|&n| crate::system::probe::mbr_partuuid(sig, n))
                .collect();
            (format!("{sig:08x}"), parts)
        }
        TableKind::Gpt => {
            let disk = ids.guid(known)?.hyphenated().to_string();
            let parts = numbers
                .iter()
                .map(|_| ids.guid(known).map(|g| g.hyphenated().to_string()))
                .collect::<Result<_, _>>()?;
            (disk, parts)
        }
    };
    let gpt_types = geometry
        .extents
        .iter()
        .map(|extent| match extent.role {
            PartitionRole::Boot => (
                GPT_BASIC_DATA.to_string(),
                "Microsoft basic data (FAT)".to_string(),
            ),
            PartitionRole::Root => (GPT_LINUX_FS.to_string(), "Linux filesystem".to_string()),
        })
        .collect();
    let has_boot = geometry
        .extents
        .iter()
        .any(|e| e.role == PartitionRole::Boot);
    Ok(NewIds {
        disk_id,
        partuuids,
        gpt_types,
        root_fs_uuid: ids.guid(known)?.hyphenated().to_string(),
        boot_fs_serial: if has_boot {
            Some(ids.vfat_serial(known)?)
        } else {
            None
        },
    })
}

const GPT_BASIC_DATA: &str = "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7";

const GPT_LINUX_FS: &str = "0fc63daf-8483-4772-8e79-3d69d8477de4";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_repeat_and_differ_by_seed() {
        let mut a = IdGenerator::new(Some(7));
        let mut b = IdGenerator::new(Some(7));
        let mut c = IdGenerator::new(Some(8));
        let (mut ka, mut kb, mut kc) = (
            KnownIds::default(),
            KnownIds::default(),
            KnownIds::default(),
        );
        let sa = a.mbr_signature(&mut ka, None, &[1, 2]).unwrap();
        assert_eq!(sa, b.mbr_signature(&mut kb, None, &[1, 2]).unwrap());
        assert_ne!(sa, c.mbr_signature(&mut kc, None, &[1, 2]).unwrap());
        assert_ne!(sa, 0);
    }

    #[test]
    fn a_pinned_signature_that_exists_is_refused() {
        let mut known = KnownIds::default();
        known.claim("6c586e13-02");
        let err = IdGenerator::new(None)
            .mbr_signature(&mut known, Some(0x6c586e13), &[1, 2])
            .unwrap_err();
        assert_eq!(err.code, "id-collision");
        assert!(err.message.contains("6c586e13"));
    }

    #[test]
    fn new_guids_are_not_repeated() {
        let mut known = KnownIds::default();
        let mut ids = IdGenerator::new(Some(1));
        let first = ids.guid(&mut known).unwrap();
        assert!(known.has_id(&first.to_string()));
        assert_eq!(first.get_version_num(), 4);
        assert_ne!(first, ids.guid(&mut known).unwrap());
    }

    #[test]
    fn labels_avoid_existing_ones() {
        let mut known = KnownIds::default();
        known.labels.insert("rootfs".into());
        known.labels.insert("rootfs2".into());
        assert_eq!(fresh_label("rootfs", &known), "rootfs3");
        assert_eq!(fresh_label("bootfs", &known), "bootfs");
    }

    #[test]
    fn vfat_ids_look_like_blkid() {
        assert_eq!(vfat_uuid_text(0x1234abcd), "1234-ABCD");
    }
}
