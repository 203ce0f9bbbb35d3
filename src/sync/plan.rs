//! What a sync will do, decided before anything is written: the standby
//! ([`super::standby::find`]), its disk checked and for a first sync laid
//! out by the replica's planner (`plan::replica`, as `migrate` checks and
//! lays out its target, with the same refusals), what the copy leaves out
//! and how it compares ([`super::compare`]), and the standby's own files
//! ([`super::own_files`]). `sync --dry-run` shows it; `sync` shows the
//! same value, asks, and hands it to `apply::sync`.

use super::boot_order;
use super::compare::comparison;
use super::divergence::{self, Divergence, Look};
use super::own_files::{own_files, OwnFiles};
use super::standby::{self, Found, Standby, StandbyPart};
use crate::plan::replica::{
    boot_files, check_disk, check_fits, lay_out, own_ids, DiskLayout, LayoutRequest, Writes,
};
use crate::plan::source_check::{check_source, CheckedSource};
use crate::plan::{FileEdit, Layout, PartitionPath, PartitionRole, Reason, Refusal, TableChoice};
use crate::state::journal::Journal;
use crate::state::standby::{ClockMark, StandbyRecord};
use crate::system::disks::Disk;
use crate::system::usage::Exclusion;
use crate::system::System;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the person asked for.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// `--target`: the standby disk, instead of the recorded one.
    pub target: Option<PathBuf>,
    /// `--erase`: lay `--target` out anew even if it is a standby already.
    pub erase: bool,
    /// A first sync's layout; by default what the running system has.
    pub layout: Option<Layout>,
    pub table: Option<TableChoice>,
    pub checksum: bool,
    pub excludes: Vec<PathBuf>,
    pub seed: Option<u64>,
}

/// Boot files go to the standby's own boot partition (a full layout).
#[derive(Debug, Clone, Serialize)]
pub struct BootSync {
    /// The running system's boot directory (view path).
    pub from: PathBuf,
    /// Names never copied (nor removed from the standby).
    pub left_out: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SyncPlan {
    pub standby: Standby,
    /// A first sync: the table and filesystems written before the copy;
    /// everything on the disk is erased.
    pub layout: Option<DiskLayout>,
    pub source_root: PathBuf,
    pub boot_dir: PathBuf,
    pub exclusions: Vec<Exclusion>,
    /// Compare every file's contents on both sides.
    pub checksum: bool,
    /// Entries whose inode did not change since (Unix seconds) are taken as
    /// they are; `None`: every entry is compared.
    pub changed_since: Option<u64>,
    /// Why the copy compares the way it does, for a person.
    pub comparison: String,
    /// The standby's own files, which the copies leave out: fstab and
    /// raspi-firmware's ROOTPART on its root, a full standby's cmdline.txt
    /// on its boot partition.
    pub edits: Vec<FileEdit>,
    pub boot: Option<BootSync>,
    /// A root-only standby: the command line that starts it from the
    /// shared boot partition.
    pub boot_command_line: Option<String>,
    /// How to boot the standby, in order.
    pub boot_steps: Vec<String>,
    pub warnings: Vec<String>,
    /// What happened to the standby since its last complete sync; a
    /// change is not overwritten without the person's word.
    pub divergence: Divergence,
}

impl SyncPlan {
    pub fn erases(&self) -> bool {
        self.layout.is_some()
    }
}

/// Names on a boot partition a sync never copies: trial-boot files (a
/// trial belongs to the running system's disk), EEPROM updates (the
/// standby must not flash the bootloader when it boots), backups.
pub const BOOT_LEFT_OUT: &[&str] = &[
    "tryboot.txt",
    "cmdline.pimigrate.txt",
    "pieeprom.upd",
    "pieeprom.sig",
    "recovery.bin",
    "RECOVERY.*",
    "*.pimigrate-backup*",
];

/// What a sync is planned from, besides the machine and the request.
pub struct SyncFacts<'a> {
    /// The migration's journal, when there is one.
    pub journal: Option<&'a Journal>,
    /// The state directory's standby record, when there is one.
    pub record: Option<&'a StandbyRecord>,
    /// How a standby mounted elsewhere since its last sync is looked at.
    pub look: Look<'a>,
}

