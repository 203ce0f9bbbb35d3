//! Which disk the system moves to: the recommendation's pick when there is
//! one, each candidate offered with its reason.

use super::intro::{product_name, shown_disks};
use super::Wizard;
use crate::recommend::Recommendation;
use crate::system::disks::{Disk, Role, Transport};
use anyhow::{bail, Result};

/// The target, or `None` when no disk can take the system (said why).
pub(super) fn choose<'a>(
    wizard: &Wizard<'a>,
    recommendation: Option<&Recommendation>,
) -> Result<Option<&'a Disk>> {
    if let Some(wanted) = &wizard.settings.target {
        // Any disk the user names is handed to the planner, which refuses
        // an unsuitable one with every reason and a way out.
        let Some(disk) = wizard.system.disks.iter().find(|d| named(d, wanted)) else {
            bail!(
                "--target {}: no such disk on this machine (`pimigrate devices` lists them)",
                wanted.display()
            );
        };
        wizard.ui.say(&format!(
            "Target: {} (from --target)\n",
            offer(disk, recommendation)
        ));
        return Ok(Some(disk));
    }
    let mut candidates: Vec<&Disk> = shown_disks(wizard)
        .filter(|d| d.role == Role::Candidate)
        .collect();
    if candidates.is_empty() {
        wizard.ui.say(
            "No disk can take the system. Plug in a USB SSD or an NVMe drive (unmount it if the \
             desktop mounted it) and run pimigrate again. Nothing was changed.",
        );
        return Ok(None);
    }
    candidates.sort_by_key(|d| std::cmp::Reverse(preference(d, recommendation)));
    // The reasons go above the question, where long lines wrap cleanly; the
    // items stay short, because a list item wider than the terminal makes
    // the prompt redraw itself line by line.
    let mut reasons = String::from("Disks that can take the system:\n");
    for disk in &candidates {
        reasons.push_str(&format!(
            "  {}  {}\n      {}\n",
            disk.path.display(),
            product_name(disk),
            reason(disk, recommendation)
        ));
    }
    wizard.ui.say(&reasons);
    let items: Vec<String> = candidates
        .iter()
        .map(|d| short_offer(d, recommendation))
        .collect();
    let index = wizard.answer(None, 0, || {
        wizard.ui.choose(
            "Which disk should the system move to? (everything on it will be erased)",
            &items,
            0,
        )
    })?;
    Ok(Some(candidates[index]))
}

/// Is `disk` what the person named (`/dev/sda` or `sda`)?
pub(super) fn named(disk: &Disk, wanted: &std::path::Path) -> bool {
    disk.path == wanted || disk.name == wanted.to_string_lossy()
}

/// The recommendation's pick first, then faster links, then larger disks.
fn preference(disk: &Disk, recommendation: Option<&Recommendation>) -> (bool, u8, u64) {
    let picked = recommendation
        .and_then(|r| r.pick.as_ref())
        .is_some_and(|pick| pick.path == disk.path);
    let link = match disk.transport {
        Transport::Nvme => 3,
        Transport::Usb if usb_speed(disk).is_some_and(|s| s >= 5000) => 2,
        Transport::Usb => 1,
        _ => 0,
    };
    (picked, link, disk.size_bytes)
}

fn usb_speed(disk: &Disk) -> Option<u32> {
    disk.usb.as_ref().and_then(|u| u.speed_mbps)
}

/// One line per candidate: what it is and why (or why not) to take it.
fn offer(disk: &Disk, recommendation: Option<&Recommendation>) -> String {
    format!(
        "{}  {}  {}  {}: {}",
        disk.path.display(),
        disk.size_human,
        disk.transport,
        product_name(disk),
        reason(disk, recommendation)
    )
}

/// A candidate as a list item: the disk, and whether it is the pick.
fn short_offer(disk: &Disk, recommendation: Option<&Recommendation>) -> String {
    let picked = recommendation
        .and_then(|r| r.pick.as_ref())
        .is_some_and(|pick| pick.path == disk.path);
    let size = disk
        .size_human
        .split(" (")
        .next()
        .unwrap_or(&disk.size_human);
    format!(
        "{}  {size}  {}{}",
        disk.path.display(),
        product_name(disk),
        if picked { "  (recommended)" } else { "" }
    )
}

/// Why (or why not) to take this disk: the benchmark's verdict, else what
/// its link says.
fn reason(disk: &Disk, recommendation: Option<&Recommendation>) -> String {
    match recommendation.and_then(|r| r.ranking.iter().find(|e| e.path == disk.path)) {
        Some(entry) if entry.worth_it => format!("recommended: {}", entry.verdict),
        Some(entry) => entry.verdict.clone(),
        None => without_benchmark(disk),
    }
}

/// What can be said from the link alone.
fn without_benchmark(disk: &Disk) -> String {
    match (disk.transport, usb_speed(disk)) {
        (Transport::Nvme, _) => "NVMe, usually the fastest a Pi can have".into(),
        (Transport::Usb, Some(speed)) if speed >= 5000 => {
            format!("USB 3 link ({speed} Mbit/s), free to take the system")
        }
        (Transport::Usb, Some(speed)) => {
            format!("USB 2 link ({speed} Mbit/s): slow, about 35 MB/s at most")
        }
        _ => "free to take the system (not measured)".into(),
    }
}
