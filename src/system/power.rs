//! The Pi's power: what `vcgencmd get_throttled` says happened since boot,
//! what the firmware took the supply to be good for, and whether a Pi 5
//! boots from USB with its ports held to 600 mA.
//!
//! A Pi 5 negotiates its supply over USB-PD. Unless the supply offers 5 A
//! (or the bootloader's `PSU_MAX_CURRENT` says it does), the bootloader
//! gives the USB ports 600 mA between them, and an SSD enclosure can need
//! more while it spins up. `usb_max_current_enable=1` in config.txt acts
//! only once Linux runs, so it does not help the bootloader read the new
//! drive. Sources: the bootloader documentation's `PSU_MAX_CURRENT`, the
//! Pi 5 bootloader's release notes (2023-09-21: "In USB boot mode
//! automatically select max-current during a reboot (but not power on
//! reset)"), and Raspberry Pi's own desktop power plugin
//! (raspberrypi-ui/pplug-power), which reads the same device-tree cells.

use crate::bootcfg::eeprom::{EepromConfig, EepromConfigError, EepromEdit, EepromSetting};
use crate::host::Host;
use crate::system::disks::Transport;
use crate::system::pi::{read_dt_u32, PiFamily};
use serde::{Deserialize, Serialize};

/// `vcgencmd get_throttled`, decoded. Bits 0-3 are "now", 16-19 "has
/// happened since boot": under-voltage, ARM frequency capped, throttled,
/// soft temperature limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throttled {
    pub raw: String,
    pub value: Option<u32>,
    pub under_voltage_now: bool,
    pub under_voltage_occurred: bool,
    pub throttled_now: bool,
    pub throttling_occurred: bool,
    /// Reports written before these were decoded lack them.
    #[serde(default)]
    pub freq_capped_now: bool,
    #[serde(default)]
    pub freq_capping_occurred: bool,
    #[serde(default)]
    pub soft_temp_limit_now: bool,
    #[serde(default)]
    pub soft_temp_limit_occurred: bool,
}

impl Throttled {
    /// Parses `throttled=0x50000`; output the tool never gives decodes as
    /// all bits clear, with `value` `None`.
    pub fn parse(output: &str) -> Throttled {
        let raw = output.trim().to_string();
        let value = raw
            .rsplit('=')
            .next()
            .map(|v| v.trim().trim_start_matches("0x"))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok());
        let bit = |n: u32| value.is_some_and(|v| v & (1 << n) != 0);
        Throttled {
            under_voltage_now: bit(0),
            freq_capped_now: bit(1),
            throttled_now: bit(2),
            soft_temp_limit_now: bit(3),
            under_voltage_occurred: bit(16),
            freq_capping_occurred: bit(17),
            throttling_occurred: bit(18),
            soft_temp_limit_occurred: bit(19),
            value,
            raw,
        }
    }

    /// Under-voltage now or at any time since boot: a bus-powered SSD is
    /// the usual suspect.
    pub fn under_voltage_seen(&self) -> bool {
        self.under_voltage_now || self.under_voltage_occurred
    }
}

/// `vcgencmd get_throttled` on this machine; `None` without the tool.
pub fn read_throttled() -> Option<Throttled> {
    let vcgencmd = crate::tools::which("vcgencmd")?;
    let output = std::process::Command::new(vcgencmd)
        .arg("get_throttled")
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| Throttled::parse(&String::from_utf8_lossy(&output.stdout)))
}

/// What the firmware wrote under `/chosen/power` in the device tree for
/// this boot (a Pi 5; older Pis have no such node). Each cell is one
/// big-endian u32.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SupplyFacts {
    /// `max_current`: the mA the firmware took the supply to be good for,
    /// from USB-PD negotiation or `PSU_MAX_CURRENT`; 5000 for a 5 A supply.
    pub max_current_ma: Option<u32>,
    /// `usb_max_current_enable`: Linux drives the USB ports at the high
    /// limit (1.6 A) rather than 600 mA.
    pub usb_max_current_enable: Option<bool>,
    /// `power_reset` bit 1: the reset before this boot was a brown-out.
    pub reset_by_brownout: Option<bool>,
}

/// A 5 A supply: what the firmware needs to see to lift the USB limit.
pub const FULL_SUPPLY_MA: u32 = 5000;

impl SupplyFacts {
    pub fn read(host: &Host) -> SupplyFacts {
        SupplyFacts {
            max_current_ma: read_dt_u32(host, "chosen/power/max_current"),
            usb_max_current_enable: read_dt_u32(host, "chosen/power/usb_max_current_enable")
                .map(|v| v != 0),
            reset_by_brownout: read_dt_u32(host, "chosen/power/power_reset").map(|v| v & 0x2 != 0),
        }
    }
}

