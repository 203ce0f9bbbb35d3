//! The bootloader's EEPROM config of a Pi 4 or Pi 5 (`bootconf.txt`, what
//! `rpi-eeprom-config` prints), read and edited byte for byte like the
//! other boot files: `BOOT_ORDER` for every boot, the one-shot order of a
//! trial boot under `[tryboot]`, `PCIE_PROBE`. The config shares
//! config.txt's filter syntax (`[all]`, `[tryboot]`, `[pi4]`, ...; the
//! last setting that applies wins), so [`ConfigTxt`] reads and edits it;
//! pimigrate never writes the EEPROM itself: the edited text goes to the
//! system's own `rpi-eeprom-config --apply`.

use super::configtxt::{ConfigTxt, ConfigTxtError, FilterContext};
use serde::{Deserialize, Serialize};

/// Why the bootloader's config cannot be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EepromConfigError {
    #[error("the bootloader's config is not text (a NUL byte or invalid UTF-8 at byte {offset})")]
    NotText { offset: usize },
    #[error("the bootloader's config line {line} opens a filter with '[' but never closes it")]
    UnclosedFilter { line: usize },
    #[error("the bootloader's config sets BOOT_ORDER={0}, which is not a boot order (hex digits such as 0xf41)")]
    BadBootOrder(String),
    #[error("cannot write {key}={value} into the bootloader's config: {reason}")]
    InvalidSetting {
        key: String,
        value: String,
        reason: &'static str,
    },
}

impl From<ConfigTxtError> for EepromConfigError {
    fn from(e: ConfigTxtError) -> Self {
        match e {
            ConfigTxtError::NulByte { offset } | ConfigTxtError::NotUtf8 { offset } => {
                EepromConfigError::NotText { offset }
            }
            ConfigTxtError::UnclosedFilter { line } => EepromConfigError::UnclosedFilter { line },
            ConfigTxtError::InvalidSetting { key, value, reason } => {
                EepromConfigError::InvalidSetting { key, value, reason }
            }
        }
    }
}

/// Boot modes as BOOT_ORDER spells them, one hex digit each.
pub const BOOT_MODE_SD: u8 = 0x1;
pub const BOOT_MODE_NETWORK: u8 = 0x2;
pub const BOOT_MODE_USB: u8 = 0x4;
pub const BOOT_MODE_NVME: u8 = 0x6;
pub const BOOT_MODE_RESTART: u8 = 0xf;

/// The order a config without BOOT_ORDER boots in: the bootloader's
/// documented default, SD card then USB mass storage, then restart.
pub const DEFAULT_BOOT_ORDER: u32 = 0xf41;

/// `BOOT_ORDER`: hex digits read right to left, one boot mode each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootOrder {
    pub value: u32,
}

impl BootOrder {
    pub fn parse(text: &str) -> Option<BootOrder> {
        let hex = text
            .trim()
            .trim_start_matches("0x")
            .trim_start_matches("0X");
        u32::from_str_radix(hex, 16)
            .ok()
            .filter(|&value| value != 0)
            .map(|value| BootOrder { value })
    }

    /// The modes in the order they are tried.
    pub fn modes(&self) -> Vec<u8> {
        let mut modes = Vec::new();
        let mut value = self.value;
        while value != 0 {
            modes.push((value & 0xf) as u8);
            value >>= 4;
        }
        modes
    }

    fn from_modes(modes: &[u8]) -> BootOrder {
        let value = modes
            .iter()
            .rev()
            .fold(0u32, |acc, &mode| (acc << 4) | u32::from(mode));
        BootOrder { value }
    }

    /// The same order with `mode` tried first, the others kept in order:
    /// the permanent order of a drive that keeps the SD card as its
    /// fallback.
    pub fn with_first(&self, mode: u8) -> BootOrder {
        let mut modes: Vec<u8> = self.modes().into_iter().filter(|&m| m != mode).collect();
        modes.insert(0, mode);
        BootOrder::from_modes(&modes)
    }

    /// A one-shot trial of `mode` with the SD card as its only fallback,
    /// then a restart: `0xf14` for USB, `0xf16` for NVMe.
    pub fn trial(mode: u8) -> BootOrder {
        BootOrder::from_modes(&[mode, BOOT_MODE_SD, BOOT_MODE_RESTART])
    }

    pub fn first_of(&self, wanted: &[u8]) -> Option<u8> {
        self.modes().into_iter().find(|m| wanted.contains(m))
    }

    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.modes().into_iter().map(mode_name).collect();
        format!("{} ({})", self, names.join(", "))
    }
}

