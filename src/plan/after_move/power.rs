//! Power, before the move: a Pi 5 that will boot a USB drive with its
//! ports held to 600 mA (`system::power`), and under-voltage since boot on
//! any Pi (`vcgencmd get_throttled`, or the kernel log where the tool is
//! not there). The fix pimigrate can make, with consent
//! (`--psu-max-current 5000`), is `PSU_MAX_CURRENT` in the bootloader's
//! config, through the same `rpi-eeprom-config` path as the boot order: a
//! change of the bootloader's plan, which `rollback` undoes with the rest.

use crate::bootcfg::eeprom::{EepromConfig, EepromEdit};
use crate::plan::edits::diff_files;
use crate::plan::{BootloaderPlan, EepromChange, Layout, Options, PartitionPath, Reason};
use crate::system::disks::Disk;
use crate::system::kernel_events::{power_events, KernelLog, PowerEventKind};
use crate::system::power::{
    psu_max_current, under_voltage_warning, usb_boot_current, SupplyFacts, Throttled,
    UsbBootCurrent, FULL_SUPPLY_MA,
};
use crate::system::System;
use serde::{Deserialize, Serialize};

/// Power in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerPlan {
    /// Whether the bootloader reads the new drive with its USB ports held
    /// to 600 mA.
    pub usb_boot_current: UsbBootCurrent,
    /// What lifts the limit, in the order to try it (empty when it does
    /// not apply).
    pub fixes: Vec<String>,
    /// Under-voltage seen since boot, in a sentence.
    pub under_voltage: Option<String>,
    /// `PSU_MAX_CURRENT` the owner asked pimigrate to write
    /// (`--psu-max-current`); the change is the bootloader's `power`.
    pub psu_max_current: Option<u32>,
}

impl Default for PowerPlan {
    fn default() -> PowerPlan {
        PowerPlan {
            usb_boot_current: UsbBootCurrent::Unknown {
                why: "the plan was made before pimigrate looked at the power".into(),
            },
            fixes: Vec::new(),
            under_voltage: None,
            psu_max_current: None,
        }
    }
}

impl PowerPlan {
    /// The plan's warnings about the power.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(warning) = self.usb_boot_current.warning() {
            out.push(match self.psu_max_current {
                Some(ma) => format!("{warning}; the migration writes PSU_MAX_CURRENT={ma}"),
                None => format!("{warning}; {}", self.fixes.join("; ")),
            });
        }
        out.extend(self.under_voltage.clone());
        out
    }
}

/// Decides the power part; with `--psu-max-current`, the change goes into
/// `bootloader` (a full move's plan of the bootloader), or the plan is
/// refused when it cannot be made.
pub(super) fn decide(
    system: &System,
    options: &Options,
    target: &Disk,
    log: &KernelLog,
    bootloader: Option<&mut BootloaderPlan>,
    reasons: &mut Vec<Reason>,
) -> PowerPlan {
    let pi = &system.pi;
    let board = pi.config_filter;
    let config_text = bootloader
        .as_ref()
        .and_then(|b| b.current.clone())
        .or_else(|| pi.eeprom_config.clone());
    let config = config_text
        .as_deref()
        .and_then(|text| EepromConfig::parse(text.as_bytes()).ok());
    let set = config
        .as_ref()
        .and_then(|c| psu_max_current(c, board).ok().flatten());
    let supply = SupplyFacts::read(&system.host);
    let verdict = match options.layout {
        Layout::RootOnly if pi.family == crate::system::pi::PiFamily::Pi5 => {
            UsbBootCurrent::NotApplicable {
                why: "a root-only move: the bootloader starts the SD card, not the USB drive"
                    .into(),
            }
        }
        _ => usb_boot_current(pi.family, board, target.transport, &supply, set),
    };
    let throttled = system
        .host
        .is_live()
        .then(crate::system::power::read_throttled)
        .flatten();
    let mut plan = PowerPlan {
        fixes: verdict.fixes(),
        usb_boot_current: verdict,
        under_voltage: under_voltage(throttled.as_ref(), log),
        psu_max_current: None,
    };
    if let Some(ma) = options.psu_max_current {
        match lift(
            system,
            &plan.usb_boot_current,
            ma,
            config.as_ref(),
            bootloader,
        ) {
            Ok(made) => plan.psu_max_current = made.then_some(ma),
            Err(reason) => reasons.push(reason),
        }
    }
    plan
}

/// Under-voltage since boot: `vcgencmd get_throttled` where it runs, else
/// the kernel's own messages.
fn under_voltage(throttled: Option<&Throttled>, log: &KernelLog) -> Option<String> {
    if let Some(throttled) = throttled.filter(|t| t.value.is_some()) {
        return under_voltage_warning(throttled);
    }
    let events = power_events(&log.records);
    let first = events
        .iter()
        .find(|e| e.kind == PowerEventKind::UnderVoltage)?;
    let count = events
        .iter()
        .filter(|e| e.kind == PowerEventKind::UnderVoltage)
        .count();
    Some(format!(
        "under-voltage since boot (the kernel log says so {count} time{}, first: \"{}\"): a USB SSD \
         draws from the same supply and can brown the Pi out; use the official supply or power the \
         drive separately",
        if count == 1 { "" } else { "s" },
        first.message
    ))
}

/// `PSU_MAX_CURRENT=ma` as a change of the bootloader's config; whether
/// there is one to make (none when the limit is lifted already).
fn lift(
    system: &System,
    verdict: &UsbBootCurrent,
    ma: u32,
    config: Option<&EepromConfig>,
    bootloader: Option<&mut BootloaderPlan>,
) -> Result<bool, Reason> {
    let refuse = |why: String| {
        Reason::new(
            "psu-max-current-unavailable",
            format!("--psu-max-current {ma}: {why}"),
        )
        .hint("leave out --psu-max-current (a 5 A USB-PD supply lifts the limit by itself)")
    };
    if ma < FULL_SUPPLY_MA {
        return Err(refuse(format!(
            "only {FULL_SUPPLY_MA} lifts the bootloader's 600 mA USB limit, and pimigrate writes \
             nothing else (a lower figure tells the bootloader the supply is weaker)"
        )));
    }
    match verdict {
        UsbBootCurrent::NotApplicable { why } => return Err(refuse(why.clone())),
        UsbBootCurrent::Lifted { .. } => return Ok(false),
        UsbBootCurrent::Limited { .. } | UsbBootCurrent::Unknown { .. } => {}
    }
    let Some(bootloader) = bootloader else {
        return Err(refuse(
            "the bootloader plays no part in this move, so its config is not changed".into(),
        ));
    };
    let Some(config) = config else {
        return Err(refuse(
            "the bootloader's config could not be read (rpi-eeprom-config)".into(),
        ));
    };
    let board = system.pi.config_filter;
    let edits = vec![EepromEdit::PsuMaxCurrent(Some(ma))];
    let to = config
        .with_edits(&edits, board)
        .map_err(|e| refuse(e.to_string()))?;
    if &to == config {
        return Ok(false);
    }
    let file = PartitionPath::known("/bootconf.txt");
    bootloader.power = Some(EepromChange {
        edits,
        config: to.to_text(),
        diff: diff_files(&file, &file, &config.to_bytes(), &to.to_bytes()),
        purpose: format!(
            "PSU_MAX_CURRENT={ma}: the bootloader takes the supply for a 5 A one and gives the USB \
             ports their full current from power-on"
        ),
    });
    Ok(true)
}
