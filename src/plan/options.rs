//! What the user asked for.

use crate::units::MIB;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Only the root filesystem moves; the SD card keeps the boot partition
    /// and must stay in. Works on every Pi.
    RootOnly,
    /// Boot and root move; the Pi boots from the target without the SD card.
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableChoice {
    /// MBR unless the disk is over 2 TiB or needs GPT, and never a table the
    /// firmware cannot read in a full move.
    Auto,
    Mbr,
    Gpt,
}

/// Whether a root-only move boots the new root once before it is permanent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialChoice {
    /// When the firmware has tryboot (Pi 4, 400, CM4, Pi 5).
    Auto,
    /// Always (a firmware pimigrate cannot identify, such as the emulated Pi).
    Always,
    /// Never: change cmdline.txt directly.
    Never,
    /// A full move's one-shot boot of the new drive itself, or a refusal
    /// saying why the bootloader cannot do it.
    Device,
}

/// Whether pimigrate changes the bootloader's config (a full move's trial
/// order, the permanent order, PCIE_PROBE) or only shows the changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BootOrderChoice {
    /// Show the changes as diffs; make none.
    #[default]
    Show,
    /// Make them, through the system's `rpi-eeprom-config`.
    Apply,
}

/// What `verify --commit` does after a full move's trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandoverChoice {
    /// The boot order when its change is allowed (`--boot-order apply`),
    /// else taking the SD card out.
    #[default]
    Auto,
    /// Set BOOT_ORDER with the new drive first and the SD card second.
    BootOrder,
    /// Take the SD card out.
    RemoveCard,
}

pub const DEFAULT_BOOT_SIZE: u64 = 512 * MIB;

#[derive(Debug, Clone)]
pub struct Options {
    pub target: PathBuf,
    pub layout: Layout,
    pub table: TableChoice,
    pub boot_size: u64,
    /// `None`: the rest of the disk.
    pub root_size: Option<u64>,
    /// Paths (as on the running system) the copy leaves out, on top of the
    /// default exclusions.
    pub excludes: Vec<PathBuf>,
    /// Makes the random ids reproducible (tests, fleets that diff plans).
    pub seed: Option<u64>,
    /// Use this MBR disk signature instead of a random one.
    pub disk_signature: Option<u32>,
    pub trial: TrialChoice,
    /// The copy's second pass compares contents of files whose size and
    /// mtime did not change (slower; catches in-place rewrites).
    pub checksum: bool,
    /// Whether the bootloader's config may be changed.
    pub boot_order: BootOrderChoice,
    pub handover: HandoverChoice,
    /// The trial boot checks itself with `verify`'s checks and commits, or
    /// goes back to the SD card, with nobody at the Pi.
    pub auto_commit: bool,
    /// Switch TRIM on for the new drive where its bridge passes it (the
    /// udev rule, `fstrim.timer`): on unless `--no-trim`.
    pub trim: bool,
    /// Keep `uas` off the target's USB bridge (`usb-storage.quirks=
    /// VID:PID:u` on the new command line).
    pub usb_quirk: bool,
    /// `PSU_MAX_CURRENT` to write into a Pi 5's bootloader config.
    pub psu_max_current: Option<u32>,
}

impl Options {
    pub fn new(target: impl Into<PathBuf>) -> Options {
        Options {
            target: target.into(),
            layout: Layout::RootOnly,
            table: TableChoice::Auto,
            boot_size: DEFAULT_BOOT_SIZE,
            root_size: None,
            excludes: Vec::new(),
            seed: None,
            disk_signature: None,
            trial: TrialChoice::Auto,
            checksum: false,
            boot_order: BootOrderChoice::Show,
            handover: HandoverChoice::Auto,
            auto_commit: false,
            trim: true,
            usb_quirk: false,
            psu_max_current: None,
        }
    }
}
