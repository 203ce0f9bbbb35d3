//! How a sync compares the running root with the standby: in full (a
//! first sync, `--checksum`, anything that makes the standby's times
//! untrustworthy), or by what changed since its last complete sync.

use super::standby::Standby;
use crate::clock::now;
use crate::state::standby::{ClockMark, StandbyRecord};
use crate::system::superblock;

/// Whether the copy may trust the source's ctimes (see
/// [`crate::copy::CopyOptions::changed_since`]): only after a complete sync
/// of this very standby, which nothing else mounted since.
pub fn comparison(
    record: Option<&StandbyRecord>,
    standby: &Standby,
    fresh: bool,
    checksum: bool,
    clock: Option<&ClockMark>,
) -> (Option<u64>, String) {
    let every = |why: &str| (None, format!("every entry compared: {why}"));
    if fresh {
        return (None, "a first sync: everything is copied".into());
    }
    if checksum {
        return every("--checksum reads every file on both sides");
    }
    let Some(record) = record.filter(|r| r.is_for(standby.root.partuuid.as_deref())) else {
        return every("no sync of this standby is recorded yet");
    };
    let Some(last) = record.last_complete else {
        return every("no sync of this standby completed yet");
    };
    if last > now() {
        return every("the clock is behind the last complete sync");
    }
    if let (Some(then), Some(now)) = (&record.clock, clock) {
        if then.set_back_before(now) {
            return every("the clock was set back since the last sync started");
        }
    }
    let stamp = read_stamp(standby);
    if stamp.is_none() || stamp != record.stamp {
        return every(
            "the standby was mounted since its last complete sync (or it could not be read)",
        );
    }
    (
        // The kernel's ctime clock is coarse: a margin keeps a change made
        // just as the last sync started on the side of being looked at.
        Some(last.saturating_sub(2)),
        format!(
            "entries changed since the last complete sync ({}) and those whose size, mtime, owner or mode differ",
            crate::clock::time_ago(last, now())
        ),
    )
}

/// The standby root's superblock stamp, through its node or at its offset
/// in the disk.
pub fn read_stamp(standby: &Standby) -> Option<superblock::Stamp> {
    let result = match &standby.root.path {
        Some(path) => superblock::read(path, 0),
        None => superblock::read(&standby.disk.path, standby.root.start_bytes),
    };
    result.ok().flatten()
}
