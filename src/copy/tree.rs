//! The walker: goes through the source tree once, in one thread, creating
//! every entry in the target and handing regular files' data to the
//! workers. Directory metadata is applied when the walker leaves a
//! directory, after everything it creates there was created; files that
//! workers create or rename into place later change the directory's mtime,
//! so those directories' times are set once more when the workers are done
//! ([`Walker::deferred_times`]).
//!
//! Nothing on the target changes because of what could not be read on the
//! source: a directory is listed before its target is touched (a listing
//! that fails leaves the target's directory and all below it alone, where
//! treating it as empty would delete them all), an entry whose stat fails
//! keeps its target entry, and files are replaced only by complete copies
//! (see `workers`).

use super::file::DataCopier;
use super::hardlinks::{HardlinkMap, LinkAction};
use super::lookahead::{self, Dir, Key, Listing, Lookahead};
use super::meta::{self, Node};
use super::nodes;
use super::progress::Progress;
use super::stats::Counters;
use super::walk::{self, Frame};
use super::workers::{self, Job, Shared};
use super::CopyOptions;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
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
    /// Threads reading the source's metadata ahead, when the copy has
    /// worker threads.
    lookahead: Option<&'a Lookahead>,
    /// The exclusions, as checked for each entry.
    rules: walk::Rules,
    hardlinks: HardlinkMap,
    root_dev: u64,
    /// Directories whose times must be set again after the workers finish.
    deferred_times: Vec<(PathBuf, meta::Times)>,
    /// Copies data in this thread when the others must not (a hard-linked
    /// inode's first name in the second pass: its later names are linked
    /// to the new inode right after).
    own_copier: Option<DataCopier<'a>>,
    /// A job just handed to the pool may rename into the current
    /// directory after the walker has left it.
    pool_renames: bool,
    /// The entry just visited was compared with its target (it was not
    /// taken as it is for being quiet in a settled directory).
    compared: bool,
}

/// A listed source directory and its key.
struct Listed {
    names: Vec<(walk::Name, io::Result<Metadata>)>,
    key: Key,
}

impl Listed {
    fn empty() -> Listed {
        Listed {
            names: Vec::new(),
            key: Key::new(),
        }
    }
}

/// One entry below a listed directory.
struct Entry {
    source: PathBuf,
    target: PathBuf,
    relative: PathBuf,
}

impl Entry {
    /// `name` in `parent`'s directory. Paths are joined only for an entry
    /// that needs them: most of a quiet tree's entries do not.
    fn in_dir(parent: &Frame, name: &OsStr) -> Entry {
        Entry {
            source: parent.source.join(name),
            target: parent.target.join(name),
            relative: parent.relative.join(name),
        }
    }
}

