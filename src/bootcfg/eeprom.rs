//! The bootloader's EEPROM config of a Pi 4 or Pi 5 (`bootconf.txt`, what
//! `rpi-eeprom-config` prints), read and edited byte for byte like the
//! other boot files: `BOOT_ORDER` for every boot, the one-shot order of a
//! trial boot under `[tryboot]`, `PCIE_PROBE`, a Pi 5's `PSU_MAX_CURRENT`.
//! The config shares
//! config.txt's filter syntax (`[all]`, `[tryboot]`, `[pi4]`, ...; the
//! last setting that applies wins), so [`ConfigTxt`] reads and edits it.
//!
//! pimigrate changes only the settings of an [`EepromEdit`], each where
//! the bootloader of this board reads it (a `BOOT_ORDER` under `[pi4]`
//! after `[all]` is the one a Pi 4 follows), on the config that is in the
//! EEPROM when the change is made; every other line stays. It never writes
//! the EEPROM itself: the edited text goes to the system's own
//! `rpi-eeprom-config --apply`.

use super::configtxt::{ConfigTxt, ConfigTxtError, FilterContext, LineApplies};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why the bootloader's config cannot be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EepromConfigError {
    #[error("the bootloader's config is not text (a NUL byte or invalid UTF-8 at byte {offset})")]
    NotText { offset: usize },
    #[error("the bootloader's config line {line} opens a filter with '[' but never closes it")]
    UnclosedFilter { line: usize },
    #[error("the bootloader's config sets BOOT_ORDER={0}, which is not a boot order (hex digits such as 0xf41)")]
    BadBootOrder(String),
    #[error("the bootloader's config sets PSU_MAX_CURRENT={0}, which is not a current in mA (such as 5000)")]
    BadPsuMaxCurrent(String),
    #[error("cannot write {key}={value} into the bootloader's config: {reason}")]
    InvalidSetting {
        key: String,
        value: String,
        reason: &'static str,
    },
    #[error(
        "the bootloader's config sets {key} on line {line} under a filter pimigrate cannot evaluate \
         (a serial number, a GPIO, a board type): which {key} the bootloader follows is not known"
    )]
    Conditional { key: String, line: usize },
    #[error("the bootloader's config could not be changed so that it reads {edit}")]
    NotInEffect { edit: String },
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

/// `BOOT_ORDER`: hex digits read right to left, one boot mode each. In
/// JSON it is written as the config spells it, `"0xf41"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOrder {
    pub value: u32,
}

impl Serialize for BootOrder {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BootOrder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BootOrder, D::Error> {
        let text = String::deserialize(deserializer)?;
        BootOrder::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a boot order (such as 0xf41)"))
        })
    }
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

/// A setting of the bootloader's config that pimigrate changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EepromSetting {
    /// `BOOT_ORDER` as a normal boot reads it.
    #[serde(rename = "BOOT_ORDER")]
    BootOrder,
    /// `BOOT_ORDER` under `[tryboot]`: the order of a trial boot
    /// (`reboot "0 tryboot"`) alone.
    #[serde(rename = "[tryboot] BOOT_ORDER")]
    TrialBootOrder,
    /// `PCIE_PROBE`: a Pi 5 looks for an NVMe drive without a HAT+.
    #[serde(rename = "PCIE_PROBE")]
    PcieProbe,
    /// `PSU_MAX_CURRENT`: a Pi 5 skips USB-PD negotiation and takes the
    /// supply to be good for this many mA (lifting the 600 mA USB limit
    /// of a USB boot at 5000).
    #[serde(rename = "PSU_MAX_CURRENT")]
    PsuMaxCurrent,
}

impl EepromSetting {
    /// The key in the config.
    pub fn key(self) -> &'static str {
        match self {
            EepromSetting::BootOrder | EepromSetting::TrialBootOrder => "BOOT_ORDER",
            EepromSetting::PcieProbe => "PCIE_PROBE",
            EepromSetting::PsuMaxCurrent => "PSU_MAX_CURRENT",
        }
    }
}

