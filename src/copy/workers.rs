//! The data side of the copy: jobs for regular files, run by a small pool
//! of threads while the walker goes on creating the tree.
//!
//! In the first pass a worker creates the file it fills (the walker's one
//! thread would otherwise spend a third of its time creating inodes). That
//! changes the directory's mtime after the walker set it, so the walker
//! sets directory times again once the workers are done. Workers never
//! rename or remove entries, and in the second pass they never create any.

use super::file::{Cancelled, DataCopier, StopFlags};
use super::meta::{self, Node};
use super::nodes;
use super::stats::{CopyError, Counters};
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// One regular file for a worker.
pub enum Job {
    /// Fill `file` (just created or emptied at `target`) from `source`,
    /// then apply the source's metadata.
    Copy {
        source: PathBuf,
        target: PathBuf,
        file: File,
    },
    /// First pass, a file with one name: create `target` (replacing what an
    /// interrupted earlier run left there), then as [`Job::Copy`].
    Create { source: PathBuf, target: PathBuf },
    /// Second pass with checksums: `target` has the source's size and
    /// mtime; compare the bytes and rewrite it in place if they differ.
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

/// Runs one job, recording its failures in `shared`.
pub fn run(job: Job, copier: &mut DataCopier, shared: &Shared) {
    match job {
        Job::Copy {
            source,
            target,
            file,
        } => {
            if let Some(input) = open_source(&source, shared) {
                copy(&source, &input, &target, &file, copier, shared);
            }
        }
        Job::Create { source, target } => create(&source, &target, copier, shared),
        Job::Verify { source, target } => verify(&source, &target, copier, shared),
    }
}

/// The source file, or `None` when it cannot be read (recorded in `shared`;
/// a file gone since it was listed only counts as vanished).
fn open_source(source: &Path, shared: &Shared) -> Option<File> {
    match nodes::open_source(source) {
        Ok(input) => Some(input),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            // Gone since it was listed: an empty target (if the walker made
            // one) is removed by the second pass, which sees it is gone.
            Counters::add(&shared.counters.vanished, 1);
            None
        }
        Err(err) => {
            shared.failed(source, "open source", err);
            None
        }
    }
}

fn create(source: &Path, target: &Path, copier: &mut DataCopier, shared: &Shared) {
    let Some(input) = open_source(source, shared) else {
        return;
    };
    let file = match nodes::create_file(target) {
        Err(err) if is_name_taken(&err) => {
            nodes::remove_any(target).and_then(|()| nodes::create_file(target))
        }
        created => created,
    };
    match file {
        Ok(file) => copy(source, &input, target, &file, copier, shared),
        Err(err) => shared.failed(target, "create file", err),
    }
}

fn copy(
    source: &Path,
    input: &File,
    target: &Path,
    file: &File,
    copier: &mut DataCopier,
    shared: &Shared,
) {
    let meta = match input.metadata() {
        Ok(meta) => meta,
        Err(err) => return shared.failed(source, "stat source", err),
    };
    if let Err(err) = copier.copy(input, file, meta.size(), meta.blocks()) {
        return shared.failed(target, "copy data", err);
    }
    finish(source, input, file, &meta, None, true, shared);
    Counters::add(&shared.counters.files, 1);
    crate::failpoint::hit("copy-file");
}

/// Errors of creating a file where something else already is (an
/// interrupted earlier run left an entry of another kind).
pub fn is_name_taken(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EEXIST | libc::ELOOP | libc::EISDIR | libc::ETXTBSY)
    )
}

fn verify(source: &Path, target: &Path, copier: &mut DataCopier, shared: &Shared) {
    let Some(input) = open_source(source, shared) else {
        return;
    };
    // Read-write without touching atime: the copy may have to be rewritten.
    let output = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOATIME)
        .open(target)
    {
        Ok(output) => output,
        Err(err) => return shared.failed(target, "open target", err),
    };
    let (meta, existing) = match (input.metadata(), output.metadata()) {
        (Ok(meta), Ok(existing)) => (meta, existing),
        (Err(err), _) => return shared.failed(source, "stat source", err),
        (_, Err(err)) => return shared.failed(target, "stat target", err),
    };
    let same = match copier.same_contents(&input, &output) {
        Ok(same) => same,
        Err(err) => return shared.failed(target, "compare contents", err),
    };
    if same {
        finish(
            source,
            &input,
            &output,
            &meta,
            Some(&existing),
            false,
            shared,
        );
        Counters::add(&shared.counters.unchanged, 1);
        return;
    }
    // Rewritten in place, not replaced: the directory must not change
    // (see the module comment); a hard-linked target is one inode with the
    // source's other names, whose contents changed the same way.
    if let Err(err) = output
        .set_len(0)
        .and_then(|()| copier.copy(&input, &output, meta.size(), meta.blocks()))
    {
        return shared.failed(target, "copy data", err);
    }
    finish(source, &input, &output, &meta, None, true, shared);
    Counters::add(&shared.counters.files, 1);
}

/// Owner, xattrs, mode and times of the source onto the written file.
fn finish(
    source: &Path,
    input: &File,
    output: &File,
    meta: &std::fs::Metadata,
    existing: Option<&std::fs::Metadata>,
    data_written: bool,
    shared: &Shared,
) {
    let xattrs = match meta::read_xattrs(Node::Open(input)) {
        Ok(xattrs) => xattrs,
        Err(err) => {
            shared.failed(source, "read xattrs", err);
            Vec::new()
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
}
