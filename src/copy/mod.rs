//! The tree copier: copies a root filesystem the way `rsync -aHAXS
//! --numeric-ids -x` would, with what the migration needs around it.
//!
//! - [`copy_tree`] copies a source tree into an (empty) target directory;
//! - [`second_pass`] brings that copy up to date after the live source
//!   changed: files whose size or mtime differ (or, with
//!   [`CopyOptions::checksum`], whose bytes differ) are copied again, what
//!   vanished from the source is removed, and metadata is re-applied.
//!
//! What is kept: numeric owner and group, mode with setuid/setgid/sticky,
//! atime and mtime to the nanosecond, symlinks as links, hard links (by
//! source device and inode, across directories), device nodes, FIFOs,
//! sockets, holes of sparse files, every extended attribute the kernel
//! lists (`security.*`, `trusted.*`, `user.*`, and POSIX ACLs as their raw
//! `system.posix_acl_*` attributes), and names as raw bytes.
//!
//! How: one walker thread lists directories (iteratively, in inode order),
//! creates every entry and applies non-file metadata; regular files are
//! created by the walker and filled by a few worker threads
//! (`copy_file_range`, `sendfile` or read/write). See docs/copy.md.
//!
//! A source that cannot be read never costs the target anything: a
//! directory that cannot be listed is left alone on the target with all
//! that is below it, a file whose read fails keeps its previous copy (the
//! second pass writes a new inode and renames it into place only once it
//! is complete), and an entry listed but gone when read keeps what the
//! target had under its name. Each is named in [`CopyStats::errors`].
//!
//! Cancelling (the `cancel` flag) stops both within one entry or one 8 MiB
//! chunk. The target is then partial but consistent for a later pass: the
//! first pass writes files under their final names, and a file cut short
//! keeps the copy's own mtime (times are set after the data), so the
//! size/mtime check of [`second_pass`] always copies it again; directories
//! not yet finished keep mode 0700 until a pass applies theirs.

#[cfg(test)]
mod failing_source;
mod faults;
mod file;
mod hardlinks;
mod lookahead;
mod meta;
mod nodes;
mod progress;
mod replace;
mod sparse;
mod stats;
mod tree;
mod walk;
mod workers;

pub use file::Cancelled;
pub use stats::{CopyError, CopyStats, MAX_KEPT_ERRORS};

use crate::system::usage::Exclusion;
use file::{DataCopier, StopFlags};
use progress::Progress;
use stats::Counters;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tree::{Dispatch, Pass, Walker};
use workers::Shared;

/// How to copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    /// Paths left out, relative to the source root (`/var/swap` means
    /// `<source>/var/swap`). Excluded target entries are never deleted.
    pub exclusions: Vec<Exclusion>,
    /// Stay on the source root's filesystem: directories of other
    /// filesystems (mount points) are created empty, with their metadata.
    pub one_file_system: bool,
    /// Second pass: compare the bytes of files whose size and mtime match.
    pub checksum: bool,
    /// Threads filling regular files while the walker creates the tree;
    /// 0 copies everything in the calling thread.
    pub threads: usize,
    /// Second pass of a copy known to have been complete at this time (Unix
    /// seconds): an entry whose inode did not change since (its ctime is
    /// older) and whose size, mtime, owner and mode still match the
    /// target's is taken as it is, without reading either side's xattrs or
    /// listing a directory's target for deletions. Any write, chmod,
    /// chown, xattr change, rename or new link of an inode moves its ctime,
    /// so only what changed is looked at closely: a changed file whose size
    /// and mtime still match is compared byte for byte, unless the target's
    /// copy was made after that change (its inode was born after the
    /// source's ctime). The target of a directory whose own inode changed
    /// is still its copy when its parent's names did not change (a quiet
    /// parent: the directory was not moved), so its quiet entries are taken
    /// as they are too. Ignored with `checksum`.
    pub changed_since: Option<i64>,
}

impl Default for CopyOptions {
    fn default() -> CopyOptions {
        CopyOptions {
            exclusions: Vec::new(),
            one_file_system: true,
            checksum: false,
            threads: DEFAULT_THREADS,
            changed_since: None,
        }
    }
}

/// Data workers by default: enough reads in flight to keep a flash device
/// busy while the walker creates entries, few enough to stay small on a
/// Pi Zero (see the measurements in docs/copy.md).
pub const DEFAULT_THREADS: usize = 4;

/// Jobs waiting per worker: each holds an open target file, so this bounds
/// open descriptors and memory, while letting the walker run ahead.
const QUEUE_PER_WORKER: usize = 64;

