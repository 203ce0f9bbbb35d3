//! The data side of the copy: jobs for regular files, run by a small pool
//! of threads while the walker goes on creating the tree.
//!
//! In the first pass a worker creates the file it fills, in place (the
//! walker's one thread would otherwise spend a third of its time creating
//! inodes). That changes the directory's mtime after the walker set it, so
//! the walker sets directory times again once the workers are done.
//!
//! In the second pass the target already holds a copy, which a failing read
//! of the source must not destroy: a file is written as a new inode beside
//! it and renamed over it only once its data and metadata are complete
//! ([`Replacement`]). A read that fails at the open, the stat, the xattrs or
//! half-way through the data leaves the target's bytes and metadata as they
//! were, and the entry is named in the errors.

use super::faults::{self, Op};
use super::file::{Cancelled, DataCopier, StopFlags};
use super::meta::{self, Node};
use super::nodes;
use super::replace::Replacement;
use super::stats::{CopyError, Counters};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// One regular file for a worker.
pub enum Job {
    /// First pass: fill `file` (just created at `target`) from `source`,
    /// then apply the source's metadata.
    Copy {
        source: PathBuf,
        target: PathBuf,
        file: File,
    },
    /// First pass, a file with one name: create `target` (replacing what an
    /// interrupted earlier run left there), then as [`Job::Copy`].
    Create { source: PathBuf, target: PathBuf },
    /// Second pass: `target` is missing or differs; write the source's data
    /// and metadata into a new inode and rename it over `target`.
    Replace { source: PathBuf, target: PathBuf },
    /// Second pass: `target` has the source's size and mtime; compare the
    /// bytes, and replace it as [`Job::Replace`] if they differ.
    Verify { source: PathBuf, target: PathBuf },
}

/// What the walker and the workers share.
pub struct Shared<'a> {
    pub counters: &'a Counters,
    pub stop: StopFlags<'a>,
    /// The first fatal error, which raised `stop.abort`.
    pub fatal: Mutex<Option<anyhow::Error>>,
}

impl Shared<'_> {
    /// Records a failure of `operation` on `path`: fatal ones (the target
    /// is full or read-only, where every next file would fail too) stop
    /// the copy, the others are kept in the stats and the copy goes on.
    pub fn failed(&self, path: &Path, operation: &str, err: io::Error) {
        if err.get_ref().is_some_and(|e| e.is::<Cancelled>()) {
            return; // the stop flags already say why
        }
        let error = CopyError::new(path, operation, &err);
        if is_fatal(&err) {
            let mut fatal = self.fatal.lock().unwrap_or_else(|e| e.into_inner());
            if fatal.is_none() {
                *fatal = Some(anyhow::Error::new(error));
            }
            self.stop.abort.store(true, Ordering::Relaxed);
        } else {
            self.counters.record_error(error);
        }
    }
}

fn is_fatal(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EROFS)
    )
}

/// Runs one job, recording its failures in `shared`. Returns whether the
/// target now holds the source's data (a hard-linked inode's later names
/// are linked to it only then).
pub fn run(job: Job, copier: &mut DataCopier, shared: &Shared) -> bool {
    match job {
        Job::Copy {
            source,
            target,
            file,
        } => match open_source(&source, &target, false, shared) {
            Some(input) => copy(&source, &input, &file, copier, shared),
            None => false,
        },
        Job::Create { source, target } => create(&source, &target, copier, shared),
        Job::Replace { source, target } => match open_source(&source, &target, true, shared) {
            Some(input) => match input.metadata() {
                Ok(meta) => replace(&source, &input, &meta, &target, copier, shared),
                Err(err) => {
                    shared.failed(&source, "stat source", err);
                    false
                }
            },
            None => false,
        },
        Job::Verify { source, target } => verify(&source, &target, copier, shared),
    }
}

/// The source file, or `None` when it cannot be read (recorded in `shared`).
/// A file gone since it was listed counts as vanished; where the target
/// has something under its name (`keeping`: the second pass), that stays,
/// and the entry is named, since this pass cannot tell whether the source
/// lost it for good.
fn open_source(source: &Path, target: &Path, keeping: bool, shared: &Shared) -> Option<File> {
    match faults::check(source, Op::Open).and_then(|()| nodes::open_source(source)) {
        Ok(input) => Some(input),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            Counters::add(&shared.counters.vanished, 1);
            if keeping && std::fs::symlink_metadata(target).is_ok() {
                shared.failed(source, GONE, err);
            }
            None
        }
        Err(err) => {
            shared.failed(source, "open source", err);
            None
        }
    }
}

/// The operation named for an entry that was listed but gone when the copy
/// came to read it, while the target keeps its copy.
pub const GONE: &str = "read (gone since its directory was listed; the copy keeps what it had)";

fn create(source: &Path, target: &Path, copier: &mut DataCopier, shared: &Shared) -> bool {
    let Some(input) = open_source(source, target, false, shared) else {
        return false;
    };
    let file = match nodes::create_file(target) {
        Err(err) if is_name_taken(&err) => {
            nodes::remove_any(target).and_then(|()| nodes::create_file(target))
        }
        created => created,
    };
    match file {
        Ok(file) => copy(source, &input, &file, copier, shared),
        Err(err) => {
            shared.failed(target, "create file", err);
            false
        }
    }
}

