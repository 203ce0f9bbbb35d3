//! Which Raspberry Pi this is and what its firmware can boot from.

use crate::host::Host;
use serde::{Deserialize, Serialize};

/// Pi models grouped by how they boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PiFamily {
    /// Pi 1, Compute Module 1.
    Pi1,
    Pi2,
    /// Pi 3B, 3A+, CM3/CM3+/CM4S: USB boot after a one-time OTP bit.
    Pi3,
    /// Pi 3B+: USB boot out of the box.
    Pi3Plus,
    Zero,
    Zero2,
    /// Pi 4, 400: EEPROM bootloader.
    Pi4,
    /// Compute Module 4: EEPROM bootloader with NVMe.
    Cm4,
    /// Pi 5, 500, CM5: EEPROM bootloader with NVMe.
    Pi5,
    /// A Raspberry Pi model this version does not know.
    UnknownPi,
    /// Not a Raspberry Pi (a workstation, the emulated testbed).
    NotAPi,
}

/// Whether the firmware can boot from a kind of disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootSupport {
    Yes,
    /// Pi 3B and friends: after `program_usb_boot_mode=1`, a one-time,
    /// irreversible OTP change.
    NeedsOtp,
    No,
    /// Not a Pi: nothing to check against.
    Unknown,
}

