//! The standby's record (`standby.json`, schema `pimigrate.standby/2`):
//! which disk and partitions the standby is, whether its last sync is
//! complete, when (its end to the nanosecond), and what the offline checks
//! said. A record of schema 1, whose end is known to the second, still
//! reads ([`StandbyRecord::ended`]).
//!
//! It is kept twice: in the running system's state directory, which
//! `devices` and `verify` read, and on the standby's own root
//! (`/var/lib/pimigrate/standby.json`), so the standby says what it is
//! when it is booted or looked at elsewhere. A sync writes `syncing` (and
//! flushes it) before it changes anything, and `complete` only after the
//! copy, the edits, a flush and the checks: a SIGKILL or a power cut in
//! between leaves `syncing`, which is reported as incomplete and finished
//! by the next sync. `apply::state` is its one writer.

use crate::clock::Moment;
use crate::plan::Layout;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version 2 keeps the last complete sync's end to the nanosecond
/// (`complete_at_nanos`), taken after its last write to the standby was
/// flushed; version 1 kept it in whole seconds, taken before the record
/// was written.
pub const STANDBY_SCHEMA: &str = "pimigrate.standby/2";
pub const STANDBY_FILE: &str = "standby.json";
/// The probe in the state directory whose ctime says when a sync started:
/// the clock the copy compares the source's ctimes with.
pub const PROBE_FILE: &str = "sync-started";
/// Where the standby's own copy lives on its root filesystem.
pub const ON_STANDBY: &str = "/var/lib/pimigrate/standby.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncState {
    /// A sync started and has not ended: the standby may be half copied.
    Syncing,
    /// A sync ended with an error (a stalled disk, Ctrl-C, a failed copy).
    Failed,
    /// The last sync copied, edited, flushed and checked everything.
    Complete,
}

/// A partition of the standby, by the ids that name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartIds {
    pub number: u32,
    pub partuuid: Option<String>,
    pub uuid: Option<String>,
    pub label: Option<String>,
}

/// One offline check, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub code: String,
    pub pass: bool,
    pub message: String,
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyRecord {
    pub schema: String,
    pub state: SyncState,
    /// The standby disk as it was named at the last sync (`/dev/mmcblk0`).
    pub disk: PathBuf,
    pub serial: Option<String>,
    pub model: Option<String>,
    /// `full`: a boot and a root partition of its own; `root-only`: a root
    /// partition started from the running system's boot partition.
    pub layout: Layout,
    pub root: PartIds,
    pub boot: Option<PartIds>,
    /// When this sync started (Unix seconds).
    pub started: u64,
    /// When it ended, complete or failed.
    pub finished: Option<u64>,
    /// When the last complete sync started: entries whose ctime is older
    /// changed neither on the source nor, if the superblock stamp still
    /// matches, on the standby.
    pub last_complete: Option<u64>,
    /// The standby root's superblock after the last complete sync.
    pub stamp: Option<crate::system::superblock::Stamp>,
    /// When the last complete sync ended (Unix seconds): on the standby,
    /// an inode changed after it was changed by someone else.
    #[serde(default)]
    pub complete_at: Option<u64>,
    /// The nanoseconds of that end (schema 2; none in a record of schema
    /// 1): together, the moment [`StandbyRecord::ended`] compares ctimes
    /// with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_at_nanos: Option<u32>,
    /// Read-write mounts of the standby by pimigrate's own runs since the
    /// last complete sync (interrupted ones): any others in its
    /// superblock's count were made elsewhere.
    #[serde(default)]
    pub own_mounts: u16,
    /// The clock when this sync started, against the time since boot, so a
    /// later sync in the same boot sees a clock that was set back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockMark>,
    /// Every offline check passed (only for a complete sync).
    pub bootable: Option<bool>,
    pub checks: Vec<CheckResult>,
    /// How to boot the standby, in order.
    pub boot_steps: Vec<String>,
    /// Why the last sync failed.
    pub error: Option<String>,
    /// A first sync's layout of the disk, while it is under way: the
    /// table's disk id and the steps done, so an interrupted layout is
    /// finished rather than half trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub laying_out: Option<LayoutProgress>,
}

/// The wall clock against the time since boot, at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockMark {
    /// Unix seconds.
    pub wall: u64,
    /// Seconds since boot (CLOCK_BOOTTIME: counts suspend, never set).
    pub since_boot: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
}

impl ClockMark {
    /// Now, with `boot_id` read from `proc_boot_id`.
    pub fn now(proc_boot_id: &Path) -> Option<ClockMark> {
        let boot_id = crate::clock::boot_id(proc_boot_id)?;
        let since_boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
            .ok()?
            .tv_sec() as u64;
        Some(ClockMark {
            wall: crate::clock::now(),
            since_boot,
            boot_id,
        })
    }

