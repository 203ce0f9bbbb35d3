//! Applies a sync plan: `sync`'s writes, on the replica engine `migrate`
//! uses ([`super::layout::lay_out`] for a first sync, then
//! [`super::replica::run`]: the root copy, the boot tree, the own files,
//! the flush), around it what only a sync does: the standby's record and
//! the offline checks.
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

use super::boot_tree::BootStats;
use super::copy_root::CopySummary;
use super::edit_files::keeping_times;
use super::executor::{check_identity, ApplyContext};
use super::layout::{lay_out, PartitionDevices};
use super::mount::{clean_up_stale_mounts, mount_to_look, Mounted};
use super::replica::{self, Points, Record, Replica, ReplicaSpec, Words};
use super::state::StateLock;
use crate::check::Check;
use crate::clock::Moment;
use crate::failpoint;
use crate::plan::replica::own_ids::without_views;
use crate::plan::{EditSite, Layout};
use crate::state::journal::Step;
use crate::state::standby::{
    CheckResult, ClockMark, LayoutProgress, StandbyRecord, SyncState, PROBE_FILE, STANDBY_SCHEMA,
};
use crate::sync::checks::{self, Standing};
use crate::sync::compare::read_stamp;
use crate::sync::divergence::changed_since;
use crate::sync::plan::SyncPlan;
use crate::sync::standby::Standby;
use crate::system::System;
use anyhow::{Context, Result};
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

/// Syncs as `plan` says, with the state directory's lock held: one
/// pimigrate at a time, and the permission to write the standby's record.
pub fn apply(
    system: &System,
    plan: &SyncPlan,
    previous: Option<&StandbyRecord>,
    lock: &StateLock,
    ctx: &ApplyContext,
) -> Result<SyncOutcome> {
    let host = &system.host;
    let state_dir = host.path(&host.state_dir);
    clean_up_stale_mounts()?;
    check_identity(system, &plan.standby.disk)?;
    let mut record = syncing_record(plan, previous, &state_dir, system)?;
    lock.save_standby(&record, &state_dir)
        .context("marking the standby as being synced; nothing was written to it")?;
    crate::failpoint::hit("sync-marked")?;
    let mut at = RecordAt {
        lock,
        record: &mut record,
        dir: &state_dir,
    };
    let devices = standby_devices(system, plan, &mut at, ctx)?;
    // Counted before the mount, so a run cut at any point after it never
    // makes its own mount look like someone else's.
    at.record.own_mounts = at.record.own_mounts.saturating_add(1);
    lock.save_standby(at.record, &state_dir)?;
    let (source_root, source_boot) = (host.path(&plan.source_root), host.path(&plan.boot_dir));
    let copy_words = match plan.layout {
        Some(_) => "copying the root filesystem to the standby".to_string(),
        None => format!(
            "bringing the standby's root up to date ({})",
            plan.comparison
        ),
    };
    let left_out = plan
        .boot
        .as_ref()
        .map(|b| b.left_out.clone())
        .unwrap_or_default();
    let spec = replica_spec(plan, &source_root, &source_boot, &copy_words, &left_out);
    let replica = replica::run(&devices, &spec, &mut at, ctx)?;
    let Replica {
        root,
        boot,
        copy,
        boot_files,
    } = replica;
    let checks = offline_checks(system, plan, &root, boot.as_ref(), ctx)?;
    complete(lock, &mut record, plan, root, boot, &checks)?;
    drop(devices);
    lock.save_standby(&record, &state_dir)?;
    Ok(SyncOutcome {
        record,
        copy: copy.unwrap_or_default(),
        boot: boot_files,
        checks,
    })
}

/// A sync's replica: the copy onto the standby (in full the first time,
/// afterwards what changed), its boot tree without what a standby never
/// takes, its own files, and a step of its own for the flush.
fn replica_spec<'a>(
    plan: &'a SyncPlan,
    source_root: &'a Path,
    source_boot: &'a Path,
    copy_words: &'a str,
    left_out: &'a [String],
) -> ReplicaSpec<'a> {
    ReplicaSpec {
        root: plan.standby.root.number,
        boot: plan.standby.boot.as_ref().map(|b| b.number),
        mount_names: ["standby-root", "standby-boot"],
        source_root,
        source_boot,
        exclusions: &plan.exclusions,
        checksum: plan.checksum,
        changed_since: plan.changed_since.map(|s| s as i64),
        fresh: plan.layout.is_some(),
        boot_left_out: left_out,
        edits: &plan.edits,
        with_edits: None,
        words: Words {
            copy: copy_words,
            boot: "bringing the standby's boot partition up to date",
            edits: "the standby's own fstab and boot settings",
            flush: Some("flushing the standby"),
        },
        points: Points {
            mounted: failpoint::point("sync-mounted"),
            copied: failpoint::point("sync-copied"),
            edited: Some(failpoint::point("sync-edited")),
            flushed: failpoint::point("sync-flushed"),
        },
        then: "the standby keeps what it had for these; fix them first",
    }
}

