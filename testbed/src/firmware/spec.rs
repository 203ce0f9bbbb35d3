//! What one boot starts from (the one-shot requests of the boot before)
//! and what the firmware decided to boot: the values the stand-in's parts
//! and the machine pass between them.

use crate::firmware::eeprom::BootMode;
use std::path::PathBuf;

/// What a boot starts from: the one-shot requests of the boot before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootRequest {
    /// `reboot "0 tryboot"` asked for a trial boot.
    pub tryboot: bool,
    /// The boot before ended in a reboot or a panic's reset (not a
    /// power-off or a power cut), so a reboot order it set is still there.
    pub after_reboot: bool,
}

/// What the firmware decided to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    /// Name of the disk the boot files came from.
    pub disk: String,
    /// The boot mode that found it (SD card, USB mass storage, NVMe).
    pub boot_mode: BootMode,
    /// The number of the partition the firmware read (its first FAT one).
    pub partition: u32,
    /// `config.txt` or `tryboot.txt`.
    pub config_file: String,
    pub tryboot: bool,
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    pub cmdline: String,
    /// The device tree, when the boot partition has the model's (the x86
    /// guest's has none), with the EEPROM bootloader's `/chosen/bootloader`
    /// (the tryboot flag among it) where the model has one.
    pub dtb: Option<PathBuf>,
    /// What the bootloader did before it loaded these files, for the
    /// boot's log (`boot-NN.firmware.txt`).
    pub notes: Vec<String>,
}
