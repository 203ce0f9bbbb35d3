//! Whether the standby changed behind the sync's back since its last
//! complete sync (mounted on another machine, or booted by mistake), decided
//! from the standby itself, so a sync never overwrites such changes without
//! a word:
//!
//! 1. its superblock: every read-write mount adds one to `s_mnt_count`; the
//!    record keeps the count the last complete sync left and the mounts of
//!    pimigrate's own runs since. None beyond those: nobody else wrote it (a
//!    read-only mount elsewhere does not count, and writes nothing).
//! 2. otherwise a look at it, mounted read-only without replaying its
//!    journal: entries whose inode changed after the last complete sync
//!    ended (`ctime`, kept by the kernel that changed them, compared to
//!    the nanosecond with the end the record keeps, taken after the sync's
//!    last write to the standby was flushed) are changes. A mount with
//!    nothing changed syncs as before.
//!
//! The look trusts the other machine's clock: when the superblock says it
//! was last mounted in a second before the one the last sync ended in,
//! that clock was behind (the mount came after the sync) and its ctimes
//! say nothing, so the standby counts as changed in ways that cannot be
//! listed.

use super::standby::Standby;
use crate::clock::Moment;
use crate::state::standby::StandbyRecord;
use crate::system::superblock::{self, Stamp};
use crate::system::System;
use serde::Serialize;
use std::path::Path;

/// How many changed paths are named.
pub const SHOWN: usize = 10;

/// Names on the standby the look leaves out: its own record, and what
/// mkfs made.
const NOT_CHANGES: &[&str] = &["var/lib/pimigrate", "lost+found"];

/// What the standby went through since its last complete sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum Divergence {
    /// No earlier complete sync of this standby to compare with.
    FirstSync,
    /// Written by nobody but pimigrate since.
    Unchanged,
    /// Mounted read-write elsewhere, but nothing in it changed.
    MountedOnly { mounts: u16 },
    /// Changed: the first few paths (below its root) and how many.
    Changed {
        mounts: u16,
        paths: Vec<String>,
        count: u64,
        /// Why the paths cannot be listed, when they cannot.
        unlisted: Option<String>,
    },
    /// Could not be told (not root, the standby unreadable): why.
    Unknown { why: String },
}

impl Divergence {
    pub fn changed(&self) -> bool {
        matches!(self, Divergence::Changed { .. })
    }

    /// The line `sync`, `devices` and `verify` say, when there is one.
    pub fn summary(&self) -> Option<String> {
        match self {
            Divergence::Changed {
                paths,
                count,
                unlisted: None,
                mounts,
            } => Some(format!(
                "standby changed since its last sync: {count} entries changed on it ({} read-write mount{} elsewhere), \
                 among them {}",
                mounts,
                if *mounts == 1 { "" } else { "s" },
                paths.iter().map(|p| format!("/{p}")).collect::<Vec<_>>().join(", ")
            )),
            Divergence::Changed {
                unlisted: Some(why),
                ..
            } => Some(format!("standby changed since its last sync: {why}")),
            _ => None,
        }
    }
}

/// How a standby's root is looked at: mounted read-only without replaying
/// its journal, the entries whose inode changed after a moment counted and
/// the first [`SHOWN`] named ([`changed_since`] on the mounted root).
/// Mounting is the writing room's (`apply::standby`'s `look`); the caller
/// hands it in, so planning and `devices` mount nothing of their own.
pub type Look<'a> = &'a dyn Fn(&System, &Standby, Moment) -> anyhow::Result<(u64, Vec<String>)>;