impl BootSupport {
    pub fn possible(self) -> bool {
        !matches!(self, BootSupport::No)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootCapabilities {
    pub sd: BootSupport,
    pub usb: BootSupport,
    pub nvme: BootSupport,
    /// Can the firmware read a GPT disk (Pi 4 and later)?
    pub gpt: BootSupport,
}

pub use crate::bootcfg::eeprom::{
    BootOrder, BOOT_MODE_NETWORK, BOOT_MODE_NVME, BOOT_MODE_RESTART, BOOT_MODE_SD, BOOT_MODE_USB,
};
use crate::bootcfg::EepromConfig;
use crate::system::disks::Transport;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PiInfo {
    /// The device tree's model string, e.g. "Raspberry Pi 4 Model B Rev 1.4".
    pub model: Option<String>,
    pub family: PiFamily,
    pub eeprom_bootloader: bool,
    pub can_boot: BootCapabilities,
    /// `reboot "0 tryboot"` and tryboot.txt work.
    pub tryboot_available: bool,
    /// This boot is a trial boot: `chosen/bootloader/tryboot` reads 1, or
    /// the kernel started with the trial's own command line (its marker,
    /// [`TRIAL_MARKER`]), which only tryboot.txt names.
    pub in_trial_boot: bool,
    /// From `rpi-eeprom-config`, when it is installed and answers.
    pub boot_order: Option<BootOrder>,
    /// The name config.txt uses in section filters: `pi4`, `pi5`, ...
    pub config_filter: Option<&'static str>,
    /// When the running EEPROM bootloader was built (Unix seconds), from
    /// `chosen/bootloader/build-timestamp`, as `rpi-eeprom-update` reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootloader_built: Option<u64>,
    /// The product of a HAT (HAT+) whose EEPROM the firmware read
    /// (`hat/product` in the device tree): a HAT+ NVMe adapter on a Pi 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hat_product: Option<String>,
    /// `PCIE_PROBE=1` in the bootloader configuration, when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie_probe: Option<bool>,
    /// The bootloader's running config, as `rpi-eeprom-config` printed it.
    #[serde(rename = "bootloader_config", skip_serializing_if = "Option::is_none")]
    pub eeprom_config: Option<String>,
    /// The device the bootloader started this boot from
    /// (`chosen/bootloader/boot-mode`: 1 SD, 4 USB, 6 NVMe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<u32>,
    /// An update staged for the next boot, the release images, how
    /// rpi-eeprom-update writes (read once the boot partition is known).
    #[serde(skip)]
    pub eeprom: super::bootloader::EepromFacts,
}

impl PiFamily {
    /// Classifies the device tree's model string.
    pub fn from_model(model: Option<&str>) -> PiFamily {
        let Some(model) = model else {
            return PiFamily::NotAPi;
        };
        let Some(rest) = model.strip_prefix("Raspberry Pi ") else {
            return PiFamily::NotAPi;
        };
        let starts = |prefix: &str| rest.starts_with(prefix);
        if starts("5") || starts("Compute Module 5") || starts("500") {
            PiFamily::Pi5
        } else if starts("Compute Module 4S") {
            PiFamily::Pi3
        } else if starts("Compute Module 4") {
            PiFamily::Cm4
        } else if starts("4") || starts("400") {
            PiFamily::Pi4
        } else if starts("3 Model B Plus") {
            PiFamily::Pi3Plus
        } else if starts("3") || starts("Compute Module 3") {
            PiFamily::Pi3
        } else if starts("Zero 2") {
            PiFamily::Zero2
        } else if starts("Zero") {
            PiFamily::Zero
        } else if starts("2") {
            PiFamily::Pi2
        } else if starts("Model") || starts("Compute Module") {
            PiFamily::Pi1
        } else {
            PiFamily::UnknownPi
        }
    }

    pub fn has_eeprom_bootloader(self) -> bool {
        matches!(self, PiFamily::Pi4 | PiFamily::Cm4 | PiFamily::Pi5)
    }

    pub fn capabilities(self) -> BootCapabilities {
        use BootSupport::*;
        let (usb, nvme) = match self {
            PiFamily::Pi5 | PiFamily::Cm4 => (Yes, Yes),
            PiFamily::Pi4 | PiFamily::Pi3Plus => (Yes, No),
            PiFamily::Pi3 => (NeedsOtp, No),
            PiFamily::Pi1 | PiFamily::Pi2 | PiFamily::Zero | PiFamily::Zero2 => (No, No),
            // Unknown models: refuse nothing we cannot check, but say so.
            PiFamily::UnknownPi | PiFamily::NotAPi => (Unknown, Unknown),
        };
        let gpt = match self {
            _ if self.has_eeprom_bootloader() => Yes,
            PiFamily::UnknownPi | PiFamily::NotAPi => Unknown,
            _ => No,
        };
        let sd = match self {
            PiFamily::NotAPi => Unknown,
            _ => Yes,
        };
        BootCapabilities { sd, usb, nvme, gpt }
    }
}

/// The name config.txt's model filters use for this board (`pi4`, `pi400`,
/// `cm4`, `pi5`, ...), from the device tree's model string.
pub fn config_filter(model: &str) -> Option<&'static str> {
    let rest = model.strip_prefix("Raspberry Pi ")?;
    let table: [(&str, &str); 16] = [
        ("500", "pi500"),
        ("5", "pi5"),
        ("Compute Module 5", "cm5"),
        ("400", "pi400"),
        ("4", "pi4"),
        ("Compute Module 4S", "cm4s"),
        ("Compute Module 4", "cm4"),
        ("3 Model B Plus", "pi3+"),
        ("3 Model A Plus", "pi3+"),
        ("3", "pi3"),
        ("Compute Module 3", "cm3"),
        ("Zero 2", "pi02"),
        ("Zero", "pi0"),
        ("2", "pi2"),
        ("Model", "pi1"),
        ("Compute Module", "cm1"),
    ];
    table
        .iter()
        .find(|(prefix, _)| rest.starts_with(prefix))
        .map(|(_, filter)| *filter)
}

/// The word that marks a trial's command line (`pimigrate.trial=1`, or
/// `=auto-commit`): see `plan::trial_guard`.
pub const TRIAL_MARKER: &str = "pimigrate.trial";

/// Whether the running kernel started with a trial's command line.
fn started_as_trial(host: &Host) -> bool {
    std::fs::read(host.proc("cmdline"))
        .ok()
        .and_then(|bytes| crate::bootcfg::Cmdline::parse(&bytes).ok())
        .is_some_and(|cmdline| cmdline.has(TRIAL_MARKER))
}

/// Reads a device-tree cell that holds one big-endian u32.
pub(crate) fn read_dt_u32(host: &Host, rest: &str) -> Option<u32> {
    let bytes = std::fs::read(host.device_tree(rest)).ok()?;
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

pub fn detect(host: &Host) -> PiInfo {
    let model = host.read_attr(&host.device_tree("model"));
    let family = PiFamily::from_model(model.as_deref());
    // The EEPROM bootloader announces itself under /chosen/bootloader.
    let eeprom_bootloader =
        family.has_eeprom_bootloader() || host.device_tree("chosen/bootloader/boot-mode").exists();
    let eeprom_config = eeprom_bootloader.then(read_eeprom_config).flatten();
    let board = model.as_deref().and_then(config_filter);
    PiInfo {
        family,
        eeprom_bootloader,
        can_boot: family.capabilities(),
        tryboot_available: eeprom_bootloader,
        in_trial_boot: read_dt_u32(host, "chosen/bootloader/tryboot") == Some(1)
            || started_as_trial(host),
        boot_order: eeprom_config
            .as_deref()
            .and_then(|c| parse_eeprom_boot_order(c, board)),
        config_filter: model.as_deref().and_then(config_filter),
        bootloader_built: read_dt_u32(host, "chosen/bootloader/build-timestamp")
            .filter(|&t| t > 0)
            .map(u64::from),
        hat_product: host.read_attr(&host.device_tree("hat/product")),
        pcie_probe: eeprom_config
            .as_deref()
            .map(|c| parse_eeprom_pcie_probe(c, board)),
        boot_mode: read_dt_u32(host, "chosen/bootloader/boot-mode"),
        eeprom_config,
        model,
        eeprom: Default::default(),
    }
}

/// Asks `rpi-eeprom-config` for the bootloader's configuration. Missing or
/// failing is not an error: the plan then says it could not read it.
fn read_eeprom_config() -> Option<String> {
    let program = crate::tools::which("rpi-eeprom-config")?;
    let output = std::process::Command::new(program).output().ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether the bootloader probes PCIe for a drive without a HAT+ EEPROM
/// (`PCIE_PROBE=1` where `board` reads it).
pub fn parse_eeprom_pcie_probe(config: &str, board: Option<&str>) -> bool {
    EepromConfig::parse(config.as_bytes()).is_ok_and(|c| c.flag("PCIE_PROBE", board))
}

/// The boot mode the bootloader starts a disk of `transport` in, as
/// BOOT_ORDER and `/chosen/bootloader/boot-mode` spell it: the one
/// mapping, for a migration's target and a standby alike.
pub fn boot_mode(transport: Transport) -> Option<u8> {
    match transport {
        Transport::Mmc => Some(BOOT_MODE_SD),
        Transport::Usb => Some(BOOT_MODE_USB),
        Transport::Nvme => Some(BOOT_MODE_NVME),
        _ => None,
    }
}

/// BOOT_ORDER as the bootloader of `board` reads it in a normal boot: the
/// last setting under a section that applies, the bootloader's default
/// (0xf41) when none does; `None` when the config cannot be read or names
/// no valid order.
pub fn parse_eeprom_boot_order(config: &str, board: Option<&str>) -> Option<BootOrder> {
    let config = EepromConfig::parse(config.as_bytes()).ok()?;
    config.boot_order(board, false).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_models() {
        let cases = [
            ("Raspberry Pi 4 Model B Rev 1.4", PiFamily::Pi4),
            ("Raspberry Pi 400 Rev 1.0", PiFamily::Pi4),
            ("Raspberry Pi 5 Model B Rev 1.0", PiFamily::Pi5),
            ("Raspberry Pi Compute Module 4 Rev 1.0", PiFamily::Cm4),
            ("Raspberry Pi Compute Module 4S Rev 1.0", PiFamily::Pi3),
            ("Raspberry Pi 3 Model B Plus Rev 1.3", PiFamily::Pi3Plus),
            ("Raspberry Pi 3 Model B Rev 1.2", PiFamily::Pi3),
            ("Raspberry Pi Zero W Rev 1.1", PiFamily::Zero),
            ("Raspberry Pi Zero 2 W Rev 1.0", PiFamily::Zero2),
            ("Raspberry Pi 2 Model B Rev 1.1", PiFamily::Pi2),
            ("Raspberry Pi Model B Plus Rev 1.2", PiFamily::Pi1),
            ("QEMU Virtual Machine", PiFamily::NotAPi),
        ];
        for (model, family) in cases {
            assert_eq!(PiFamily::from_model(Some(model)), family, "{model}");
        }
        assert_eq!(PiFamily::from_model(None), PiFamily::NotAPi);
    }

    #[test]
    fn names_config_txt_filters() {
        assert_eq!(config_filter("Raspberry Pi 400 Rev 1.0"), Some("pi400"));
        assert_eq!(config_filter("Raspberry Pi 4 Model B Rev 1.4"), Some("pi4"));
        assert_eq!(config_filter("Raspberry Pi 5 Model B Rev 1.0"), Some("pi5"));
        assert_eq!(
            config_filter("Raspberry Pi 3 Model B Plus Rev 1.3"),
            Some("pi3+")
        );
        assert_eq!(config_filter("QEMU"), None);
    }

    #[test]
    fn knows_what_each_model_boots_from() {
        assert_eq!(PiFamily::Pi4.capabilities().nvme, BootSupport::No);
        assert_eq!(PiFamily::Pi5.capabilities().nvme, BootSupport::Yes);
        assert_eq!(PiFamily::Pi3.capabilities().usb, BootSupport::NeedsOtp);
        assert_eq!(PiFamily::Zero.capabilities().usb, BootSupport::No);
        assert_eq!(PiFamily::Pi3Plus.capabilities().gpt, BootSupport::No);
    }

    #[test]
    fn eeprom_config_takes_the_unconditional_boot_order() {
        let config = "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf41\n[cm4]\nBOOT_ORDER=0xf16\n";
        assert_eq!(
            parse_eeprom_boot_order(config, Some("pi4"))
                .unwrap()
                .to_string(),
            "0xf41"
        );
        // The board's own section wins on that board.
        assert_eq!(
            parse_eeprom_boot_order(config, Some("cm4"))
                .unwrap()
                .to_string(),
            "0xf16"
        );
        // No BOOT_ORDER: the bootloader's default, SD then USB.
        assert_eq!(
            parse_eeprom_boot_order("BOOT_UART=0\n", Some("pi4"))
                .unwrap()
                .to_string(),
            "0xf41"
        );
        assert!(parse_eeprom_boot_order("BOOT_ORDER=usb\n", Some("pi4")).is_none());
    }
}
