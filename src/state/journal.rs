//! What a migration has done so far, on disk, so an interrupted run can be
//! resumed (`migrate --resume`) or undone (`rollback`). Written atomically
//! after every step, by `apply::state` alone; a copy goes onto the
//! new root filesystem at the end.

use crate::clock::now;
use crate::plan::{PartitionPath, PartitionRole, Plan};
use crate::system::System;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version 2 names the files it created inside the boot partition
/// (`/tryboot.txt`), as its backups always were; version 1 named them as
/// the system saw them (`/boot/firmware/tryboot.txt`), and still reads
/// ([`upgrade_v1`]).
pub const JOURNAL_SCHEMA: &str = "pimigrate.journal/2";
const JOURNAL_SCHEMA_V1: &str = "pimigrate.journal/1";
pub const JOURNAL_FILE: &str = "migration.json";

/// The steps of a migration, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Old signatures cleared and the new table written: the target's old
    /// contents are gone from here on.
    Partitioned,
    /// mkfs ran on every new partition.
    Formatted,
    /// The root filesystem was copied (both passes).
    Copied,
    /// Full move: the boot files are on the target's FAT partition.
    BootFilesCopied,
    /// fstab (and a full move's cmdline.txt) edited on the target.
    TargetEdited,
    /// The TRIM rule and fstrim.timer's link on the new root (when the
    /// plan has them).
    TrimSetUp,
    /// A full move's change to the bootloader's config made (`--boot-order
    /// apply`): staged for the next boot (Pi 4) or written (Pi 5).
    BootloaderConfigured,
    /// The SD card's boot files changed (root-only): the last step.
    SourceBootEdited,
}

impl Step {
    /// The step in words (`status` and the migration log).
    pub fn name(self) -> &'static str {
        match self {
            Step::Partitioned => "partitioned",
            Step::Formatted => "formatted",
            Step::Copied => "the root filesystem copied",
            Step::BootFilesCopied => "the boot files copied",
            Step::TargetEdited => "fstab edited on the target",
            Step::TrimSetUp => "TRIM set up on the target",
            Step::BootloaderConfigured => "the bootloader's config changed",
            Step::SourceBootEdited => "the SD card's boot files changed",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub schema: String,
    pub plan: Plan,
    /// The view paths of the source, as given when the migration started.
    pub source_root: PathBuf,
    pub boot_dir: PathBuf,
    pub done: Vec<Step>,
    /// Backups written on the source's boot partition, file → backup, so
    /// `rollback` knows what to restore.
    pub backups: BTreeMap<PartitionPath, PartitionPath>,
    /// Files created on the source's boot partition, which `rollback` removes.
    pub created: Vec<PartitionPath>,
    /// When `verify --commit` made a trial boot permanent (Unix time).
    #[serde(default)]
    pub committed: Option<u64>,
    /// The bootloader's config as it was before this migration changed it
    /// (a full move with `--boot-order apply`), which `rollback` puts back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader_before: Option<String>,
    /// When pimigrate rebooted into the trial boot (`migrate --reboot`, the
    /// wizard): a normal boot after it means the trial did not come up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_requested: Option<u64>,
    pub started: u64,
    pub updated: u64,
    /// The boot (`/proc/sys/kernel/random/boot_id`) in which the journal
    /// was last written. Whether the Pi rebooted since is told by it: the
    /// clock cannot tell, as a Pi without an RTC or the network starts
    /// each boot at the time fake-hwclock saved, before the last write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_in_boot: Option<String>,
}

/// Version 1's `created` held view paths (`/boot/firmware/tryboot.txt`):
/// each becomes the name inside its `boot_dir` (`/tryboot.txt`).
fn upgrade_v1(journal: &mut serde_json::Value) -> Result<()> {
    let boot_dir = PathBuf::from(
        journal["boot_dir"]
            .as_str()
            .context("a version 1 journal without its boot_dir")?,
    );
    if let Some(created) = journal["created"].as_array_mut() {
        for entry in created {
            let view = PathBuf::from(
                entry
                    .as_str()
                    .context("a created file that is not a path")?,
            );
            let inside = view.strip_prefix(&boot_dir).with_context(|| {
                format!(
                    "the created file {} is not in the boot directory {}",
                    view.display(),
                    boot_dir.display()
                )
            })?;
            *entry = serde_json::to_value(PartitionPath::new(inside)?)?;
        }
    }
    journal["schema"] = JOURNAL_SCHEMA.into();
    Ok(())
}

impl Journal {
    pub fn new(plan: Plan, source_root: PathBuf, boot_dir: PathBuf) -> Journal {
        Journal {
            schema: JOURNAL_SCHEMA.into(),
            plan,
            source_root,
            boot_dir,
            done: Vec::new(),
            backups: BTreeMap::new(),
            created: Vec::new(),
            committed: None,
            bootloader_before: None,
            trial_requested: None,
            started: now(),
            updated: now(),
            written_in_boot: None,
        }
    }

    /// Whether this boot (`boot_id`, begun at `booted`) began after the
    /// journal was last written: by the boot ids when both are known, else
    /// by the clock; `None` when neither can tell.
    pub fn rebooted_since(&self, boot_id: Option<&str>, booted: Option<u64>) -> Option<bool> {
        match (self.written_in_boot.as_deref(), boot_id) {
            (Some(then), Some(now)) => Some(then != now),
            _ => booted.map(|began| began > self.updated),
        }
    }

    pub fn is_done(&self, step: Step) -> bool {
        self.done.contains(&step)
    }

    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(JOURNAL_FILE)
    }

    pub fn load(state_dir: &Path) -> Result<Option<Journal>> {
        let path = Journal::path(state_dir);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => {
                return Err(err).with_context(|| format!("reading the journal {}", path.display()))
            }
        };
        let journal = Journal::from_bytes(&bytes).with_context(|| {
            format!(
                "the journal {} is damaged; move it away to start over",
                path.display()
            )
        })?;
        Ok(Some(journal))
    }

    /// A journal of this version or of version 1 (upgraded as it is read).
    pub fn from_bytes(bytes: &[u8]) -> Result<Journal> {
        let mut value: serde_json::Value = serde_json::from_slice(bytes)?;
        if value["schema"] == JOURNAL_SCHEMA_V1 {
            upgrade_v1(&mut value)?;
        }
        Ok(serde_json::from_value(value)?)
    }

    /// Whether the migration's last step is recorded.
    pub fn is_complete(&self) -> bool {
        self.is_done(Step::SourceBootEdited)
    }

    /// Whether the migration reached its end: its last step recorded, or
    /// this system running from the target's root.
    pub fn landed(&self, system: &System) -> bool {
        self.is_complete() || runs_from_target(system, &self.plan)
    }
}

/// Is the running root the planned root partition on the target?
pub fn runs_from_target(system: &System, plan: &Plan) -> bool {
    let Some(root) = plan
        .disk
        .table
        .partitions
        .iter()
        .find(|p| p.role == PartitionRole::Root)
    else {
        return false;
    };
    let Some(devno) = system.source.running_root_devno else {
        return false;
    };
    system
        .disks
        .iter()
        .flat_map(|d| &d.partitions)
        .any(|p| p.devno == Some(devno) && p.partuuid.as_deref() == Some(root.partuuid.as_str()))
}
