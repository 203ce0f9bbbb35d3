//! Which disk is the standby: the one named with `--target`, the one the
//! standby record names, or the one the migration journal says the system
//! came from (the SD card's old root after a root-only move, the whole card
//! after a full move). Read-only.

use crate::bootcfg::DeviceSpec;
use crate::plan::{Layout, Reason, TargetIdentity};
use crate::state::journal::Journal;
use crate::state::standby::StandbyRecord;
use crate::system::disks::{Disk, Partition};
use crate::system::mounts::DevNo;
use crate::system::source::{matching, Match};
use crate::system::System;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One partition of the standby, as the disk shows it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StandbyPart {
    pub number: u32,
    /// The kernel's device, when it shows one.
    pub path: Option<PathBuf>,
    pub devno: Option<DevNo>,
    pub start_bytes: u64,
    pub size_bytes: u64,
    pub fstype: Option<String>,
    pub partuuid: Option<String>,
    pub uuid: Option<String>,
    pub label: Option<String>,
}

impl StandbyPart {
    pub fn of(part: &Partition) -> StandbyPart {
        StandbyPart {
            number: part.number,
            path: part.path.clone(),
            devno: part.devno,
            start_bytes: part.start_bytes,
            size_bytes: part.size_bytes,
            fstype: part.fstype.clone(),
            partuuid: part.partuuid.clone(),
            uuid: part.uuid.clone(),
            label: part.label.clone(),
        }
    }

    /// `/dev/mmcblk0p2`, or `/dev/loop3 partition 2` without a node.
    pub fn name(&self, disk: &Path) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => format!("{} partition {}", disk.display(), self.number),
        }
    }

    pub fn ids(&self) -> crate::state::standby::PartIds {
        crate::state::standby::PartIds {
            number: self.number,
            partuuid: self.partuuid.clone(),
            uuid: self.uuid.clone(),
            label: self.label.clone(),
        }
    }
}

/// How the standby was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FoundBy {
    /// The state directory's standby record.
    Record,
    /// The migration journal: the disk the system was migrated from.
    Journal,
    /// `--target`, a disk that is laid out anew.
    Named,
}

/// A standby that exists: its disk and partitions.
#[derive(Debug, Clone, Serialize)]
pub struct Standby {
    pub disk: TargetIdentity,
    /// `full`: its own boot partition; `root-only`: started from the
    /// running system's boot partition.
    pub layout: Layout,
    pub root: StandbyPart,
    pub boot: Option<StandbyPart>,
    pub found_by: FoundBy,
}

impl Standby {
    pub fn root_name(&self) -> String {
        self.root.name(&self.disk.path)
    }

    /// The ids its own files name, when both of each partition's could be
    /// read.
    pub fn ids(&self) -> Option<crate::plan::replica::ReplicaIds> {
        use crate::plan::replica::{OwnIds, ReplicaIds};
        let own = |part: &StandbyPart| {
            Some(OwnIds {
                partuuid: part.partuuid.clone()?,
                uuid: part.uuid.clone()?,
            })
        };
        Some(ReplicaIds {
            root: own(&self.root)?,
            boot: match &self.boot {
                Some(boot) => Some(own(boot)?),
                None => None,
            },
        })
    }

    /// Every id of the standby's partitions: PARTUUIDs, filesystem UUIDs
    /// and labels.
    pub fn specs(&self) -> Vec<DeviceSpec> {
        std::iter::once(&self.root)
            .chain(self.boot.as_ref())
            .flat_map(|part| {
                [
                    part.partuuid.clone().map(DeviceSpec::PartUuid),
                    part.uuid.clone().map(DeviceSpec::Uuid),
                    part.label.clone().map(DeviceSpec::Label),
                ]
            })
            .flatten()
            .collect()
    }
}

/// What `--target`, the record or the journal point at.
#[derive(Debug)]
pub enum Found<'a> {
    /// A standby with partitions of its own: update it (with what to warn
    /// of, when it is taken on the person's word).
    Existing(Box<Standby>, Option<String>),
    /// A disk that is not (yet) a standby: a first sync lays it out.
    Blank(&'a Disk),
}

/// Finds the standby; a reason with what to do when there is none.
pub fn find<'a>(
    system: &'a System,
    journal: Option<&Journal>,
    record: Option<&StandbyRecord>,
    to: Option<&Path>,
    fresh: bool,
) -> Result<Found<'a>, Reason> {
    if let Some(to) = to {
        let disk = crate::plan::replica::resolve_disk(system, to)?;
        if fresh {
            return Ok(Found::Blank(disk));
        }
        if let Some((standby, unlike)) = record.and_then(|r| from_record(disk, r)) {
            // Named with --target: taken as the standby, with what differs said.
            let warning = unlike.map(|why| {
                format!(
                    "{} is taken as the standby because --target names it, though {why}",
                    to.display()
                )
            });
            return Ok(existing_or_unfinished(standby, disk, record, warning));
        }
        if let Some(standby) = journal.and_then(|j| from_journal(system, j, Some(disk)).ok()) {
            return Ok(Found::Existing(Box::new(standby), None));
        }
        return Ok(Found::Blank(disk));
    }
    if let Some(record) = record {
        let found: Vec<(Standby, Option<String>, &Disk)> = system
            .disks
            .iter()
            .filter_map(|disk| from_record(disk, record).map(|(s, unlike)| (s, unlike, disk)))
            .collect();
        if let Some((standby, _, disk)) = found.iter().find(|(_, unlike, _)| unlike.is_none()) {
            return Ok(existing_or_unfinished(
                standby.clone(),
                disk,
                Some(record),
                None,
            ));
        }
        return Err(match found.first() {
            Some((_, Some(why), disk)) => Reason::new(
                "standby-not-itself",
                format!(
                    "{} carries the standby's root PARTUUID={}, but {why}: a copy of the standby, not the standby itself",
                    disk.path.display(),
                    record.root.partuuid.as_deref().unwrap_or("?")
                ),
            )
            .hint(format!(
                "plug in the standby itself; or, to make {} the standby, name it: sudo pimigrate sync --target {}",
                disk.path.display(),
                disk.path.display()
            )),
            _ => Reason::new(
                "standby-missing",
                format!(
                    "the standby {} (root PARTUUID={}) is not attached",
                    record.disk.display(),
                    record.root.partuuid.as_deref().unwrap_or("?")
                ),
            )
            .hint("plug it in, or name another disk with --target (a disk that is not a standby yet is erased and laid out anew)"),
        });
    }
    if let Some(journal) = journal {
        return from_journal(system, journal, None).map(|s| Found::Existing(Box::new(s), None));
    }
    Err(Reason::new(
        "no-standby",
        "there is no standby yet: no standby record and no migration journal names a disk",
    )
    .hint("name the disk to keep in sync with --target DISK (`pimigrate devices` lists them)"))
}

