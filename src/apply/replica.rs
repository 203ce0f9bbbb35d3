//! The front door of the replica engine's writing half, for `migrate`'s
//! executor and the standby's apply alike: on the partitions of a disk
//! laid out (or a standby's existing ones), mount the copy's root and boot
//! partition, copy the running root ([`super::copy_root`]), bring the boot
//! tree up to date ([`super::boot_tree`]), write the copy's own files
//! ([`super::edit_files`]) and flush, each step recorded as done where the
//! use case records it ([`Record`]: the migration's journal, the standby's
//! record). What happens around it (the trial and the SD card's boot files;
//! the standby's record and checks) is each use case's own.

use super::boot_tree::{self, BootStats};
use super::copy_root::{copy_root, CopySummary, RootCopy};
use super::edit_files::write_edited;
use super::executor::ApplyContext;
use super::layout::PartitionDevices;
use super::mount::{mount_device, Mounted};
use crate::plan::{EditSite, FileEdit};
use crate::state::journal::Step;
use crate::system::usage::Exclusion;
use anyhow::{Context, Result};
use std::path::Path;

/// Where a replica's steps are recorded once done, so an interrupted run
/// redoes only what is not: a migration's journal (every step), a
/// standby's record (the layout's steps; a sync copies anew each run).
pub trait Record {
    fn is_done(&self, step: Step) -> bool;
    /// Records `step` durably before the next one begins.
    fn mark(&mut self, step: Step) -> Result<()>;
    /// The copy's root is mounted at `root`: a record the copy keeps of
    /// itself is written now, before anything else there changes.
    fn mounted(&mut self, _root: &Path) -> Result<()> {
        Ok(())
    }
}

/// What the steps are called, for the person watching (the testbed's
/// copy benchmark reads these lines too).
pub struct Words<'a> {
    pub copy: &'a str,
    pub boot: &'a str,
    pub edits: &'a str,
    /// A step line of its own for the flush after the edits.
    pub flush: Option<&'a str>,
}

/// The use case's fail points around the engine's steps
/// ([`crate::failpoint`]).
pub struct Points {
    pub mounted: &'static str,
    pub copied: &'static str,
    /// After the copy's own files are written, before their flush.
    pub edited: Option<&'static str>,
    /// After that flush.
    pub flushed: &'static str,
}

/// A use case's own write on the copy's boot partition, given its
/// directory.
pub type BootWrite<'a> = &'a dyn Fn(&Path) -> Result<()>;

/// A replica to make on partitions that exist.
pub struct ReplicaSpec<'a> {
    /// The copy's root partition, and its own boot partition (a full
    /// layout).
    pub root: u32,
    pub boot: Option<u32>,
    /// The mount points' names under /run/pimigrate (root, boot).
    pub mount_names: [&'a str; 2],
    /// The running root and boot directory, as this process sees them.
    pub source_root: &'a Path,
    pub source_boot: &'a Path,
    pub exclusions: &'a [Exclusion],
    pub checksum: bool,
    /// The copy was complete at this time (Unix seconds); see
    /// [`RootCopy::changed_since`].
    pub changed_since: Option<i64>,
    /// A new, empty root: both passes of the copy.
    pub fresh: bool,
    /// Names on the boot partition never copied nor removed (besides the
    /// copy's own files).
    pub boot_left_out: &'a [String],
    /// The copy's own files: the plan's edits of its root and boot
    /// partition (others, such as the SD card's, are left to the caller).
    pub edits: &'a [FileEdit],
    /// Written on the copy's boot partition with the edits (a full move's
    /// tryboot.txt).
    pub with_edits: Option<BootWrite<'a>>,
    pub words: Words<'a>,
    pub points: Points,
    /// What to say after entries the copy could not read.
    pub then: &'a str,
}

/// The replica made: its filesystems, still mounted for the use case's
/// own part, and what the copies did (none for a step done before).
pub struct Replica {
    pub root: Mounted,
    pub boot: Option<Mounted>,
    pub copy: Option<CopySummary>,
    pub boot_files: Option<BootStats>,
}