/// The plan, or every reason there cannot be one: the standby found, its
/// disk checked (and a first sync's laid out) by the replica's rules, the
/// standby's own files made, then what only a sync has: how the copy
/// compares, whether the standby changed behind the sync's back, the
/// bootloader's order, how to boot it.
pub fn plan_sync(
    system: &System,
    facts: &SyncFacts,
    request: &SyncRequest,
) -> Result<SyncPlan, Refusal> {
    let refuse = |reason: Reason| Refusal {
        reasons: vec![reason],
    };
    if let Some(reason) = pending_migration(system, facts.journal) {
        return Err(refuse(reason));
    }
    let found = standby::find(
        system,
        facts.journal,
        facts.record,
        request.target.as_deref(),
        request.erase,
    )
    .map_err(refuse)?;
    let boot_dir = boot_dir(system).map_err(refuse)?;
    let mut reasons = Vec::new();
    let source = check_source(system, &mut reasons);
    let target = match found {
        Found::Blank(disk) => first_sync(system, disk, request, source.as_ref(), &mut reasons),
        Found::Existing(standby, warning) => {
            existing(system, *standby, warning, source.as_ref(), &mut reasons)
        }
    };
    let own = match (&target, &source) {
        (Some(target), Some(source)) => own_files(system, source, &target.standby)
            .map_err(|found| reasons.extend(found))
            .ok(),
        _ => None,
    };
    let (Some(target), Some(own), true) = (target, own, reasons.is_empty()) else {
        return Err(Refusal { reasons });
    };
    Ok(finish(system, facts, request, target, own, boot_dir))
}

/// The standby and, for a first sync, the layout written before the copy.
struct Target {
    standby: Standby,
    layout: Option<DiskLayout>,
    warning: Option<String>,
}

/// A first sync's standby: `disk` checked as the replica's whole disk and
/// laid out as `migrate` lays out its target. Full unless asked otherwise
/// or the running system itself starts from another disk's boot
/// partition.
fn first_sync(
    system: &System,
    disk: &Disk,
    request: &SyncRequest,
    source: Option<&CheckedSource>,
    reasons: &mut Vec<Reason>,
) -> Option<Target> {
    reasons.extend(check_disk(system, disk, Writes::WholeDisk));
    let layout = request.layout.unwrap_or_else(|| default_layout(system));
    let table = request.table.unwrap_or(TableChoice::Auto);
    let laid_out = lay_out(
        system,
        disk,
        &LayoutRequest::new(layout, table, request.seed),
    )
    .map_err(|found| reasons.extend(found))
    .ok()?;
    let standby = planned_standby(disk, &laid_out.disk, layout);
    check_room(system, &standby, source, reasons);
    Some(Target {
        standby,
        layout: Some(laid_out.disk),
        warning: None,
    })
}