/// Whether the bootloader reads a USB drive with the ports held to 600 mA:
/// the plan's answer, before a Pi 5 is asked to boot from USB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum UsbBootCurrent {
    /// Not a Pi 5 booting from USB: the limit is not the bootloader's.
    NotApplicable { why: String },
    /// The bootloader gives the ports their full current.
    Lifted { by: LiftedBy },
    /// A USB boot from a cold start runs at 600 mA.
    Limited {
        /// What the firmware took the supply to be good for this boot.
        max_current_ma: Option<u32>,
        /// An owner's `PSU_MAX_CURRENT` below 5000 in the EEPROM config.
        psu_max_current: Option<u32>,
    },
    /// The device tree said nothing of the supply (older firmware).
    Unknown { why: String },
}

/// What lifts the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "source", content = "ma")]
pub enum LiftedBy {
    /// `PSU_MAX_CURRENT` in the bootloader's config.
    Eeprom(u32),
    /// A supply that negotiated 5 A.
    Supply(u32),
}

/// The edit that lifts the limit, with the owner's consent: the
/// bootloader then skips USB-PD and takes the supply for a 5 A one. Only
/// right when it is one: a weaker supply browns out under the load.
pub fn lift_edit() -> EepromEdit {
    EepromEdit::PsuMaxCurrent(Some(FULL_SUPPLY_MA))
}

/// `PSU_MAX_CURRENT` as the bootloader of `board` reads it, refusing a
/// line under a filter pimigrate cannot evaluate.
pub fn psu_max_current(
    config: &EepromConfig,
    board: Option<&str>,
) -> Result<Option<u32>, EepromConfigError> {
    match config.reading(EepromSetting::PsuMaxCurrent, board)? {
        EepromEdit::PsuMaxCurrent(ma) => Ok(ma),
        _ => Ok(None),
    }
}

/// Decides [`UsbBootCurrent`] for a migration to `target` on a Pi of
/// `family` whose board filter is `board` (`pi5`, `pi500`, `cm5`).
pub fn usb_boot_current(
    family: PiFamily,
    board: Option<&str>,
    target: Transport,
    supply: &SupplyFacts,
    psu_max_current: Option<u32>,
) -> UsbBootCurrent {
    let not = |why: &str| UsbBootCurrent::NotApplicable {
        why: why.to_string(),
    };
    if family != PiFamily::Pi5 {
        return not("the 600 mA limit of a USB boot is a Pi 5's");
    }
    if board == Some("cm5") {
        return not("a Compute Module 5's USB power comes from its carrier board");
    }
    if target != Transport::Usb {
        return not("the target is not on a USB port");
    }
    match (psu_max_current, supply.max_current_ma) {
        (Some(set), _) if set >= FULL_SUPPLY_MA => UsbBootCurrent::Lifted {
            by: LiftedBy::Eeprom(set),
        },
        (None, Some(ma)) if ma >= FULL_SUPPLY_MA => UsbBootCurrent::Lifted {
            by: LiftedBy::Supply(ma),
        },
        (None, None) => UsbBootCurrent::Unknown {
            why: "the device tree has no chosen/power/max_current".to_string(),
        },
        (set, ma) => UsbBootCurrent::Limited {
            max_current_ma: ma,
            psu_max_current: set,
        },
    }
}

impl UsbBootCurrent {
    /// A warning for the plan, or `None` when there is nothing to say.
    pub fn warning(&self) -> Option<String> {
        let UsbBootCurrent::Limited {
            max_current_ma,
            psu_max_current,
        } = self
        else {
            return None;
        };
        let supply = match (psu_max_current, max_current_ma) {
            (Some(set), _) => format!("the bootloader's config says PSU_MAX_CURRENT={set}"),
            (None, Some(ma)) => format!("the supply negotiated {ma} mA, not 5000"),
            (None, None) => "the supply did not negotiate 5 A".to_string(),
        };
        Some(format!(
            "{supply}: starting from power-off, the bootloader gives the USB ports \
             600 mA between them while it reads the new drive, which an SSD \
             enclosure can exceed (a reboot is not limited, so a trial boot can \
             pass and a later cold start fail)"
        ))
    }

    /// What lifts the limit, in the order to try it.
    pub fn fixes(&self) -> Vec<String> {
        if !matches!(self, UsbBootCurrent::Limited { .. }) {
            return Vec::new();
        }
        vec![
            "use a 5 V 5 A USB-PD supply (the official 27 W one)".to_string(),
            format!(
                "or, if the supply is good for 5 A without USB-PD, let pimigrate write {} \
                 into the bootloader's config (the same rpi-eeprom-config path as the boot order)",
                lift_edit()
            ),
            "or power the drive separately (a powered hub, an enclosure with its own supply)"
                .to_string(),
        ]
    }
}

