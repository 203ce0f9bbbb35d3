//! The post-migration benchmark against the "before" report of the old
//! root: which report counts as "before", and the speed-up per test.

use crate::bench::job::Pattern;
use crate::bench::report::{DeviceIdentity, Report, StoredReport};
use serde::Serialize;
use std::path::Path;

/// One test, before and after: MB/s for sequential tests, IOPS for random.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub test: String,
    pub unit: &'static str,
    pub before: f64,
    pub after: f64,
    /// after / before; above 1 is faster.
    pub speedup: Option<f64>,
}

/// The newest report of the old root drive; when that drive is not
/// attached (a full move with the SD card removed) or has no report, the
/// newest report of a root filesystem (`/`) taken before the migration
/// began on another drive than the target.
pub fn find_before<'a>(
    reports: &'a [StoredReport],
    old_root: Option<&DeviceIdentity>,
    target: Option<&DeviceIdentity>,
    migration_started: u64,
) -> Option<&'a StoredReport> {
    let of_old_drive = |r: &&StoredReport| {
        old_root.is_some_and(|old| {
            r.report
                .target
                .device
                .as_ref()
                .is_some_and(|d| d.same_drive(old))
        })
    };
    let root_before_migration = |r: &&StoredReport| {
        r.report.target.mountpoint.as_deref() == Some(Path::new("/"))
            && r.report.unix_time <= migration_started
            && !target.is_some_and(|t| {
                r.report
                    .target
                    .device
                    .as_ref()
                    .is_some_and(|d| d.same_drive(t))
            })
    };
    // `list` sorts oldest first.
    reports
        .iter()
        .rev()
        .find(of_old_drive)
        .or_else(|| reports.iter().rev().find(root_before_migration))
}

/// Rows for the tests both reports ran, in the order the new run ran them.
pub fn compare(before: &Report, after: &Report) -> Vec<Row> {
    after
        .results
        .iter()
        .filter_map(|new| {
            let old = before.result(&new.name)?;
            let (unit, before, after) = if new.pattern == Pattern::Sequential {
                ("MB/s", old.mb_per_s, new.mb_per_s)
            } else {
                ("IOPS", old.iops, new.iops)
            };
            Some(Row {
                test: new.name.clone(),
                unit,
                before,
                after,
                speedup: (before > 0.0).then(|| after / before),
            })
        })
        .collect()
}
