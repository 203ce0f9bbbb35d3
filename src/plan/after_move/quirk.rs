//! The target's USB bridge on the right driver: `usb-storage.quirks=
//! VID:PID:u` keeps `uas` off a bridge that aborts and resets under it, so
//! `usb-storage` (Bulk-Only) drives it instead. Offered when the bridge is
//! in the trackers' list of trouble on `uas`, or when the kernel log since
//! boot (pimigrate's own benchmark of the drive included) shows uas aborts
//! or resets of it; set only with the owner's consent (`--usb-quirk`),
//! merged into the one `usb-storage.quirks=` argument the command line may
//! already have (`bootcfg::usb_quirks`), and never for a bridge that offers
//! no Bulk-Only setting (`system::usb_modes`: no driver would take it, and
//! the disk would vanish) nor past the 127 characters the kernel keeps.
//!
//! The one decision for the plan, `verify --apply-quirk` and verify's
//! advice.

use crate::bootcfg::usb_quirks::{
    add_ignore_uas, effective_quirks, ignores_uas, known_uas_trouble, UsbId, QUIRKS_KEY, QUIRK_COST,
};
use crate::bootcfg::Cmdline;
use crate::host::Host;
use crate::plan::{EditOperation, Reason};
use crate::system::disks::Disk;
use crate::system::kernel_events::{disk_events, summarise, uas_trouble, DiskNames, KernelLog};
use crate::system::usb_modes;
use serde::{Deserialize, Serialize};

/// The bridge and the quirk, as the plan says them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsbQuirk {
    /// `VID:PID`, as sysfs spells it.
    pub bridge: String,
    /// The driver that holds it now: `uas` or `usb-storage`.
    pub driver: Option<String>,
    /// Why it is offered: a tracker's report of the bridge, the kernel
    /// log's aborts and resets of this disk (empty: not offered).
    pub evidence: Vec<String>,
    /// The kernel log could not be read, so resets were not looked for.
    #[serde(default)]
    pub log_unreadable: Option<String>,
    /// pimigrate recommends it (the bridge runs on `uas` and has trouble).
    pub offered: bool,
    /// The argument as the new command line would have it, merged with
    /// the owner's quirks; `null` when it cannot be set.
    pub argument: Option<String>,
    /// Why it cannot be set.
    pub refused: Option<String>,
    /// The command line already keeps `uas` off this bridge.
    pub already: bool,
    /// The owner asked for it (`--usb-quirk`).
    pub consent: bool,
    /// What it costs.
    pub cost: String,
}

impl UsbQuirk {
    /// The command-line edit, when the quirk is set.
    pub fn operation(&self) -> Option<EditOperation> {
        (self.sets()).then(|| EditOperation::CmdlineIgnoreUas {
            usb_id: self.bridge.clone(),
        })
    }

    /// The migration adds it.
    pub fn sets(&self) -> bool {
        self.consent && self.refused.is_none() && !self.already
    }

    /// For the plan's warnings: an offer the owner has not taken up.
    pub fn warning(&self) -> Option<String> {
        if !self.offered || self.consent || self.already {
            return None;
        }
        let why = self.evidence.join("; ");
        Some(match &self.refused {
            None => format!(
                "the USB bridge {} runs on uas and {why}: --usb-quirk sets {} on the new command line \
                 (usb-storage instead; it costs speed and usually TRIM)",
                self.bridge,
                self.argument.as_deref().unwrap_or(QUIRKS_KEY)
            ),
            Some(refused) => format!(
                "the USB bridge {} runs on uas and {why}, but pimigrate cannot move it to usb-storage: {refused}",
                self.bridge
            ),
        })
    }
}

/// Decides the quirk for `disk` (none when it is not behind a USB
/// bridge): `cmdline` is the command line the quirk would be merged into
/// (`None`: not known, no argument can be worked out), `log` the kernel
/// log since boot. With `consent`, a quirk that cannot be set is a
/// refusal in `reasons`.
pub fn decide(
    host: &Host,
    disk: &Disk,
    cmdline: Option<&Cmdline>,
    log: &KernelLog,
    consent: bool,
    reasons: &mut Vec<Reason>,
) -> Option<UsbQuirk> {
    let Some(usb) = &disk.usb else {
        if consent {
            reasons.push(
                Reason::new(
                    "usb-quirk-unavailable",
                    format!(
                        "--usb-quirk: {} is not behind a USB bridge, so there is no usb-storage quirk to set",
                        disk.path.display()
                    ),
                )
                .hint("leave out --usb-quirk"),
            );
        }
        return None;
    };
    let bridge = usb.id();
    let on_uas = usb.driver.as_deref() == Some("uas");
    let id = UsbId::parse(&bridge);
    let evidence = if on_uas {
        evidence(host, disk, id, log)
    } else {
        Vec::new()
    };
    let (argument, refused, already) = setting(host, disk, &bridge, id, cmdline);
    let quirk = UsbQuirk {
        bridge,
        driver: usb.driver.clone(),
        offered: !evidence.is_empty(),
        evidence,
        log_unreadable: log.unreadable.clone().filter(|_| on_uas),
        argument,
        refused,
        already,
        consent,
        cost: QUIRK_COST.to_string(),
    };
    if consent {
        if let Some(why) = &quirk.refused {
            reasons.push(
                Reason::new("usb-quirk-unavailable", format!("--usb-quirk: {why}"))
                    .hint("leave out --usb-quirk"),
            );
        }
    }
    Some(quirk)
}