/// One change pimigrate makes to the bootloader's config: the value a
/// setting is to have where the bootloader reads it. `None` is no line of
/// its own: BOOT_ORDER and PCIE_PROBE take the bootloader's default, a
/// trial boot follows the normal order. In JSON:
/// `{"setting": "[tryboot] BOOT_ORDER", "value": "0xf14"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "setting", content = "value")]
pub enum EepromEdit {
    #[serde(rename = "BOOT_ORDER")]
    BootOrder(Option<BootOrder>),
    #[serde(rename = "[tryboot] BOOT_ORDER")]
    TrialBootOrder(Option<BootOrder>),
    #[serde(rename = "PCIE_PROBE")]
    PcieProbe(Option<String>),
    /// In mA; `None` leaves the supply to USB-PD negotiation.
    #[serde(rename = "PSU_MAX_CURRENT")]
    PsuMaxCurrent(Option<u32>),
}

impl EepromEdit {
    pub fn setting(&self) -> EepromSetting {
        match self {
            EepromEdit::BootOrder(_) => EepromSetting::BootOrder,
            EepromEdit::TrialBootOrder(_) => EepromSetting::TrialBootOrder,
            EepromEdit::PcieProbe(_) => EepromSetting::PcieProbe,
            EepromEdit::PsuMaxCurrent(_) => EepromSetting::PsuMaxCurrent,
        }
    }

    /// The value as the config spells it, `None` for no line.
    pub fn value(&self) -> Option<String> {
        match self {
            EepromEdit::BootOrder(order) | EepromEdit::TrialBootOrder(order) => {
                order.map(|o| o.to_string())
            }
            EepromEdit::PcieProbe(value) => value.clone(),
            EepromEdit::PsuMaxCurrent(ma) => ma.map(|ma| ma.to_string()),
        }
    }
}

impl std::fmt::Display for EepromEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.setting() {
            EepromSetting::BootOrder => "BOOT_ORDER",
            EepromSetting::TrialBootOrder => "[tryboot] BOOT_ORDER",
            EepromSetting::PcieProbe => "PCIE_PROBE",
            EepromSetting::PsuMaxCurrent => "PSU_MAX_CURRENT",
        };
        match self.value() {
            Some(value) => write!(f, "{name}={value}"),
            None => match self.setting() {
                EepromSetting::TrialBootOrder => {
                    write!(f, "no {name} (a trial boot follows the normal order)")
                }
                _ => write!(f, "no {name} (the bootloader's default)"),
            },
        }
    }
}

