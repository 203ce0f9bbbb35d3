//! What a user must know about a drive before moving the system onto it.

use super::bridges;
use super::formula::{self, Gain};
use crate::bench::grade::{AppClass, ClassVerdict};
use crate::bench::machine::Throttled;
use crate::bench::report::DeviceIdentity;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    /// Stable, for scripts: `slower-random-writes`, `usb2-link`, ...
    pub code: &'static str,
    pub message: String,
    /// What the user can do about it.
    pub hint: Option<String>,
}

impl Warning {
    fn new(code: &'static str, message: String, hint: Option<String>) -> Warning {
        Warning {
            code,
            message,
            hint,
        }
    }
}

/// Slower than the current root at random 4K writes: the one figure that
/// makes a system on it feel worse, however fast it reads.
pub fn slower_random_writes(gain: &Gain, baseline_name: &str) -> Option<Warning> {
    let writes = gain.random_write?;
    if writes >= formula::MIN_WRITE_GAIN {
        return None;
    }
    let detail: Vec<String> = gain
        .tests
        .iter()
        .filter(|t| t.weight == formula::WRITE_WEIGHT)
        .map(|t| format!("{} {:.0} vs {:.0} IOPS", t.test, t.iops, t.baseline_iops))
        .collect();
    Some(Warning::new(
        "slower-random-writes",
        format!(
            "{} ({})",
            formula::compare_phrase(writes, "random 4K writes", baseline_name),
            detail.join(", ")
        ),
        Some("a system on this drive would feel slower than it does now".into()),
    ))
}

/// Fails Raspberry Pi's own SD card test (agnostics' A1 marks).
pub fn below_a1(class: &ClassVerdict) -> Option<Warning> {
    if class.class != AppClass::BelowA1 {
        return None;
    }
    let failed: Vec<String> = class
        .checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| format!("{} {:.0} (A1 needs {:.0})", c.what, c.value, c.target))
        .collect();
    Some(Warning::new(
        "below-a1",
        format!("below A1: {}", failed.join(", ")),
        Some("A1 is the minimum Raspberry Pi's SD card test accepts for a system drive".into()),
    ))
}

/// Whether the Pi has USB 3 ports to move a drive to: Pi 4/400 and Pi 5
/// do; Pi 1-3 and Zero do not; a CM4's carrier board may or may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usb3Ports {
    Yes,
    No,
    Unknown,
}

/// A USB 2 link caps the drive at roughly 35-40 MB/s and adds latency to
/// every random I/O.
pub fn usb2_link(identity: &DeviceIdentity, ports: Usb3Ports) -> Option<Warning> {
    let usb = identity.usb.as_ref()?;
    let speed = usb.speed_mbps?;
    if speed > 480 {
        return None;
    }
    let hint = match ports {
        Usb3Ports::Yes => {
            "plug it into a blue USB 3 port (and use a USB 3 cable); then run recommend again"
        }
        Usb3Ports::No => {
            "this Pi has only USB 2 ports: expect about 35 MB/s at best whatever the drive"
        }
        Usb3Ports::Unknown => {
            "plug it into a USB 3 port if the machine has one; then run recommend again"
        }
    };
    Some(Warning::new(
        "usb2-link",
        format!(
            "limited by a USB 2 link ({speed} Mbit/s, bridge {})",
            usb.id
        ),
        Some(hint.into()),
    ))
}

/// A bridge on the `uas` driver: a warning with the quirk for bridges
/// trackers name, a note to watch the kernel log for the others.
pub fn uas_bridge(identity: &DeviceIdentity) -> Option<Warning> {
    let usb = identity.usb.as_ref()?;
    if usb.driver.as_deref() != Some("uas") {
        return None;
    }
    let quirk = bridges::quirk_argument(&usb.id);
    let watch = format!(
        "watch the kernel log (`dmesg -w` or `journalctl -k -f`) for {}",
        bridges::KERNEL_LOG_SIGNS
    );
    let product = usb
        .product
        .as_ref()
        .map(|p| format!(" {p}"))
        .unwrap_or_default();
    Some(match bridges::known_uas_trouble(&usb.id) {
        Some(vendor) => Warning::new(
            "uas-bridge-known-issues",
            format!(
                "USB bridge {} ({vendor}{product}) on the uas driver is known to misbehave (resets, hangs)",
                usb.id
            ),
            Some(format!(
                "{watch}; if they appear, add `{quirk}` to cmdline.txt (one line, space-separated) to use usb-storage instead. pimigrate does not apply it"
            )),
        ),
        None => Warning::new(
            "uas-bridge",
            format!(
                "USB bridge {}{product} runs on the uas driver; lists of bridges that misbehave with uas are never complete",
                usb.id
            ),
            Some(format!(
                "{watch}; if they appear, `{quirk}` in cmdline.txt forces usb-storage"
            )),
        ),
    })
}

pub fn writes_not_measured(device_path: &str) -> Warning {
    Warning::new(
        "writes-not-measured",
        "random write figures unknown: only read tests ran (no mounted filesystem to put a test file on, and recommend writes to a raw disk only when it is blank and you said yes)".into(),
        Some(format!(
            "mount a filesystem of it and run recommend again, or measure it with `pimigrate bench --destructive {device_path}` (erases it); recommend reuses that report")),
    )
}

pub fn not_measured(reason: &str) -> Warning {
    Warning::new("not-measured", format!("not measured: {reason}"), None)
}

/// Under-voltage during the benchmark: figures may be low, and a
/// bus-powered drive may brown the Pi out.
pub fn under_voltage(throttled: &Throttled) -> Option<Warning> {
    if !(throttled.under_voltage_now
        || throttled.under_voltage_occurred
        || throttled.throttling_occurred)
    {
        return None;
    }
    Some(Warning::new(
        "under-voltage",
        format!(
            "the Pi reported under-voltage or throttling when this was measured ({})",
            throttled.raw
        ),
        Some("use the official power supply, or a powered USB hub for a bus-powered drive; figures may be low".into()),
    ))
}

/// In use: `migrate` refuses it until it is unmounted.
pub fn in_use(uses: &[String], device_path: &str) -> Option<Warning> {
    if uses.is_empty() {
        return None;
    }
    Some(Warning::new(
        "in-use",
        format!("in use: {}", uses.join("; ")),
        Some(format!(
            "unmount it before `pimigrate migrate --target {device_path}`, which erases it"
        )),
    ))
}