/// An existing standby, checked by the replica's rules for the partitions
/// a sync writes (its root, and its own boot partition), then as a
/// standby: ext4, ids of its own.
fn existing(
    system: &System,
    standby: Standby,
    warning: Option<String>,
    source: Option<&CheckedSource>,
    reasons: &mut Vec<Reason>,
) -> Option<Target> {
    let Some(disk) = system.disks.iter().find(|d| d.devno == standby.disk.devno) else {
        reasons.push(Reason::new(
            "standby-missing",
            format!(
                "the standby {} is not attached",
                standby.disk.path.display()
            ),
        ));
        return None;
    };
    let numbers: Vec<u32> = std::iter::once(standby.root.number)
        .chain(standby.boot.as_ref().map(|b| b.number))
        .collect();
    let refused = check_disk(system, disk, Writes::Partitions(&numbers));
    // A standby that is what this system runs from is no standby at all.
    if refused.iter().any(|r| r.code.starts_with("target-holds")) {
        reasons.extend(refused);
        return None;
    }
    reasons.extend(refused);
    if !matches!(
        standby.root.fstype.as_deref(),
        Some("ext4" | "ext3" | "ext2")
    ) {
        reasons.push(
            Reason::new(
                "standby-filesystem",
                format!(
                    "{} holds {}, not the ext4 root filesystem a standby has",
                    standby.root_name(),
                    standby
                        .root
                        .fstype
                        .as_deref()
                        .unwrap_or("no filesystem pimigrate knows")
                ),
            )
            .hint("lay the disk out anew: sudo pimigrate sync --target DISK --erase"),
        );
    }
    reasons.extend(own_ids::check_own(system, &standby.disk, &standby.specs()));
    check_room(system, &standby, source, reasons);
    Some(Target {
        standby,
        layout: None,
        warning,
    })
}

/// Whether the system fits the standby's root and its boot files its boot
/// partition: the replica's rules, as `migrate` checks its target. The
/// system's use is the filesystem's own count (a sync does not walk the
/// root to plan).
fn check_room(
    system: &System,
    standby: &Standby,
    source: Option<&CheckedSource>,
    reasons: &mut Vec<Reason>,
) {
    if let Some(used) = system.source_used_bytes {
        reasons.extend(check_fits(&standby.disk.path, standby.root.size_bytes, used).1);
    }
    if let (Some(boot), Some(source)) = (&standby.boot, source) {
        if let Err(reason) = boot_files(system, source, boot.number, boot.size_bytes) {
            reasons.push(reason);
        }
    }
}

/// The running system's boot directory, which a sync copies from.
fn boot_dir(system: &System) -> Result<PathBuf, Reason> {
    system.source.boot_dir.clone().ok_or_else(|| {
        Reason::new(
            "source-boot",
            "no boot directory found (neither /boot/firmware nor /boot holds the boot files)",
        )
        .hint("mount the boot partition, or pass --boot-dir")
    })
}

/// The plan of a standby whose every check passed.
fn finish(
    system: &System,
    facts: &SyncFacts,
    request: &SyncRequest,
    target: Target,
    own: OwnFiles,
    boot_dir: PathBuf,
) -> SyncPlan {
    let Target {
        standby,
        layout,
        warning,
    } = target;
    let divergence = match layout {
        Some(_) => Divergence::FirstSync,
        None => divergence::check(system, &standby, facts.record, facts.look),
    };
    let clock = ClockMark::now(&system.host.proc(crate::clock::BOOT_ID));
    let (changed_since, comparison) = comparison(
        facts.record,
        &standby,
        layout.is_some(),
        request.checksum,
        clock.as_ref(),
    );
    let mut warnings: Vec<String> = warning.into_iter().collect();
    warnings.extend(boot_order::standby_boots_first(
        system,
        &standby.disk,
        standby.layout,
    ));
    let boot_steps = boot_steps(&standby, facts.journal, own.boot_command_line.as_deref());
    SyncPlan {
        boot: (standby.layout == Layout::Full).then(|| BootSync {
            from: boot_dir.clone(),
            left_out: BOOT_LEFT_OUT.iter().map(|s| s.to_string()).collect(),
        }),
        standby,
        layout,
        source_root: system.host.source_root.clone(),
        boot_dir,
        exclusions: with_records(
            system,
            crate::plan::exclusions::exclusions(system, &request.excludes),
        ),
        checksum: request.checksum,
        changed_since,
        comparison,
        edits: own.edits,
        boot_command_line: own.boot_command_line,
        boot_steps,
        warnings,
        divergence,
    }
}