/// Why the quirk is offered for a bridge on `uas`: the trackers' report
/// of it, and the kernel log's aborts and resets of `disk` since boot.
fn evidence(host: &Host, disk: &Disk, id: Option<UsbId>, log: &KernelLog) -> Vec<String> {
    let mut evidence = Vec::new();
    if let Some(known) = id.and_then(known_uas_trouble) {
        evidence.push(format!(
            "is known for aborts and resets on uas ({}, {})",
            known.name, known.source
        ));
    }
    let events = disk_events(&log.records, &DiskNames::of_disk(host, &disk.name));
    if uas_trouble(&events) {
        let counts: Vec<String> = summarise(&events)
            .into_iter()
            .filter(|c| {
                use crate::system::kernel_events::EventKind::*;
                matches!(c.kind, UasAbort | UasReset | UsbReset)
            })
            .map(|c| {
                format!(
                    "{} {} (first: \"{}\")",
                    c.count,
                    kind_words(c.kind, c.count),
                    c.first
                )
            })
            .collect();
        evidence.push(format!(
            "had {} in the kernel log since boot",
            counts.join(", ")
        ));
    }
    evidence
}

/// The quirk's argument as the new command line would have it, why it
/// cannot be set, and whether `cmdline` already keeps `uas` off `bridge`.
fn setting(
    host: &Host,
    disk: &Disk,
    bridge: &str,
    id: Option<UsbId>,
    cmdline: Option<&Cmdline>,
) -> (Option<String>, Option<String>, bool) {
    match (id, cmdline) {
        (None, _) => (
            None,
            Some(format!("{bridge} is not a USB vendor and product id")),
            false,
        ),
        (Some(id), Some(cmdline)) if ignores_uas(cmdline, id) => {
            (effective_quirks(cmdline).map(argument_of), None, true)
        }
        (Some(id), cmdline) => match why_not(host, disk) {
            Some(why) => (None, Some(why), false),
            None => match cmdline.map(|c| merged(c, id)) {
                Some(Ok(value)) => (Some(argument_of(value)), None, false),
                Some(Err(why)) => (None, Some(why), false),
                None => (Some(argument_of(format!("{id}:u"))), None, false),
            },
        },
    }
}

/// `usb-storage.quirks=VALUE`.
fn argument_of(value: String) -> String {
    format!("{QUIRKS_KEY}={value}")
}

/// Why the bridge cannot be given to usb-storage: it offers no Bulk-Only
/// setting, or what it offers cannot be read.
fn why_not(host: &Host, disk: &Disk) -> Option<String> {
    match usb_modes::of_disk(host, &disk.name) {
        Some(modes) if modes.bulk_only() => None,
        Some(_) => Some(
            "the bridge offers no Bulk-Only setting (its descriptors list UAS alone): with the quirk no \
             driver would take it, and the disk would vanish"
                .into(),
        ),
        None => Some(
            "the bridge's interface settings could not be read (sysfs `descriptors`), so whether \
             usb-storage can drive it is not known"
                .into(),
        ),
    }
}

/// The quirks value once `id`'s `u` is merged in, or why it cannot be.
fn merged(cmdline: &Cmdline, id: UsbId) -> Result<String, String> {
    let mut edited = cmdline.clone();
    add_ignore_uas(&mut edited, id).map_err(|e| e.to_string())?;
    effective_quirks(&edited).ok_or_else(|| "the quirk could not be added".to_string())
}

fn kind_words(kind: crate::system::kernel_events::EventKind, count: usize) -> &'static str {
    use crate::system::kernel_events::EventKind::*;
    match (kind, count) {
        (UasAbort, 1) => "uas abort",
        (UasAbort, _) => "uas aborts",
        (UasReset, 1) => "uas reset",
        (UasReset, _) => "uas resets",
        (UsbReset, 1) => "USB reset",
        (UsbReset, _) => "USB resets",
        _ => "events",
    }
}
