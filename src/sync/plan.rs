//! What a sync will do, decided before anything is written: the standby,
//! a first sync's layout (a migration's table and filesystems), what the
//! copy leaves out and how it compares, the standby's own fstab and
//! command line, and every refusal with what to do. `sync --dry-run` shows
//! it; `sync` shows the same value, asks, and hands it to [`super::apply`].

use super::boot_order;
use super::divergence::{self, Divergence};
use super::record::ClockMark;
use super::record::StandbyRecord;
use super::standby::{self, Found, Standby, StandbyPart};
use super::superblock;
use crate::apply::journal::Journal;
use crate::bootcfg::DeviceSpec;
use crate::clock::now;
use crate::plan::boot_layout::demands;
use crate::plan::edits::{boot_relative, file_edit, EditTarget};
use crate::plan::regenerated::RASPI_FIRMWARE_DEFAULTS;
use crate::plan::replica::{retarget, DiskLayout};
use crate::plan::source_check::check_source;
use crate::plan::{
    EditSite, FileEdit, Layout, Options, PartitionPath, PartitionRole, Plan, Reason, Refusal,
    TableChoice, TrialChoice,
};
use crate::system::disks::Disk;
use crate::system::source::id_uses;
use crate::system::usage::Exclusion;
use crate::system::System;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the person asked for.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// `--to`: the standby disk, instead of the recorded one.
    pub to: Option<PathBuf>,
    /// `--fresh`: lay `--to` out anew even if it is a standby already.
    pub fresh: bool,
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

/// The plan, or every reason there cannot be one.
pub fn plan_sync(
    system: &System,
    journal: Option<&Journal>,
    record: Option<&StandbyRecord>,
    request: &SyncRequest,
) -> Result<SyncPlan, Refusal> {
    let refuse = |reason: Reason| Refusal {
        reasons: vec![reason],
    };
    if let Some(reason) = pending_migration(system, journal) {
        return Err(refuse(reason));
    }
    let found = standby::find(
        system,
        journal,
        record,
        request.to.as_deref(),
        request.fresh,
    )
    .map_err(refuse)?;
    let boot_dir =
        system.source.boot_dir.clone().ok_or_else(|| {
            refuse(Reason::new(
            "source-boot",
            "no boot directory found (neither /boot/firmware nor /boot holds the boot files)",
        )
        .hint("mount the boot partition, or pass --boot-dir"))
        })?;
    let mut warnings = Vec::new();
    let (standby, layout, exclusions) = match found {
        Found::Blank(disk) => {
            let plan = layout_plan(system, disk, request)?;
            let standby = planned_standby(disk, &plan);
            let exclusions = with_records(system, plan.copy.exclusions);
            (standby, Some(plan.disk), exclusions)
        }
        Found::Existing(standby, warning) => {
            let standby = *standby;
            warnings.extend(warning);
            let reasons = check_existing(system, &standby);
            if !reasons.is_empty() {
                return Err(Refusal { reasons });
            }
            let options = options(&standby.disk.path, standby.layout, request);
            let exclusions = crate::plan::exclusions::exclusions(system, &options);
            (standby, None, with_records(system, exclusions))
        }
    };
    let mut reasons = Vec::new();
    let edits = standby_edits(system, &standby, &mut reasons);
    if !reasons.is_empty() {
        return Err(Refusal { reasons });
    }
    let divergence = match layout {
        Some(_) => Divergence::FirstSync,
        None => divergence::check(system, &standby, record),
    };
    let clock = ClockMark::now(&system.host.proc("sys/kernel/random/boot_id"));
    let (changed_since, comparison) = comparison(
        record,
        &standby,
        layout.is_some(),
        request.checksum,
        clock.as_ref(),
    );
    warnings.extend(boot_order::standby_boots_first(
        system,
        &standby.disk,
        standby.layout,
    ));
    let boot_steps = boot_steps(&standby, journal, edits.boot_command_line.as_deref());
    Ok(SyncPlan {
        boot: (standby.layout == Layout::Full).then(|| BootSync {
            from: boot_dir.clone(),
            left_out: BOOT_LEFT_OUT.iter().map(|s| s.to_string()).collect(),
        }),
        standby,
        layout,
        source_root: system.host.source_root.clone(),
        boot_dir,
        exclusions,
        checksum: request.checksum,
        changed_since,
        comparison,
        edits: edits.root.into_iter().chain(edits.boot_cmdline).collect(),
        boot_command_line: edits.boot_command_line,
        boot_steps,
        warnings,
        divergence,
    })
}