/// A boot mode's name, as the bootloader's documentation calls it.
pub fn mode_name(mode: u8) -> &'static str {
    match mode {
        BOOT_MODE_SD => "SD",
        BOOT_MODE_NETWORK => "network",
        BOOT_MODE_USB => "USB",
        BOOT_MODE_NVME => "NVMe",
        BOOT_MODE_RESTART => "restart",
        _ => "other",
    }
}

impl std::fmt::Display for BootOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.value)
    }
}

/// A bootloader config, every byte kept but the edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EepromConfig {
    text: ConfigTxt,
}

impl EepromConfig {
    pub fn parse(bytes: &[u8]) -> Result<EepromConfig, EepromConfigError> {
        Ok(EepromConfig {
            text: ConfigTxt::parse(bytes)?,
        })
    }

    /// The value of `key` the bootloader of `board` (a config.txt model
    /// filter such as `pi4`; `None` when unknown) reads, in a normal boot
    /// or a trial boot.
    pub fn value(&self, key: &str, board: Option<&str>, tryboot: bool) -> Option<String> {
        self.text.value(key, &FilterContext::new(board, tryboot))
    }

    /// BOOT_ORDER as `board` reads it, the default when the config has none.
    pub fn boot_order(
        &self,
        board: Option<&str>,
        tryboot: bool,
    ) -> Result<BootOrder, EepromConfigError> {
        match self.value("BOOT_ORDER", board, tryboot) {
            None => Ok(BootOrder {
                value: DEFAULT_BOOT_ORDER,
            }),
            Some(text) => BootOrder::parse(&text).ok_or(EepromConfigError::BadBootOrder(text)),
        }
    }

    /// Whether a flag such as `PCIE_PROBE=1` is on for `board`.
    pub fn flag(&self, key: &str, board: Option<&str>) -> bool {
        self.value(key, board, false)
            .is_some_and(|v| v.trim() != "0" && !v.trim().is_empty())
    }

    /// This config with `key=value` for every boot (the last unconditional
    /// line's value replaced, or the line added under `[all]`).
    pub fn with_setting(&self, key: &str, value: &str) -> Result<EepromConfig, EepromConfigError> {
        let mut text = self.text.clone();
        text.try_set(key, value)?;
        Ok(EepromConfig { text })
    }

    /// This config with BOOT_ORDER set for every boot.
    pub fn with_boot_order(&self, order: BootOrder) -> Result<EepromConfig, EepromConfigError> {
        self.with_setting("BOOT_ORDER", &order.to_string())
    }

    /// This config with BOOT_ORDER set for trial boots only, under
    /// `[tryboot]` (bootloader 2024-05-17 or later on a Pi 4).
    pub fn with_trial_order(&self, order: BootOrder) -> Result<EepromConfig, EepromConfigError> {
        let mut text = self.text.clone();
        text.try_set_in_section("tryboot", "BOOT_ORDER", &order.to_string())?;
        Ok(EepromConfig { text })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.text.to_bytes()
    }

    pub fn to_text(&self) -> String {
        String::from_utf8_lossy(&self.to_bytes()).into_owned()
    }
}

