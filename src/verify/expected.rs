//! What the migration meant to build, read from its journal: the yardstick
//! every check measures the running system against.

use crate::bootcfg::DeviceSpec;
use crate::plan::{
    BootloaderPlan, EditOperation, EditSite, Layout, PartitionPath, PartitionRole, Plan, TrialBoot,
    TrialRoute,
};
use crate::state::journal::Journal;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct Expected {
    pub layout: Layout,
    /// The target's root partition, as the partition table names it.
    pub root_partuuid: String,
    /// The partition the firmware should read boot files from: the SD
    /// card's (root-only) or the target's (full move).
    pub boot_spec: Option<DeviceSpec>,
    /// The SD card's root partition, which nothing should name any more.
    pub old_root_spec: DeviceSpec,
    /// Every id the migration created; each must exist only once.
    pub new_ids: Vec<DeviceSpec>,
    pub trial: Option<TrialBoot>,
    pub committed: Option<u64>,
    /// The boot files' directory as the migration saw it (a view path).
    pub boot_dir: PathBuf,
    /// The boot file whose `root=` the migration changed (`/cmdline.txt`).
    pub cmdline_file: PartitionPath,
    /// `verify --commit` began (it journals its backup of cmdline.txt before
    /// the swap) and did not finish: a power cut in the middle.
    pub commit_interrupted: bool,
    /// A full move on a Pi with the EEPROM bootloader: the trial's route,
    /// the bootloader's changes and the hand-over.
    pub bootloader: Option<BootloaderPlan>,
    /// When pimigrate rebooted into the trial.
    pub trial_requested: Option<u64>,
}

impl Expected {
    pub fn from_journal(journal: &Journal) -> Result<Expected> {
        let plan = &journal.plan;
        let root_partuuid = partuuid_of(plan, PartitionRole::Root)
            .context("the journal's plan has no root partition")?;
        let boot_spec = match plan.layout {
            Layout::Full => partuuid_of(plan, PartitionRole::Boot).map(DeviceSpec::PartUuid),
            Layout::RootOnly => plan.source.boot_spec.clone(),
        };
        let mut new_ids: Vec<DeviceSpec> = plan
            .disk
            .table
            .partitions
            .iter()
            .map(|p| DeviceSpec::PartUuid(p.partuuid.clone()))
            .collect();
        for fs in &plan.disk.filesystems {
            new_ids.push(DeviceSpec::Uuid(fs.uuid.clone()));
            new_ids.push(DeviceSpec::Label(fs.label.clone()));
        }
        let cmdline_file = plan
            .edits
            .iter()
            .find(|e| is_cmdline_edit(&e.operations) && e.site != EditSite::TargetRoot)
            .map(|e| e.file.clone())
            .unwrap_or_else(|| PartitionPath::known("/cmdline.txt"));
        Ok(Expected {
            layout: plan.layout,
            root_partuuid,
            boot_spec,
            old_root_spec: plan.source.root_spec.clone(),
            new_ids,
            trial: plan.trial_boot.clone(),
            committed: journal.committed,
            boot_dir: journal.boot_dir.clone(),
            commit_interrupted: plan.trial_boot.is_some()
                && plan.layout == Layout::RootOnly
                && journal.committed.is_none()
                && journal.backups.contains_key(&cmdline_file),
            cmdline_file,
            bootloader: plan.bootloader.clone(),
            trial_requested: journal.trial_requested,
        })
    }

    /// A full move's one-shot boot of the new drive (its own boot
    /// partition, the bootloader's trial order).
    pub fn device_trial(&self) -> bool {
        self.bootloader
            .as_ref()
            .is_some_and(|b| b.trial == Some(TrialRoute::Device))
    }

    /// The boot mode (`/chosen/bootloader/boot-mode`) a boot that runs the
    /// target should have come from: the new drive's, except in a full
    /// move's trial that starts the SD card's kernel; none for a root-only
    /// move, whose boots all start from the SD card.
    pub fn boot_mode(&self, in_trial: bool) -> Option<u8> {
        let bootloader = self.bootloader.as_ref()?;
        match (in_trial, bootloader.trial) {
            (true, Some(TrialRoute::KernelFromSd)) => Some(crate::bootcfg::eeprom::BOOT_MODE_SD),
            _ => Some(bootloader.target_mode),
        }
    }

    /// Where the trial's files are.
    pub fn trial_site(&self) -> Option<EditSite> {
        self.trial.as_ref().map(|t| t.site)
    }

    pub fn root_spec(&self) -> DeviceSpec {
        DeviceSpec::PartUuid(self.root_partuuid.clone())
    }

    /// A trial boot was planned and not yet made permanent.
    pub fn trial_pending(&self) -> bool {
        self.trial.is_some() && self.committed.is_none()
    }

    /// The view path of a file on the boot partition (`/cmdline.txt`).
    pub fn on_boot(&self, file: &PartitionPath) -> PathBuf {
        file.under(&self.boot_dir)
    }

    /// The view path of a file a boot file names (config.txt's `cmdline=`).
    /// A name that leaves the partition is taken as written: the firmware
    /// finds no such file, and the check reading it says so.
    pub fn on_boot_named(&self, name: &str) -> PathBuf {
        match PartitionPath::new(name) {
            Ok(file) => self.on_boot(&file),
            Err(_) => self.boot_dir.join(name),
        }
    }
}

fn partuuid_of(plan: &Plan, role: PartitionRole) -> Option<String> {
    plan.disk
        .table
        .partitions
        .iter()
        .find(|p| p.role == role)
        .map(|p| p.partuuid.clone())
}

fn is_cmdline_edit(operations: &[EditOperation]) -> bool {
    operations
        .iter()
        .any(|op| matches!(op, EditOperation::CmdlineSetRoot { .. }))
}
