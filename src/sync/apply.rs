//! Applies a sync plan: the only code of `pimigrate sync` that writes.
//!
//! Order is what keeps the standby from ever being taken for good when it
//! is not: the record says `syncing` (flushed, in the state directory and
//! then on the standby) before anything of the standby changes; the copy,
//! the boot files, the standby's own fstab and command line follow, then a
//! flush and the offline checks; only then does the record say `complete`,
//! on the standby first and in the state directory last. The running
//! system's own boot partition is never written.

use super::boot_files::{self, BootStats};
use super::checks::{self, Standing};
use super::plan::SyncPlan;
use super::record::{CheckResult, StandbyRecord, SyncState, STANDBY_SCHEMA};
use crate::apply::atomic;
use crate::apply::boot_partition::StateLock;
use crate::apply::executor::{check_identity, partition_and_format, ApplyContext};
use crate::apply::journal::Journal;
use crate::clock::now;
use crate::apply::loopparts::PartitionLoops;
use crate::apply::mount::{bind_read_only, clean_up_stale_mounts, mount_device, Mounted};
use crate::copy::{copy_tree, second_pass, CopyOptions, CopyStats};
use crate::plan::{edits, FileEdit, Layout, Plan};
use crate::system::disks::Transport;
use crate::system::System;
use crate::verify::Check;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// What the sync tells the person about, and how it learns of Ctrl-C.
pub struct SyncContext<'a> {
    pub cancel: &'a AtomicBool,
    /// A new step begins.
    pub step: &'a dyn Fn(&str),
    /// The copy's progress: bytes and entries so far.
    pub progress: &'a dyn Fn(u64, u64),
}

/// How a sync ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncOutcome {
    pub record: StandbyRecord,
    pub copy: CopySummary,
    pub boot: Option<BootStats>,
    pub checks: Vec<Check>,
}

/// What the copy of the root did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CopySummary {
    /// Regular files whose data was written.
    pub files: u64,
    pub bytes: u64,
    /// Entries looked at in all.
    pub entries: u64,
    /// Entries found as they were.
    pub unchanged: u64,
    /// Entries removed because the running system no longer has them.
    pub deleted: u64,
    /// How long the copy took (both passes of a first sync).
    pub seconds: f64,
}

impl CopySummary {
    /// The passes of one copy, added up.
    fn of(passes: &[&CopyStats], seconds: f64) -> CopySummary {
        let sum = |f: fn(&CopyStats) -> u64| passes.iter().map(|s| f(s)).sum();
        CopySummary {
            files: sum(|s| s.files),
            bytes: sum(|s| s.bytes),
            // The second pass looks at every entry again.
            entries: passes.last().map(|s| s.entries()).unwrap_or(0),
            unchanged: passes.last().map(|s| s.unchanged).unwrap_or(0),
            deleted: sum(|s| s.deleted),
            seconds,
        }
    }
}