    /// Whether the wall clock was set back between `self` and `later` (in
    /// the same boot; across boots it cannot be told).
    pub fn set_back_before(&self, later: &ClockMark) -> bool {
        let elapsed = later.since_boot.saturating_sub(self.since_boot);
        self.boot_id == later.boot_id && later.wall + 2 < self.wall + elapsed
    }
}

/// How far a first sync's layout of the standby got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutProgress {
    /// The planned table's disk id (MBR signature or GPT GUID).
    pub disk_id: String,
    pub done: Vec<crate::state::journal::Step>,
}

impl StandbyRecord {
    /// Reads `standby.json` in `dir`; none when there is none yet.
    pub fn load(dir: &Path) -> Result<Option<StandbyRecord>> {
        let path = dir.join(STANDBY_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is damaged; move it away and sync again", path.display()))
    }

    /// When the last complete sync ended: every write of that sync to the
    /// standby has a ctime no later than this, so an inode changed after
    /// it was changed by someone else. A record that knows the end to the
    /// second only (schema 1) counts it as the last nanosecond of that
    /// second: nothing of the sync's own is taken for a change, and a
    /// change in the rest of that second goes unseen.
    pub fn ended(&self) -> Option<Moment> {
        let secs = self.complete_at?;
        Some(match self.complete_at_nanos {
            Some(nanos) if nanos < 1_000_000_000 => Moment {
                secs: secs as i64,
                nanos,
            },
            _ => Moment::end_of_second(secs),
        })
    }

    /// Whether this record describes the standby whose root partition has
    /// `partuuid`.
    pub fn is_for(&self, partuuid: Option<&str>) -> bool {
        match (self.root.partuuid.as_deref(), partuuid) {
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        }
    }
}

/// A record to start tests from.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub(crate) fn sample() -> StandbyRecord {
        StandbyRecord {
            schema: STANDBY_SCHEMA.into(),
            state: SyncState::Syncing,
            disk: "/dev/mmcblk0".into(),
            serial: Some("0x8a3c2f11".into()),
            model: Some("SC64G".into()),
            layout: Layout::Full,
            root: PartIds {
                number: 2,
                partuuid: Some("6c586e13-02".into()),
                uuid: None,
                label: Some("rootfs".into()),
            },
            boot: None,
            started: 1_700_000_000,
            finished: None,
            last_complete: Some(1_699_990_000),
            stamp: None,
            complete_at: None,
            complete_at_nanos: None,
            own_mounts: 0,
            clock: None,
            bootable: None,
            checks: Vec::new(),
            boot_steps: Vec::new(),
            error: None,
            laying_out: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_set_back_in_the_same_boot_is_seen() {
        let then = ClockMark {
            wall: 1_000_000,
            since_boot: 100,
            boot_id: "a".into(),
        };
        let later = |wall, since_boot, id: &str| ClockMark {
            wall,
            since_boot,
            boot_id: id.into(),
        };
        assert!(!then.set_back_before(&later(1_000_600, 700, "a")));
        // An hour ahead then, put right since: 600 s later by the boot
        // clock, but the wall clock says 3000 s earlier.
        assert!(then.set_back_before(&later(997_600, 700, "a")));
        // Another boot: it cannot be told.
        assert!(!then.set_back_before(&later(997_600, 50, "b")));
    }

    #[test]
    fn a_record_of_schema_1_still_reads_its_end_as_the_end_of_its_second() {
        let dir = tempfile::tempdir().unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/standby/standby-1.json");
        std::fs::copy(fixture, dir.path().join(STANDBY_FILE)).unwrap();
        let old = StandbyRecord::load(dir.path()).unwrap().unwrap();
        assert_eq!(old.schema, "pimigrate.standby/1");
        assert_eq!(old.state, SyncState::Complete);
        assert_eq!(old.complete_at, Some(1_716_200_130));
        assert_eq!(old.complete_at_nanos, None);
        assert_eq!(old.ended(), Some(Moment::end_of_second(1_716_200_130)));
        assert!(old.is_for(Some("9f0e1d2c-01")));
    }

    #[test]
    fn a_record_of_schema_2_keeps_its_end_to_the_nanosecond() {
        let mut record = tests_support::sample();
        record.complete_at = Some(1_716_200_130);
        record.complete_at_nanos = Some(250_000_000);
        let bytes = serde_json::to_vec(&record).unwrap();
        let read: StandbyRecord = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            read.ended(),
            Some(Moment {
                secs: 1_716_200_130,
                nanos: 250_000_000
            })
        );
        assert_eq!(read, record);
        record.complete_at = None;
        assert_eq!(record.ended(), None);
    }

    #[test]
    fn a_damaged_record_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(StandbyRecord::load(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(STANDBY_FILE), "{").unwrap();
        let err = StandbyRecord::load(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("is damaged"), "{err:#}");
    }
}