/// The lookahead's key of the `index`-th entry of `parent`'s listing.
fn child_key(parent: &Frame, index: u32) -> Key {
    let mut key = parent.key.clone();
    key.push(index);
    key
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
            lookahead: None,
            rules: walk::Rules::new(&options.exclusions),
            hardlinks: HardlinkMap::new(),
            root_dev: 0,
            deferred_times: Vec::new(),
            own_copier: None,
            pool_renames: false,
            compared: false,
        }
    }

    /// Takes the source's listings from `lookahead` (see there).
    pub fn reading_ahead(mut self, lookahead: &'a Lookahead) -> Walker<'a> {
        self.lookahead = Some(lookahead);
        self
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
        // The roots are each other's copy by definition.
        let Some(names) = self.list_source(&root, Key::new(), true, &root_meta) else {
            return Ok(()); // named in the errors; the target is left alone
        };
        let mut stack = vec![self.open_dir(root, root_meta, true, names)];
        while let Some(frame) = stack.last_mut() {
            if self.shared.stop.raised() {
                return Ok(());
            }
            self.progress.tick();
            let index = frame.next;
            match frame.names.next() {
                Some((name, meta)) => {
                    frame.next += 1;
                    let child = self.visit(&*frame, index, &name.name, meta);
                    let renames = std::mem::take(&mut self.pool_renames);
                    let compared = std::mem::take(&mut self.compared);
                    if let Some(frame) = stack.last_mut() {
                        frame.renames |= renames;
                        frame.compared |= compared;
                    }
                    if let Some(child) = child {
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

    /// Copies the entry `name`, the `index`-th of `parent`'s listing, whose
    /// stat was taken when its directory was listed; returns the frame of a
    /// directory to descend into.
    fn visit(
        &mut self,
        parent: &Frame,
        index: u32,
        name: &OsStr,
        stat: io::Result<Metadata>,
    ) -> Option<Frame> {
        if self.rules.excludes_child(&parent.relative, name) {
            Counters::add(&self.counters().excluded, 1);
            return None;
        }
        let meta = match stat {
            Ok(meta) => meta,
            Err(err) => {
                self.stat_failed(Entry::in_dir(parent, name), err);
                return None;
            }
        };
        // An unchanged inode (not even renamed or moved: that moves its
        // ctime too) in a directory whose target is its copy: the target
        // has it as the last complete copy left it (the plan trusts ctimes
        // only while nothing else mounted the target since), so the target
        // is not even looked at. This halves the system calls of a sync in
        // which little changed; a directory is still listed, since a file
        // in it may have changed without changing the directory.
        if parent.settled && self.quiet(&meta) {
            return self.visit_quiet(parent, index, name, meta);
        }
        self.compared = true;
        let entry = Entry::in_dir(parent, name);
        // A directory whose own inode changed (entries added or removed, a
        // chmod, or a move) in a quiet one, whose names did not change: it
        // was not moved, so its target is still its copy (see
        // [`Frame::settled`]).
        let settled_below = parent.settled && self.quiet(&parent.meta);
        // The second pass compares with what the first left; the first
        // assumes an empty target and clears the way only when a name is
        // taken (an interrupted earlier run).
        let existing = match self.pass {
            Pass::First => None,
            Pass::Second => std::fs::symlink_metadata(&entry.target).ok(),
        };
        let file_type = meta.file_type();
        if file_type.is_dir() {
            self.visit_dir(
                entry,
                meta,
                existing,
                child_key(parent, index),
                settled_below,
            )
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

    /// An entry whose stat failed keeps its target entry.
    fn stat_failed(&self, entry: Entry, err: io::Error) {
        if err.kind() == io::ErrorKind::NotFound {
            // Gone since its directory was listed. Whatever the target
            // has under the name stays: this pass cannot tell a
            // deletion from a source that failed to show it.
            Counters::add(&self.counters().vanished, 1);
            if std::fs::symlink_metadata(&entry.target).is_ok() {
                self.failed(&entry.source, workers::GONE, err);
            }
        } else {
            self.failed(&entry.source, "stat", err);
        }
    }

    /// A quiet entry in a settled directory (see [`Walker::visit`]): a
    /// directory is listed and entered, anything else is unchanged.
    fn visit_quiet(
        &mut self,
        parent: &Frame,
        index: u32,
        name: &OsStr,
        meta: Metadata,
    ) -> Option<Frame> {
        if meta.is_dir() && !self.is_mount_point(&meta) {
            let entry = Entry::in_dir(parent, name);
            let names = self.list_source(&entry, child_key(parent, index), true, &meta)?;
            Counters::add(&self.counters().dirs, 1);
            return Some(self.open_dir(entry, meta, true, names));
        }
        Counters::add(&self.counters().unchanged, 1);
        None
    }

    /// `settled` is what [`Frame::settled`] would be, if its target is a
    /// directory already.
    fn visit_dir(
        &mut self,
        entry: Entry,
        meta: Metadata,
        existing: Option<Metadata>,
        key: Key,
        settled: bool,
    ) -> Option<Frame> {
        let mount_point = self.is_mount_point(&meta);
        // A directory the target lacks holds nothing of the source's.
        let settled = settled && existing.as_ref().is_some_and(Metadata::is_dir);
        // Listed first: a directory that cannot be listed changes nothing
        // on the target, not even what stands under its name there.
        let names = if mount_point {
            Listed::empty()
        } else {
            self.list_source(&entry, key, settled, &meta)?
        };
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
        if mount_point {
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
        // Changed, or moved here (then what is below is compared entry by
        // entry).
        Some(self.open_dir(entry, meta, settled, names))
    }

    /// The names in a source directory with their metadata, or `None`
    /// when it cannot be listed (a garbled directory block: ext4 says
    /// EBADMSG). Then the directory is named in the errors and not entered:
    /// its target keeps everything it holds, and its metadata.
    /// `settled` is the frame's [`Frame::settled`].
    fn list_source(
        &self,
        entry: &Entry,
        key: Key,
        settled: bool,
        meta: &Metadata,
    ) -> Option<Listed> {
        let listing: Listing = match self.lookahead {
            Some(lookahead) => {
                let dir = Dir {
                    source: entry.source.clone(),
                    target: entry.target.clone(),
                    relative: entry.relative.clone(),
                    settled,
                    quiet: self.quiet(meta),
                };
                lookahead.take(&key, dir)
            }
            None => lookahead::fetch(&entry.source),
        };
        match listing {
            Ok(names) => Some(Listed { names, key }),
            // Gone since its parent was listed: named only where the target
            // keeps something under its name (as for any entry).
            Err(err)
                if err.kind() == io::ErrorKind::NotFound
                    && std::fs::symlink_metadata(&entry.target).is_err() =>
            {
                Counters::add(&self.counters().vanished, 1);
                None
            }
            Err(err) => {
                self.failed(&entry.source, "list directory", err);
                None
            }
        }
    }

    /// The frame of a listed source directory; in the second pass, also
    /// removes what the target holds and the source no longer does.
    fn open_dir(&mut self, entry: Entry, meta: Metadata, settled: bool, listed: Listed) -> Frame {
        // A directory whose inode did not change since the last complete
        // copy gained and lost no names: its target has nothing extra.
        if self.pass == Pass::Second && !self.quiet(&meta) {
            let keep: HashSet<&OsString> = listed.names.iter().map(|(n, _)| &n.name).collect();
            self.remove_extra(&entry, &keep);
        }
        Frame {
            source: entry.source,
            target: entry.target,
            relative: entry.relative,
            names: listed.names.into_iter(),
            next: 0,
            key: listed.key,
            meta,
            settled,
            renames: false,
            compared: false,
        }
    }

    /// Removes target entries without a source entry. Excluded names stay,
    /// and the directories that hold one: they are the target's own
    /// (lost+found from mkfs, a swap file, a standby's record).
    fn remove_extra(&mut self, dir: &Entry, keep: &HashSet<&OsString>) {
        let present = match walk::list(&dir.target) {
            Ok(present) => present,
            Err(err) => return self.failed(&dir.target, "list target directory", err),
        };
        for name in present {
            if keep.contains(&name.name)
                || self.rules.excludes_child(&dir.relative, &name.name)
                || self.rules.holds_excluded(&dir.relative, &name.name)
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
        if let Some(lookahead) = self.lookahead {
            lookahead.forget_below(&frame.key);
        }
        // A quiet directory in a settled one, all of whose entries were
        // quiet too, is as the last complete copy left it: nothing in it
        // was written, so its target is not even looked at.
        let settled = self.quiet(&frame.meta)
            && ((frame.settled && !frame.compared)
                || self.target_matches(&frame.meta, &frame.target));
        if !settled {
            self.apply_by_path(
                &frame.source,
                &frame.target,
                &frame.meta,
                Node::Path(&frame.target),
            );
        }
        if frame.renames || (!settled && self.workers_create_files()) {
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
    /// unchanged files in the second pass). When the source's xattrs cannot
    /// be read, nothing is applied: the target keeps its own metadata.
    fn apply_by_path(&self, source: &Path, target: &Path, meta: &Metadata, node: Node) {
        let source_node = match node {
            Node::Symlink(_) => Node::Symlink(source),
            _ => Node::Path(source),
        };
        let xattrs = match meta::read_xattrs(source_node) {
            Ok(xattrs) => xattrs,
            Err(err) => return self.failed(source, "read xattrs", err),
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

    /// A directory of another filesystem, which the copy does not enter.
    fn is_mount_point(&self, meta: &Metadata) -> bool {
        self.options.one_file_system && meta.dev() != self.root_dev
    }

    /// Whether `meta`'s inode is unchanged since [`CopyOptions::changed_since`]
    /// (second pass only; a checksum pass reads every file anyway).
    fn quiet(&self, meta: &Metadata) -> bool {
        self.pass == Pass::Second
            && !self.options.checksum
            && self
                .options
                .changed_since
                .is_some_and(|since| meta.ctime() < since)
    }

    /// The target at `target` has the source's owner, mode and times (read
    /// again: the walk itself may have changed a directory's).
    fn target_matches(&self, meta: &Metadata, target: &Path) -> bool {
        std::fs::symlink_metadata(target).is_ok_and(|t| same_attributes(meta, &t))
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
        if let Some(target) = existing.as_ref().filter(|t| looks_copied(meta, t)) {
            return self.keep_or_verify(entry, meta, target);
        }
        if self.pass == Pass::Second {
            // Whatever the target has under the name stays until a
            // complete copy replaces it.
            return self.rewrite(
                Job::Replace {
                    source: entry.source.clone(),
                    target: entry.target.clone(),
                },
                meta,
            );
        }
        self.create_new_file(entry, meta);
    }

    /// A target file that looks like the source's copy (see
    /// [`looks_copied`]): kept, its metadata brought up to date, or its
    /// bytes compared.
    fn keep_or_verify(&mut self, entry: &Entry, meta: &Metadata, target: &Metadata) {
        let quiet = self.quiet(meta);
        if quiet && same_attributes(meta, target) {
            Counters::add(&self.counters().unchanged, 1);
            return;
        }
        // Its inode changed since the last complete copy: its bytes
        // may have, under the same size and mtime (what a quick
        // check misses), so they are compared, unless the target
        // was copied from it after that change.
        let inode_changed = !quiet
            && self.options.changed_since.is_some()
            && !copied_after_its_change(meta, target);
        if self.options.checksum || inode_changed {
            self.rewrite(
                Job::Verify {
                    source: entry.source.clone(),
                    target: entry.target.clone(),
                },
                meta,
            );
        } else {
            Counters::add(&self.counters().unchanged, 1);
            self.apply_by_path(
                &entry.source,
                &entry.target,
                meta,
                Node::Path(&entry.target),
            );
        }
    }

    /// The first pass writes in place: the target is new.
    fn create_new_file(&mut self, entry: &Entry, meta: &Metadata) {
        if meta.nlink() == 1 && self.workers_create_files() {
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
            Err(err) if workers::is_name_taken(&err) => {
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

    /// A second-pass job, which may rename a new copy into the directory.
    /// A hard-linked inode's first name is done here, before the walk goes
    /// on: its later names are linked to the new inode (or, when it could
    /// not be copied, copy it themselves).
    fn rewrite(&mut self, job: Job, meta: &Metadata) {
        if meta.nlink() > 1 {
            if !self.run_here(job) {
                self.hardlinks.forget(meta.dev(), meta.ino());
            }
            return;
        }
        self.pool_renames = matches!(self.dispatch, Dispatch::Pool(_));
        self.submit(job);
    }

    /// Runs `job` in the walker's thread; returns whether it copied.
    fn run_here(&mut self, job: Job) -> bool {
        let shared = self.shared;
        match &mut self.dispatch {
            Dispatch::Inline(copier) => workers::run(job, copier, shared),
            Dispatch::Pool(_) => {
                let copier = self
                    .own_copier
                    .get_or_insert_with(|| DataCopier::new(shared.stop, &shared.counters.bytes));
                workers::run(job, copier, shared)
            }
        }
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
        if let Some(target) = &existing {
            // A symlink's destination never changes in place: a new one is a
            // new inode, with a new ctime.
            if target.file_type().is_symlink()
                && target.size() == meta.size()
                && self.quiet(meta)
                && same_attributes(meta, target)
            {
                Counters::add(&self.counters().unchanged, 1);
                return;
            }
        }
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
                if self.quiet(meta) && same_attributes(meta, target) {
                    return;
                }
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
                    self.run_here(job);
                }
            }
            Dispatch::Inline(copier) => {
                workers::run(job, copier, self.shared);
            }
        }
    }
}

/// A target file of the same kind, size and mtime as the source file: its
/// copy, as far as a quick check tells.
fn looks_copied(source: &Metadata, target: &Metadata) -> bool {
    let same_kind = target.file_type().is_file()
        // A target linked to other names the source no longer
        // shares must not be compared as the source's copy.
        && !(target.nlink() > 1 && source.nlink() == 1);
    same_kind && target.size() == source.size() && same_mtime(target, source)
}

/// Whether the target file was copied from the source after the source's
/// inode last changed: the target inode was born (its btime) after the
/// source's ctime. A copy is always a new inode, created before the
/// source's data is read (`workers`: the first pass creates the file and
/// then fills it, the second writes a new inode and renames it into place),
/// and any change of the source's data moves its ctime; so a source whose
/// ctime is older than the copy's birth holds the bytes the copy read. A
/// change during the copy has a ctime after its birth, and is compared the
/// next time. Metadata changes of the target (chmod, times) leave its
/// birth alone. Without a btime, or with one in the future (a clock set
/// back since), the bytes are compared.
fn copied_after_its_change(source: &Metadata, target: &Metadata) -> bool {
    let Ok(born) = target.created() else {
        return false;
    };
    let Ok(born) = born.duration_since(std::time::UNIX_EPOCH) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let changed = (source.ctime(), source.ctime_nsec());
    let born_at = (born.as_secs() as i64, i64::from(born.subsec_nanos()));
    born <= now && born_at > changed
}

fn same_mtime(a: &Metadata, b: &Metadata) -> bool {
    a.mtime() == b.mtime() && a.mtime_nsec() == b.mtime_nsec()
}

/// Owner, mode and times as the copy sets them (xattrs are not compared
/// here: reading them is what a quiet entry saves).
fn same_attributes(source: &Metadata, target: &Metadata) -> bool {
    source.uid() == target.uid()
        && source.gid() == target.gid()
        && source.mode() == target.mode()
        && same_mtime(source, target)
        && source.atime() == target.atime()
        && source.atime_nsec() == target.atime_nsec()
}

/// Sets directory times again after the workers created files in them.
pub fn set_deferred_times(times: &[(PathBuf, meta::Times)], shared: &Shared) {
    for (dir, times) in times {
        if let Err(err) = meta::set_node_times(Node::Path(dir), *times) {
            shared.failed(dir, "set directory times", err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{copy_tree, second_pass, CopyOptions};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    /// Copies `source` to `target` and returns a time after the copy and
    /// at least a second before anything the test changes next.
    fn copied(source: &Path, target: &Path) -> i64 {
        let options = CopyOptions {
            threads: 0,
            ..CopyOptions::default()
        };
        copy_tree(source, target, &options, &AtomicBool::new(false), &|_| {}).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let since = now();
        std::thread::sleep(Duration::from_millis(1100));
        since
    }

    fn pass(source: &Path, target: &Path, since: Option<i64>) -> super::super::CopyStats {
        let options = CopyOptions {
            changed_since: since,
            threads: 0,
            ..CopyOptions::default()
        };
        second_pass(source, target, &options, &AtomicBool::new(false), &|_| {}).unwrap()
    }

    /// A directory on the target that holds an excluded path (a standby's
    /// own record in `var/lib/pimigrate`) stays, though the source has
    /// none, and its parent keeps the source's times: a pass that removed
    /// it would leave the record's next write to change them.
    #[test]
    fn a_directory_holding_an_excluded_path_is_the_targets_own() {
        use crate::system::usage::Exclusion;
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(source.join("var/lib/apt")).unwrap();
        copied(&source, &target);
        std::fs::create_dir_all(target.join("var/lib/own")).unwrap();
        std::fs::write(target.join("var/lib/own/record.json"), "{}").unwrap();
        std::fs::write(target.join("var/lib/extra"), "not the source's").unwrap();
        let options = CopyOptions {
            threads: 0,
            exclusions: vec![Exclusion::new("/var/lib/own/record.json", false, "")],
            ..CopyOptions::default()
        };
        let stats =
            second_pass(&source, &target, &options, &AtomicBool::new(false), &|_| {}).unwrap();
        assert_eq!(stats.deleted, 1, "only var/lib/extra goes");
        assert!(target.join("var/lib/own/record.json").is_file());
        assert!(!target.join("var/lib/extra").exists());
        let mtime = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            (m.mtime(), m.mtime_nsec())
        };
        assert_eq!(
            mtime(&target.join("var/lib")),
            mtime(&source.join("var/lib"))
        );
    }

    /// After a complete copy at `since`, a pass with `changed_since` looks
    /// closely only at what changed since: a quiet entry in a settled
    /// directory is not looked at on the target at all (a target-only mode
    /// and xattr stay, as a pass never makes them: the plan trusts ctimes
    /// only while nothing else mounted the target), also in a directory
    /// that changed but sits in a quiet one (it was not moved); and every
    /// kind of change on the source (data of the same size and mtime aside,
    /// which moves ctime too: a mode, an xattr, a deletion in a quiet tree)
    /// is carried over.
    #[test]
    fn a_pass_with_changed_since_skips_quiet_entries_and_catches_changed_ones() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(source.join("d/e")).unwrap();
        for name in ["a", "b", "d/c", "d/e/f", "d/e/h"] {
            std::fs::write(source.join(name), name).unwrap();
        }
        let since = copied(&source, &target);

        // The target alone changed (as a pass never would): not seen.
        std::fs::set_permissions(target.join("a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(target.join("d/e/h"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let with_xattr = xattr::set(target.join("d/c"), "user.extra", b"1").is_ok();
        // The source changed: a mode only, an xattr only, a deletion deep down.
        std::fs::set_permissions(source.join("b"), std::fs::Permissions::from_mode(0o640)).unwrap();
        let source_xattr = xattr::set(source.join("d/e/f"), "user.new", b"v").is_ok();
        std::fs::remove_file(source.join("d/e/f")).ok();
        std::fs::write(source.join("d/e/g"), "g").unwrap();

        let stats = pass(&source, &target, Some(since));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode(&target.join("b")),
            0o640,
            "a mode-only change is carried over"
        );
        assert!(!target.join("d/e/f").exists(), "a deletion is carried over");
        assert_eq!(std::fs::read(target.join("d/e/g")).unwrap(), b"g");
        assert_eq!(stats.deleted, 1);
        assert_eq!(
            mode(&target.join("a")),
            0o600,
            "a quiet file in a settled directory is not looked at"
        );
        assert_eq!(
            mode(&target.join("d/e/h")),
            0o600,
            "nor is one in a changed directory that was not moved"
        );
        if with_xattr {
            assert!(xattr::get(target.join("d/c"), "user.extra")
                .unwrap()
                .is_some());
        }
        let _ = source_xattr;

        // Without it every entry is compared, and the target is made exact.
        pass(&source, &target, None);
        assert_eq!(mode(&target.join("a")), 0o644);
        if with_xattr {
            assert!(xattr::get(target.join("d/c"), "user.extra")
                .unwrap()
                .is_none());
        }
    }

    /// Two directories that swapped names since the last copy, at the top
    /// or one level down (in a directory whose own parent stays quiet):
    /// their contents are quiet (moving a directory changes only its own
    /// ctime, and its parents'), but below a moved directory nothing is
    /// settled, so the target's same-named entries, the other directory's,
    /// are compared and replaced.
    #[test]
    fn below_a_moved_directory_quiet_entries_are_compared() {
        for top in ["", "deep/"] {
            let dir = tempfile::tempdir_in("/var/tmp").unwrap();
            let (source, target) = (dir.path().join("s"), dir.path().join("t"));
            let at = |name: &str| source.join(format!("{top}{name}"));
            for (name, bytes) in [("a", "from a, longer"), ("b", "from b")] {
                std::fs::create_dir_all(at(name).join("sub")).unwrap();
                std::fs::write(at(name).join("x"), bytes).unwrap();
                std::fs::write(at(name).join("sub/y"), bytes).unwrap();
            }
            let since = copied(&source, &target);
            std::fs::rename(at("a"), at("tmp")).unwrap();
            std::fs::rename(at("b"), at("a")).unwrap();
            std::fs::rename(at("tmp"), at("b")).unwrap();

            pass(&source, &target, Some(since));
            for name in ["a/x", "a/sub/y", "b/x", "b/sub/y"] {
                let name = format!("{top}{name}");
                assert_eq!(
                    std::fs::read(target.join(&name)).unwrap(),
                    std::fs::read(source.join(&name)).unwrap(),
                    "{name}"
                );
            }
        }
    }

    /// Bytes rewritten under the same size and mtime (rsync's quick check
    /// misses them) are seen by the ctime, and copied.
    #[test]
    fn a_same_size_same_mtime_rewrite_is_carried_over() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("f"), "before").unwrap();
        let since = copied(&source, &target);
        let mtime = std::fs::metadata(source.join("f"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(source.join("f"), "after!").unwrap();
        std::fs::File::options()
            .write(true)
            .open(source.join("f"))
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        pass(&source, &target, Some(since));
        assert_eq!(std::fs::read(target.join("f")).unwrap(), b"after!");
    }

    /// A file changed just before a pass began is copied by it; the next
    /// pass, whose window still covers that change, does not read it
    /// again: the copy was born after the change. One rewritten (same size,
    /// same mtime) after that copy is read and compared. (An injected read
    /// error shows which files are read.)
    #[test]
    fn a_file_copied_after_its_change_is_not_compared_again() {
        use super::super::faults::{self, Op};
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("copied"), "before").unwrap();
        std::fs::write(source.join("rewritten"), "before").unwrap();
        let since = copied(&source, &target);
        std::fs::write(source.join("copied"), "changed, longer").unwrap();
        // Past the kernel's coarse clock tick, which the copy's birth uses.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(pass(&source, &target, Some(since)).files, 1);

        std::thread::sleep(Duration::from_millis(20));
        let rewritten = source.join("rewritten");
        let mtime = std::fs::metadata(&rewritten).unwrap().modified().unwrap();
        std::fs::write(&rewritten, "after!").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&rewritten)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        faults::inject(&source.join("copied"), Op::Read, libc::EIO);
        faults::inject(&rewritten, Op::Read, libc::EIO);
        let stats = pass(&source, &target, Some(since));
        assert_eq!(stats.error_count, 1, "{}", stats.errors_shown(5));
        assert_eq!(stats.errors[0].path, rewritten, "only this one is read");
        faults::clear(&rewritten);
        pass(&source, &target, Some(since));
        assert_eq!(std::fs::read(target.join("rewritten")).unwrap(), b"after!");
        assert_eq!(
            std::fs::read(target.join("copied")).unwrap(),
            b"changed, longer"
        );
    }

    /// A file whose only change is an xattr (same size, same mtime) is
    /// seen by its ctime.
    #[test]
    fn an_xattr_only_change_is_carried_over() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("f"), "data").unwrap();
        let since = copied(&source, &target);
        if xattr::set(source.join("f"), "user.tag", b"yes").is_err() {
            return; // no user xattrs on this filesystem
        }
        pass(&source, &target, Some(since));
        assert_eq!(
            xattr::get(target.join("f"), "user.tag").unwrap().as_deref(),
            Some(&b"yes"[..])
        );
    }
}