/// `full` when the running root and boot partition are on one disk (the
/// standby can then be a whole system too), else `root-only`.
fn default_layout(system: &System) -> Layout {
    let source = &system.source;
    let disk_of = |devno: Option<crate::system::mounts::DevNo>| {
        devno.and_then(|d| system.disk_holding(d)).map(|d| d.devno)
    };
    match (disk_of(source.root_devno), disk_of(source.boot_devno)) {
        (Some(root), Some(boot)) if root == boot => Layout::Full,
        _ => Layout::RootOnly,
    }
}

/// The standby a first sync's layout makes on `disk`.
fn planned_standby(disk: &Disk, laid_out: &DiskLayout, layout: Layout) -> Standby {
    let ss = u64::from(laid_out.table.sector_size);
    let part = |role| {
        let (p, fs) = laid_out.part(role)?;
        Some(StandbyPart {
            number: p.number,
            path: None,
            devno: None,
            start_bytes: p.start_sector * ss,
            size_bytes: p.size_bytes,
            fstype: Some(fs.fstype.clone()),
            partuuid: Some(p.partuuid.clone()),
            uuid: Some(fs.uuid.clone()),
            label: Some(fs.label.clone()),
        })
    };
    Standby {
        disk: crate::plan::identity(disk),
        layout,
        root: part(PartitionRole::Root).expect("every layout has a root partition"),
        boot: part(PartitionRole::Boot),
        found_by: standby::FoundBy::Named,
    }
}

/// The standby's record is its own, on either side: never copied.
fn with_records(system: &System, mut exclusions: Vec<Exclusion>) -> Vec<Exclusion> {
    let mut add = |path: &Path| {
        let rule = Exclusion::new(
            &path.to_string_lossy(),
            false,
            "the standby's own record (written by the sync)",
        );
        if !exclusions.contains(&rule) {
            exclusions.push(rule);
        }
    };
    add(Path::new(crate::state::standby::ON_STANDBY));
    for name in [
        crate::state::standby::STANDBY_FILE,
        crate::state::standby::PROBE_FILE,
    ] {
        let state = system.host.state_dir.join(name);
        if let Ok(relative) = state.strip_prefix(&system.host.source_root) {
            add(&Path::new("/").join(relative));
        }
    }
    exclusions
}

/// A migration not finished, or its trial not committed: the running
/// system's disk is not settled, and the disk a sync would overwrite may be
/// the very root the trial falls back to and `rollback` returns to.
fn pending_migration(system: &System, journal: Option<&Journal>) -> Option<Reason> {
    let journal = journal?;
    let target = journal.plan.target.path.display();
    if !journal.landed(system) {
        return Some(
            Reason::new(
                "migration-pending",
                format!("the migration to {target} has not finished: the SD card is still what the Pi falls back to"),
            )
            .hint("finish it with `sudo pimigrate migrate --resume` or undo it with `sudo pimigrate rollback`, then sync"),
        );
    }
    if journal.plan.trial_boot.is_some() && journal.committed.is_none() {
        return Some(
            Reason::new(
                "migration-pending",
                format!(
                    "the migration to {target} waits for its trial boot to be committed: until then the SD card \
                     is what the trial falls back to and `rollback` returns to"
                ),
            )
            .hint("in the trial boot, `sudo pimigrate verify --commit` makes it permanent (or `sudo pimigrate rollback` undoes it); then sync"),
        );
    }
    None
}