fn options(target: &Path, layout: Layout, request: &SyncRequest) -> Options {
    Options {
        target: target.to_path_buf(),
        layout,
        table: request.table.unwrap_or(TableChoice::Auto),
        boot_size: crate::plan::options::DEFAULT_BOOT_SIZE,
        root_size: None,
        excludes: request.excludes.clone(),
        seed: request.seed,
        disk_signature: None,
        trial: TrialChoice::Never,
        checksum: request.checksum,
        // A standby never touches the bootloader's config.
        boot_order: crate::plan::BootOrderChoice::Show,
        handover: crate::plan::HandoverChoice::RemoveCard,
        auto_commit: false,
    }
}

/// A first sync's layout: the plan a migration to `disk` would make (with
/// every refusal it would have), of which the sync uses the table, the
/// filesystems and the exclusions. Full unless asked otherwise or the
/// running system itself starts from another disk's boot partition.
fn layout_plan(system: &System, disk: &Disk, request: &SyncRequest) -> Result<Plan, Refusal> {
    let layout = request.layout.unwrap_or_else(|| default_layout(system));
    crate::plan::plan(system, &options(&disk.path, layout, request))
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

/// The standby a layout plan will make.
fn planned_standby(disk: &Disk, plan: &Plan) -> Standby {
    let ss = u64::from(plan.disk.table.sector_size);
    let part = |role| {
        let p = plan.disk.table.partitions.iter().find(|p| p.role == role)?;
        let fs = plan
            .disk
            .filesystems
            .iter()
            .find(|f| f.partition == p.number);
        Some(StandbyPart {
            number: p.number,
            path: None,
            devno: None,
            start_bytes: p.start_sector * ss,
            size_bytes: p.size_bytes,
            fstype: fs.map(|f| f.fstype.clone()),
            partuuid: Some(p.partuuid.clone()),
            uuid: fs.map(|f| f.uuid.clone()),
            label: fs.map(|f| f.label.clone()),
        })
    };
    Standby {
        disk: crate::plan::identity(disk),
        layout: plan.layout,
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
    add(Path::new(super::record::ON_STANDBY));
    for name in [super::record::STANDBY_FILE, crate::apply::standby::PROBE] {
        let state = system.host.state_dir.join(name);
        if let Ok(relative) = state.strip_prefix(&system.host.source_root) {
            add(&Path::new("/").join(relative));
        }
    }
    exclusions
}

/// What keeps an existing standby from being synced.
fn check_existing(system: &System, standby: &Standby) -> Vec<Reason> {
    let mut reasons = Vec::new();
    let source = &system.source;
    let name = standby.root_name();
    let is = |part: &StandbyPart, devno| part.devno.is_some() && part.devno == devno;
    if is(&standby.root, source.running_root_devno) || is(&standby.root, source.root_devno) {
        reasons.push(
            Reason::new(
                "standby-is-source",
                format!("{name} is the root filesystem being copied: a standby must be another partition"),
            )
            .hint("this system may run from its standby; name the disk to sync with --to"),
        );
        return reasons;
    }
    if let Some(boot) = &standby.boot {
        if is(boot, source.boot_devno) {
            reasons.push(Reason::new(
                "standby-holds-boot",
                format!(
                    "{} is the boot partition this system starts from, not a standby's own",
                    boot.name(&standby.disk.path)
                ),
            ));
        }
    }
    let disk = system.disks.iter().find(|d| d.devno == standby.disk.devno);
    let parts = std::iter::once(&standby.root).chain(standby.boot.as_ref());
    for part in parts {
        let Some(p) = disk.and_then(|d| d.partitions.iter().find(|p| p.number == part.number))
        else {
            continue;
        };
        let part_name = part.name(&standby.disk.path);
        let mut uses: Vec<String> = p
            .mountpoints
            .iter()
            .filter(|m| !crate::apply::mount::is_stale(m))
            .map(|m| format!("mounted at {}", m.display()))
            .collect();
        if p.swap {
            uses.push("active swap".into());
        }
        uses.extend(p.holders.iter().map(|h| format!("held by {h}")));
        if !uses.is_empty() {
            reasons.push(
                Reason::new(
                    "standby-in-use",
                    format!("{part_name} is in use: {}", uses.join(", ")),
                )
                .hint("unmount it first; pimigrate never writes to a filesystem in use"),
            );
        }
    }
    if !matches!(
        standby.root.fstype.as_deref(),
        Some("ext4" | "ext3" | "ext2")
    ) {
        reasons.push(
            Reason::new(
                "standby-filesystem",
                format!(
                    "{name} holds {}, not the ext4 root filesystem a standby has",
                    standby
                        .root
                        .fstype
                        .as_deref()
                        .unwrap_or("no filesystem pimigrate knows")
                ),
            )
            .hint("lay the disk out anew: sudo pimigrate sync --to DISK --fresh (erases it)"),
        );
    }
    reasons.extend(shared_ids(system, standby));
    if let Some(used) = system.source_used_bytes {
        let usable = crate::space::ext4_usable_bytes(standby.root.size_bytes);
        if used > usable {
            reasons.push(
                Reason::new(
                    "standby-too-small",
                    format!(
                        "the system uses {}, more than the standby's root partition {name} holds ({}, of which ext4 keeps {} for itself)",
                        crate::units::binary(used),
                        crate::units::binary(standby.root.size_bytes),
                        crate::units::binary(standby.root.size_bytes - usable)
                    ),
                )
                .hint("leave out large directories with --exclude, or sync to a larger disk with --to DISK --fresh"),
            );
        }
    }
    reasons
}

/// The standby's ids must be its own: a clone carrying them makes the
/// kernel or systemd pick either disk.
fn shared_ids(system: &System, standby: &Standby) -> Vec<Reason> {
    let disks = standby::other_disks(&system.disks, &standby.disk);
    // The ids its files name (labels repeat on every card of a distribution).
    let named = standby
        .specs()
        .into_iter()
        .filter(|spec| !matches!(spec, DeviceSpec::Label(_)));
    id_uses(named, &disks)
        .into_iter()
        .filter(|u| u.devices.len() > 1)
        .map(|u| {
            Reason::new("standby-ids-shared", u.describe())
                .hint("detach the clone, or give the standby fresh ids: sudo pimigrate sync --to DISK --fresh (erases it)")
        })
        .collect()
}

/// The standby's own versions of the running system's boot files.
#[derive(Default)]
struct Edits {
    root: Vec<FileEdit>,
    boot_cmdline: Option<FileEdit>,
    boot_command_line: Option<String>,
}

/// What ROOTPART= on a standby says of itself.
const STANDBY_ROOTPART: &str = "Set by pimigrate sync: this is a standby copy; raspi-firmware writes this into cmdline.txt as root=";

/// The replica's retargeted files ([`crate::plan::replica::retarget`], the
/// planner `migrate` uses, with its refusals) placed on the standby: fstab
/// and raspi-firmware's ROOTPART on its root, and the command line that
/// starts it (on its own boot partition, or for a root-only standby the
/// line to put into the shared one).
fn standby_edits(system: &System, standby: &Standby, reasons: &mut Vec<Reason>) -> Edits {
    let mut edits = Edits::default();
    let Some(ids) = standby.ids() else {
        reasons.push(
            Reason::new(
                "standby-unreadable",
                format!(
                    "the ids of {} could not be read (its PARTUUID and filesystem UUID)",
                    standby.root_name()
                ),
            )
            .hint("run as root, so pimigrate can read the disk"),
        );
        return edits;
    };
    let Some(source) = check_source(system, reasons) else {
        return edits;
    };
    let hooks = demands(&source, standby.layout, false, reasons);
    let retargeted = match retarget(
        system,
        &source,
        &ids,
        standby.layout,
        &hooks.cmdline_ops,
        STANDBY_ROOTPART,
    ) {
        Ok(retargeted) => retargeted,
        Err(found) => {
            reasons.extend(found);
            return edits;
        }
    };
    let device = format!("the standby's root filesystem {}", standby.root_name());
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        Reason::new("source-edit", format!("{what}: {err}"))
    };
    if !retargeted.fstab.is_empty() {
        let file = PartitionPath::known("/etc/fstab");
        match file_edit(
            on_root(&file, &device),
            source.fstab_bytes,
            retargeted.fstab,
        ) {
            Ok(edit) => edits.root.push(edit),
            Err(err) => reasons.push(fail("/etc/fstab", &err)),
        }
    }
    if let Some(rootpart) = retargeted.rootpart {
        let file = PartitionPath::known(RASPI_FIRMWARE_DEFAULTS);
        match file_edit(
            on_root(&file, &device),
            &rootpart.bytes,
            rootpart.operations,
        ) {
            Ok(edit) => edits.root.push(edit),
            Err(err) => reasons.push(fail(RASPI_FIRMWARE_DEFAULTS, &err)),
        }
    }
    match standby.layout {
        Layout::Full => {
            let name = match boot_relative(&source, source.cmdline_path) {
                Ok(name) => name,
                Err(reason) => {
                    reasons.push(reason);
                    return edits;
                }
            };
            let boot = standby.boot.as_ref().map(|b| b.name(&standby.disk.path));
            match file_edit(
                EditTarget {
                    site: EditSite::TargetBoot,
                    file: &name,
                    output: &name,
                    backup: None,
                    device: format!("the standby's boot partition {}", boot.unwrap_or_default()),
                },
                source.cmdline_bytes,
                retargeted.cmdline,
            ) {
                Ok(edit) => edits.boot_cmdline = Some(edit),
                Err(err) => reasons.push(fail("cmdline.txt", &err)),
            }
        }
        Layout::RootOnly => {
            match crate::plan::edits::apply(source.cmdline_bytes, &retargeted.cmdline) {
                Ok(bytes) => {
                    edits.boot_command_line =
                        Some(String::from_utf8_lossy(&bytes).trim_end().to_string())
                }
                Err(err) => reasons.push(fail("cmdline.txt", &err)),
            }
        }
    }
    edits
}

/// A file of the standby's root, edited in place.
fn on_root<'a>(file: &'a PartitionPath, device: &str) -> EditTarget<'a> {
    EditTarget {
        site: EditSite::TargetRoot,
        file,
        output: file,
        backup: None,
        device: device.to_string(),
    }
}

