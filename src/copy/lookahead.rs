//! Reading the source's metadata ahead of the walker, several reads at a
//! time. A pass over a tree whose caches are cold spends nearly all its
//! time waiting for directory blocks and inode tables, one read after the
//! other when one thread asks for them; a few threads that list the
//! directories the walker will enter next, and stat their entries, keep
//! several reads in flight, which a flash device (and the block layer's
//! merging) serves in about the time of one.
//!
//! The walker enters directories in depth-first order, each one's entries
//! in inode order. A directory's place in that order is its key: the
//! positions of its ancestors and of itself in their parents' listings.
//! Keys compare as the walk's order, so the threads always take the
//! requested directory the walker will need first. A thread that lists a
//! directory requests the subdirectories the walker will enter (the same
//! exclusions and filesystem boundary), so the threads run ahead as far as
//! the held listings allow ([`AHEAD`] entries), no further.
//!
//! The walker takes each listing when it enters the directory: a listing
//! still in work is waited for, one not begun yet is done right there (so
//! the walker never waits on threads that wait for room). When it leaves a
//! directory, whatever is still held or requested below it (a directory it
//! could not create on the target) is dropped.
//!
//! What it reads is what the walker would have read itself a moment later:
//! a change made meanwhile is one a pass cannot see anyway, and the next
//! one sees (its ctime is after the pass began).
//!
//! In the second pass the threads also read, without keeping it, what the
//! walker will look at on the target: the entries it compares (those not
//! quiet in a settled directory) and the listing of a directory that
//! changed (for what the source no longer has). The walker reads them
//! again itself, from the cache: the target changes under the walk, and
//! only the walker knows how.

use super::walk::{self, Name, Rules};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Threads reading ahead: enough reads in flight for an SSD or a USB
/// drive, which serve several at once; they wait on the device, so they
/// cost little CPU.
pub const THREADS: usize = 8;

/// Entries (names with their metadata) held ready for the walker, at most:
/// about 2 MiB.
pub const AHEAD: usize = 8192;

/// A directory's place in the walk (see the module comment).
pub type Key = Vec<u32>;

/// A listed directory: its names in inode order, each with its metadata
/// (or the error of its stat), or the error of the listing.
pub type Listing = io::Result<Vec<(Name, io::Result<Metadata>)>>;

/// Which subdirectories the walker enters, and what it compares.
pub struct Filter {
    pub rules: Rules,
    /// The source root's device, when the walk stays on its filesystem.
    pub root_dev: Option<u64>,
    /// The second pass compares with the target.
    pub second_pass: bool,
    /// An inode whose ctime is before this is quiet (the second pass's
    /// `changed_since`, unless it compares checksums).
    pub quiet_before: Option<i64>,
}

impl Filter {
    fn enters(&self, meta: &Metadata) -> bool {
        meta.is_dir() && self.root_dev.is_none_or(|dev| meta.dev() == dev)
    }

    fn quiet(&self, meta: &Metadata) -> bool {
        self.quiet_before.is_some_and(|since| meta.ctime() < since)
    }
}

/// A directory the walker will enter.
pub struct Dir {
    pub source: PathBuf,
    pub target: PathBuf,
    /// Below the source root.
    pub relative: PathBuf,
    /// The walker's `Frame::settled` for it.
    pub settled: bool,
    /// Its own inode is quiet.
    pub quiet: bool,
}

#[derive(Default)]
struct State {
    pending: BTreeMap<Key, Dir>,
    running: BTreeSet<Key>,
    done: BTreeMap<Key, Listing>,
    /// Running listings the walker no longer wants.
    orphans: BTreeSet<Key>,
    /// Entries in `done`.
    held: usize,
    /// The listing the walker waits for.
    wanted: Option<Key>,
    closed: bool,
}

pub struct Lookahead {
    state: Mutex<State>,
    /// Threads wait here for a request, or for room.
    work: Condvar,
    /// The walker waits here for a running listing.
    ready: Condvar,
    filter: Filter,
}

