//! The walker: goes through the source tree once, in one thread, creating
//! every entry in the target and handing regular files' data to the
//! workers. Directory metadata is applied when the walker leaves a
//! directory, after everything it creates there was created; files that
//! workers create later change the directory's mtime, so in the first pass
//! directory times are set once more when the workers are done
//! ([`Walker::deferred_times`]).

use super::file::DataCopier;
use super::hardlinks::{HardlinkMap, LinkAction};
use super::meta::{self, Node};
use super::nodes;
use super::progress::Progress;
use super::stats::Counters;
use super::walk::{self, Frame};
use super::workers::{self, Job, Shared};
use super::CopyOptions;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Which pass: the first copies into a new target; the second brings an
/// earlier copy up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    First,
    Second,
}

/// Where regular files go: to the worker pool, or copied right here when
/// the caller asked for no threads.
pub enum Dispatch<'a> {
    Pool(crossbeam_channel::Sender<Job>),
    Inline(DataCopier<'a>),
}

pub struct Walker<'a> {
    pub source_root: &'a Path,
    pub target_root: &'a Path,
    pub options: &'a CopyOptions,
    pub pass: Pass,
    pub shared: &'a Shared<'a>,
    pub dispatch: Dispatch<'a>,
    pub progress: Progress<'a>,
    hardlinks: HardlinkMap,
    root_dev: u64,
    /// Directories whose times must be set again after the workers finish.
    deferred_times: Vec<(PathBuf, meta::Times)>,
}

/// One entry below a listed directory.
struct Entry {
    source: PathBuf,
    target: PathBuf,
    relative: PathBuf,
}

