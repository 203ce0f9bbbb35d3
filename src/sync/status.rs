//! The standby in one line, as `devices` and `verify` show it: "standby on
//! /dev/mmcblk0: synced 2 h ago, bootable". Read-only: the state
//! directory's record and the attached disks.

use super::divergence::Look;
use crate::clock::{now, time_ago};
use crate::state::standby::{StandbyRecord, SyncState};
use crate::system::System;
use serde::Serialize;

/// What `devices --json` and `verify --json` say of the standby.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StandbyStatus {
    /// The disk that holds it now, if attached.
    pub disk: Option<String>,
    /// `complete`, `syncing` (a sync started and did not end: incomplete)
    /// or `failed`.
    pub state: SyncState,
    /// When the last sync ended (Unix seconds), or started if it did not.
    pub at: u64,
    pub bootable: Option<bool>,
    /// This system runs from the standby itself.
    pub running_from_standby: bool,
    /// The line people read.
    pub summary: String,
    /// What else the owner must know: the standby changed since its last
    /// sync; the bootloader would start it before the running system.
    pub warnings: Vec<String>,
}

/// The standby's status, when there is a record of one.
pub fn status(system: &System, look: Look) -> Option<StandbyStatus> {
    let record = StandbyRecord::load(&system.host.path(&system.host.state_dir)).ok()??;
    let mut status = of(system, &record, now());
    if let Some(standby) = super::standby::recorded(system, &record) {
        if !status.running_from_standby {
            status
                .warnings
                .extend(super::divergence::check(system, &standby, Some(&record), look).summary());
            status
                .warnings
                .extend(super::boot_order::standby_boots_first(
                    system,
                    &standby.disk,
                    record.layout,
                ));
        }
    }
    Some(status)
}

fn of(system: &System, record: &StandbyRecord, now: u64) -> StandbyStatus {
    let found = system.disks.iter().find_map(|disk| {
        disk.partitions
            .iter()
            .find(|p| {
                p.partuuid
                    .as_deref()
                    .is_some_and(|id| record.is_for(Some(id)))
            })
            .map(|p| (disk, p))
    });
    let disk = found.map(|(d, _)| d.path.display().to_string());
    let running_from_standby = found
        .is_some_and(|(_, p)| p.devno.is_some() && p.devno == system.source.running_root_devno);
    let at = record.finished.unwrap_or(record.started);
    let failed = record
        .checks
        .iter()
        .find(|c| !c.pass)
        .map(|c| c.message.clone());
    let state = match (record.state, record.bootable, failed) {
        (SyncState::Complete, Some(true), _) => {
            format!("synced {}, bootable", time_ago(at, now))
        }
        (SyncState::Complete, _, failed) => format!(
            "synced {}, NOT bootable: {}",
            time_ago(at, now),
            failed.unwrap_or_else(|| "a check failed".into())
        ),
        (SyncState::Syncing, _, _) => format!(
            "incomplete: a sync started {} did not finish; `sudo pimigrate sync` completes it",
            time_ago(record.started, now)
        ),
        (SyncState::Failed, _, _) => format!(
            "incomplete: the sync {} failed ({}); `sudo pimigrate sync` completes it",
            time_ago(at, now),
            record.error.as_deref().unwrap_or("no reason recorded")
        ),
    };
    let summary = if running_from_standby {
        format!("this system runs from its standby copy ({state})")
    } else {
        match &disk {
            Some(disk) => format!("standby on {disk}: {state}"),
            None => format!(
                "standby {} (root PARTUUID={}) not attached; its last sync: {state}",
                record.disk.display(),
                record.root.partuuid.as_deref().unwrap_or("?")
            ),
        }
    };
    StandbyStatus {
        disk,
        state: record.state,
        at,
        bootable: record.bootable,
        running_from_standby,
        summary,
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::standby::CheckResult;

    #[test]
    fn the_line_says_when_and_whether_it_boots_or_that_it_is_incomplete() {
        let (_, system) = crate::system::inspect_fixture("pi4");
        let mut record = crate::state::standby::tests_support::sample();
        record.state = SyncState::Complete;
        record.finished = Some(1_000_000 - 2 * 3600);
        record.bootable = Some(true);
        let line = of(&system, &record, 1_000_000).summary;
        // The pi4 fixture's SD card carries 6c586e13-02, the sample's root.
        assert_eq!(
            line,
            "this system runs from its standby copy (synced 2 h ago, bootable)"
        );
        record.root.partuuid = Some("0a1b2c3d-01".into());
        assert_eq!(
            of(&system, &record, 1_000_000).summary,
            "standby on /dev/sda: synced 2 h ago, bootable"
        );
        record.bootable = Some(false);
        record.checks = vec![CheckResult {
            code: "kernel".into(),
            pass: false,
            message: "no /lib/modules/6.6".into(),
            hint: None,
        }];
        assert!(of(&system, &record, 1_000_000)
            .summary
            .ends_with("NOT bootable: no /lib/modules/6.6"));
        record.state = SyncState::Syncing;
        record.started = 1_000_000 - 300;
        let line = of(&system, &record, 1_000_000).summary;
        assert!(
            line.contains("incomplete: a sync started 5 min ago did not finish"),
            "{line}"
        );
        record.root.partuuid = Some("deadbeef-02".into());
        assert!(of(&system, &record, 1_000_000)
            .summary
            .contains("not attached"));
    }
}
