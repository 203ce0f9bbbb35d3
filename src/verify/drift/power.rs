//! The power: under-voltage or throttling since boot (`power`, from
//! `vcgencmd get_throttled`, else the kernel's own under-voltage
//! messages), and a Pi 5 booting from USB with its ports held to 600 mA
//! (`usb-current`).

use super::Facts;
use crate::check::Finding;
use crate::system::disks::Transport;
use crate::system::kernel_events::{power_events, PowerEventKind};
use crate::system::power::{psu_max_current, usb_boot_current, UsbBootCurrent};

/// Under-voltage right now is a failure: a bus-powered SSD browns the Pi
/// out. Earlier in this boot, or throttling for heat: a warning.
pub fn power(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "power";
    let supply = [
        "use the official power supply (Pi 4: 5.1 V 3 A; Pi 5: 5 V 5 A)",
        "or power the SSD separately: a powered USB hub or an enclosure with its own supply",
    ];
    let Some(t) = &facts.throttled else {
        // No vcgencmd: the kernel's own messages, where it prints them.
        let seen = power_events(&facts.kernel_log.records)
            .into_iter()
            .find(|e| e.kind == PowerEventKind::UnderVoltage)?;
        return Some(
            Finding::warning(
                CODE,
                format!(
                    "the kernel logged under-voltage since boot: \"{}\"",
                    seen.message
                ),
            )
            .fix(supply[0])
            .fix(supply[1]),
        );
    };
    let finding = if t.under_voltage_now {
        Finding::failure(
            CODE,
            format!(
                "under-voltage right now (vcgencmd get_throttled: {}): a bus-powered SSD can brown the Pi out",
                t.raw
            ),
        )
    } else if t.under_voltage_occurred {
        Finding::warning(
            CODE,
            format!(
                "under-voltage since boot (vcgencmd get_throttled: {}): a bus-powered SSD can brown the Pi out",
                t.raw
            ),
        )
    } else if t.throttled_now
        || t.throttling_occurred
        || t.freq_capped_now
        || t.freq_capping_occurred
        || t.soft_temp_limit_now
        || t.soft_temp_limit_occurred
    {
        return Some(
            Finding::warning(
                CODE,
                format!(
                    "the Pi was throttled for heat since boot (vcgencmd get_throttled: {}): it slows down, the drive \
                     with it",
                    t.raw
                ),
            )
            .fix("give it a heatsink or a fan (a Pi 5: the Active Cooler), and room to breathe"),
        );
    } else {
        return Some(Finding::ok(
            CODE,
            format!(
                "no under-voltage or throttling since boot (vcgencmd get_throttled: {})",
                t.raw
            ),
        ));
    };
    Some(finding.fix(supply[0]).fix(supply[1]))
}

/// A Pi 5 whose root is on a USB drive starts it, from power-off, with
/// the ports held to 600 mA unless the supply is a 5 A one.
pub fn usb_current(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "usb-current";
    let system = facts.system;
    let disk = facts.disk.filter(|d| d.transport == Transport::Usb)?;
    let board = system.pi.config_filter;
    let set = system
        .pi
        .eeprom_config
        .as_deref()
        .and_then(|text| crate::bootcfg::EepromConfig::parse(text.as_bytes()).ok())
        .and_then(|config| psu_max_current(&config, board).ok())
        .flatten();
    let verdict = usb_boot_current(system.pi.family, board, disk.transport, &facts.supply, set);
    match &verdict {
        UsbBootCurrent::Limited { .. } => {
            let mut finding = Finding::warning(
                CODE,
                format!(
                    "{}; the root is on {}",
                    verdict.warning().unwrap_or_default(),
                    disk.path.display()
                ),
            );
            for step in verdict.fixes() {
                finding = finding.fix(step);
            }
            Some(finding)
        }
        UsbBootCurrent::Lifted { by } => Some(Finding::ok(
            CODE,
            format!(
                "the USB ports get their full current at boot ({})",
                match by {
                    crate::system::power::LiftedBy::Eeprom(ma) => format!("PSU_MAX_CURRENT={ma}"),
                    crate::system::power::LiftedBy::Supply(ma) =>
                        format!("the supply negotiated {ma} mA"),
                }
            ),
        )),
        UsbBootCurrent::NotApplicable { .. } | UsbBootCurrent::Unknown { .. } => None,
    }
}