/// The standby `record` names, on the disk that is it (not a copy of it),
/// when it is attached.
pub fn recorded(system: &System, record: &StandbyRecord) -> Option<Standby> {
    system
        .disks
        .iter()
        .filter_map(|disk| from_record(disk, record))
        .find(|(_, unlike)| unlike.is_none())
        .map(|(standby, _)| standby)
}

/// The standby the record names, or, when its first sync's layout was cut
/// short (no filesystems made yet), its disk to lay out anew.
fn existing_or_unfinished<'a>(
    standby: Standby,
    disk: &'a Disk,
    record: Option<&StandbyRecord>,
    warning: Option<String>,
) -> Found<'a> {
    let unfinished = record
        .and_then(|r| r.laying_out.as_ref())
        .is_some_and(|l| !l.done.contains(&crate::state::journal::Step::Formatted));
    match unfinished {
        true => Found::Blank(disk),
        false => Found::Existing(Box::new(standby), warning),
    }
}

/// The standby of `record`, if its root PARTUUID is on `disk`; with what
/// tells that it is another disk carrying the same ids (a copy of the
/// card), when something does: the root filesystem's UUID, the disk's
/// serial or model, where both the record and the disk know them.
fn from_record(disk: &Disk, record: &StandbyRecord) -> Option<(Standby, Option<String>)> {
    let by_partuuid = |partuuid: Option<&str>| {
        let partuuid = partuuid?;
        disk.partitions.iter().find(|p| {
            p.partuuid
                .as_deref()
                .is_some_and(|id| id.eq_ignore_ascii_case(partuuid))
        })
    };
    let root = by_partuuid(record.root.partuuid.as_deref())?;
    let boot = match &record.boot {
        Some(ids) => Some(by_partuuid(ids.partuuid.as_deref())?),
        None => None,
    };
    let differs = |what: &str, recorded: Option<&str>, now: Option<&str>| match (recorded, now) {
        (Some(a), Some(b)) if !a.eq_ignore_ascii_case(b) => {
            Some(format!("its {what} is {b}, the standby's {a}"))
        }
        _ => None,
    };
    let unlike: Vec<String> = [
        differs(
            "root filesystem's UUID",
            record.root.uuid.as_deref(),
            root.uuid.as_deref(),
        ),
        differs("serial", record.serial.as_deref(), disk.serial.as_deref()),
        differs("model", record.model.as_deref(), disk.model.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let standby = Standby {
        disk: crate::plan::identity(disk),
        layout: record.layout,
        root: StandbyPart::of(root),
        boot: boot.map(StandbyPart::of),
        found_by: FoundBy::Record,
    };
    Some((standby, (!unlike.is_empty()).then(|| unlike.join(", "))))
}

/// The disk the journal's migration came from: its old root partition, and
/// after a full move its own boot partition. `on` limits it to one disk.
fn from_journal(system: &System, journal: &Journal, on: Option<&Disk>) -> Result<Standby, Reason> {
    let source = &journal.plan.source;
    let (disk, root) = one_partition(system, &source.root_spec, on, "root")?;
    let boot = match (journal.plan.layout, &source.boot_spec) {
        (Layout::Full, Some(spec)) => Some(one_partition(system, spec, Some(disk), "boot")?.1),
        _ => None,
    };
    Ok(Standby {
        disk: crate::plan::identity(disk),
        layout: if boot.is_some() {
            Layout::Full
        } else {
            Layout::RootOnly
        },
        root: StandbyPart::of(root),
        boot: boot.map(StandbyPart::of),
        found_by: FoundBy::Journal,
    })
}

/// The one partition `spec` names (on `on`, if given).
fn one_partition<'a>(
    system: &'a System,
    spec: &DeviceSpec,
    on: Option<&Disk>,
    what: &str,
) -> Result<(&'a Disk, &'a Partition), Reason> {
    let found: Vec<(&Disk, &Partition)> = matching(spec, &system.disks)
        .into_iter()
        .filter_map(|m| match m {
            Match::Partition(disk, part) => Some((disk, part)),
            Match::Disk(_) => None,
        })
        .filter(|(disk, _)| on.is_none_or(|on| on.devno == disk.devno))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(Reason::new(
            "standby-missing",
            format!("the {what} partition the system was migrated from ({spec}) is not attached"),
        )
        .hint("put the SD card back in, or name another disk with --target")),
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|(d, p)| Match::Partition(d, p).name())
                .collect();
            Err(crate::plan::replica::own_ids::collision(spec, &names))
        }
    }
}