/// Whether the copy may trust the source's ctimes (see
/// [`crate::copy::CopyOptions::changed_since`]): only after a complete sync
/// of this very standby, which nothing else mounted since.
fn comparison(
    record: Option<&StandbyRecord>,
    standby: &Standby,
    fresh: bool,
    checksum: bool,
    clock: Option<&ClockMark>,
) -> (Option<u64>, String) {
    let every = |why: &str| (None, format!("every entry compared: {why}"));
    if fresh {
        return (None, "a first sync: everything is copied".into());
    }
    if checksum {
        return every("--checksum reads every file on both sides");
    }
    let Some(record) = record.filter(|r| r.is_for(standby.root.partuuid.as_deref())) else {
        return every("no sync of this standby is recorded yet");
    };
    let Some(last) = record.last_complete else {
        return every("no sync of this standby completed yet");
    };
    if last > now() {
        return every("the clock is behind the last complete sync");
    }
    if let (Some(then), Some(now)) = (&record.clock, clock) {
        if then.set_back_before(now) {
            return every("the clock was set back since the last sync started");
        }
    }
    let stamp = read_stamp(standby);
    if stamp.is_none() || stamp != record.stamp {
        return every(
            "the standby was mounted since its last complete sync (or it could not be read)",
        );
    }
    (
        // The kernel's ctime clock is coarse: a margin keeps a change made
        // just as the last sync started on the side of being looked at.
        Some(last.saturating_sub(2)),
        format!(
            "entries changed since the last complete sync ({}) and those whose size, mtime, owner or mode differ",
            crate::clock::time_ago(last, now())
        ),
    )
}