/// How the owner boots the standby, in order.
fn boot_steps(standby: &Standby, journal: Option<&Journal>, line: Option<&str>) -> Vec<String> {
    match standby.layout {
        Layout::Full => vec![
            format!(
                "shut down, take out the disk the system runs from (or put {} first in the boot order) and power on: {} starts by itself",
                standby.disk.path.display(),
                standby.disk.path.display()
            ),
        ],
        Layout::RootOnly => {
            let mut steps = Vec::new();
            let backup = journal
                .and_then(|j| j.backups.get(&PartitionPath::known("/cmdline.txt")))
                .filter(|_| standby.found_by == standby::FoundBy::Journal);
            if let Some(backup) = backup {
                steps.push(format!(
                    "while this system still runs: sudo pimigrate rollback --yes && sudo reboot (puts {backup} back as cmdline.txt)"
                ));
                steps.push(format!(
                    "with the disk it runs from dead: on another computer, copy {} over cmdline.txt on the SD card's boot partition",
                    backup.to_string().trim_start_matches('/')
                ));
            }
            if let Some(line) = line {
                steps.push(format!(
                    "or write this one line into cmdline.txt on the boot partition: {line}"
                ));
            }
            steps
        }
    }
}

#[cfg(test)]
mod tests {
    //! Sync's planning on the Pi 4 fixture machine (an SD card that runs
    //! the system, a Samsung SSD with an exFAT partition, a mounted USB
    //! stick, a read-only card reader): every refusal code sync's own
    //! planning has, and what it plans.
    use super::*;
    use crate::state::standby::{tests_support::sample, PartIds, SyncState};
    use crate::system::disks::Disk;

    fn pi4() -> System {
        crate::system::inspect_fixture("pi4").1
    }

    /// These standbys have no record of a complete sync: nothing is looked at.
    fn no_look(
        _: &System,
        _: &Standby,
        _: crate::clock::Moment,
    ) -> anyhow::Result<(u64, Vec<String>)> {
        anyhow::bail!("no look at a fixture's standby")
    }

    fn plan_sync(
        system: &System,
        journal: Option<&Journal>,
        record: Option<&StandbyRecord>,
        request: &SyncRequest,
    ) -> Result<SyncPlan, Refusal> {
        let facts = SyncFacts {
            journal,
            record,
            look: &no_look,
        };
        super::plan_sync(system, &facts, request)
    }

    fn codes(result: Result<SyncPlan, Refusal>) -> Vec<String> {
        match result {
            Ok(plan) => panic!("planned: {:?}", plan.standby),
            Err(refusal) => refusal.reasons.iter().map(|r| r.code.to_string()).collect(),
        }
    }

    fn to(path: &str) -> SyncRequest {
        SyncRequest {
            target: Some(PathBuf::from(path)),
            seed: Some(1),
            ..SyncRequest::default()
        }
    }

    /// A complete record of a root-only standby on `partuuid`.
    fn record_of(partuuid: &str) -> StandbyRecord {
        let mut record = sample();
        record.state = SyncState::Complete;
        record.layout = Layout::RootOnly;
        record.serial = None;
        record.model = None;
        record.root = PartIds {
            number: 1,
            partuuid: Some(partuuid.into()),
            uuid: None,
            label: None,
        };
        record
    }

    fn sda_mut(system: &mut System) -> &mut Disk {
        system.disks.iter_mut().find(|d| d.name == "sda").unwrap()
    }

    /// sda1 as an ext4 standby root with readable ids.
    fn sda_as_standby(system: &mut System) {
        let part = &mut sda_mut(system).partitions[0];
        part.fstype = Some("ext4".into());
        part.uuid = Some("5a1e0b9c-7c1d-4b8e-9d0a-2f3c4d5e6f70".into());
    }

    #[test]
    fn without_a_record_or_journal_there_is_no_standby() {
        let system = pi4();
        assert_eq!(
            codes(plan_sync(&system, None, None, &SyncRequest::default())),
            ["no-standby"]
        );
    }

    #[test]
    fn to_names_a_whole_disk_that_exists() {
        let system = pi4();
        assert_eq!(
            codes(plan_sync(&system, None, None, &to("/dev/nvme9n1"))),
            ["target-not-found"]
        );
        assert_eq!(
            codes(plan_sync(&system, None, None, &to("/dev/sda1"))),
            ["target-is-partition"]
        );
    }

