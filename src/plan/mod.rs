//! The plan: everything a migration will do, decided before anything is
//! written. `pimigrate plan` prints it; `migrate` prints the same value and
//! hands it to the executor.

pub mod after_move;
pub(crate) mod boot_layout;
pub mod bootloader;
pub mod edits;
pub mod exclusions;
mod firmware;
pub mod geometry;
pub mod ids;
pub mod mkfs;
pub mod options;
pub mod partition_path;
pub mod planner;
pub mod refusal;
pub mod regenerated;
pub mod render;
pub mod replica;
pub mod root_filesystem;
pub(crate) mod source_check;
mod table;
pub mod trial;
pub mod trial_guard;
mod warnings;

pub use options::{BootOrderChoice, HandoverChoice, Layout, Options, TableChoice, TrialChoice};
pub use partition_path::PartitionPath;
pub use planner::{plan, plan_with_progress};
pub use refusal::{Reason, Refusal};
pub use replica::identity;

use crate::bootcfg::eeprom::{BootOrder, EepromEdit};
use crate::bootcfg::DeviceSpec;
use crate::space::SpaceCheck;
use crate::system::disks::Transport;
use crate::system::mounts::DevNo;
use crate::system::probe::TableKind;
use crate::system::usage::Exclusion;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Bumped whenever a field changes meaning or disappears (adding is fine).
pub const PLAN_SCHEMA: &str = "pimigrate.plan/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    pub layout: Layout,
    pub pi: PiSummary,
    pub source: SourceSummary,
    pub target: TargetIdentity,
    /// The table and filesystems the target gets (`table`, `filesystems`).
    #[serde(flatten)]
    pub disk: replica::DiskLayout,
    pub copy: CopyPlan,
    /// Full move: the boot partition's files go to the target's FAT partition.
    pub boot_copy: Option<BootCopy>,
    pub edits: Vec<FileEdit>,
    /// Root-only move on a firmware with tryboot: the SD card's cmdline.txt
    /// is left alone; the next `reboot "0 tryboot"` reads tryboot.txt, which
    /// points at the new command line. Made permanent by `verify --commit`.
    pub trial_boot: Option<TrialBoot>,
    pub boot_order: Option<BootOrderAdvice>,
    /// A full move on a Pi with the EEPROM bootloader (Pi 4, 400, CM4,
    /// Pi 5): how the trial reaches the new drive, the changes to the
    /// bootloader's config as diffs, and the hand-over `verify --commit`
    /// makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<BootloaderPlan>,
    /// What the new drive needs beyond the copy: TRIM, the USB bridge's
    /// driver, the power (`after_move`; a plan journaled before it has
    /// none, and writes nothing for it).
    #[serde(default)]
    pub after_move: after_move::AfterMove,
    /// Things the user should know that do not stop the move.
    pub warnings: Vec<String>,
    /// What the migration does with this system's boot layout beyond
    /// `root=`, and why: a first-boot hook left out, an fstab without `/`,
    /// a setting that regenerates cmdline.txt.
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PiSummary {
    pub model: Option<String>,
    pub family: crate::system::pi::PiFamily,
    pub eeprom_bootloader: bool,
    pub tryboot_available: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceSummary {
    pub root_dir: PathBuf,
    pub root_device: Option<String>,
    pub boot_dir: PathBuf,
    pub boot_device: Option<String>,
    /// How the source names its root: fstab's `/` line, or cmdline.txt's
    /// `root=` when fstab has none.
    pub root_spec: DeviceSpec,
    pub boot_spec: Option<DeviceSpec>,
    /// False when fstab has no `/` line and only cmdline.txt names the root.
    #[serde(default = "yes")]
    pub fstab_names_root: bool,
}

fn yes() -> bool {
    true
}

fn source_boot() -> EditSite {
    EditSite::SourceBoot
}

/// Who the target is, so the executor can check, right before the first
/// write, that the disk is still the one the user confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetIdentity {
    pub path: PathBuf,
    pub name: String,
    pub devno: DevNo,
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub size_bytes: u64,
    pub logical_sector_size: u32,
    pub transport: Transport,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionRole {
    Boot,
    Root,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TablePlan {
    pub kind: TableKind,
    /// Why this kind (`auto` explains its choice).
    pub reason: String,
    /// MBR: the disk signature (8 hex digits); GPT: the disk GUID.
    pub disk_id: String,
    pub sector_size: u32,
    pub alignment_bytes: u64,
    pub partitions: Vec<PlannedPartition>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedPartition {
    pub number: u32,
    pub role: PartitionRole,
    /// First and last sector, inclusive, in logical sectors.
    pub start_sector: u64,
    pub end_sector: u64,
    pub size_bytes: u64,
    /// MBR type byte (`0x0c`, `0x83`) or GPT type GUID.
    pub type_id: String,
    pub type_name: String,
    pub partuuid: String,
    /// GPT partition name.
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MkfsStep {
    pub partition: u32,
    pub fstype: String,
    pub label: String,
    pub uuid: String,
    /// The command, with `{partition}` where the kernel's partition node
    /// goes (its name is read from sysfs once the table is re-read).
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyPlan {
    pub from: PathBuf,
    pub exclusions: Vec<Exclusion>,
    /// Mount points below the root that belong to other filesystems and are
    /// not descended into (files hidden beneath them are copied).
    pub other_filesystems: Vec<PathBuf>,
    pub files: u64,
    pub directories: u64,
    pub space: SpaceCheck,
    /// The second pass compares file contents, not only size and mtime.
    #[serde(default)]
    pub checksum: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootCopy {
    pub from: PathBuf,
    pub to_partition: u32,
    pub bytes: u64,
    pub files: u64,
}

/// Which filesystem an edited file lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditSite {
    /// The new root filesystem on the target.
    TargetRoot,
    /// The new boot partition on the target (full move).
    TargetBoot,
    /// The source's boot partition: the SD card the firmware reads (a
    /// root-only move). Changed last, atomically, after a backup.
    SourceBoot,
}

/// One change to one file, as operations (re-applied to the file as it is
/// at apply time) and as the diff they make to the file as it is now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEdit {
    pub site: EditSite,
    /// The file inside that filesystem: `/etc/fstab`, `/cmdline.txt`.
    pub file: PartitionPath,
    /// Where the edited text goes: `file` itself, or a file of its own for
    /// a trial boot (`/cmdline.pimigrate.txt`).
    pub output: PartitionPath,
    /// Where the original is kept before `file` is replaced (none when the
    /// output is a new file).
    pub backup: Option<PartitionPath>,
    /// Where that is, for a person: "SD card boot partition /dev/mmcblk0p1".
    pub device: String,
    pub operations: Vec<EditOperation>,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum EditOperation {
    FstabSetSpec {
        mountpoint: String,
        spec: DeviceSpec,
    },
    /// Sets the filesystem type of the entry mounted at `mountpoint` (an
    /// ext2 or ext3 root's `/` line, whose copy is ext4).
    FstabSetType {
        mountpoint: String,
        fstype: String,
    },
    CmdlineSetRoot {
        spec: DeviceSpec,
    },
    CmdlineAdd {
        arg: String,
    },
    /// Leaves out an argument written exactly so (a first-boot hook).
    CmdlineRemove {
        arg: String,
    },
    /// Keeps `uas` off the USB bridge `usb_id` (`VID:PID`): its `u` flag
    /// merged into the one `usb-storage.quirks=` argument.
    CmdlineIgnoreUas {
        usb_id: String,
    },
    /// Sets `key=value` in an `/etc/default/` file (raspi-firmware's
    /// ROOTPART), appended under `comment` when no line assigns it.
    DefaultsSet {
        key: String,
        value: String,
        comment: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialBoot {
    /// The boot partition the trial's files are on: the SD card's (a
    /// root-only move, or a full move whose trial starts the SD card's
    /// kernel) or the target's (a full move's one-shot boot of the new
    /// drive).
    #[serde(default = "source_boot")]
    pub site: EditSite,
    /// `/tryboot.txt` on that boot partition: config.txt plus
    /// `cmdline=<cmdline_file>`.
    pub tryboot_file: PartitionPath,
    pub cmdline_file: PartitionPath,
    /// An existing tryboot.txt is kept here first.
    pub backup: Option<PartitionPath>,
    /// config.txt → tryboot.txt.
    pub diff: String,
    /// Where tryboot.txt's `cmdline=` went and why, when config.txt's
    /// includes mattered (Ubuntu's syscfg.txt, usercfg.txt).
    #[serde(default)]
    pub note: Option<String>,
    /// What resets the trial when it does not come up (none in journals
    /// written before it existed).
    #[serde(default)]
    pub guard: Option<trial_guard::TrialGuard>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootOrderAdvice {
    pub current: Option<BootOrder>,
    pub needed: Option<BootOrder>,
    pub message: String,
}

/// How a full move's trial boot reaches the new drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrialRoute {
    /// A one-shot boot of the new drive, its own boot partition and all:
    /// the Pi 4's EEPROM `[tryboot]` BOOT_ORDER or the Pi 5's
    /// `set_reboot_order`, with the SD card as the fallback.
    Device,
    /// The SD card's kernel with the new drive's root, as a root-only trial;
    /// the new drive boots by itself only after the hand-over.
    KernelFromSd,
}

/// What `verify --commit` does after a full move's trial: the new drive
/// must become what the bootloader boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handover {
    /// BOOT_ORDER with the new drive first, the SD card kept as the fallback.
    BootOrder,
    /// The owner takes the SD card out; the bootloader's config stays.
    RemoveCard,
}

/// When a change to the bootloader's config takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EepromTakesEffect {
    /// Pi 4 family: `rpi-eeprom-update` stages it on the SD card's boot
    /// partition and the boot ROM's recovery.bin writes it at the next
    /// reboot, which then starts as before.
    NextReboot,
    /// Pi 5: `rpi-eeprom-update` writes the EEPROM at once (flashrom).
    AtOnce,
}

/// One change to the bootloader's config, made through the system's
/// `rpi-eeprom-config --apply`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EepromChange {
    /// The settings changed, each where the bootloader reads it; made on
    /// the config that is in the EEPROM when the change is made.
    #[serde(default)]
    pub edits: Vec<EepromEdit>,
    /// The whole config with the edits, as the plan's config reads.
    pub config: String,
    /// From the config before it, as a diff.
    pub diff: String,
    /// What the change is for, in a line.
    pub purpose: String,
}

/// Where the plan read the bootloader's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EepromSource {
    /// The config the bootloader started with (`rpi-eeprom-config`).
    #[default]
    Running,
    /// An update staged for the next boot (`pieeprom.upd` with
    /// `recovery.bin`), which the EEPROM holds from then on.
    Staged,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootloaderPlan {
    /// How the trial boot reaches the new drive (none: no trial boot).
    pub trial: Option<TrialRoute>,
    /// Why this route, in a sentence: the bootloader's date, consent, tools.
    pub reason: String,
    /// The target's boot mode, as BOOT_ORDER and
    /// `/chosen/bootloader/boot-mode` spell it: 4 USB, 6 NVMe.
    pub target_mode: u8,
    /// Pi 5: the one-shot order `set_reboot_order` sets for the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_order: Option<BootOrder>,
    /// The bootloader's config the changes are planned on.
    pub current: Option<String>,
    /// Where `current` was read.
    #[serde(default)]
    pub current_from: EepromSource,
    /// The image the changes are built on (none without changes to make).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<crate::system::bootloader::EepromBase>,
    /// The migration's change, before the trial (a `[tryboot]` order,
    /// `PCIE_PROBE=1`; without a trial, the permanent order).
    pub at_migrate: Option<EepromChange>,
    pub handover: Handover,
    /// The hand-over's change, when it needs one: the permanent order,
    /// and the trial's `[tryboot]` order gone.
    pub at_commit: Option<EepromChange>,
    /// The changes are made (`--boot-order apply`, or yes in the wizard);
    /// otherwise they are only shown.
    pub consent: bool,
    /// `PSU_MAX_CURRENT` for a Pi 5's USB boot, made with the migration's
    /// change: present only with its own consent (`--psu-max-current`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<EepromChange>,
    pub takes_effect: EepromTakesEffect,
}

impl BootloaderPlan {
    /// The changes to make, with consent, in order.
    pub fn changes(&self) -> impl Iterator<Item = &EepromChange> {
        let consent = self.consent;
        self.at_migrate
            .iter()
            .filter(move |_| consent)
            .chain(self.power.iter())
            .chain(self.at_commit.iter().filter(move |_| consent))
    }

    /// The change the migration makes (with consent, the boot order's
    /// and the power's as one), before the trial.
    pub fn at_migrate_made(&self) -> Option<EepromChange> {
        let order = self.at_migrate.as_ref().filter(|_| self.consent);
        match (order, &self.power) {
            (Some(order), None) => Some(order.clone()),
            (None, Some(power)) => Some(power.clone()),
            (Some(order), Some(power)) => Some(EepromChange {
                edits: order.edits.iter().chain(&power.edits).cloned().collect(),
                config: power.config.clone(),
                diff: order.diff.clone(),
                purpose: format!("{}; {}", order.purpose, power.purpose),
            }),
            (None, None) => None,
        }
    }
}