/// A migration not finished, or its trial not committed: the running
/// system's disk is not settled, and the disk a sync would overwrite may be
/// the very root the trial falls back to and `rollback` returns to.
fn pending_migration(system: &System, journal: Option<&Journal>) -> Option<Reason> {
    let journal = journal?;
    let target = journal.plan.target.path.display();
    if !crate::apply::migration::landed(system, journal) {
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

/// The standby root's superblock stamp, through its node or at its offset
/// in the disk.
pub fn read_stamp(standby: &Standby) -> Option<superblock::Stamp> {
    let result = match &standby.root.path {
        Some(path) => superblock::read(path, 0),
        None => superblock::read(&standby.disk.path, standby.root.start_bytes),
    };
    result.ok().flatten()
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
    use crate::sync::record::{tests_support::sample, PartIds, SyncState};
    use crate::system::disks::Disk;

    fn pi4() -> System {
        crate::system::inspect_fixture("pi4").1
    }

    fn codes(result: Result<SyncPlan, Refusal>) -> Vec<String> {
        match result {
            Ok(plan) => panic!("planned: {:?}", plan.standby),
            Err(refusal) => refusal.reasons.iter().map(|r| r.code.to_string()).collect(),
        }
    }

    fn to(path: &str) -> SyncRequest {
        SyncRequest {
            to: Some(PathBuf::from(path)),
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
            ["standby-not-found"]
        );
        assert_eq!(
            codes(plan_sync(&system, None, None, &to("/dev/sda1"))),
            ["standby-is-partition"]
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
        // Named with --to, it is taken, with the difference said.
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
            ["standby-is-source"]
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
        .contains(&"standby-holds-boot".to_string()));
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
        assert!(stick.contains(&"standby-in-use".to_string()), "{stick:?}");
        assert!(
            stick.contains(&"standby-filesystem".to_string()),
            "{stick:?}"
        );
    }

    #[test]
    fn a_standby_too_small_for_the_system_is_refused_counting_ext4s_own_share() {
        let mut system = pi4();
        sda_as_standby(&mut system);
        let size = sda_mut(&mut system).partitions[0].size_bytes;
        // Fits the partition, not what ext4 leaves of it.
        system.source_used_bytes = Some(size - size / 100);
        assert_eq!(
            codes(plan_sync(
                &system,
                None,
                Some(&record_of("0a1b2c3d-01")),
                &SyncRequest::default()
            )),
            ["standby-too-small"]
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
        assert!(
            shared.contains(&"standby-ids-shared".to_string()),
            "{shared:?}"
        );

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
            &options(Path::new("/dev/sda"), Layout::RootOnly, &to("/dev/sda")),
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
            crate::apply::journal::Step::Partitioned,
            crate::apply::journal::Step::Formatted,
            crate::apply::journal::Step::Copied,
            crate::apply::journal::Step::TargetEdited,
            crate::apply::journal::Step::SourceBootEdited,
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