/// Copies the tree at `source` into the directory `target` (created if
/// missing; normally empty). Returns what was copied, with the entries that
/// failed in [`CopyStats::errors`]; the copy goes on past them. Fails as a
/// whole when the target is full or read-only, when `source` is not a
/// directory, and when `cancel` is raised (the error is [`Cancelled`]).
/// `progress` is called a few times a second, in the calling thread.
pub fn copy_tree(
    source: &Path,
    target: &Path,
    options: &CopyOptions,
    cancel: &AtomicBool,
    progress: &dyn Fn(&CopyStats),
) -> anyhow::Result<CopyStats> {
    run_pass(source, target, options, Pass::First, cancel, progress)
}

/// Brings the copy at `target` up to date with `source`: files whose size
/// or mtime differ are copied again (with [`CopyOptions::checksum`], files
/// that look unchanged are compared byte for byte), entries gone from the
/// source are removed (excluded names excepted), and every entry's owner,
/// xattrs, mode and times are made to match. Errors as in [`copy_tree`].
///
/// What cannot be read on the source is never removed or truncated on the
/// target: a directory whose listing fails keeps everything below it, a
/// changed file is written beside its old copy and renamed over it only
/// when complete, and an entry gone between the listing and its read keeps
/// the target's entry; each of them is one of the returned errors.
pub fn second_pass(
    source: &Path,
    target: &Path,
    options: &CopyOptions,
    cancel: &AtomicBool,
    progress: &dyn Fn(&CopyStats),
) -> anyhow::Result<CopyStats> {
    run_pass(source, target, options, Pass::Second, cancel, progress)
}

fn run_pass(
    source: &Path,
    target: &Path,
    options: &CopyOptions,
    pass: Pass,
    cancel: &AtomicBool,
    progress: &dyn Fn(&CopyStats),
) -> anyhow::Result<CopyStats> {
    let counters = Counters::default();
    let abort = AtomicBool::new(false);
    let shared = Shared {
        counters: &counters,
        stop: StopFlags {
            cancel,
            abort: &abort,
        },
        fatal: Mutex::new(None),
    };
    let lookahead = lookahead::Lookahead::new(lookahead_filter(source, options, pass));
    let walked = std::thread::scope(|scope| {
        // Closed when the walk ends, however it ends: the scope waits for
        // these threads.
        let _close = lookahead::CloseOnDrop(&lookahead);
        if options.threads > 0 {
            for _ in 0..lookahead::THREADS {
                scope.spawn(|| lookahead.serve());
            }
        }
        let dispatch = if options.threads == 0 {
            Dispatch::Inline(DataCopier::new(shared.stop, &counters.bytes))
        } else {
            start_workers(scope, options.threads, &shared)
        };
        let mut walker = Walker::new(
            source,
            target,
            options,
            pass,
            &shared,
            dispatch,
            Progress::new(progress, &counters),
        );
        if options.threads > 0 {
            walker = walker.reading_ahead(&lookahead);
        }
        let walked = walker.run();
        let deferred_times = walker.take_deferred_times();
        // Dropping the walker drops the sender: workers finish the queue
        // and leave, and the scope waits for them.
        drop(walker);
        walked.map(|()| deferred_times)
    });
    let deferred_times = walked?;
    if !shared.stop.raised() {
        tree::set_deferred_times(&deferred_times, &shared);
    }
    if let Some(fatal) = shared
        .fatal
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        return Err(fatal.context(format!(
            "copying {} to {}",
            source.display(),
            target.display()
        )));
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(Cancelled.into());
    }
    Progress::new(progress, &counters).report();
    Ok(counters.snapshot())
}

/// What the lookahead reads ahead: the entries the walker will visit.
fn lookahead_filter(source: &Path, options: &CopyOptions, pass: Pass) -> lookahead::Filter {
    // Where the walk stays: the root's filesystem (the walker checks the
    // root itself and fails the copy if it cannot read it).
    let root_dev = std::fs::symlink_metadata(source).map(|m| m.dev()).ok();
    lookahead::Filter {
        rules: walk::Rules::new(&options.exclusions),
        root_dev: root_dev.filter(|_| options.one_file_system),
        second_pass: pass == Pass::Second,
        quiet_before: options
            .changed_since
            .filter(|_| pass == Pass::Second && !options.checksum),
    }
}

/// `threads` workers copying the files the walker sends them, until it
/// drops its sender.
fn start_workers<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    threads: usize,
    shared: &'env Shared<'env>,
) -> Dispatch<'env> {
    let (sender, receiver) = crossbeam_channel::bounded::<workers::Job>(threads * QUEUE_PER_WORKER);
    for _ in 0..threads {
        let receiver = receiver.clone();
        scope.spawn(move || {
            let mut copier = DataCopier::new(shared.stop, &shared.counters.bytes);
            for job in receiver {
                if shared.stop.raised() {
                    continue; // drain: the files stay as created
                }
                workers::run(job, &mut copier, shared);
            }
        });
    }
    Dispatch::Pool(sender)
}
