//! USB bridges that trackers report misbehaving with the `uas` driver.
//!
//! Maintainers say such lists are always out of date, so a bridge missing
//! here is not vouched for: every bridge on `uas` gets the advice to watch
//! the kernel log, and the listed ones a plain warning with the quirk that
//! forces the older `usb-storage` driver. The quirk is offered, never
//! applied: it costs speed on bridges that work.

/// `(VID, PID, vendor)` as lsusb prints them.
pub const UAS_TROUBLE: &[(&str, &str, &str)] = &[
    ("174c", "55aa", "ASMedia"),
    ("152d", "0578", "JMicron"),
    ("174c", "1156", "ASMedia"),
];

/// The vendor name when `id` (`VID:PID`, any case) is on the list.
pub fn known_uas_trouble(id: &str) -> Option<&'static str> {
    let id = id.to_ascii_lowercase();
    UAS_TROUBLE
        .iter()
        .find(|(vid, pid, _)| id == format!("{vid}:{pid}"))
        .map(|(_, _, vendor)| *vendor)
}

/// The kernel argument that makes the kernel use `usb-storage` instead of
/// `uas` for one bridge.
pub fn quirk_argument(id: &str) -> String {
    format!("usb-storage.quirks={}:u", id.to_ascii_lowercase())
}

/// What the kernel logs when a uas bridge stalls.
pub const KERNEL_LOG_SIGNS: &str =
    "`uas_eh_abort_handler`, `uas_eh_device_reset_handler` or `reset SuperSpeed USB device`";