/// The bootloader's build time (Unix seconds) an image file carries as
/// `BUILD_TIMESTAMP=`, the figure `rpi-eeprom-update` compares with the
/// running bootloader's `chosen/bootloader/build-timestamp`.
pub fn image_build_time(image: &[u8]) -> Option<u64> {
    const MARKER: &[u8] = b"BUILD_TIMESTAMP=";
    let at = image.windows(MARKER.len()).position(|w| w == MARKER)? + MARKER.len();
    let digits: String = image[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    digits.parse().ok().filter(|&t| t > 0)
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

    /// `PSU_MAX_CURRENT` as the bootloader of `board` reads it, in mA;
    /// `None` when no line sets it (USB-PD negotiation decides). A value
    /// that is not a number is an error: what the bootloader makes of it
    /// is not known.
    pub fn psu_max_current(&self, board: Option<&str>) -> Result<Option<u32>, EepromConfigError> {
        match self.value("PSU_MAX_CURRENT", board, false) {
            None => Ok(None),
            Some(text) if text.trim().is_empty() => Ok(None),
            Some(text) => text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| EepromConfigError::BadPsuMaxCurrent(text)),
        }
    }

    /// What this config says of `setting` for `board`, as an edit that
    /// would leave it as it is: the "before" of a change, and what a
    /// rollback puts back.
    pub fn reading(
        &self,
        setting: EepromSetting,
        board: Option<&str>,
    ) -> Result<EepromEdit, EepromConfigError> {
        self.refuse_conditional(
            setting.key(),
            board,
            setting == EepromSetting::TrialBootOrder,
        )?;
        let order = |text: Option<String>| match text {
            None => Ok(None),
            Some(text) => BootOrder::parse(&text)
                .map(Some)
                .ok_or(EepromConfigError::BadBootOrder(text)),
        };
        Ok(match setting {
            EepromSetting::BootOrder => {
                EepromEdit::BootOrder(order(self.value("BOOT_ORDER", board, false))?)
            }
            EepromSetting::TrialBootOrder => {
                let own = !self.trial_only_lines("BOOT_ORDER", board).is_empty();
                EepromEdit::TrialBootOrder(match own {
                    true => order(self.value("BOOT_ORDER", board, true))?,
                    false => None,
                })
            }
            EepromSetting::PcieProbe => {
                EepromEdit::PcieProbe(self.value("PCIE_PROBE", board, false))
            }
            EepromSetting::PsuMaxCurrent => EepromEdit::PsuMaxCurrent(self.psu_max_current(board)?),
        })
    }

    /// Whether the bootloader of `board` reads `edit` in this config.
    pub fn reads(&self, edit: &EepromEdit, board: Option<&str>) -> Result<bool, EepromConfigError> {
        let now = self.reading(edit.setting(), board)?;
        Ok(match (edit, &now) {
            // A trial order that is also the normal one still reads so.
            (EepromEdit::TrialBootOrder(Some(wanted)), _) => {
                self.boot_order(board, true)? == *wanted
            }
            (EepromEdit::PcieProbe(Some(a)), EepromEdit::PcieProbe(Some(b))) => {
                a.trim() == b.trim()
            }
            _ => now == *edit,
        })
    }

    /// Whether the bootloader of `board` reads every one of `edits`.
    pub fn reads_all(
        &self,
        edits: &[EepromEdit],
        board: Option<&str>,
    ) -> Result<bool, EepromConfigError> {
        for edit in edits {
            if !self.reads(edit, board)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// This config with `edits` made, each where the bootloader of `board`
    /// reads it, every other line kept.
    pub fn with_edits(
        &self,
        edits: &[EepromEdit],
        board: Option<&str>,
    ) -> Result<EepromConfig, EepromConfigError> {
        edits
            .iter()
            .try_fold(self.clone(), |config, edit| config.with_edit(edit, board))
    }

    /// This config with `edit` made where the bootloader of `board` reads
    /// it: the line in effect changed (the last one that applies, be it
    /// under `[all]` or `[pi4]`), or one added at the end when none
    /// applies; a trial order only ever under `[tryboot]`, so a normal
    /// boot reads what it read before. `None` removes the lines that give
    /// the setting its value (for a trial order: those under `[tryboot]`).
    pub fn with_edit(
        &self,
        edit: &EepromEdit,
        board: Option<&str>,
    ) -> Result<EepromConfig, EepromConfigError> {
        let key = edit.setting().key();
        let trial = edit.setting() == EepromSetting::TrialBootOrder;
        self.refuse_conditional(key, board, trial)?;
        // What the edit must leave alone: a normal boot's reading for a
        // trial order, a trial boot's own order for a normal one.
        let other = match edit.setting() {
            EepromSetting::BootOrder => Some(EepromSetting::TrialBootOrder),
            EepromSetting::TrialBootOrder => Some(EepromSetting::BootOrder),
            EepromSetting::PcieProbe | EepromSetting::PsuMaxCurrent => None,
        };
        let other_before = other.map(|o| self.reading(o, board)).transpose()?;
        let mut text = self.text.clone();
        let ctx = FilterContext::new(board, trial);
        let lines_now = |text: &ConfigTxt| -> Vec<usize> {
            let certain = |ctx: &FilterContext| -> Vec<usize> {
                text.lines_setting(key, ctx)
                    .into_iter()
                    .filter(|(_, applies)| *applies == LineApplies::Yes)
                    .map(|(index, _)| index)
                    .collect()
            };
            match trial {
                false => certain(&ctx),
                true => {
                    let normal = certain(&FilterContext::new(board, false));
                    certain(&ctx)
                        .into_iter()
                        .filter(|index| !normal.contains(index))
                        .collect()
                }
            }
        };
        // The line in effect, when it is one the edit may change (for a
        // trial order, one a normal boot does not read).
        let in_effect = |text: &ConfigTxt| -> Option<usize> {
            let last = text
                .lines_setting(key, &ctx)
                .into_iter()
                .rev()
                .find(|(_, applies)| *applies == LineApplies::Yes)
                .map(|(index, _)| index)?;
            lines_now(text).contains(&last).then_some(last)
        };
        match edit.value() {
            Some(value) => match in_effect(&text) {
                Some(index) => text.set_value_at(index, &value)?,
                None if trial => text.append_in_section("tryboot", key, &value)?,
                // No line applies here, so none under [all] either: the
                // new one goes at the end (after an [all] if the file ends
                // under a filter).
                None => text.try_set(key, &value)?,
            },
            None => {
                while let Some(&index) = lines_now(&text).last() {
                    text.remove_setting_at(index);
                }
            }
        }
        let edited = EepromConfig { text };
        let other_after = other.map(|o| edited.reading(o, board)).transpose()?;
        if other_after != other_before || !edited.reads(edit, board)? {
            return Err(EepromConfigError::NotInEffect {
                edit: edit.to_string(),
            });
        }
        Ok(edited)
    }

    /// The lines setting `key` that a trial boot of `board` reads and a
    /// normal boot does not.
    fn trial_only_lines(&self, key: &str, board: Option<&str>) -> Vec<usize> {
        let certain = |tryboot: bool| -> Vec<usize> {
            self.text
                .lines_setting(key, &FilterContext::new(board, tryboot))
                .into_iter()
                .filter(|(_, applies)| *applies == LineApplies::Yes)
                .map(|(index, _)| index)
                .collect()
        };
        let normal = certain(false);
        certain(true)
            .into_iter()
            .filter(|index| !normal.contains(index))
            .collect()
    }

    /// An error when a line for `key` may or may not apply on `board`: the
    /// setting in effect is then unknown, and so where to change it.
    fn refuse_conditional(
        &self,
        key: &str,
        board: Option<&str>,
        tryboot: bool,
    ) -> Result<(), EepromConfigError> {
        let maybe = self
            .text
            .lines_setting(key, &FilterContext::new(board, tryboot))
            .into_iter()
            .find(|(_, applies)| *applies == LineApplies::Maybe);
        match maybe {
            Some((index, _)) => Err(EepromConfigError::Conditional {
                key: key.to_string(),
                line: index + 1,
            }),
            None => Ok(()),
        }
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

    fn trial(order: u32) -> EepromEdit {
        EepromEdit::TrialBootOrder(Some(BootOrder { value: order }))
    }

    fn order(order: u32) -> EepromEdit {
        EepromEdit::BootOrder(Some(BootOrder { value: order }))
    }

    #[test]
    fn a_trial_order_goes_under_tryboot_and_leaves_every_other_byte() {
        let board = Some("pi4");
        let with_trial = parse(PI4).with_edit(&trial(0xf14), board).unwrap();
        assert_eq!(
            with_trial.to_text(),
            format!("{PI4}[tryboot]\nBOOT_ORDER=0xf14\n")
        );
        assert_eq!(
            with_trial.boot_order(board, false).unwrap().to_string(),
            "0xf41"
        );
        assert_eq!(
            with_trial.boot_order(board, true).unwrap().to_string(),
            "0xf14"
        );
        assert!(with_trial.reads(&trial(0xf14), board).unwrap());
        // Made again, the same line is changed, not a second one added.
        let again = with_trial.with_edit(&trial(0xf16), board).unwrap();
        assert_eq!(
            again.to_text(),
            format!("{PI4}[tryboot]\nBOOT_ORDER=0xf16\n")
        );
        // Taken out, the config is byte for byte what it was.
        let gone = again
            .with_edit(&EepromEdit::TrialBootOrder(None), board)
            .unwrap();
        assert_eq!(gone.to_text(), PI4);
        assert_eq!(
            gone.reading(EepromSetting::TrialBootOrder, board).unwrap(),
            EepromEdit::TrialBootOrder(None)
        );
        // A config ending under a board's filter, without a final newline,
        // gets [all] first, and gets it all back when the order goes.
        let odd = "BOOT_ORDER=0xf41\r\n[pi4]\r\nBOOT_UART=1";
        let board_end = parse(odd).with_edit(&trial(0xf14), board).unwrap();
        assert_eq!(
            board_end.to_text(),
            "BOOT_ORDER=0xf41\r\n[pi4]\r\nBOOT_UART=1\r\n[all]\r\n[tryboot]\r\nBOOT_ORDER=0xf14"
        );
        let back = board_end
            .with_edit(&EepromEdit::TrialBootOrder(None), board)
            .unwrap();
        assert_eq!(back.to_text(), odd);
    }

    #[test]
    fn a_trial_order_overridden_by_a_later_board_line_is_added_where_it_wins() {
        // An owner's [tryboot] line that a later [pi4] line overrides in a
        // trial boot too: changing it would not change what the trial reads.
        let text = "[tryboot]\nBOOT_ORDER=0xf41\n[all]\n[pi4]\nBOOT_ORDER=0xf21\n";
        let edited = parse(text).with_edit(&trial(0xf14), Some("pi4")).unwrap();
        assert_eq!(
            edited.to_text(),
            format!("{text}[all]\n[tryboot]\nBOOT_ORDER=0xf14\n")
        );
        assert_eq!(
            edited.boot_order(Some("pi4"), true).unwrap().to_string(),
            "0xf14"
        );
        assert_eq!(
            edited.boot_order(Some("pi4"), false).unwrap().to_string(),
            "0xf21"
        );
    }

    #[test]
    fn the_permanent_order_is_changed_where_the_board_reads_it() {
        let pi5 = parse(PI5).with_edit(&order(0xf416), Some("pi5")).unwrap();
        assert_eq!(pi5.to_text(), PI5.replace("0xf461", "0xf416"));
        let pi4 = parse(PI4).with_edit(&order(0xf14), Some("pi4")).unwrap();
        assert_eq!(pi4.to_text(), format!("{PI4}BOOT_ORDER=0xf14\n"));
        // A board's own section after [all] is the line a Pi 4 follows: it
        // is the one changed, [all]'s stays for the other boards.
        let filtered =
            "[all]\nBOOT_ORDER=0xf41\n[pi4]\nBOOT_ORDER=0xf21\n[cm4]\nBOOT_ORDER=0xf16\n";
        let pi4 = parse(filtered)
            .with_edit(&order(0xf14), Some("pi4"))
            .unwrap();
        assert_eq!(pi4.to_text(), filtered.replace("0xf21", "0xf14"));
        assert_eq!(
            pi4.boot_order(Some("pi4"), false).unwrap().to_string(),
            "0xf14"
        );
        // A CM4 sees [pi4] and [cm4]: the last, [cm4]'s, is the one.
        let cm4 = parse(filtered)
            .with_edit(&order(0xf61), Some("cm4"))
            .unwrap();
        assert_eq!(cm4.to_text(), filtered.replace("0xf16", "0xf61"));
        // A Pi 400 sees [pi4] too.
        let pi400 = parse(filtered)
            .with_edit(&order(0xf14), Some("pi400"))
            .unwrap();
        assert_eq!(pi400.to_text(), filtered.replace("0xf21", "0xf14"));
        // An owner's trial order survives a change of the normal one.
        let own = "BOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf21\n";
        let edited = parse(own).with_edit(&order(0xf14), Some("pi4")).unwrap();
        assert_eq!(edited.to_text(), own.replacen("0xf41", "0xf14", 1));
        assert_eq!(
            edited.boot_order(Some("pi4"), true).unwrap().to_string(),
            "0xf21"
        );
    }

    #[test]
    fn flags_are_set_and_taken_out_again() {
        let probe = parse(PI5)
            .with_edit(&EepromEdit::PcieProbe(Some("1".into())), Some("pi5"))
            .unwrap();
        assert_eq!(probe.to_text(), format!("{PI5}PCIE_PROBE=1\n"));
        assert!(probe.flag("PCIE_PROBE", Some("pi5")));
        assert!(!parse(PI5).flag("PCIE_PROBE", Some("pi5")));
        let back = probe
            .with_edit(&EepromEdit::PcieProbe(None), Some("pi5"))
            .unwrap();
        assert_eq!(back.to_text(), PI5);
        // A BOOT_ORDER the config did not have goes again.
        let added = parse(PI4).with_edit(&order(0xf14), Some("pi4")).unwrap();
        let removed = added
            .with_edit(&EepromEdit::BootOrder(None), Some("pi4"))
            .unwrap();
        assert_eq!(removed.to_text(), PI4);
    }

    #[test]
    fn psu_max_current_goes_where_a_pi_5_reads_it_and_comes_out_again() {
        let lift = EepromEdit::PsuMaxCurrent(Some(5000));
        assert_eq!(parse(PI5).psu_max_current(Some("pi5")).unwrap(), None);
        let lifted = parse(PI5).with_edit(&lift, Some("pi5")).unwrap();
        assert_eq!(lifted.to_text(), format!("{PI5}PSU_MAX_CURRENT=5000\n"));
        assert_eq!(lifted.psu_max_current(Some("pi5")).unwrap(), Some(5000));
        assert!(lifted.reads(&lift, Some("pi5")).unwrap());
        // An owner's 3000 under [pi5] is the line a Pi 5 follows, after
        // [all]'s: that one changes, [all]'s stays.
        let owned = "[all]\nPSU_MAX_CURRENT=5000\n[pi5]\nPSU_MAX_CURRENT=3000\n[all]\n";
        assert_eq!(
            parse(owned).psu_max_current(Some("pi5")).unwrap(),
            Some(3000)
        );
        let changed = parse(owned).with_edit(&lift, Some("pi5")).unwrap();
        assert_eq!(
            changed.to_text(),
            "[all]\nPSU_MAX_CURRENT=5000\n[pi5]\nPSU_MAX_CURRENT=5000\n[all]\n"
        );
        // Taking it out again leaves USB-PD to decide.
        let back = lifted
            .with_edit(&EepromEdit::PsuMaxCurrent(None), Some("pi5"))
            .unwrap();
        assert_eq!(back.to_text(), PI5);
        assert_eq!(
            lift.to_string(),
            "PSU_MAX_CURRENT=5000",
            "as a plan shows it"
        );
        assert_eq!(
            serde_json::to_value(&lift).unwrap(),
            serde_json::json!({"setting": "PSU_MAX_CURRENT", "value": 5000})
        );
        // A value the bootloader may read otherwise is an error, not a guess.
        let odd = parse("[all]\nPSU_MAX_CURRENT=5A\n");
        assert_eq!(
            odd.reading(EepromSetting::PsuMaxCurrent, Some("pi5")),
            Err(EepromConfigError::BadPsuMaxCurrent("5A".into()))
        );
    }

    #[test]
    fn a_boot_order_under_a_filter_that_cannot_be_evaluated_is_refused() {
        let text = "[all]\nBOOT_ORDER=0xf41\n[0x12345678]\nBOOT_ORDER=0xf14\n";
        let err = parse(text)
            .with_edit(&order(0xf14), Some("pi4"))
            .unwrap_err();
        assert_eq!(
            err,
            EepromConfigError::Conditional {
                key: "BOOT_ORDER".into(),
                line: 4
            }
        );
        assert!(parse(text)
            .reading(EepromSetting::BootOrder, Some("pi4"))
            .is_err());
        // Another key under such a filter is no matter.
        assert!(parse(text)
            .with_edit(&EepromEdit::PcieProbe(Some("1".into())), Some("pi4"))
            .is_ok());
    }

    #[test]
    fn orders_and_edits_serialise_as_the_config_spells_them() {
        let value = serde_json::to_value(BootOrder { value: 0xf14 }).unwrap();
        assert_eq!(value, serde_json::json!("0xf14"));
        let back: BootOrder = serde_json::from_value(value).unwrap();
        assert_eq!(back.value, 0xf14);
        assert!(serde_json::from_value::<BootOrder>(serde_json::json!("usb")).is_err());
        let edits = vec![trial(0xf14), EepromEdit::BootOrder(None)];
        let value = serde_json::to_value(&edits).unwrap();
        assert_eq!(
            value,
            serde_json::json!([
                {"setting": "[tryboot] BOOT_ORDER", "value": "0xf14"},
                {"setting": "BOOT_ORDER", "value": null}
            ])
        );
        assert_eq!(
            serde_json::from_value::<Vec<EepromEdit>>(value).unwrap(),
            edits
        );
        assert_eq!(trial(0xf14).to_string(), "[tryboot] BOOT_ORDER=0xf14");
    }

    #[test]
    fn the_build_time_is_read_as_rpi_eeprom_update_reads_it() {
        let image = b"\x55\xaa\xf0\x0fBUILD_TIMESTAMP=1779045198\0VERSION:224877da";
        assert_eq!(image_build_time(image), Some(1_779_045_198));
        assert_eq!(image_build_time(b"no stamp"), None);
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