impl Lookahead {
    pub fn new(filter: Filter) -> Lookahead {
        Lookahead {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            ready: Condvar::new(),
            filter,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reading thread: takes the first request in the walk's order while
    /// there is room, until [`Lookahead::close`].
    pub fn serve(&self) {
        loop {
            let (key, dir) = {
                let mut state = self.lock();
                loop {
                    if state.closed {
                        return;
                    }
                    if state.held < AHEAD {
                        if let Some(first) = state.pending.pop_first() {
                            state.running.insert(first.0.clone());
                            // One wakes the next while there is more to do.
                            if !state.pending.is_empty() {
                                self.work.notify_one();
                            }
                            break first;
                        }
                    }
                    state = self.work.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            let listing = self.read(&dir);
            let mut state = self.lock();
            state.running.remove(&key);
            if state.orphans.remove(&key) {
                continue;
            }
            self.request_children(&mut state, &key, &dir, &listing);
            state.held += listing.as_ref().map_or(1, Vec::len);
            let wanted = state.wanted.as_ref() == Some(&key);
            state.done.insert(key, listing);
            drop(state);
            if wanted {
                self.ready.notify_one();
            }
        }
    }

    /// Lists `dir` with each entry's metadata and, in the second pass,
    /// reads what the walker will read of the target.
    fn read(&self, dir: &Dir) -> Listing {
        let listing = fetch(&dir.source);
        if self.filter.second_pass {
            if let Ok(entries) = &listing {
                if !dir.quiet {
                    let _ = walk::list(&dir.target);
                }
                for (name, meta) in entries {
                    let quiet = meta.as_ref().is_ok_and(|m| self.filter.quiet(m));
                    if !(dir.settled && quiet) {
                        let _ = std::fs::symlink_metadata(dir.target.join(&name.name));
                    }
                }
            }
        }
        listing
    }

    /// The listing of the directory `dir` at `key`, for the walker that
    /// enters it now.
    pub fn take(&self, key: &Key, dir: Dir) -> Listing {
        let mut state = self.lock();
        loop {
            if let Some(listing) = state.done.remove(key) {
                state.held -= listing.as_ref().map_or(1, Vec::len);
                state.wanted = None;
                drop(state);
                self.work.notify_one();
                return listing;
            }
            if !state.running.contains(key) {
                break;
            }
            state.wanted = Some(key.clone());
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.wanted = None;
        // Not begun (or never requested: the root): read it here, without
        // the target (the walker is about to read that itself).
        state.pending.remove(key);
        drop(state);
        let listing = fetch(&dir.source);
        let mut state = self.lock();
        self.request_children(&mut state, key, &dir, &listing);
        listing
    }

    /// Drops what is held or requested below `key`, a directory the walker
    /// leaves.
    pub fn forget_below(&self, key: &Key) {
        // A directory's descendants follow it in the keys' order.
        fn below<'k>(keys: impl Iterator<Item = &'k Key>, key: &Key) -> Vec<Key> {
            keys.skip_while(|k| *k == key)
                .take_while(|k| k.len() > key.len() && k.starts_with(key))
                .cloned()
                .collect()
        }
        let mut state = self.lock();
        let pending = below(state.pending.range(key.clone()..).map(|(k, _)| k), key);
        let done = below(state.done.range(key.clone()..).map(|(k, _)| k), key);
        let running = below(state.running.range(key.clone()..), key);
        if pending.is_empty() && done.is_empty() && running.is_empty() {
            return;
        }
        for k in pending {
            state.pending.remove(&k);
        }
        for k in done {
            if let Some(listing) = state.done.remove(&k) {
                state.held -= listing.as_ref().map_or(1, Vec::len);
            }
        }
        state.orphans.extend(running);
        drop(state);
        self.work.notify_one();
    }

    /// Ends the threads' work (the walk is over or stopped).
    pub fn close(&self) {
        self.lock().closed = true;
        self.work.notify_all();
        self.ready.notify_all();
    }

    /// Requests the subdirectories of the directory `dir` at `key` that the
    /// walker will enter.
    fn request_children(&self, state: &mut State, key: &Key, dir: &Dir, listing: &Listing) {
        let Ok(entries) = listing else {
            return;
        };
        let mut requested = 0;
        for (index, (name, meta)) in entries.iter().enumerate() {
            let Ok(meta) = meta else {
                continue;
            };
            if !self.filter.enters(meta)
                || self.filter.rules.excludes_child(&dir.relative, &name.name)
            {
                continue;
            }
            let mut child = key.clone();
            child.push(index as u32);
            let quiet = self.filter.quiet(meta);
            state.pending.insert(
                child,
                Dir {
                    source: dir.source.join(&name.name),
                    target: dir.target.join(&name.name),
                    relative: dir.relative.join(&name.name),
                    settled: dir.settled && (quiet || dir.quiet),
                    quiet,
                },
            );
            requested += 1;
        }
        for _ in 0..requested.min(THREADS) {
            self.work.notify_one();
        }
    }
}

/// Closes the lookahead when dropped.
pub struct CloseOnDrop<'l>(pub &'l Lookahead);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Lists `dir` and stats each of its entries.
pub fn fetch(dir: &Path) -> Listing {
    let names = walk::list(dir)?;
    Ok(names
        .into_iter()
        .map(|name| {
            let meta = walk::stat(&dir.join(&name.name));
            (name, meta)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::usage::Exclusion;

    fn filter(exclusions: &[Exclusion]) -> Filter {
        Filter {
            rules: Rules::new(exclusions),
            root_dev: None,
            second_pass: false,
            quiet_before: None,
        }
    }

    fn names(listing: &Listing) -> Vec<String> {
        listing
            .as_ref()
            .unwrap()
            .iter()
            .map(|(n, _)| n.name.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn keys_compare_in_the_walks_order() {
        let order: Vec<Key> = vec![vec![], vec![0], vec![0, 3], vec![0, 3, 0], vec![1], vec![2]];
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, order);
    }

    /// Threads read a tree ahead; the walker gets every listing, with
    /// metadata, whether read ahead, in work or not begun; excluded
    /// directories are not requested; what is left below a directory the
    /// walker leaves is dropped.
    #[test]
    fn listings_are_read_ahead_and_taken_in_any_state() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["a/x", "a/y", "b", "skip/deep"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/file"), "f").unwrap();
        let ahead = Lookahead::new(filter(&[Exclusion::new("/skip", false, "")]));
        let dir = |relative: &str| Dir {
            source: root.join(relative),
            target: root.join("never-read"),
            relative: PathBuf::from(relative),
            settled: false,
            quiet: false,
        };
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| ahead.serve());
            }
            let top = ahead.take(&vec![], dir(""));
            let mut top_names = names(&top);
            top_names.sort();
            assert_eq!(top_names, ["a", "b", "skip"]);
            let entries = top.unwrap();
            let index =
                |name: &str| entries.iter().position(|(n, _)| n.name == name).unwrap() as u32;
            assert!(entries.iter().all(|(_, meta)| meta.is_ok()));
            let a = ahead.take(&vec![index("a")], dir("a"));
            let mut a_names = names(&a);
            a_names.sort();
            assert_eq!(a_names, ["file", "x", "y"]);
            // The walker leaves `a` without entering x and y: dropped.
            ahead.forget_below(&vec![index("a")]);
            let b = ahead.take(&vec![index("b")], dir("b"));
            assert!(names(&b).is_empty());
            let state = ahead.lock();
            let skip = vec![index("skip")];
            assert!(!state.pending.contains_key(&skip) && !state.done.contains_key(&skip));
            assert!(state.done.keys().all(|k| k[0] != index("a")));
            drop(state);
            ahead.close();
        });
    }

    #[test]
    fn a_directory_that_cannot_be_listed_is_an_error_for_the_walker() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = Lookahead::new(filter(&[]));
        let missing = Dir {
            source: dir.path().join("gone"),
            target: dir.path().join("gone-too"),
            relative: PathBuf::from("gone"),
            settled: false,
            quiet: false,
        };
        let listing = ahead.take(&vec![0], missing);
        assert_eq!(listing.unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
