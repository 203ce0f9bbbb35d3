//! The data side of the copy: jobs for regular files, run by a small pool
//! of threads while the walker goes on creating the tree.
//!
//! Workers never create, rename or remove directory entries (the walker
//! already created the file they write), so a directory's times, set by the
//! walker once it leaves the directory, stay put while its files are still
//! being filled.

use super::file::{Cancelled, DataCopier, StopFlags};
use super::meta::{self, Node};
use super::nodes;
use super::stats::{CopyError, Counters};
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
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
    pub fn failed(&self, path: &std::path::Path, operation: &str, err: io::Error) {
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
        } => copy(&source, &target, &file, copier, shared),
        Job::Verify { source, target } => verify(&source, &target, copier, shared),
    }
}

fn copy(
    source: &std::path::Path,
    target: &std::path::Path,
    file: &File,
    copier: &mut DataCopier,
    shared: &Shared,
) {
    let input = match nodes::open_source(source) {
        Ok(input) => input,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            // Gone since it was listed: the empty target is removed by the
            // second pass, which sees the source no longer has it.
            Counters::add(&shared.counters.vanished, 1);
            return;
        }
        Err(err) => return shared.failed(source, "open source", err),
    };
    let meta = match input.metadata() {
        Ok(meta) => meta,
        Err(err) => return shared.failed(source, "stat source", err),
    };
    if let Err(err) = copier.copy(&input, file, meta.size(), meta.blocks()) {
        return shared.failed(target, "copy data", err);
    }
    finish(source, &input, file, &meta, None, true, shared);
    Counters::add(&shared.counters.files, 1);
    crate::failpoint::hit("copy-file");
}

fn verify(
    source: &std::path::Path,
    target: &std::path::Path,
    copier: &mut DataCopier,
    shared: &Shared,
) {
    let input = match nodes::open_source(source) {
        Ok(input) => input,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            Counters::add(&shared.counters.vanished, 1);
            return;
        }
        Err(err) => return shared.failed(source, "open source", err),
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
    source: &std::path::Path,
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
