//! What verify says of the new drive beyond its checks (issue 45): the
//! driver that holds it (`uas`, `usb-storage`, `nvme`) and whether this
//! boot's command line keeps `uas` off its bridge; and TRIM: the disk's
//! discard limits now, the rule the migration wrote, `fstrim.timer`, and,
//! once (the commit's run, or `verify --trim`), one FITRIM of the new root
//! with the bytes it freed. Never on an SD card: `system::trim::fitrim`
//! refuses one, and only a root on the migration's target is trimmed.

use crate::bootcfg::usb_quirks::{ignores_uas, UsbId};
use crate::bootcfg::Cmdline;
use crate::plan::after_move::AfterMove;
use crate::system::disks::{Disk, Transport};
use crate::system::trim::fitrim::trim_mounted;
use crate::system::trim::timer::FstrimTimer;
use crate::system::trim::{on_root, Inquiry, TrimFacts};
use crate::system::System;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The report's part (`after_move` in verify's JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AfterMoveReport {
    pub driver: Option<DriverReport>,
    pub trim: Option<TrimReport>,
}

/// The driver that holds the target disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriverReport {
    /// `/dev/sda`.
    pub disk: String,
    /// `uas`, `usb-storage`, `nvme`, or the disk's transport.
    pub driver: String,
    /// The USB bridge, `VID:PID`.
    pub bridge: Option<String>,
    /// This boot's command line keeps `uas` off the bridge
    /// (`usb-storage.quirks=VID:PID:u`); `null` for a disk not on USB.
    pub quirk_in_effect: Option<bool>,
    pub message: String,
}

/// TRIM on the target disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrimReport {
    pub disk: String,
    /// `queue/discard_max_bytes` now: 0 means no discard reaches it.
    pub discard_max_bytes: Option<u64>,
    /// A SCSI disk's `provisioning_mode` (`unmap`, `full`, ...).
    pub provisioning_mode: Option<String>,
    /// The rule the migration wrote, and whether it is on this root.
    pub rule: Option<RuleInPlace>,
    /// `fstrim.timer` on this root.
    pub fstrim_timer: FstrimTimer,
    /// One FITRIM of the new root, when this run made one.
    pub trimmed: Option<Trimmed>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleInPlace {
    pub path: PathBuf,
    pub present: bool,
}

/// What one FITRIM of the new root did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Trimmed {
    /// The filesystem told the disk this many bytes are free.
    Trimmed { mountpoint: PathBuf, bytes: u64 },
    /// Why not.
    NotTrimmed { why: String },
}

/// The report for a migration whose plan had `after_move`, on `target`,
/// without trimming.
pub fn report(system: &System, after_move: &AfterMove, target: Option<&Disk>) -> AfterMoveReport {
    let Some(disk) = target else {
        return AfterMoveReport::default();
    };
    AfterMoveReport {
        driver: Some(driver(system, disk)),
        trim: (disk.transport != Transport::Mmc).then(|| trim(system, after_move, disk)),
    }
}

fn driver(system: &System, disk: &Disk) -> DriverReport {
    let name = disk.path.display().to_string();
    let driver = match (&disk.usb, disk.transport) {
        (Some(usb), _) => usb.driver.clone().unwrap_or_else(|| "no driver".into()),
        (None, Transport::Nvme) => "nvme".into(),
        (None, transport) => transport.to_string(),
    };
    let bridge = disk.usb.as_ref().map(|u| u.id());
    let running = std::fs::read(system.host.proc("cmdline"))
        .ok()
        .and_then(|bytes| Cmdline::parse(&bytes).ok());
    let quirk_in_effect = bridge
        .as_deref()
        .and_then(UsbId::parse)
        .map(|id| running.as_ref().is_some_and(|c| ignores_uas(c, id)));
    let message = match (&bridge, quirk_in_effect) {
        (Some(bridge), Some(true)) => format!(
            "{name} is held by {driver} (USB bridge {bridge}; this boot's usb-storage.quirks keeps uas off it)"
        ),
        (Some(bridge), _) => format!("{name} is held by {driver} (USB bridge {bridge})"),
        (None, _) => format!("{name} is held by {driver}"),
    };
    DriverReport {
        disk: name,
        driver,
        bridge,
        quirk_in_effect,
        message,
    }
}

fn trim(system: &System, after_move: &AfterMove, disk: &Disk) -> TrimReport {
    let facts = TrimFacts::read(&system.host, disk, Inquiry::Never);
    let root = system.host.path(&system.source.root_dir);
    let rule = after_move.trim.rule.as_ref().map(|rule| RuleInPlace {
        present: on_root(&root, &rule.path).is_file(),
        path: rule.path.clone(),
    });
    let timer = FstrimTimer::of_root(&root);
    let name = disk.path.display().to_string();
    let max = facts.queue.max_bytes;
    let mode = facts
        .scsi
        .as_ref()
        .and_then(|s| s.provisioning_mode.clone());
    let mut message = match max {
        Some(bytes) if bytes > 0 => format!("TRIM reaches {name} (discard_max_bytes {bytes}"),
        Some(_) => format!("TRIM does not reach {name} (discard_max_bytes 0"),
        None => format!("TRIM on {name} is unknown (no discard_max_bytes"),
    };
    if let Some(mode) = &mode {
        message.push_str(&format!(", provisioning_mode {mode}"));
    }
    message.push(')');
    if let Some(rule) = &rule {
        message.push_str(&format!(
            "; pimigrate's rule {} {}",
            rule.path.display(),
            if rule.present {
                "is in place"
            } else {
                "is missing"
            }
        ));
    }
    message.push_str(match &timer {
        FstrimTimer::Enabled => "; fstrim.timer is enabled",
        FstrimTimer::Disabled { .. } => "; fstrim.timer is not enabled",
        FstrimTimer::Masked => "; fstrim.timer is masked",
        FstrimTimer::NotInstalled => "; fstrim.timer is not installed",
    });
    TrimReport {
        disk: name,
        discard_max_bytes: max,
        provisioning_mode: mode,
        rule,
        fstrim_timer: timer,
        trimmed: None,
        message,
    }
}

/// One FITRIM of the running root when it is on `target`, into `report`;
/// the action line for verify's output.
pub fn trim_once(system: &System, target: Option<&Disk>, report: &mut TrimReport) -> String {
    let outcome = trim_root(system, target);
    let line = match &outcome {
        Trimmed::Trimmed { mountpoint, bytes } => format!(
            "trimmed {} once (FITRIM): {bytes} bytes ({}) reported free to the disk",
            mountpoint.display(),
            crate::units::binary(*bytes)
        ),
        Trimmed::NotTrimmed { why } => format!("the new root was not trimmed: {why}"),
    };
    report.trimmed = Some(outcome);
    line
}

fn trim_root(system: &System, target: Option<&Disk>) -> Trimmed {
    let not = |why: String| Trimmed::NotTrimmed { why };
    let Some(disk) = target else {
        return not("the target disk is not attached".into());
    };
    if !system.host.is_live() {
        return not("this is not the running system (--sysroot)".into());
    }
    let runs_from_it = system
        .source
        .running_root_devno
        .is_some_and(|devno| disk.contains(devno));
    if !runs_from_it {
        return not(format!(
            "the running root is not on {}",
            disk.path.display()
        ));
    }
    let root = Path::new("/");
    match trim_mounted(root, disk.transport) {
        Ok(bytes) => Trimmed::Trimmed {
            mountpoint: root.to_path_buf(),
            bytes,
        },
        Err(err) => not(err.to_string()),
    }
}
