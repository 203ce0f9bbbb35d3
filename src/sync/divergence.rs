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
//!    ended (`ctime`, kept by the kernel that changed them) are changes. A
//!    mount with nothing changed syncs as before.
//!
//! The look trusts the other machine's clock: when the superblock says it
//! was last mounted at a time before the last sync ended, that clock was
//! behind and its ctimes say nothing, so the standby counts as changed in
//! ways that cannot be listed.

use super::record::StandbyRecord;
use super::standby::Standby;
use super::superblock;
use crate::apply::layout::PartitionDevices;
use crate::apply::mount::mount_to_look;
use crate::system::System;
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
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

/// The standby's divergence since the sync `record` describes.
pub fn check(system: &System, standby: &Standby, record: Option<&StandbyRecord>) -> Divergence {
    let Some(record) = record.filter(|r| r.is_for(standby.root.partuuid.as_deref())) else {
        return Divergence::FirstSync;
    };
    let (Some(then), Some(ended)) = (record.stamp, record.complete_at) else {
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
    if now == then {
        return Divergence::Unchanged;
    }
    let mounts = now.mounts_since(&then).saturating_sub(record.own_mounts);
    if mounts == 0 {
        return Divergence::Unchanged;
    }
    let mounted_at = superblock::last_mounted(&device, offset).ok().flatten();
    if mounted_at.is_some_and(|at| u64::from(at) + 2 < ended) {
        return Divergence::Changed {
            mounts,
            paths: Vec::new(),
            count: 0,
            unlisted: Some(format!(
                "it was mounted read-write {mounts} time(s) elsewhere, by a machine whose clock was behind this \
                 one's (its last mount is dated before the last sync), so what changed cannot be told from its times"
            )),
        };
    }
    match look(system, standby, ended) {
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
    }
}

/// Mounts the standby's root read-only and counts the entries that changed
/// after `ended`, naming the first [`SHOWN`].
fn look(system: &System, standby: &Standby, ended: u64) -> anyhow::Result<(u64, Vec<String>)> {
    let devices = PartitionDevices::existing(system, &standby.disk, &[standby.root.number])?;
    let mounted = mount_to_look(devices.of(standby.root.number)?, "standby-look")?;
    let found = changed_since(mounted.path(), ended + 1);
    mounted.unmount()?;
    Ok(found)
}

/// Entries below `root` whose inode changed after `since` (Unix seconds),
/// but for [`NOT_CHANGES`]: how many, and the first [`SHOWN`] by path.
pub fn changed_since(root: &Path, since: u64) -> (u64, Vec<String>) {
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
        if meta.ctime() > since as i64 {
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
        let before = crate::clock::now() - 100;
        let (count, paths) = changed_since(root, before);
        // srv itself (a new entry in it) and srv/new; var and var/lib too,
        // as their directories gained entries; never the record.
        assert!(paths.contains(&"srv/new".to_string()), "{paths:?}");
        assert!(
            !paths.iter().any(|p| p.starts_with("var/lib/pimigrate")),
            "{paths:?}"
        );
        assert_eq!(count as usize, paths.len());
        let (count, _) = changed_since(root, crate::clock::now() + 100);
        assert_eq!(count, 0);
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