/// The standby's partitions: a first sync's laid out anew (each step in
/// the record), or the existing ones as the disks are now.
fn standby_devices(
    system: &System,
    plan: &SyncPlan,
    record: &mut RecordAt,
    ctx: &ApplyContext,
) -> Result<PartitionDevices> {
    let standby = &plan.standby;
    if let Some(layout) = &plan.layout {
        return lay_out(&standby.disk, layout, record, ctx);
    }
    let now = System::inspect(&system.host).context("reading the disks again")?;
    let numbers: Vec<u32> = std::iter::once(standby.root.number)
        .chain(standby.boot.as_ref().map(|b| b.number))
        .collect();
    PartitionDevices::existing(&now, &standby.disk, &numbers)
}

/// The checks a sync ends with, on the standby as it is mounted.
fn offline_checks(
    system: &System,
    plan: &SyncPlan,
    root: &Mounted,
    boot: Option<&Mounted>,
    ctx: &ApplyContext,
) -> Result<Vec<Check>> {
    (ctx.step)("checking that the standby would boot");
    let mut after = System::inspect(&system.host).context("reading the disks for the checks")?;
    // Loop devices over the standby's partitions carry its ids; they are
    // ways into the standby, not other disks.
    after.disks = without_views(&after.disks, &plan.standby.disk);
    let shared_boot = system.host.path(&plan.boot_dir);
    let boot_dir = boot.map(Mounted::path).unwrap_or(&shared_boot);
    let command_line = command_line(plan, boot_dir)?;
    Ok(checks::run(&Standing {
        system: &after,
        standby: &plan.standby,
        root: root.path(),
        boot: boot_dir,
        command_line: &command_line,
    }))
}

/// The record says `complete`, with the checks: on the standby first,
/// flushed, then the standby is let go and the state directory's record
/// (written by the caller) learns its superblock's stamp.
fn complete(
    lock: &StateLock,
    record: &mut StandbyRecord,
    plan: &SyncPlan,
    root: Mounted,
    boot: Option<Mounted>,
    checks: &[Check],
) -> Result<()> {
    // The end, to the nanosecond: taken after the replica flushed its
    // last write to the standby (and the checks only read it), so every
    // ctime the sync left there is no later, and a change made after the
    // standby is let go below is later. The record written next is in
    // the directory the look leaves out.
    let end = Moment::now();
    record.state = SyncState::Complete;
    record.finished = Some(end.secs.max(0) as u64);
    record.complete_at = record.finished;
    record.complete_at_nanos = Some(end.nanos);
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
    lock.save_standby(record, &on_standby)?;
    root.sync()?;
    crate::failpoint::hit("sync-before-complete")?;
    if let Some(boot) = boot {
        boot.unmount()?;
    }
    root.unmount()?;
    record.stamp = read_stamp(&plan.standby);
    record.own_mounts = 0;
    Ok(())
}

/// The standby's record as the record of the replica's steps: a first
/// sync's layout steps are kept (an interrupted layout of the same plan
/// goes on); the copy, the boot files and the edits are made anew by every
/// sync. It is written onto the standby too, once its root is mounted.
struct RecordAt<'a> {
    lock: &'a StateLock,
    record: &'a mut StandbyRecord,
    dir: &'a Path,
}

impl Record for RecordAt<'_> {
    fn is_done(&self, step: Step) -> bool {
        self.record
            .laying_out
            .as_ref()
            .is_some_and(|l| l.done.contains(&step))
    }

    fn mark(&mut self, step: Step) -> Result<()> {
        if !matches!(step, Step::Partitioned | Step::Formatted) {
            return Ok(());
        }
        if let Some(layout) = &mut self.record.laying_out {
            if !layout.done.contains(&step) {
                layout.done.push(step);
            }
        }
        self.lock.save_standby(self.record, self.dir)
    }

    fn mounted(&mut self, root: &Path) -> Result<()> {
        let on_standby = own_dir(root, "var/lib/pimigrate")?;
        self.lock.save_standby(self.record, &on_standby)?;
        super::atomic::sync_filesystem(root)
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
        complete_at_nanos: same.and_then(|r| r.complete_at_nanos).filter(|_| !fresh),
        own_mounts: same.map(|r| r.own_mounts).filter(|_| !fresh).unwrap_or(0),
        clock: ClockMark::now(&system.host.proc(crate::clock::BOOT_ID)),
        bootable: None,
        checks: Vec::new(),
        boot_steps: plan.boot_steps.clone(),
        error: None,
        laying_out,
    })
}

/// Writes the probe into `state_dir` and returns its ctime.
fn probe_time(state_dir: &Path) -> Result<u64> {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let path = state_dir.join(PROBE_FILE);
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

/// The look [`crate::sync::divergence::Look`] asks for: the standby's root
/// mounted read-only without replaying its journal (not a byte of it
/// changes), the entries changed after `since` counted, and unmounted.
pub fn look(system: &System, standby: &Standby, since: Moment) -> Result<(u64, Vec<String>)> {
    let devices = PartitionDevices::existing(system, &standby.disk, &[standby.root.number])?;
    let mounted = mount_to_look(devices.of(standby.root.number)?, "standby-look")?;
    let found = changed_since(mounted.path(), since);
    mounted.unmount()?;
    Ok(found)
}
