//! What a sync will do, decided before anything is written: the standby,
//! a first sync's layout (a migration's table and filesystems), what the
//! copy leaves out and how it compares, the standby's own fstab and
//! command line, and every refusal with what to do. `sync --dry-run` shows
//! it; `sync` shows the same value, asks, and hands it to [`super::apply`].

use super::record::StandbyRecord;
use super::standby::{self, Found, Standby, StandbyPart};
use super::superblock;
use crate::apply::journal::{now, Journal};
use crate::bootcfg::firstboot::{first_boot_hooks, HookAction};
use crate::bootcfg::{Cmdline, DeviceSpec, Fstab};
use crate::plan::edits::{file_edit, new_spec, EditTarget};
use crate::plan::regenerated::{RASPI_FIRMWARE_DEFAULTS, ROOTPART};
use crate::plan::{
    EditOperation, EditSite, FileEdit, Layout, Options, PartitionPath, PartitionRole, Plan, Reason,
    Refusal, TableChoice, TrialChoice,
};
use crate::system::disks::Disk;
use crate::system::source::resolve;
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
    /// The standby's command line: the running one with its own root.
    pub cmdline: FileEdit,
}

#[derive(Debug, Clone, Serialize)]
pub struct SyncPlan {
    pub standby: Standby,
    /// A first sync: the table and filesystems written before the copy;
    /// everything on the disk is erased.
    pub layout: Option<Plan>,
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
    /// The standby root's own files: fstab, raspi-firmware's ROOTPART.
    pub root_edits: Vec<FileEdit>,
    pub boot: Option<BootSync>,
    /// A root-only standby: the command line that starts it from the
    /// shared boot partition.
    pub boot_command_line: Option<String>,
    /// How to boot the standby, in order.
    pub boot_steps: Vec<String>,
    pub warnings: Vec<String>,
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
    let (standby, layout, exclusions) = match found {
        Found::Blank(disk) => {
            let plan = layout_plan(system, disk, request)?;
            let standby = planned_standby(disk, &plan);
            let exclusions = with_records(system, plan.copy.exclusions.clone());
            (standby, Some(plan), exclusions)
        }
        Found::Existing(standby) => {
            let standby = *standby;
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
    let (changed_since, comparison) =
        comparison(record, &standby, layout.is_some(), request.checksum);
    let boot_steps = boot_steps(&standby, journal, edits.boot_command_line.as_deref());
    Ok(SyncPlan {
        boot: edits.boot_cmdline.map(|cmdline| BootSync {
            from: boot_dir.clone(),
            left_out: BOOT_LEFT_OUT.iter().map(|s| s.to_string()).collect(),
            cmdline,
        }),
        standby,
        layout,
        source_root: system.host.source_root.clone(),
        boot_dir,
        exclusions,
        checksum: request.checksum,
        changed_since,
        comparison,
        root_edits: edits.root,
        boot_command_line: edits.boot_command_line,
        boot_steps,
        warnings: Vec::new(),
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
    let ss = u64::from(plan.table.sector_size);
    let part = |role| {
        let p = plan.table.partitions.iter().find(|p| p.role == role)?;
        let fs = plan.filesystems.iter().find(|f| f.partition == p.number);
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
    let state = system.host.state_dir.join(super::record::STANDBY_FILE);
    if let Ok(relative) = state.strip_prefix(&system.host.source_root) {
        add(&Path::new("/").join(relative));
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
        if used > standby.root.size_bytes {
            reasons.push(
                Reason::new(
                    "standby-too-small",
                    format!(
                        "the system uses {}, more than the standby's root partition {name} holds ({})",
                        crate::units::binary(used),
                        crate::units::binary(standby.root.size_bytes)
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
    let mut reasons = Vec::new();
    let disks = standby::other_disks(&system.disks, &standby.disk);
    let parts = std::iter::once(&standby.root).chain(standby.boot.as_ref());
    for part in parts {
        let specs = [
            part.partuuid.clone().map(DeviceSpec::PartUuid),
            part.uuid.clone().map(DeviceSpec::Uuid),
        ];
        for spec in specs.into_iter().flatten() {
            let names = resolve(&spec, &disks);
            if names.len() > 1 {
                reasons.push(
                    Reason::new(
                        "standby-ids-shared",
                        format!("{spec} of the standby also names {}", names.join(", ")),
                    )
                    .hint("detach the clone, or give the standby fresh ids: sudo pimigrate sync --to DISK --fresh (erases it)"),
                );
            }
        }
    }
    reasons
}

/// The standby's own versions of the running system's boot files.
#[derive(Default)]
struct Edits {
    root: Vec<FileEdit>,
    boot_cmdline: Option<FileEdit>,
    boot_command_line: Option<String>,
}

/// fstab with the standby's own partitions, raspi-firmware's ROOTPART, and
/// the command line that starts the standby (on its own boot partition, or
/// for a root-only standby the line to put into the shared one).
fn standby_edits(system: &System, standby: &Standby, reasons: &mut Vec<Reason>) -> Edits {
    let mut edits = Edits::default();
    let root_ids = (
        standby.root.partuuid.clone().unwrap_or_default(),
        standby.root.uuid.clone().unwrap_or_default(),
    );
    if root_ids.0.is_empty() || root_ids.1.is_empty() {
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
    }
    let root_for = |old: &DeviceSpec| new_spec(old, &root_ids.0, &root_ids.1);
    let device = format!("the standby's root filesystem {}", standby.root_name());
    let fstab_file = match &system.source.fstab {
        Ok(file) => file,
        Err(err) => {
            reasons.push(Reason::new("source-fstab", err.to_string()));
            return edits;
        }
    };
    let fstab = match &fstab_file.parsed {
        Ok(fstab) => fstab,
        Err(err) => {
            reasons.push(Reason::new("source-fstab", err.to_string()).hint(
                "fix /etc/fstab first; pimigrate edits the standby's copy of it and will not guess",
            ));
            return edits;
        }
    };
    let fstab_ops = fstab_ops(fstab, standby, &root_for);
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        Reason::new("source-edit", format!("{what}: {err}"))
    };
    if !fstab_ops.is_empty() {
        let file = PartitionPath::known("/etc/fstab");
        match file_edit(
            EditTarget {
                site: EditSite::TargetRoot,
                file: &file,
                output: &file,
                backup: None,
                device: device.clone(),
            },
            &fstab_file.bytes,
            fstab_ops,
        ) {
            Ok(edit) => edits.root.push(edit),
            Err(err) => reasons.push(fail("/etc/fstab", &err)),
        }
    }
    if let Some(edit) = rootpart_edit(system, &root_for, &device, reasons) {
        edits.root.push(edit);
    }
    let cmdline_file = match &system.source.cmdline {
        Ok(file) => file,
        Err(err) => {
            reasons.push(Reason::new("source-cmdline", err.to_string()));
            return edits;
        }
    };
    let cmdline = match &cmdline_file.parsed {
        Ok(cmdline) => cmdline,
        Err(err) => {
            reasons.push(Reason::new("source-cmdline", err.to_string()));
            return edits;
        }
    };
    let ops = match cmdline_ops(cmdline, &root_for) {
        Ok(ops) => ops,
        Err(reason) => {
            reasons.push(reason);
            return edits;
        }
    };
    match standby.layout {
        Layout::Full => {
            let name = cmdline_file
                .path
                .strip_prefix(system.source.boot_dir.as_deref().unwrap_or(Path::new("/")))
                .ok()
                .and_then(|p| PartitionPath::new(p).ok())
                .unwrap_or_else(|| PartitionPath::known("/cmdline.txt"));
            let boot = standby.boot.as_ref().map(|b| b.name(&standby.disk.path));
            match file_edit(
                EditTarget {
                    site: EditSite::TargetBoot,
                    file: &name,
                    output: &name,
                    backup: None,
                    device: format!("the standby's boot partition {}", boot.unwrap_or_default()),
                },
                &cmdline_file.bytes,
                ops,
            ) {
                Ok(edit) => edits.boot_cmdline = Some(edit),
                Err(err) => reasons.push(fail("cmdline.txt", &err)),
            }
        }
        Layout::RootOnly => match crate::plan::edits::apply(&cmdline_file.bytes, &ops) {
            Ok(bytes) => {
                edits.boot_command_line =
                    Some(String::from_utf8_lossy(&bytes).trim_end().to_string())
            }
            Err(err) => reasons.push(fail("cmdline.txt", &err)),
        },
    }
    edits
}

/// `/` names the standby's root; a full standby's boot line its own boot
/// partition (a root-only standby shares the running system's, whose line
/// stays as it is).
fn fstab_ops(
    fstab: &Fstab,
    standby: &Standby,
    root_for: &dyn Fn(&DeviceSpec) -> DeviceSpec,
) -> Vec<EditOperation> {
    let mut ops = Vec::new();
    if let Ok(Ok(old)) = fstab.root().map(|e| e.device_spec()) {
        ops.push(EditOperation::FstabSetSpec {
            mountpoint: "/".into(),
            spec: root_for(&old),
        });
    }
    if let (Some(entry), Some(boot)) = (fstab.boot(), &standby.boot) {
        if let (Ok(old), Some(partuuid), Some(uuid)) =
            (entry.device_spec(), &boot.partuuid, &boot.uuid)
        {
            ops.push(EditOperation::FstabSetSpec {
                mountpoint: entry.mountpoint.clone(),
                spec: new_spec(&old, partuuid, uuid),
            });
        }
    }
    ops
}

/// root= set to the standby's root, `rootwait` if missing, and the
/// first-boot hooks migrate leaves out left out here too.
fn cmdline_ops(
    cmdline: &Cmdline,
    root_for: &dyn Fn(&DeviceSpec) -> DeviceSpec,
) -> Result<Vec<EditOperation>, Reason> {
    let old = cmdline
        .root()
        .map_err(|e| Reason::new("source-cmdline", e.to_string()))?;
    let mut ops = vec![EditOperation::CmdlineSetRoot {
        spec: root_for(&old),
    }];
    if !cmdline.has("rootwait") {
        ops.push(EditOperation::CmdlineAdd {
            arg: "rootwait".into(),
        });
    }
    for hook in first_boot_hooks(cmdline) {
        match hook.action {
            HookAction::LeaveOut => ops.push(EditOperation::CmdlineRemove { arg: hook.arg }),
            HookAction::BootOnceFirst => {
                return Err(Reason::new(
                    "first-boot-pending",
                    format!(
                    "the command line has `{}`: this system has not finished its first boot ({})",
                    hook.arg, hook.what
                ),
                )
                .hint("let the first boot finish (it reboots by itself), then sync"))
            }
        }
    }
    Ok(ops)
}

/// raspi-firmware writes cmdline.txt from ROOTPART on every kernel update:
/// on the standby it names the standby's root.
fn rootpart_edit(
    system: &System,
    root_for: &dyn Fn(&DeviceSpec) -> DeviceSpec,
    device: &str,
    reasons: &mut Vec<Reason>,
) -> Option<FileEdit> {
    let view = system
        .source
        .root_dir
        .join(RASPI_FIRMWARE_DEFAULTS.trim_start_matches('/'));
    let bytes = std::fs::read(system.host.path(&view)).ok()?;
    let old = system
        .source
        .cmdline
        .as_ref()
        .ok()
        .and_then(|c| c.ok())
        .and_then(|c| c.root().ok())
        .unwrap_or(DeviceSpec::PartUuid(String::new()));
    let file = PartitionPath::known(RASPI_FIRMWARE_DEFAULTS);
    file_edit(
        EditTarget {
            site: EditSite::TargetRoot,
            file: &file,
            output: &file,
            backup: None,
            device: device.to_string(),
        },
        &bytes,
        vec![EditOperation::DefaultsSet {
            key: ROOTPART.into(),
            value: root_for(&old).to_string(),
            comment: "Set by pimigrate sync: this is a standby copy; raspi-firmware writes this into cmdline.txt as root=".into(),
        }],
    )
    .map_err(|err| {
        reasons.push(Reason::new(
            "source-raspi-firmware",
            format!("{RASPI_FIRMWARE_DEFAULTS}: {err}"),
        ))
    })
    .ok()
}

/// Whether the copy may trust the source's ctimes (see
/// [`crate::copy::CopyOptions::changed_since`]): only after a complete sync
/// of this very standby, which nothing else mounted since.
fn comparison(
    record: Option<&StandbyRecord>,
    standby: &Standby,
    fresh: bool,
    checksum: bool,
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
    let stamp = read_stamp(standby);
    if stamp.is_none() || stamp != record.stamp {
        return every(
            "the standby was mounted elsewhere since its last complete sync (or it could not be read)",
        );
    }
    (
        // The kernel's ctime clock is coarse: a margin keeps a change made
        // just as the last sync started on the side of being looked at.
        Some(last.saturating_sub(2)),
        format!(
            "entries changed since the last complete sync ({}) and those whose size, mtime, owner or mode differ",
            super::render::time_ago(last, now())
        ),
    )
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
