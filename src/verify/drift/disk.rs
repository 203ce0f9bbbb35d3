//! The committed drive in the kernel log since boot (`disk-errors`): I/O
//! errors, a disk gone offline or a filesystem gone read-only are
//! failures; uas aborts and resets, USB resets and NVMe controller resets
//! are warnings, each with the setting that usually ends them.

use super::Facts;
use crate::check::Finding;
use crate::system::kernel_events::{disk_events, summarise, EventKind, KindCount};

/// What the kernel said about the committed drive since boot.
pub fn errors(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "disk-errors";
    let (disk, names) = (facts.disk?, facts.disk_names.as_ref()?);
    let log = &facts.kernel_log;
    let shown = disk.path.display().to_string();
    if let Some(why) = &log.unreadable {
        return Some(
            Finding::warning(
                CODE,
                format!("the kernel log could not be read ({why}), so {shown}'s errors and resets were not looked for"),
            )
            .fix("check as root: sudo pimigrate status --check"),
        );
    }
    let counts: Vec<KindCount> = summarise(&disk_events(&log.records, names))
        .into_iter()
        .filter(|c| c.kind != EventKind::UasIgnored)
        .collect();
    if counts.is_empty() {
        return Some(
            Finding::ok(
                CODE,
                format!("no I/O errors or resets of {shown} in the kernel log since boot"),
            )
            .devices(vec![shown]),
        );
    }
    let failing = counts.iter().any(|c| is_failure(c.kind));
    let said: Vec<String> = counts
        .iter()
        .map(|c| format!("{} {}", c.count, kind_name(c.kind, c.count)))
        .collect();
    let first = &counts[0].first;
    let message = format!(
        "since boot, the kernel logged {} for {shown} ({}), e.g. \"{first}\"",
        said.join(", "),
        disk.describe()
    );
    let mut finding = match failing {
        true => Finding::failure(CODE, message)
            .fix("back up what matters now: the drive or its connection is failing"),
        false => Finding::warning(CODE, message),
    }
    .devices(vec![shown]);
    let kinds = |wanted: &[EventKind]| counts.iter().any(|c| wanted.contains(&c.kind));
    if kinds(&[EventKind::UasAbort, EventKind::UasReset]) {
        // On uas, the quirk is worth a try: verify --apply-quirk refuses
        // it, saying why, where usb-storage cannot take the bridge.
        let on_uas = disk
            .usb
            .as_ref()
            .filter(|usb| usb.driver.as_deref() == Some("uas"));
        if let Some(quirk) = on_uas.map(|usb| format!("{}:u", usb.id())) {
            finding = finding.fix(format!(
                "sudo pimigrate verify --apply-quirk (adds usb-storage.quirks={quirk} to cmdline.txt, with a backup), \
                 then reboot: the bridge runs on usb-storage, a little slower and steady"
            ));
        }
    }
    if kinds(&[EventKind::NvmeReset, EventKind::NvmeTimeout]) {
        finding = finding.fix(
            "add nvme_core.default_ps_max_latency_us=0 to cmdline.txt (the power saving some drives fail at) and reboot",
        );
    }
    Some(finding.fix(
        "check the cable and the power: a powered USB hub, or an enclosure with its own supply, for a USB drive; \
         `sudo dmesg` shows the messages",
    ))
}

/// Kinds that mean data may not have reached the drive.
fn is_failure(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::IoError | EventKind::DeviceOffline | EventKind::FsError | EventKind::FsReadOnly
    )
}

fn kind_name(kind: EventKind, count: usize) -> &'static str {
    let one = count == 1;
    match kind {
        EventKind::UasAbort if one => "uas abort",
        EventKind::UasAbort => "uas aborts",
        EventKind::UasReset if one => "uas reset",
        EventKind::UasReset => "uas resets",
        EventKind::UsbReset if one => "USB reset",
        EventKind::UsbReset => "USB resets",
        EventKind::UasIgnored => "uas ignored",
        EventKind::IoError if one => "I/O error",
        EventKind::IoError => "I/O errors",
        EventKind::DeviceOffline => "device offline",
        EventKind::NvmeReset if one => "NVMe controller reset",
        EventKind::NvmeReset => "NVMe controller resets",
        EventKind::NvmeTimeout if one => "NVMe timeout",
        EventKind::NvmeTimeout => "NVMe timeouts",
        EventKind::FsError if one => "filesystem error",
        EventKind::FsError => "filesystem errors",
        EventKind::FsReadOnly => "remounted read-only",
    }
}
