//! Applies a sync plan: `sync`'s writes, on the replica engine `migrate`
//! uses (the layout, the root copy, the boot tree, the own files).
//!
//! Order is what keeps the standby from ever being taken for good when it
//! is not: the record says `syncing` (flushed, in the state directory and
//! then on the standby) before anything of the standby changes; the copy,
//! the boot files and the standby's own fstab, command line and ROOTPART
//! follow (the copies leave those out, so they never name the running
//! system, not even between two steps), then a flush and the offline
//! checks; only then does the record say `complete`, on the standby first
//! and in the state directory last. The running system's own boot
//! partition is never written.

use super::boot_partition::StateLock;
use super::boot_tree::{self, BootStats};
use super::copy_root::{copy_root, CopySummary, RootCopy};
use super::edit_files::{keeping_times, write_edited};
use super::executor::{check_identity, ApplyContext};
use super::journal::Step;
use super::layout::{lay_out, LayoutRecord, PartitionDevices};
use super::mount::{clean_up_stale_mounts, mount_device, Mounted};
use crate::clock::now;
use crate::plan::{EditSite, Layout};
use crate::sync::checks::{self, Standing};
use crate::sync::plan::SyncPlan;
use crate::sync::record::{
    CheckResult, ClockMark, LayoutProgress, StandbyRecord, SyncState, STANDBY_SCHEMA,
};
use crate::system::System;
use crate::verify::Check;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// How a sync ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncOutcome {
    pub record: StandbyRecord,
    pub copy: CopySummary,
    pub boot: Option<BootStats>,
    pub checks: Vec<Check>,
}