/// Whether two configs say the same: the same section and setting lines in
/// the same order, whatever the blank lines, comments and spaces around
/// them (the text a tool prints back may differ in those from the file
/// that was applied).
pub fn same_config(a: &str, b: &str) -> bool {
    fn lines(text: &str) -> Vec<String> {
        text.lines()
            .map(|line| line.split('#').next().unwrap_or("").trim())
            .filter(|line| !line.is_empty())
            .map(|line| {
                line.split_once('=')
                    .map(|(k, v)| format!("{}={}", k.trim(), v.trim()))
                    .unwrap_or_else(|| line.to_string())
            })
            .collect()
    }
    lines(a) == lines(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `rpi-eeprom-config` prints for the Pi 4's 2026-05-17 image.
    const PI4: &str =
        "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\nNET_INSTALL_AT_POWER_ON=1\n";
    /// ... and for the Pi 5's 2026-05-26 image.
    const PI5: &str = "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\nNET_INSTALL_AT_POWER_ON=1\n";

    fn parse(text: &str) -> EepromConfig {
        EepromConfig::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn boot_orders_read_right_to_left_and_default_to_sd_then_usb() {
        let order = BootOrder::parse("0xf41").unwrap();
        assert_eq!(
            order.modes(),
            vec![BOOT_MODE_SD, BOOT_MODE_USB, BOOT_MODE_RESTART]
        );
        assert_eq!(order.describe(), "0xf41 (SD, USB, restart)");
        assert_eq!(order.with_first(BOOT_MODE_USB).to_string(), "0xf14");
        let pi5 = BootOrder::parse("0xf461").unwrap();
        assert_eq!(pi5.with_first(BOOT_MODE_NVME).to_string(), "0xf416");
        assert_eq!(BootOrder::trial(BOOT_MODE_USB).to_string(), "0xf14");
        assert_eq!(BootOrder::trial(BOOT_MODE_NVME).to_string(), "0xf16");
        assert_eq!(
            parse(PI4).boot_order(Some("pi4"), false).unwrap().value,
            DEFAULT_BOOT_ORDER
        );
        assert_eq!(
            parse(PI5)
                .boot_order(Some("pi5"), true)
                .unwrap()
                .to_string(),
            "0xf461"
        );
        assert!(BootOrder::parse("0").is_none());
        assert!(parse("BOOT_ORDER=usb\n").boot_order(None, false).is_err());
    }

    #[test]
    fn a_trial_order_goes_under_tryboot_and_leaves_every_other_byte() {
        let trial = parse(PI4)
            .with_trial_order(BootOrder::trial(BOOT_MODE_USB))
            .unwrap();
        assert_eq!(
            trial.to_text(),
            format!("{PI4}[tryboot]\nBOOT_ORDER=0xf14\n")
        );
        assert_eq!(
            trial.boot_order(Some("pi4"), false).unwrap().to_string(),
            "0xf41"
        );
        assert_eq!(
            trial.boot_order(Some("pi4"), true).unwrap().to_string(),
            "0xf14"
        );
        // Applied again, the same line is changed, not a second one added.
        let again = trial.with_trial_order(BootOrder { value: 0xf16 }).unwrap();
        assert_eq!(
            again.to_text(),
            format!("{PI4}[tryboot]\nBOOT_ORDER=0xf16\n")
        );
        // A config ending under a board's filter gets [all] first, so the
        // trial order does not depend on the board.
        let board = parse("BOOT_ORDER=0xf41\r\n[pi4]\r\nBOOT_UART=1")
            .with_trial_order(BootOrder { value: 0xf14 })
            .unwrap();
        assert_eq!(
            board.to_text(),
            "BOOT_ORDER=0xf41\r\n[pi4]\r\nBOOT_UART=1\r\n[all]\r\n[tryboot]\r\nBOOT_ORDER=0xf14"
        );
    }

    #[test]
    fn the_permanent_order_replaces_the_unconditional_line_or_is_added() {
        let pi5 = parse(PI5)
            .with_boot_order(BootOrder { value: 0xf416 })
            .unwrap();
        assert_eq!(pi5.to_text(), PI5.replace("0xf461", "0xf416"));
        let pi4 = parse(PI4)
            .with_boot_order(BootOrder { value: 0xf14 })
            .unwrap();
        assert_eq!(pi4.to_text(), format!("{PI4}BOOT_ORDER=0xf14\n"));
        let probe = parse(PI5).with_setting("PCIE_PROBE", "1").unwrap();
        assert!(probe.flag("PCIE_PROBE", Some("pi5")));
        assert!(!parse(PI5).flag("PCIE_PROBE", Some("pi5")));
        // A board section overrides [all] on that board only.
        let cm4 = parse("BOOT_ORDER=0xf41\n[cm4]\nBOOT_ORDER=0xf16\n");
        assert_eq!(
            cm4.boot_order(Some("cm4"), false).unwrap().to_string(),
            "0xf16"
        );
        assert_eq!(
            cm4.boot_order(Some("pi4"), false).unwrap().to_string(),
            "0xf41"
        );
    }

    #[test]
    fn configs_compare_by_their_settings_not_their_spacing() {
        assert!(same_config(PI4, &format!("{PI4}\n\n")));
        assert!(same_config(
            "[all]\nBOOT_ORDER = 0xf14 # usb\n",
            "\n[all]\nBOOT_ORDER=0xf14"
        ));
        assert!(!same_config(
            PI4,
            &format!("{PI4}[tryboot]\nBOOT_ORDER=0xf14\n")
        ));
        assert!(!same_config(
            "BOOT_ORDER=0xf14\n[all]\n",
            "[all]\nBOOT_ORDER=0xf14\n"
        ));
    }

    #[test]
    fn broken_configs_are_errors() {
        assert!(EepromConfig::parse(b"BOOT_ORDER=0xf41\0").is_err());
        assert!(matches!(
            EepromConfig::parse(b"[all\nBOOT_ORDER=0xf41\n"),
            Err(EepromConfigError::UnclosedFilter { line: 1 })
        ));
    }
}