/// A warning for the plan when under-voltage was seen since boot (any
/// Pi): a bus-powered SSD makes it worse.
pub fn under_voltage_warning(throttled: &Throttled) -> Option<String> {
    if !throttled.under_voltage_seen() {
        return None;
    }
    let when = if throttled.under_voltage_now {
        "right now"
    } else {
        "since boot"
    };
    Some(format!(
        "under-voltage {when} (vcgencmd get_throttled: {}): a USB SSD draws from the \
         same supply and can brown the Pi out; use the official supply or power the \
         drive separately",
        throttled.raw
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_bit_of_get_throttled() {
        // 0x50005: under-voltage and throttling, now and since boot.
        let t = Throttled::parse("throttled=0x50005\n");
        assert_eq!(t.value, Some(0x50005));
        assert!(t.under_voltage_now && t.under_voltage_occurred);
        assert!(t.throttled_now && t.throttling_occurred);
        assert!(!t.freq_capped_now && !t.soft_temp_limit_now);
        // 0xe000e: capped, throttled and at the soft limit, not under-voltage.
        let hot = Throttled::parse("throttled=0xe000e");
        assert!(hot.freq_capped_now && hot.freq_capping_occurred);
        assert!(hot.soft_temp_limit_now && hot.soft_temp_limit_occurred);
        assert!(!hot.under_voltage_seen());
        let ok = Throttled::parse("throttled=0x0");
        assert!(!ok.under_voltage_now && !ok.under_voltage_occurred);
        let junk = Throttled::parse("error=1 error_msg=\"Command not registered\"");
        assert_eq!(junk.value, None);
        assert!(!junk.under_voltage_seen());
    }

    #[test]
    fn reports_saved_before_the_new_bits_still_read() {
        let old = r#"{"raw":"throttled=0x50000","value":327680,"under_voltage_now":false,
            "under_voltage_occurred":true,"throttled_now":false,"throttling_occurred":true}"#;
        let t: Throttled = serde_json::from_str(old).unwrap();
        assert!(t.under_voltage_occurred && !t.soft_temp_limit_occurred);
    }

    /// A Pi 5's `/chosen/power`, as the firmware writes it.
    fn pi5_tree(max_current: Option<u32>, usb_high: u32, reset: u32) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let power = dir.path().join("proc/device-tree/chosen/power");
        std::fs::create_dir_all(&power).unwrap();
        if let Some(ma) = max_current {
            std::fs::write(power.join("max_current"), ma.to_be_bytes()).unwrap();
        }
        std::fs::write(power.join("usb_max_current_enable"), usb_high.to_be_bytes()).unwrap();
        std::fs::write(power.join("power_reset"), reset.to_be_bytes()).unwrap();
        dir
    }

    #[test]
    fn supply_facts_come_from_the_device_tree() {
        let tree = pi5_tree(Some(3000), 0, 0x2);
        let facts = SupplyFacts::read(&Host::with_root(tree.path()));
        assert_eq!(
            facts,
            SupplyFacts {
                max_current_ma: Some(3000),
                usb_max_current_enable: Some(false),
                reset_by_brownout: Some(true),
            }
        );
        let pi4 = tempfile::tempdir().unwrap();
        assert_eq!(
            SupplyFacts::read(&Host::with_root(pi4.path())),
            SupplyFacts::default()
        );
    }

    fn facts(max_current_ma: Option<u32>) -> SupplyFacts {
        SupplyFacts {
            max_current_ma,
            usb_max_current_enable: Some(true),
            reset_by_brownout: Some(false),
        }
    }

    #[test]
    fn a_pi_5_on_a_3_a_supply_boots_usb_at_600_ma() {
        let verdict = usb_boot_current(
            PiFamily::Pi5,
            Some("pi5"),
            Transport::Usb,
            &facts(Some(3000)),
            None,
        );
        assert_eq!(
            verdict,
            UsbBootCurrent::Limited {
                max_current_ma: Some(3000),
                psu_max_current: None
            }
        );
        let warning = verdict.warning().unwrap();
        assert!(warning.starts_with("the supply negotiated 3000 mA, not 5000"));
        assert!(warning.contains("600 mA"));
        // usb_max_current_enable=1 (above) does not lift the bootloader's limit.
        assert!(verdict.fixes()[1].contains("PSU_MAX_CURRENT=5000"));
        assert_eq!(
            serde_json::to_value(&verdict).unwrap(),
            serde_json::json!({"verdict": "limited", "max_current_ma": 3000, "psu_max_current": null})
        );
    }

    #[test]
    fn a_5_a_supply_or_the_eeprom_setting_lifts_it() {
        let by_supply = usb_boot_current(
            PiFamily::Pi5,
            Some("pi5"),
            Transport::Usb,
            &facts(Some(5000)),
            None,
        );
        assert_eq!(
            by_supply,
            UsbBootCurrent::Lifted {
                by: LiftedBy::Supply(5000)
            }
        );
        assert_eq!(by_supply.warning(), None);
        assert!(by_supply.fixes().is_empty());
        let by_eeprom = usb_boot_current(
            PiFamily::Pi5,
            Some("pi500"),
            Transport::Usb,
            &facts(Some(3000)),
            Some(5000),
        );
        assert_eq!(
            serde_json::to_value(&by_eeprom).unwrap(),
            serde_json::json!({"verdict": "lifted", "by": {"source": "eeprom", "ma": 5000}})
        );
        // An owner's explicit 3000 keeps it: their supply is a 3 A one.
        let owned = usb_boot_current(
            PiFamily::Pi5,
            Some("pi5"),
            Transport::Usb,
            &facts(None),
            Some(3000),
        );
        assert!(owned
            .warning()
            .unwrap()
            .starts_with("the bootloader's config says PSU_MAX_CURRENT=3000"));
    }

    #[test]
    fn only_a_pi_5_booting_from_usb_is_concerned() {
        let supply = facts(Some(3000));
        for (family, board, transport) in [
            (PiFamily::Pi4, Some("pi4"), Transport::Usb),
            (PiFamily::Pi5, Some("pi5"), Transport::Nvme),
            (PiFamily::Pi5, Some("cm5"), Transport::Usb),
        ] {
            let verdict = usb_boot_current(family, board, transport, &supply, None);
            assert!(
                matches!(verdict, UsbBootCurrent::NotApplicable { .. }),
                "{family:?} {transport:?}: {verdict:?}"
            );
            assert_eq!(verdict.warning(), None);
        }
        assert!(matches!(
            usb_boot_current(
                PiFamily::Pi5,
                Some("pi5"),
                Transport::Usb,
                &facts(None),
                None
            ),
            UsbBootCurrent::Unknown { .. }
        ));
    }

    #[test]
    fn the_fix_is_written_where_the_pi_5_reads_it() {
        let config =
            EepromConfig::parse(b"[all]\nBOOT_ORDER=0xf461\n[pi5]\nPSU_MAX_CURRENT=3000\n")
                .unwrap();
        assert_eq!(psu_max_current(&config, Some("pi5")).unwrap(), Some(3000));
        let lifted = config.with_edit(&lift_edit(), Some("pi5")).unwrap();
        assert_eq!(
            lifted.to_text(),
            "[all]\nBOOT_ORDER=0xf461\n[pi5]\nPSU_MAX_CURRENT=5000\n"
        );
        assert_eq!(psu_max_current(&lifted, Some("pi5")).unwrap(), Some(5000));
        let gated = EepromConfig::parse(b"[all]\n[gpio4=0]\nPSU_MAX_CURRENT=5000\n").unwrap();
        assert!(matches!(
            psu_max_current(&gated, Some("pi5")),
            Err(EepromConfigError::Conditional { .. })
        ));
    }

    #[test]
    fn the_pi_5_fixture_on_a_3_a_supply_warns_for_its_usb_disk_only() {
        let (host, system) = crate::system::inspect_fixture("pi5");
        let supply = SupplyFacts::read(&host);
        assert_eq!(supply.max_current_ma, Some(3000));
        // config.txt's usb_max_current_enable=1 is in effect for Linux...
        assert_eq!(supply.usb_max_current_enable, Some(true));
        let verdict = |name: &str| {
            let disk = system.disks.iter().find(|d| d.name == name).unwrap();
            usb_boot_current(
                system.pi.family,
                system.pi.config_filter,
                disk.transport,
                &supply,
                None,
            )
        };
        // ...and the bootloader still reads a USB drive at 600 mA.
        assert!(matches!(verdict("sda"), UsbBootCurrent::Limited { .. }));
        assert!(matches!(
            verdict("nvme0n1"),
            UsbBootCurrent::NotApplicable { .. }
        ));
    }

    #[test]
    fn under_voltage_since_boot_is_a_warning_heat_is_not() {
        let seen = under_voltage_warning(&Throttled::parse("throttled=0x50000")).unwrap();
        assert!(seen
            .starts_with("under-voltage since boot (vcgencmd get_throttled: throttled=0x50000)"));
        assert!(under_voltage_warning(&Throttled::parse("throttled=0x1"))
            .unwrap()
            .starts_with("under-voltage right now"));
        assert_eq!(
            under_voltage_warning(&Throttled::parse("throttled=0x80008")),
            None
        );
    }
}