/// Makes the replica `spec` describes on `devices`, skipping each step
/// `record` says is done.
pub fn run(
    devices: &PartitionDevices,
    spec: &ReplicaSpec,
    record: &mut impl Record,
    ctx: &ApplyContext,
) -> Result<Replica> {
    let [root_name, boot_name] = spec.mount_names;
    let root = mount_device(devices.of(spec.root)?, "ext4", root_name)?;
    let boot = match spec.boot {
        Some(number) => Some(mount_device(devices.of(number)?, "vfat", boot_name)?),
        None => None,
    };
    crate::failpoint::hit(spec.points.mounted)?;
    record.mounted(root.path())?;
    ctx.check_cancel()?;
    let copy = match record.is_done(Step::Copied) {
        true => None,
        false => Some(copy_step(spec, &root, record, ctx)?),
    };
    ctx.check_cancel()?;
    let boot_files = match &boot {
        Some(boot) if !record.is_done(Step::BootFilesCopied) => {
            Some(boot_step(spec, boot, copy.as_ref(), record, ctx)?)
        }
        _ => None,
    };
    if !record.is_done(Step::TargetEdited) {
        edit_step(spec, &root, boot.as_ref(), ctx)?;
        record.mark(Step::TargetEdited)?;
    }
    Ok(Replica {
        root,
        boot,
        copy,
        boot_files,
    })
}

/// The running root onto the copy's, flushed before it is recorded: after
/// a power cut a resume trusts this step and copies nothing again.
fn copy_step(
    spec: &ReplicaSpec,
    root: &Mounted,
    record: &mut impl Record,
    ctx: &ApplyContext,
) -> Result<CopySummary> {
    (ctx.step)(spec.words.copy);
    let own = own_files(spec.edits, EditSite::TargetRoot, |path| path.to_string());
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    let copy = copy_root(
        &RootCopy {
            source: spec.source_root,
            exclusions: spec.exclusions,
            own_files: &own,
            checksum: spec.checksum,
            changed_since: spec.changed_since,
            fresh: spec.fresh,
            then: spec.then,
        },
        root.path(),
        ctx,
    )?;
    root.sync()?;
    crate::failpoint::hit(spec.points.copied)?;
    record.mark(Step::Copied)?;
    Ok(copy)
}

/// The running boot partition's files onto the copy's, but for the names
/// left out and the copy's own files.
fn boot_step(
    spec: &ReplicaSpec,
    boot: &Mounted,
    copy: Option<&CopySummary>,
    record: &mut impl Record,
    ctx: &ApplyContext,
) -> Result<BootStats> {
    (ctx.step)(spec.words.boot);
    let mut left_out = spec.boot_left_out.to_vec();
    left_out.extend(own_files(spec.edits, EditSite::TargetBoot, |path| {
        path.file_name().to_string_lossy().into_owned()
    }));
    // The copy's figures again: a sign of life that leaves a progress
    // display where the copy left it.
    let (bytes, entries) = copy.map_or((0, 0), |c| (c.bytes, c.entries));
    let stats = boot_tree::sync(
        spec.source_boot,
        boot.path(),
        &left_out,
        spec.checksum,
        ctx.cancel,
        &|| (ctx.progress)(bytes, entries),
    )?;
    boot.sync()?;
    record.mark(Step::BootFilesCopied)?;
    Ok(stats)
}

/// The copy's own files, made again from the running system's as they are
/// now, then flushed.
fn edit_step(
    spec: &ReplicaSpec,
    root: &Mounted,
    boot: Option<&Mounted>,
    ctx: &ApplyContext,
) -> Result<()> {
    (ctx.step)(spec.words.edits);
    for edit in spec.edits.iter().filter(|e| e.site != EditSite::SourceBoot) {
        let (from, to) = match edit.site {
            EditSite::TargetBoot => (
                spec.source_boot,
                boot.map(Mounted::path)
                    .context("the plan edits a boot partition the copy does not have")?,
            ),
            _ => (spec.source_root, root.path()),
        };
        write_edited(from, to, edit)?;
    }
    if let (Some(write), Some(boot)) = (spec.with_edits, boot) {
        write(boot.path())?;
    }
    if let Some(point) = spec.points.edited {
        crate::failpoint::hit(point)?;
    }
    if let Some(words) = spec.words.flush {
        (ctx.step)(words);
    }
    root.sync()?;
    if let Some(boot) = boot {
        boot.sync()?;
    }
    crate::failpoint::hit(spec.points.flushed)?;
    Ok(())
}

/// The copy's own files at `site`, and their backups, as `name` gives
/// them: the copies leave these to the edits.
fn own_files(
    edits: &[FileEdit],
    site: EditSite,
    name: impl Fn(&crate::plan::PartitionPath) -> String,
) -> Vec<String> {
    edits
        .iter()
        .filter(|e| e.site == site)
        .flat_map(|e| std::iter::once(&e.output).chain(&e.backup))
        .map(name)
        .collect()
}