impl<'a> Walker<'a> {
    pub fn new(
        source_root: &'a Path,
        target_root: &'a Path,
        options: &'a CopyOptions,
        pass: Pass,
        shared: &'a Shared<'a>,
        dispatch: Dispatch<'a>,
        progress: Progress<'a>,
    ) -> Walker<'a> {
        Walker {
            source_root,
            target_root,
            options,
            pass,
            shared,
            dispatch,
            progress,
            hardlinks: HardlinkMap::new(),
            root_dev: 0,
            deferred_times: Vec::new(),
        }
    }

    fn counters(&self) -> &'a Counters {
        self.shared.counters
    }

    /// Walks the whole tree. Returns early, leaving the target partial,
    /// when a stop flag is raised.
    pub fn run(&mut self) -> anyhow::Result<()> {
        use anyhow::Context;
        let root_meta = std::fs::symlink_metadata(self.source_root)
            .with_context(|| format!("reading the source root {}", self.source_root.display()))?;
        anyhow::ensure!(
            root_meta.is_dir(),
            "the source root {} is not a directory",
            self.source_root.display()
        );
        self.root_dev = root_meta.dev();
        nodes::create_dir(self.target_root)
            .with_context(|| format!("creating the target root {}", self.target_root.display()))?;
        Counters::add(&self.counters().dirs, 1);
        let root = Entry {
            source: self.source_root.to_path_buf(),
            target: self.target_root.to_path_buf(),
            relative: PathBuf::new(),
        };
        let mut stack = vec![self.open_dir(root, root_meta)];
        while let Some(frame) = stack.last_mut() {
            if self.shared.stop.raised() {
                return Ok(());
            }
            self.progress.tick();
            match frame.names.next() {
                Some(name) => {
                    let entry = Entry {
                        source: frame.source.join(&name.name),
                        target: frame.target.join(&name.name),
                        relative: frame.relative.join(&name.name),
                    };
                    if let Some(child) = self.visit(entry) {
                        stack.push(child);
                    }
                }
                None => {
                    if let Some(done) = stack.pop() {
                        self.leave_dir(done);
                    }
                }
            }
        }
        Ok(())
    }

    fn failed(&self, path: &Path, operation: &str, err: io::Error) {
        self.shared.failed(path, operation, err);
    }

    /// Copies one entry; returns the frame of a directory to descend into.
    fn visit(&mut self, entry: Entry) -> Option<Frame> {
        if walk::is_excluded(&self.options.exclusions, &entry.relative) {
            Counters::add(&self.counters().excluded, 1);
            return None;
        }
        let meta = match std::fs::symlink_metadata(&entry.source) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                Counters::add(&self.counters().vanished, 1);
                return None;
            }
            Err(err) => {
                self.failed(&entry.source, "stat", err);
                return None;
            }
        };
        // The second pass compares with what the first left; the first
        // assumes an empty target and clears the way only when a name is
        // taken (an interrupted earlier run).
        let existing = match self.pass {
            Pass::First => None,
            Pass::Second => std::fs::symlink_metadata(&entry.target).ok(),
        };
        let file_type = meta.file_type();
        if file_type.is_dir() {
            self.visit_dir(entry, meta, existing)
        } else if file_type.is_file() {
            self.visit_file(&entry, &meta, existing);
            None
        } else if file_type.is_symlink() {
            self.visit_symlink(&entry, &meta, existing);
            None
        } else if nodes::is_special(&meta) {
            self.visit_special(&entry, &meta, existing);
            None
        } else {
            let err = io::Error::from_raw_os_error(libc::EINVAL);
            self.failed(&entry.source, "copy entry of unknown type", err);
            None
        }
    }

    fn visit_dir(
        &mut self,
        entry: Entry,
        meta: Metadata,
        existing: Option<Metadata>,
    ) -> Option<Frame> {
        if existing.as_ref().is_some_and(|t| !t.is_dir()) {
            if let Err(err) = nodes::remove_any(&entry.target) {
                self.failed(&entry.target, "remove to make a directory", err);
                return None;
            }
        }
        if let Err(err) = nodes::create_dir(&entry.target) {
            self.failed(&entry.target, "create directory", err);
            return None;
        }
        if self.options.one_file_system && meta.dev() != self.root_dev {
            // A mount point: the directory exists on the new root, with
            // the mounted filesystem's root metadata, and stays empty.
            Counters::add(&self.counters().mount_points, 1);
            self.apply_by_path(
                &entry.source,
                &entry.target,
                &meta,
                Node::Path(&entry.target),
            );
            return None;
        }
        Counters::add(&self.counters().dirs, 1);
        Some(self.open_dir(entry, meta))
    }

    /// Lists a source directory; in the second pass, also removes what the
    /// target holds and the source no longer does.
    fn open_dir(&mut self, entry: Entry, meta: Metadata) -> Frame {
        let names = walk::list(&entry.source).unwrap_or_else(|err| {
            // Still a frame, so the directory gets its metadata.
            self.failed(&entry.source, "list directory", err);
            Vec::new()
        });
        if self.pass == Pass::Second {
            let keep: HashSet<&OsString> = names.iter().map(|n| &n.name).collect();
            self.remove_extra(&entry, &keep);
        }
        Frame {
            source: entry.source,
            target: entry.target,
            relative: entry.relative,
            names: names.into_iter(),
            meta,
        }
    }

    /// Removes target entries without a source entry. Excluded names stay:
    /// they are the target's own (lost+found from mkfs, a swap file).
    fn remove_extra(&mut self, dir: &Entry, keep: &HashSet<&OsString>) {
        let present = match walk::list(&dir.target) {
            Ok(present) => present,
            Err(err) => return self.failed(&dir.target, "list target directory", err),
        };
        for name in present {
            if keep.contains(&name.name)
                || walk::is_excluded(&self.options.exclusions, &dir.relative.join(&name.name))
            {
                continue;
            }
            let path = dir.target.join(&name.name);
            match nodes::remove_any(&path) {
                Ok(()) => Counters::add(&self.counters().deleted, 1),
                Err(err) => self.failed(&path, "remove entry the source no longer has", err),
            }
        }
    }

    /// Metadata of a directory, now that everything in it exists.
    fn leave_dir(&mut self, frame: Frame) {
        self.apply_by_path(
            &frame.source,
            &frame.target,
            &frame.meta,
            Node::Path(&frame.target),
        );
        if self.workers_create_files() {
            self.deferred_times
                .push((frame.target, meta::Times::of(&frame.meta)));
        }
    }

    /// Whether regular files with one name are created by the workers
    /// (first pass, with a pool), not by the walker.
    fn workers_create_files(&self) -> bool {
        self.pass == Pass::First && matches!(self.dispatch, Dispatch::Pool(_))
    }

    /// The directories whose times the workers may have changed since the
    /// walker set them; set them again with [`set_deferred_times`] once
    /// the workers are done.
    pub fn take_deferred_times(&mut self) -> Vec<(PathBuf, meta::Times)> {
        std::mem::take(&mut self.deferred_times)
    }

    /// Applies metadata read by path (directories, symlinks, specials, and
    /// unchanged files in the second pass).
    fn apply_by_path(&self, source: &Path, target: &Path, meta: &Metadata, node: Node) {
        let source_node = match node {
            Node::Symlink(_) => Node::Symlink(source),
            _ => Node::Path(source),
        };
        let xattrs = match meta::read_xattrs(source_node) {
            Ok(xattrs) => xattrs,
            Err(err) => {
                self.failed(source, "read xattrs", err);
                Vec::new()
            }
        };
        let existing = match self.pass {
            Pass::First => None,
            Pass::Second => std::fs::symlink_metadata(target).ok(),
        };
        meta::apply(
            node,
            meta,
            &xattrs,
            existing.as_ref(),
            false,
            &mut |op, err| self.failed(source, &op, err),
        );
    }

    fn visit_file(&mut self, entry: &Entry, meta: &Metadata, existing: Option<Metadata>) {
        if meta.nlink() > 1 {
            match self
                .hardlinks
                .visit(meta.dev(), meta.ino(), meta.nlink(), &entry.target)
            {
                LinkAction::LinkTo(first) => return self.link(entry, &first, existing),
                LinkAction::CopyData => {}
            }
        }
        if let Some(target) = &existing {
            let same_kind = target.file_type().is_file()
                // A target linked to other names the source no longer
                // shares must not be rewritten in place.
                && !(target.nlink() > 1 && meta.nlink() == 1);
            if same_kind && target.size() == meta.size() && same_mtime(target, meta) {
                if self.options.checksum {
                    self.submit(Job::Verify {
                        source: entry.source.clone(),
                        target: entry.target.clone(),
                    });
                } else {
                    Counters::add(&self.counters().unchanged, 1);
                    self.apply_by_path(
                        &entry.source,
                        &entry.target,
                        meta,
                        Node::Path(&entry.target),
                    );
                }
                return;
            }
            if !same_kind {
                if let Err(err) = nodes::remove_any(&entry.target) {
                    self.hardlinks.forget(meta.dev(), meta.ino());
                    return self.failed(&entry.target, "remove to make a file", err);
                }
            }
        }
        if existing.is_none() && meta.nlink() == 1 && self.workers_create_files() {
            // Hard-linked files stay with the walker: their later names
            // are linked to the first one, which must exist by then.
            return self.submit(Job::Create {
                source: entry.source.clone(),
                target: entry.target.clone(),
            });
        }
        let file = match nodes::create_file(&entry.target) {
            Ok(file) => file,
            // Something else has the name (an interrupted earlier run).
            Err(err) if workers::is_name_taken(&err) && self.pass == Pass::First => {
                match nodes::remove_any(&entry.target)
                    .and_then(|()| nodes::create_file(&entry.target))
                {
                    Ok(file) => file,
                    Err(err) => {
                        self.hardlinks.forget(meta.dev(), meta.ino());
                        return self.failed(&entry.target, "create file", err);
                    }
                }
            }
            Err(err) => {
                self.hardlinks.forget(meta.dev(), meta.ino());
                return self.failed(&entry.target, "create file", err);
            }
        };
        self.submit(Job::Copy {
            source: entry.source.clone(),
            target: entry.target.clone(),
            file,
        });
    }

    /// Another name of an inode copied earlier in this pass.
    fn link(&mut self, entry: &Entry, first: &Path, existing: Option<Metadata>) {
        if let Some(target) = &existing {
            let already = std::fs::symlink_metadata(first)
                .is_ok_and(|f| f.dev() == target.dev() && f.ino() == target.ino());
            if already {
                Counters::add(&self.counters().unchanged, 1);
                return;
            }
        }
        match nodes::make_replacing(&entry.target, || std::fs::hard_link(first, &entry.target)) {
            Ok(()) => Counters::add(&self.counters().hardlinks, 1),
            Err(err) => self.failed(&entry.target, "hard link", err),
        }
    }

    fn visit_symlink(&mut self, entry: &Entry, meta: &Metadata, existing: Option<Metadata>) {
        let destination = match std::fs::read_link(&entry.source) {
            Ok(destination) => destination,
            Err(err) => return self.failed(&entry.source, "read symlink", err),
        };
        if let Some(target) = &existing {
            let same = target.file_type().is_symlink()
                && std::fs::read_link(&entry.target).is_ok_and(|d| d == destination);
            if same {
                Counters::add(&self.counters().unchanged, 1);
                self.apply_by_path(
                    &entry.source,
                    &entry.target,
                    meta,
                    Node::Symlink(&entry.target),
                );
                return;
            }
        }
        if existing.is_some() {
            if let Err(err) = nodes::remove_any(&entry.target) {
                return self.failed(&entry.target, "remove to make a symlink", err);
            }
        }
        let made = nodes::make_replacing(&entry.target, || {
            std::os::unix::fs::symlink(&destination, &entry.target)
        });
        if let Err(err) = made {
            return self.failed(&entry.target, "create symlink", err);
        }
        Counters::add(&self.counters().symlinks, 1);
        self.apply_by_path(
            &entry.source,
            &entry.target,
            meta,
            Node::Symlink(&entry.target),
        );
    }

    fn visit_special(&mut self, entry: &Entry, meta: &Metadata, existing: Option<Metadata>) {
        if let Some(target) = &existing {
            if target.file_type() == meta.file_type() && target.rdev() == meta.rdev() {
                Counters::add(&self.counters().unchanged, 1);
                self.apply_by_path(
                    &entry.source,
                    &entry.target,
                    meta,
                    Node::Path(&entry.target),
                );
                return;
            }
            if let Err(err) = nodes::remove_any(&entry.target) {
                return self.failed(&entry.target, "remove to make a special file", err);
            }
        }
        let made =
            nodes::make_replacing(&entry.target, || nodes::create_special(&entry.target, meta));
        if let Err(err) = made {
            return self.failed(&entry.target, "create special file (mknod)", err);
        }
        Counters::add(&self.counters().specials, 1);
        self.apply_by_path(
            &entry.source,
            &entry.target,
            meta,
            Node::Path(&entry.target),
        );
    }

    fn submit(&mut self, job: Job) {
        match &mut self.dispatch {
            Dispatch::Pool(sender) => {
                // Workers only stop after the sender is dropped, so a send
                // fails only if they all panicked: run the job here then.
                if let Err(crossbeam_channel::SendError(job)) = sender.send(job) {
                    let mut copier = DataCopier::new(self.shared.stop, &self.shared.counters.bytes);
                    workers::run(job, &mut copier, self.shared);
                }
            }
            Dispatch::Inline(copier) => workers::run(job, copier, self.shared),
        }
    }
}

fn same_mtime(a: &Metadata, b: &Metadata) -> bool {
    a.mtime() == b.mtime() && a.mtime_nsec() == b.mtime_nsec()
}

/// Sets directory times again after the workers created files in them.
pub fn set_deferred_times(times: &[(PathBuf, meta::Times)], shared: &Shared) {
    for (dir, times) in times {
        if let Err(err) = meta::set_node_times(Node::Path(dir), *times) {
            shared.failed(dir, "set directory times", err);
        }
    }
}