/// The standby's divergence since the sync `record` describes.
pub fn check(
    system: &System,
    standby: &Standby,
    record: Option<&StandbyRecord>,
    look: Look,
) -> Divergence {
    let Some(record) = record.filter(|r| r.is_for(standby.root.partuuid.as_deref())) else {
        return Divergence::FirstSync;
    };
    let (Some(then), Some(ended)) = (record.stamp, record.ended()) else {
        return Divergence::FirstSync;
    };
    let (device, offset) = match &standby.root.path {
        Some(path) => (path.clone(), 0),
        None => (standby.disk.path.clone(), standby.root.start_bytes),
    };
    let now = match superblock::read(&device, offset) {
        Ok(Some(stamp)) => stamp,
        Ok(None) => {
            return Divergence::Unknown {
                why: format!("{} holds no ext4 filesystem now", standby.root_name()),
            }
        }
        Err(err) => {
            return Divergence::Unknown {
                why: format!("reading {}: {err}", standby.root_name()),
            }
        }
    };
    let mounted_at = || superblock::last_mounted(&device, offset).ok().flatten();
    match mounts_elsewhere(then, now, record.own_mounts, mounted_at, ended) {
        Mounts::None => Divergence::Unchanged,
        Mounts::ByAClockBehind(mounts) => Divergence::Changed {
            mounts,
            paths: Vec::new(),
            count: 0,
            unlisted: Some(format!(
                "it was mounted read-write {mounts} time(s) elsewhere, by a machine whose clock was behind this \
                 one's (its last mount is dated before the last sync), so what changed cannot be told from its times"
            )),
        },
        Mounts::ToLookAt(mounts) => match look(system, standby, ended) {
            Ok((0, _)) => Divergence::MountedOnly { mounts },
            Ok((count, paths)) => Divergence::Changed {
                mounts,
                paths,
                count,
                unlisted: None,
            },
            Err(err) => Divergence::Unknown {
                why: format!("{err:#}"),
            },
        },
    }
}

/// What the superblock says of the standby since the last complete sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mounts {
    /// Mounted read-write by nobody but pimigrate.
    None,
    /// Mounted read-write elsewhere (so many times) by a machine whose
    /// clock was behind: its ctimes say nothing.
    ByAClockBehind(u16),
    /// Mounted read-write elsewhere (so many times): its ctimes say what
    /// changed.
    ToLookAt(u16),
}

/// The standby's mounts elsewhere since the last complete sync, which
/// ended at `ended` and left the superblock at `then`; `now` is the
/// superblock as it is, `own_mounts` the read-write mounts of pimigrate's
/// own runs since, `mounted_at` the last mount's time (`s_mtime`, whole
/// seconds by the mounting machine's clock).
fn mounts_elsewhere(
    then: Stamp,
    now: Stamp,
    own_mounts: u16,
    mounted_at: impl FnOnce() -> Option<u32>,
    ended: Moment,
) -> Mounts {
    if now == then {
        return Mounts::None;
    }
    let mounts = now.mounts_since(&then).saturating_sub(own_mounts);
    if mounts == 0 {
        return Mounts::None;
    }
    // Every mount since came after the sync ended (it had the standby
    // mounted until then): one dated in an earlier second was dated by a
    // clock behind this one's. One in the very second of the end is not
    // told apart from a right clock, whose ctimes the look can trust.
    match mounted_at() {
        Some(at) if i64::from(at) < ended.secs => Mounts::ByAClockBehind(mounts),
        _ => Mounts::ToLookAt(mounts),
    }
}