impl SyncOutcome {
    pub fn bootable(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

/// How many failed entries an error names.
const ERRORS_SHOWN: usize = 10;

/// The directory of a first sync's layout journal, in the state directory.
pub const LAYOUT_DIR: &str = "standby-layout";

pub fn apply(
    system: &System,
    plan: &SyncPlan,
    previous: Option<&StandbyRecord>,
    ctx: &SyncContext,
) -> Result<SyncOutcome> {
    let host = &system.host;
    let state_dir = host.path(&host.state_dir);
    let _lock = StateLock::acquire(&state_dir)?;
    clean_up_stale_mounts()?;
    check_identity(system, &plan.standby.disk)?;
    let mut record = syncing_record(plan, previous);
    record
        .save(&state_dir)
        .context("marking the standby as being synced; nothing was written to it")?;
    crate::failpoint::hit("sync-marked");
    if let Some(layout) = &plan.layout {
        lay_out(system, layout, &state_dir, ctx)?;
    }
    let now_system = System::inspect(host).context("reading the disks again")?;
    let devices = StandbyDevices::attach(&now_system, plan)?;
    let root = mount_device(&devices.root, "ext4", "standby-root")?;
    let boot = match &devices.boot {
        Some(device) => Some(mount_device(device, "vfat", "standby-boot")?),
        None => None,
    };
    let on_standby = root.path().join("var/lib/pimigrate");
    save_on_standby(&record, &on_standby)?;
    root.sync()?;

    let copy = copy_root(host, plan, root.path(), ctx)?;
    let boot_stats = match (&plan.boot, &boot) {
        (Some(sync), Some(mounted)) => {
            (ctx.step)("bringing the standby's boot partition up to date");
            let from = host.path(&sync.from);
            let stats = boot_files::sync(
                &from,
                mounted.path(),
                &sync.left_out,
                plan.checksum,
                ctx.cancel,
                &|| (ctx.progress)(0, 0),
            )?;
            edit_file(&from, mounted.path(), &sync.cmdline)?;
            Some(stats)
        }
        _ => None,
    };
    (ctx.step)("the standby's own fstab and boot settings");
    for edit in &plan.root_edits {
        edit_file(root.path(), root.path(), edit)?;
    }
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
    after.disks = super::standby::other_disks(&after.disks, &plan.standby.disk);
    let shared_boot = host.path(&plan.boot_dir);
    let boot_dir = boot.as_ref().map(Mounted::path).unwrap_or(&shared_boot);
    let command_line = command_line(plan, boot_dir)?;
    let checks = checks::run(&Standing {
        system: &after,
        standby: &plan.standby,
        root: root.path(),
        boot: boot_dir,
        command_line: &command_line,
    });
    record.state = SyncState::Complete;
    record.finished = Some(now());
    record.last_complete = Some(record.started);
    record.bootable = Some(checks.iter().all(|c| c.pass));
    record.checks = checks.iter().map(result).collect();
    record.error = None;
    save_on_standby(&record, &on_standby)?;
    root.sync()?;
    crate::failpoint::hit("sync-before-complete");
    if let Some(boot) = boot {
        boot.unmount()?;
    }
    root.unmount()?;
    record.stamp = devices.stamp();
    drop(devices);
    record.save(&state_dir)?;
    Ok(SyncOutcome {
        record,
        copy,
        boot: boot_stats,
        checks,
    })
}

/// The record a sync starts with: this standby, `syncing`, with the last
/// complete sync of the same standby carried over.
fn syncing_record(plan: &SyncPlan, previous: Option<&StandbyRecord>) -> StandbyRecord {
    let standby = &plan.standby;
    let same = previous.filter(|r| r.is_for(standby.root.partuuid.as_deref()));
    StandbyRecord {
        schema: STANDBY_SCHEMA.into(),
        state: SyncState::Syncing,
        disk: standby.disk.path.clone(),
        serial: standby.disk.serial.clone(),
        model: standby.disk.model.clone(),
        layout: standby.layout,
        root: standby.root.ids(),
        boot: standby.boot.as_ref().map(|b| b.ids()),
        started: now(),
        finished: None,
        last_complete: same.and_then(|r| r.last_complete),
        stamp: same.and_then(|r| r.stamp),
        bootable: None,
        checks: Vec::new(),
        boot_steps: plan.boot_steps.clone(),
        error: None,
    }
}

fn result(check: &Check) -> CheckResult {
    CheckResult {
        code: check.code.to_string(),
        pass: check.pass,
        message: check.message.clone(),
        hint: check.hint.clone(),
    }
}

/// A first sync: the migration's table and filesystems, journaled in the
/// state directory's `standby-layout` so an interrupted layout is finished
/// (or, with a new plan, made again) rather than half trusted.
fn lay_out(system: &System, layout: &Plan, state_dir: &Path, ctx: &SyncContext) -> Result<()> {
    let dir = state_dir.join(LAYOUT_DIR);
    let mut journal = match Journal::load(&dir)? {
        Some(journal) if journal.plan.disk.table.disk_id == layout.disk.table.disk_id => journal,
        _ => Journal::new(
            layout.clone(),
            system.host.source_root.clone(),
            system.source.boot_dir.clone().unwrap_or_default(),
        ),
    };
    journal.save(&dir)?;
    let apply = ApplyContext {
        cancel: ctx.cancel,
        step: ctx.step,
        copy_progress: ctx.progress,
        log: None,
    };
    drop(partition_and_format(layout, &mut journal, &dir, &apply)?);
    Ok(())
}

/// The standby's partitions as devices: the kernel's nodes, or for a loop
/// disk without partition support a loop device over each.
struct StandbyDevices {
    root: PathBuf,
    boot: Option<PathBuf>,
    /// The disk and the root's offset in it, for the superblock stamp.
    disk: PathBuf,
    root_offset: u64,
    _loops: Option<PartitionLoops>,
}

impl StandbyDevices {
    fn attach(system: &System, plan: &SyncPlan) -> Result<StandbyDevices> {
        let standby = &plan.standby;
        let disk = system
            .disks
            .iter()
            .find(|d| d.devno == standby.disk.devno)
            .with_context(|| format!("{} is gone", standby.disk.path.display()))?;
        let find = |number: u32| {
            disk.partitions
                .iter()
                .find(|p| p.number == number)
                .with_context(|| {
                    format!("{} has no partition {number}", standby.disk.path.display())
                })
        };
        let root = find(standby.root.number)?;
        let boot = standby.boot.as_ref().map(|b| find(b.number)).transpose()?;
        let parts: Vec<_> = std::iter::once(root).chain(boot).collect();
        let (devices, loops) = if let Some(paths) = parts
            .iter()
            .map(|p| p.path.clone())
            .collect::<Option<Vec<_>>>()
        {
            (paths, None)
        } else if disk.transport == Transport::Virtual {
            let ranges: Vec<(u64, u64)> = parts
                .iter()
                .map(|p| (p.start_bytes, p.size_bytes))
                .collect();
            let loops = PartitionLoops::attach(&disk.path, &ranges)?;
            (loops.devices().to_vec(), Some(loops))
        } else {
            bail!(
                "the kernel shows no device for the partitions of {}",
                disk.path.display()
            );
        };
        Ok(StandbyDevices {
            root: devices[0].clone(),
            boot: devices.get(1).cloned(),
            disk: disk.path.clone(),
            root_offset: root.start_bytes,
            _loops: loops,
        })
    }

    fn stamp(&self) -> Option<super::superblock::Stamp> {
        super::superblock::read(&self.disk, self.root_offset)
            .ok()
            .flatten()
    }
}

/// The running root, through a read-only bind mount, onto the standby's:
/// all of it the first time, what changed afterwards.
fn copy_root(
    host: &crate::host::Host,
    plan: &SyncPlan,
    target: &Path,
    ctx: &SyncContext,
) -> Result<CopySummary> {
    let source = bind_read_only(&host.path(&plan.source_root), "standby-source")?;
    let options = CopyOptions {
        exclusions: plan.exclusions.clone(),
        checksum: plan.checksum,
        changed_since: plan.changed_since.map(|s| s as i64),
        ..CopyOptions::default()
    };
    let progress = |stats: &CopyStats| (ctx.progress)(stats.bytes, stats.entries());
    let started = std::time::Instant::now();
    let first = match plan.layout {
        Some(_) => {
            (ctx.step)("copying the root filesystem to the standby");
            let first = copy_tree(source.path(), target, &options, ctx.cancel, &progress)?;
            (ctx.step)("second pass: files that changed during the copy");
            Some(first)
        }
        None => {
            (ctx.step)(&format!(
                "bringing the standby's root up to date ({})",
                plan.comparison
            ));
            None
        }
    };
    let stats = second_pass(source.path(), target, &options, ctx.cancel, &progress)?;
    let seconds = started.elapsed().as_secs_f64();
    source.unmount()?;
    if !stats.errors.is_empty() {
        bail!(
            "{} entries could not be copied:\n{}\nthe standby is marked incomplete; fix these and sync again",
            stats.error_count,
            stats.errors_shown(ERRORS_SHOWN)
        );
    }
    let passes: Vec<&CopyStats> = first.iter().chain([&stats]).collect();
    Ok(CopySummary::of(&passes, seconds))
}

/// One of the plan's edits, made again from the running system's file as
/// it is now (`from`) into the standby's (`to`), byte for byte.
fn edit_file(from: &Path, to: &Path, edit: &FileEdit) -> Result<()> {
    let source = edit.file.under(from);
    let current =
        std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
    let edited = edits::apply(&current, &edit.operations)
        .with_context(|| format!("editing the standby's copy of {}", source.display()))?;
    let target = edit.output.under(to);
    if std::fs::read(&target).ok().as_deref() == Some(edited.as_slice()) {
        return Ok(());
    }
    // The rename moves the directory's times, which the copy made the
    // running system's: they are put back, so only the file differs.
    let dir = target.parent().unwrap_or(to);
    keeping_times(dir, || atomic::replace(&target, &edited, atomic::FILE))
}

/// Runs `change` inside `dir` and puts `dir`'s times back afterwards.
fn keeping_times(dir: &Path, change: impl FnOnce() -> Result<()>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let times = std::fs::metadata(dir).ok();
    change()?;
    if let Some(meta) = times {
        crate::sys64::set_times(
            crate::sys64::TimesOf::Path(dir),
            (meta.atime(), meta.atime_nsec()),
            (meta.mtime(), meta.mtime_nsec()),
        )
        .with_context(|| format!("setting the times of {}", dir.display()))?;
    }
    Ok(())
}

/// Writes the standby's own record; a `/var/lib/pimigrate` it has to
/// create leaves `/var/lib`'s times as the copy made them.
fn save_on_standby(record: &StandbyRecord, dir: &Path) -> Result<()> {
    match dir.parent() {
        Some(parent) if !dir.exists() => keeping_times(parent, || record.save(dir)),
        _ => record.save(dir),
    }
}

/// The command line that starts the standby: its own boot partition's, or
/// for a root-only standby the line the plan worked out.
fn command_line(plan: &SyncPlan, boot_dir: &Path) -> Result<Vec<u8>> {
    match (plan.standby.layout, &plan.boot_command_line, &plan.boot) {
        (Layout::RootOnly, Some(line), _) => Ok(line.clone().into_bytes()),
        (_, _, Some(sync)) => {
            let path = sync.cmdline.output.under(boot_dir);
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
        }
        _ => bail!("the plan has no command line for the standby"),
    }
}