    #[test]
    fn a_recorded_standby_must_be_attached_and_be_itself() {
        let system = pi4();
        let gone = record_of("0badc0de-02");
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&gone),
                &SyncRequest::default()
            )),
            ["standby-missing"]
        );
        // The SSD's partition carries the id, but another disk's serial.
        let mut clone = record_of("0a1b2c3d-01");
        clone.serial = Some("S6PXNM0T999999X".into());
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&clone),
                &SyncRequest::default()
            )),
            ["standby-not-itself"]
        );
        // Named with --target, it is taken, with the difference said.
        let mut system = pi4();
        sda_as_standby(&mut system);
        let plan = plan_sync(&system, None, Some(&clone), &to("/dev/sda")).unwrap();
        assert!(
            plan.warnings.iter().any(|w| w.contains("S6PXNM0T999999X")),
            "{:?}",
            plan.warnings
        );
    }

    #[test]
    fn the_running_systems_own_partitions_are_never_a_standby() {
        let system = pi4();
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&record_of("6c586e13-02")),
                &SyncRequest::default()
            )),
            ["target-holds-root"]
        );
        // Running from the SSD, with the SD card as a full standby whose
        // boot partition is the one this system starts from.
        let mut system = pi4();
        let sda1 = sda_mut(&mut system).partitions[0].devno;
        system.source.root_devno = sda1;
        system.source.running_root_devno = sda1;
        let mut full = record_of("6c586e13-02");
        full.layout = Layout::Full;
        full.root.number = 2;
        full.boot = Some(PartIds {
            number: 1,
            partuuid: Some("6c586e13-01".into()),
            uuid: None,
            label: None,
        });
        assert!(codes(plan_sync(
            &system,
            None,
            Some(&full),
            &SyncRequest::default()
        ))
        .contains(&"target-holds-boot".to_string()));
    }

    #[test]
    fn a_standby_in_use_or_without_ext4_is_refused() {
        let system = pi4();
        let stick = codes(plan_sync(
            &system,
            None,
            Some(&record_of("00c0ffee-01")),
            &SyncRequest::default(),
        ));
        assert!(stick.contains(&"target-in-use".to_string()), "{stick:?}");
        assert!(
            stick.contains(&"standby-filesystem".to_string()),
            "{stick:?}"
        );
    }

    #[test]
    fn a_standby_too_small_for_the_system_is_refused_counting_ext4s_share_and_room_to_grow() {
        let mut system = pi4();
        sda_as_standby(&mut system);
        let size = sda_mut(&mut system).partitions[0].size_bytes;
        let refused = |system: &System| {
            codes(plan_sync(
                system,
                None,
                Some(&record_of("0a1b2c3d-01")),
                &SyncRequest::default(),
            ))
        };
        // Fits the partition, not what ext4 leaves of it.
        system.source_used_bytes = Some(size - size / 100);
        assert_eq!(refused(&system), ["target-too-small"]);
        // Fits what ext4 leaves, not with room to grow: the one rule
        // `migrate` has (crate::space), for a standby as for a new root.
        let usable = crate::space::ext4_usable_bytes(size);
        system.source_used_bytes = Some(usable - usable / 20);
        assert_eq!(refused(&system), ["target-too-small"]);
        system.source_used_bytes = Some(usable / 2);
        assert!(plan_sync(
            &system,
            None,
            Some(&record_of("0a1b2c3d-01")),
            &SyncRequest::default()
        )
        .is_ok());
    }

    #[test]
    fn a_write_protected_standby_is_refused_before_anything_is_written() {
        let mut system = pi4();
        sda_as_standby(&mut system);
        sda_mut(&mut system).read_only = true;
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&record_of("0a1b2c3d-01")),
                &SyncRequest::default()
            )),
            ["target-read-only"]
        );
    }

    #[test]
    fn a_standby_whose_ids_another_disk_carries_or_that_cannot_be_read_is_refused() {
        let mut system = pi4();
        sda_as_standby(&mut system);
        let mut twin = sda_mut(&mut system).clone();
        twin.name = "sdd".into();
        twin.path = PathBuf::from("/dev/sdd");
        twin.devno.minor = 48;
        twin.serial = Some("TWIN".into());
        for part in &mut twin.partitions {
            part.devno = None;
            part.path = None;
            part.mountpoints.clear();
        }
        system.disks.push(twin);
        let shared = codes(plan_sync(
            &system,
            None,
            Some(&record_of("0a1b2c3d-01")),
            &SyncRequest::default(),
        ));
        assert!(shared.contains(&"id-collision".to_string()), "{shared:?}");

        let mut system = pi4();
        sda_as_standby(&mut system);
        sda_mut(&mut system).partitions[0].uuid = None;
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&record_of("0a1b2c3d-01")),
                &SyncRequest::default()
            )),
            ["standby-unreadable"]
        );
    }

    #[test]
    fn without_boot_files_there_is_nothing_to_sync_from() {
        let mut system = pi4();
        system.source.boot_dir = None;
        assert_eq!(
            codes(plan_sync(&system, None, None, &to("/dev/sda"))),
            ["source-boot"]
        );
    }

    #[test]
    fn no_sync_while_a_migration_is_pending() {
        let system = pi4();
        let plan = crate::plan::plan(
            &system,
            &crate::plan::Options {
                seed: Some(1),
                ..crate::plan::Options::new("/dev/sda")
            },
        )
        .unwrap();
        let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
        // Not finished.
        assert_eq!(
            codes(plan_sync(&system, Some(&journal), None, &to("/dev/sda"))),
            ["migration-pending"]
        );
        // Finished, its trial not committed.
        for step in [
            crate::state::journal::Step::Partitioned,
            crate::state::journal::Step::Formatted,
            crate::state::journal::Step::Copied,
            crate::state::journal::Step::TargetEdited,
            crate::state::journal::Step::SourceBootEdited,
        ] {
            journal.done.push(step);
        }
        journal.plan.trial_boot = Some(crate::plan::TrialBoot {
            site: crate::plan::EditSite::SourceBoot,
            tryboot_file: PartitionPath::known("/tryboot.txt"),
            cmdline_file: PartitionPath::known("/cmdline.pimigrate.txt"),
            backup: None,
            diff: String::new(),
            note: None,
            guard: None,
        });
        let refused = plan_sync(&system, Some(&journal), None, &to("/dev/sda")).unwrap_err();
        assert_eq!(refused.reasons[0].code, "migration-pending");
        assert!(refused.reasons[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("verify --commit"));
        // Committed: the plan is made.
        journal.committed = Some(1);
        let plan = plan_sync(&system, Some(&journal), None, &to("/dev/sda")).unwrap();
        assert!(plan.erases());
    }

    #[test]
    fn a_first_sync_plans_the_layout_and_the_standbys_own_files() {
        let system = pi4();
        let plan = plan_sync(&system, None, None, &to("/dev/sda")).unwrap();
        let layout = plan
            .layout
            .as_ref()
            .expect("a first sync lays the disk out");
        assert_eq!(
            plan.standby.layout,
            Layout::Full,
            "root and boot on one disk"
        );
        assert_eq!(layout.table.partitions.len(), 2);
        assert_eq!(plan.divergence, Divergence::FirstSync);
        let files: Vec<String> = plan.edits.iter().map(|e| e.output.to_string()).collect();
        assert_eq!(files, ["/etc/fstab", "/cmdline.txt"]);
        let ids = layout.ids();
        let cmdline = &plan.edits[1];
        assert!(
            cmdline
                .diff
                .contains(&format!("root=PARTUUID={}", ids.root.partuuid)),
            "{}",
            cmdline.diff
        );
        assert!(plan
            .boot
            .as_ref()
            .unwrap()
            .left_out
            .contains(&"pieeprom.upd".to_string()));
    }
}