/// Entries below `root` whose inode changed strictly after `after` (their
/// ctime, to the nanosecond), but for [`NOT_CHANGES`]: how many, and the
/// first [`SHOWN`] by path.
pub fn changed_since(root: &Path, after: Moment) -> (u64, Vec<String>) {
    let mut count = 0;
    let mut paths = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .min_depth(1)
        .same_file_system(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let relative = e.path().strip_prefix(root).unwrap_or(e.path());
            !NOT_CHANGES.iter().any(|n| relative == Path::new(n))
        });
    for entry in walk.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if Moment::ctime_of(&meta) > after {
            count += 1;
            if paths.len() < SHOWN {
                let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
                paths.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    (count, paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_changed_after_the_sync_are_counted_and_its_own_record_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("var/lib/pimigrate")).unwrap();
        std::fs::create_dir_all(root.join("srv")).unwrap();
        std::fs::write(root.join("var/lib/pimigrate/standby.json"), "{}").unwrap();
        std::fs::write(root.join("srv/new"), "x").unwrap();
        let before = Moment::end_of_second(crate::clock::now() - 100);
        let (count, paths) = changed_since(root, before);
        // srv itself (a new entry in it) and srv/new; var and var/lib too,
        // as their directories gained entries; never the record.
        assert!(paths.contains(&"srv/new".to_string()), "{paths:?}");
        assert!(
            !paths.iter().any(|p| p.starts_with("var/lib/pimigrate")),
            "{paths:?}"
        );
        assert_eq!(count as usize, paths.len());
        let (count, _) = changed_since(root, Moment::end_of_second(crate::clock::now() + 100));
        assert_eq!(count, 0);
    }

    /// Regression (issue 44 item 7): a change made within the seconds
    /// after a sync ended was not seen, as the look counted only ctimes
    /// more than a second after the end's whole second.
    #[test]
    fn a_change_right_after_the_end_is_seen_to_the_nanosecond() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("synced"), "the sync's own write").unwrap();
        let ended = Moment::now();
        // The standby is flushed, unmounted and mounted elsewhere after
        // the end: longer than the few milliseconds by which the kernel's
        // ctime clock lags the wall clock.
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::write(root.join("theirs"), "written right after").unwrap();
        let theirs = Moment::ctime_of(&std::fs::metadata(root.join("theirs")).unwrap());
        assert!(theirs > ended);
        assert_eq!(changed_since(root, ended), (1, vec!["theirs".to_string()]));
        // The sync's own writes are never after its end.
        let synced = Moment::ctime_of(&std::fs::metadata(root.join("synced")).unwrap());
        assert!(synced <= ended, "{synced:?} {ended:?}");
        // A record of schema 1 knows the end to the second: only what
        // changed in a later second is seen.
        let old_end = Moment::end_of_second(ended.secs as u64);
        let (count, _) = changed_since(root, old_end);
        assert_eq!(count, u64::from(theirs.secs > ended.secs));
    }

    #[test]
    fn the_superblock_decides_whether_to_look() {
        let stamp = |mount_count| Stamp {
            mount_count,
            write_time: 1_700_000_000,
        };
        let ended = Moment {
            secs: 1_700_000_100,
            nanos: 900_000_000,
        };
        let at = |secs: u32| move || Some(secs);
        // Nothing mounted it, or only pimigrate's own runs did.
        assert_eq!(
            mounts_elsewhere(stamp(7), stamp(7), 0, at(0), ended),
            Mounts::None
        );
        assert_eq!(
            mounts_elsewhere(stamp(7), stamp(8), 1, at(0), ended),
            Mounts::None
        );
        // Mounted elsewhere in the very second the sync ended, or later:
        // its ctimes are looked at.
        for secs in [1_700_000_100, 1_700_000_101, 1_700_009_000] {
            assert_eq!(
                mounts_elsewhere(stamp(7), stamp(8), 0, at(secs), ended),
                Mounts::ToLookAt(1),
                "{secs}"
            );
        }
        assert_eq!(
            mounts_elsewhere(stamp(7), stamp(9), 0, || None, ended),
            Mounts::ToLookAt(2)
        );
        // Dated in a second before the end: a clock behind, even by one.
        assert_eq!(
            mounts_elsewhere(stamp(7), stamp(8), 0, at(1_700_000_099), ended),
            Mounts::ByAClockBehind(1)
        );
        assert_eq!(
            mounts_elsewhere(stamp(7), stamp(10), 1, at(1_600_000_000), ended),
            Mounts::ByAClockBehind(2)
        );
    }

    #[test]
    fn only_changes_are_said() {
        assert_eq!(Divergence::Unchanged.summary(), None);
        assert_eq!(Divergence::MountedOnly { mounts: 1 }.summary(), None);
        let changed = Divergence::Changed {
            mounts: 1,
            paths: vec!["srv/keep/a".into()],
            count: 3,
            unlisted: None,
        };
        assert!(changed.changed());
        assert_eq!(
            changed.summary().unwrap(),
            "standby changed since its last sync: 3 entries changed on it (1 read-write mount elsewhere), among them /srv/keep/a"
        );
    }
}
