//! What a migration has done so far, on disk, so an interrupted run can be
//! resumed (`migrate --resume`) or undone (`rollback`). Written atomically
//! after every step; a copy goes onto the new root filesystem at the end.

use crate::plan::Plan;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const JOURNAL_SCHEMA: &str = "pimigrate.journal/1";
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
    /// The SD card's boot files changed (root-only): the last step.
    SourceBootEdited,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub schema: String,
    pub plan: Plan,
    /// The view paths of the source, as given when the migration started.
    pub source_root: PathBuf,
    pub boot_dir: PathBuf,
    pub done: Vec<Step>,
    /// Backups written, so `rollback` knows what to restore (view paths).
    pub backups: BTreeMap<PathBuf, PathBuf>,
    /// Files created on the source's boot partition, which `rollback` removes.
    pub created: Vec<PathBuf>,
    /// When `verify --commit` made a trial boot permanent (Unix time).
    #[serde(default)]
    pub committed: Option<u64>,
    pub started: u64,
    pub updated: u64,
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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
            started: now(),
            updated: now(),
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
        let journal: Journal = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "the journal {} is damaged; move it away to start over",
                path.display()
            )
        })?;
        Ok(Some(journal))
    }

    /// Writes the journal atomically (a power cut leaves the old or the new).
    pub fn save(&mut self, state_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        self.updated = now();
        let bytes = serde_json::to_vec_pretty(self).context("encoding the journal")?;
        super::atomic::replace(&Journal::path(state_dir), &bytes, super::atomic::FILE)
    }

    pub fn mark(&mut self, step: Step, state_dir: &Path) -> Result<()> {
        if !self.done.contains(&step) {
            self.done.push(step);
        }
        self.save(state_dir)
    }
}