impl SyncOutcome {
    pub fn bootable(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

/// Syncs as `plan` says, with the state directory's lock held (`_lock`:
/// one pimigrate at a time).
pub fn apply(
    system: &System,
    plan: &SyncPlan,
    previous: Option<&StandbyRecord>,
    _lock: &StateLock,
    ctx: &ApplyContext,
) -> Result<SyncOutcome> {
    let host = &system.host;
    let state_dir = host.path(&host.state_dir);
    clean_up_stale_mounts()?;
    check_identity(system, &plan.standby.disk)?;
    let mut record = syncing_record(plan, previous, &state_dir, system)?;
    record
        .save(&state_dir)
        .context("marking the standby as being synced; nothing was written to it")?;
    crate::failpoint::hit("sync-marked");
    let standby = &plan.standby;
    let devices = match &plan.layout {
        Some(layout) => lay_out(
            &standby.disk,
            layout,
            &mut RecordAt {
                record: &mut record,
                dir: &state_dir,
            },
            ctx,
        )?,
        None => {
            let now = System::inspect(host).context("reading the disks again")?;
            let numbers: Vec<u32> = std::iter::once(standby.root.number)
                .chain(standby.boot.as_ref().map(|b| b.number))
                .collect();
            PartitionDevices::existing(&now, &standby.disk, &numbers)?
        }
    };
    // Counted before the mount, so a run cut at any point after it never
    // makes its own mount look like someone else's.
    record.own_mounts = record.own_mounts.saturating_add(1);
    record.save(&state_dir)?;
    let root = mount_device(devices.of(standby.root.number)?, "ext4", "standby-root")?;
    let boot = match &standby.boot {
        Some(part) => Some(mount_device(
            devices.of(part.number)?,
            "vfat",
            "standby-boot",
        )?),
        None => None,
    };
    crate::failpoint::hit("sync-mounted");
    let on_standby = own_dir(root.path(), "var/lib/pimigrate")?;
    save_on_standby(&record, &on_standby)?;
    root.sync()?;

    (ctx.step)(&match plan.layout {
        Some(_) => "copying the root filesystem to the standby".to_string(),
        None => format!(
            "bringing the standby's root up to date ({})",
            plan.comparison
        ),
    });
    let own = own_files(plan, EditSite::TargetRoot);
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    let copy = copy_root(
        &RootCopy {
            source: &host.path(&plan.source_root),
            exclusions: &plan.exclusions,
            own_files: &own,
            checksum: plan.checksum,
            changed_since: plan.changed_since.map(|s| s as i64),
            fresh: plan.layout.is_some(),
            then: "the standby is marked incomplete: it keeps what it had for these; fix them and sync again",
        },
        root.path(),
        ctx,
    )?;
    crate::failpoint::hit("sync-copied");
    let boot_stats = match (&plan.boot, &boot) {
        (Some(sync), Some(mounted)) => {
            (ctx.step)("bringing the standby's boot partition up to date");
            let mut left_out = sync.left_out.clone();
            left_out.extend(own_names(plan, EditSite::TargetBoot));
            Some(boot_tree::sync(
                &host.path(&sync.from),
                mounted.path(),
                &left_out,
                plan.checksum,
                ctx.cancel,
                &|| (ctx.progress)(0, 0),
            )?)
        }
        _ => None,
    };
    (ctx.step)("the standby's own fstab and boot settings");
    for edit in &plan.edits {
        let (from, to) = match (edit.site, &boot) {
            (EditSite::TargetBoot, Some(boot)) => (host.path(&plan.boot_dir), boot.path()),
            (EditSite::TargetBoot, None) => {
                bail!("the plan edits a boot partition the standby does not have")
            }
            _ => (host.path(&plan.source_root), root.path()),
        };
        write_edited(&from, to, edit)?;
    }
    crate::failpoint::hit("sync-edited");
    (ctx.step)("flushing the standby");
    root.sync()?;
    if let Some(boot) = &boot {
        boot.sync()?;
    }
    crate::failpoint::hit("sync-flushed");

    (ctx.step)("checking that the standby would boot");
    let mut after = System::inspect(host).context("reading the disks for the checks")?;
    // Loop devices over the standby's partitions carry its ids; they are
    // ways into the standby, not other disks.
    after.disks = crate::sync::standby::other_disks(&after.disks, &standby.disk);
    let shared_boot = host.path(&plan.boot_dir);
    let boot_dir = boot.as_ref().map(Mounted::path).unwrap_or(&shared_boot);
    let command_line = command_line(plan, boot_dir)?;
    let checks = checks::run(&Standing {
        system: &after,
        standby,
        root: root.path(),
        boot: boot_dir,
        command_line: &command_line,
    });
    record.state = SyncState::Complete;
    record.finished = Some(now());
    record.complete_at = record.finished;
    record.last_complete = Some(record.started);
    record.bootable = Some(checks.iter().all(|c| c.pass));
    record.checks = checks.iter().map(result).collect();
    record.error = None;
    record.laying_out = None;
    // Made again as the first time: the copy keeps it, but a directory
    // pimigrate makes must never change its parent's times (a sync with
    // nothing to do would then leave the standby unlike the source), nor
    // follow a link the copy put in its way.
    let on_standby = own_dir(root.path(), "var/lib/pimigrate")?;
    save_on_standby(&record, &on_standby)?;
    root.sync()?;
    crate::failpoint::hit("sync-before-complete");
    if let Some(boot) = boot {
        boot.unmount()?;
    }
    root.unmount()?;
    record.stamp = crate::sync::plan::read_stamp(standby);
    record.own_mounts = 0;
    drop(devices);
    record.save(&state_dir)?;
    Ok(SyncOutcome {
        record,
        copy,
        boot: boot_stats,
        checks,
    })
}

/// The files on the standby the plan's edits write (`site`'s), by path
/// below its root or names on its boot partition.
fn own_files(plan: &SyncPlan, site: EditSite) -> Vec<String> {
    plan.edits
        .iter()
        .filter(|e| e.site == site)
        .map(|e| e.output.to_string())
        .collect()
}

fn own_names(plan: &SyncPlan, site: EditSite) -> Vec<String> {
    plan.edits
        .iter()
        .filter(|e| e.site == site)
        .map(|e| e.output.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The standby's record as the record of a first sync's layout steps.
struct RecordAt<'a> {
    record: &'a mut StandbyRecord,
    dir: &'a Path,
}

impl LayoutRecord for RecordAt<'_> {
    fn is_done(&self, step: Step) -> bool {
        self.record
            .laying_out
            .as_ref()
            .is_some_and(|l| l.done.contains(&step))
    }

    fn mark(&mut self, step: Step) -> Result<()> {
        if let Some(layout) = &mut self.record.laying_out {
            if !layout.done.contains(&step) {
                layout.done.push(step);
            }
        }
        self.record.save(self.dir)
    }
}

/// The record a sync starts with: this standby, `syncing`, with the last
/// complete sync of the same standby carried over, and for a first sync
/// the layout's progress (an interrupted layout of the same plan goes on).
/// It starts at the source filesystem's own clock: the ctime of a probe
/// written into the state directory now, the clock the copy later compares
/// ctimes with.
fn syncing_record(
    plan: &SyncPlan,
    previous: Option<&StandbyRecord>,
    state_dir: &Path,
    system: &System,
) -> Result<StandbyRecord> {
    let standby = &plan.standby;
    let same = previous.filter(|r| r.is_for(standby.root.partuuid.as_deref()));
    let laying_out = plan.layout.as_ref().map(|layout| {
        let disk_id = layout.table.disk_id.clone();
        let done = same
            .and_then(|r| r.laying_out.as_ref())
            .filter(|l| l.disk_id == disk_id)
            .map(|l| l.done.clone())
            .unwrap_or_default();
        LayoutProgress { disk_id, done }
    });
    let fresh = plan.layout.is_some();
    Ok(StandbyRecord {
        schema: STANDBY_SCHEMA.into(),
        state: SyncState::Syncing,
        disk: standby.disk.path.clone(),
        serial: standby.disk.serial.clone(),
        model: standby.disk.model.clone(),
        layout: standby.layout,
        root: standby.root.ids(),
        boot: standby.boot.as_ref().map(|b| b.ids()),
        started: probe_time(state_dir)?,
        finished: None,
        last_complete: same.and_then(|r| r.last_complete).filter(|_| !fresh),
        stamp: same.and_then(|r| r.stamp).filter(|_| !fresh),
        complete_at: same.and_then(|r| r.complete_at).filter(|_| !fresh),
        own_mounts: same.map(|r| r.own_mounts).filter(|_| !fresh).unwrap_or(0),
        clock: ClockMark::now(&system.host.proc("sys/kernel/random/boot_id")),
        bootable: None,
        checks: Vec::new(),
        boot_steps: plan.boot_steps.clone(),
        error: None,
        laying_out,
    })
}

/// The name of the probe whose ctime says when a sync started.
pub const PROBE: &str = "sync-started";

/// Writes the probe into `state_dir` and returns its ctime.
fn probe_time(state_dir: &Path) -> Result<u64> {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let path = state_dir.join(PROBE);
    let mut file = std::fs::File::create(&path)
        .with_context(|| format!("writing {} (when this sync started)", path.display()))?;
    writeln!(file, "{}", std::process::id())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    let ctime = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?
        .ctime();
    Ok(ctime.max(0) as u64)
}

fn result(check: &Check) -> CheckResult {
    CheckResult {
        code: check.code.to_string(),
        pass: check.pass,
        message: check.message.clone(),
        hint: check.hint.clone(),
    }
}

/// `relative` below the standby's root as a directory of its own: a
/// symlink or file in its way (a standby changed behind the sync's back)
/// is removed, never followed, and directories pimigrate creates leave
/// their parent's times as the copy made them.
fn own_dir(root: &Path, relative: &str) -> Result<std::path::PathBuf> {
    let mut dir = root.to_path_buf();
    for name in relative.split('/') {
        let parent = dir.clone();
        dir.push(name);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => std::fs::remove_file(&dir)
                .with_context(|| format!("removing {} from the standby's way", dir.display()))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("reading {}", dir.display())),
        }
        keeping_times(&parent, || {
            std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))
        })?;
    }
    Ok(dir)
}

/// Writes the standby's own record into its directory on the standby.
fn save_on_standby(record: &StandbyRecord, dir: &Path) -> Result<()> {
    record.save(dir)
}

/// The command line that starts the standby: its own boot partition's, or
/// for a root-only standby the line the plan worked out.
fn command_line(plan: &SyncPlan, boot_dir: &Path) -> Result<Vec<u8>> {
    if plan.standby.layout == Layout::RootOnly {
        if let Some(line) = &plan.boot_command_line {
            return Ok(line.clone().into_bytes());
        }
    }
    let edit = plan
        .edits
        .iter()
        .find(|e| e.site == EditSite::TargetBoot)
        .context("the plan has no command line for the standby")?;
    let path = edit.output.under(boot_dir);
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}