/// First pass: the data into `file` in place, then the metadata.
fn copy(
    source: &Path,
    input: &File,
    file: &File,
    copier: &mut DataCopier,
    shared: &Shared,
) -> bool {
    let meta = match input.metadata() {
        Ok(meta) => meta,
        Err(err) => {
            shared.failed(source, "stat source", err);
            return false;
        }
    };
    if let Err(err) = copy_data(source, input, file, &meta, copier) {
        shared.failed(source, "copy data", err);
        return false;
    }
    let copied = finish(source, input, file, &meta, None, true, shared);
    Counters::add(&shared.counters.files, 1);
    if let Err(err) = crate::failpoint::hit("copy-file") {
        shared.failed(source, "copy file", err);
        return false;
    }
    copied
}

/// Second pass: the source's data and metadata into a new inode beside
/// `target`, renamed over it only once complete.
fn replace(
    source: &Path,
    input: &File,
    meta: &Metadata,
    target: &Path,
    copier: &mut DataCopier,
    shared: &Shared,
) -> bool {
    // Read before anything is written: the xattrs are the source's too.
    let xattrs = match meta::read_xattrs(Node::Open(input)) {
        Ok(xattrs) => xattrs,
        Err(err) => {
            shared.failed(source, "read xattrs", err);
            return false;
        }
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    let new = match Replacement::create_in(dir) {
        Ok(new) => new,
        Err(err) => {
            shared.failed(target, "create file", err);
            return false;
        }
    };
    if let Err(err) = copy_data(source, input, new.file(), meta, copier) {
        shared.failed(source, "copy data", err);
        return false; // dropping `new` leaves the target as it was
    }
    meta::apply(
        Node::Open(new.file()),
        meta,
        &xattrs,
        None,
        true,
        &mut |operation, err| shared.failed(source, &operation, err),
    );
    if let Err(err) = new.commit(target) {
        shared.failed(target, "rename the new copy into place", err);
        return false;
    }
    Counters::add(&shared.counters.files, 1);
    if let Err(err) = crate::failpoint::hit("copy-file") {
        shared.failed(source, "copy file", err);
        return false;
    }
    true
}

/// The file's data, holes kept (see [`DataCopier::copy`]).
fn copy_data(
    source: &Path,
    input: &File,
    output: &File,
    meta: &Metadata,
    copier: &mut DataCopier,
) -> io::Result<()> {
    if let Err(err) = faults::check(source, Op::Read) {
        // As a disk failing half-way: what came before was written.
        copier.copy(input, output, meta.size() / 2, meta.blocks())?;
        return Err(err);
    }
    copier.copy(input, output, meta.size(), meta.blocks())
}

/// Errors of creating a file where something else already is (an
/// interrupted earlier run left an entry of another kind).
pub fn is_name_taken(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EEXIST | libc::ELOOP | libc::EISDIR | libc::ETXTBSY)
    )
}

fn verify(source: &Path, target: &Path, copier: &mut DataCopier, shared: &Shared) -> bool {
    let Some(input) = open_source(source, target, true, shared) else {
        return false;
    };
    // Read-only, without touching atime: a copy that differs is replaced,
    // not rewritten.
    let output = match nodes::open_source(target) {
        Ok(output) => output,
        Err(err) => {
            shared.failed(target, "open target", err);
            return false;
        }
    };
    let (meta, existing) = match (input.metadata(), output.metadata()) {
        (Ok(meta), Ok(existing)) => (meta, existing),
        (Err(err), _) => {
            shared.failed(source, "stat source", err);
            return false;
        }
        (_, Err(err)) => {
            shared.failed(target, "stat target", err);
            return false;
        }
    };
    let same = match faults::check(source, Op::Read)
        .and_then(|()| copier.same_contents(&input, &output))
    {
        Ok(same) => same,
        Err(err) => {
            shared.failed(source, "compare contents", err);
            return false;
        }
    };
    if same {
        Counters::add(&shared.counters.unchanged, 1);
        return finish(
            source,
            &input,
            &output,
            &meta,
            Some(&existing),
            false,
            shared,
        );
    }
    drop(output);
    replace(source, &input, &meta, target, copier, shared)
}

/// Owner, xattrs, mode and times of the source onto the written file.
/// When the source's xattrs cannot be read nothing is applied: the file
/// keeps what it had (in the first pass, the copy's own mtime, so the next
/// pass copies it again). Returns whether everything was read.
fn finish(
    source: &Path,
    input: &File,
    output: &File,
    meta: &Metadata,
    existing: Option<&Metadata>,
    data_written: bool,
    shared: &Shared,
) -> bool {
    let xattrs = match meta::read_xattrs(Node::Open(input)) {
        Ok(xattrs) => xattrs,
        Err(err) => {
            shared.failed(source, "read xattrs", err);
            return false;
        }
    };
    meta::apply(
        Node::Open(output),
        meta,
        &xattrs,
        existing,
        data_written,
        &mut |operation, err| shared.failed(source, &operation, err),
    );
    true
}
