//! TRIM on the new drive: what reaches it now, the udev rule that lets a
//! USB bridge pass it on (written onto the new root, with consent: on
//! unless `--no-trim`), and `fstrim.timer`, which does the trimming every
//! week. The facts and the decision are `system::trim`'s; this part says
//! what the migration writes because of them.
//!
//! Never anything for an SD card (some cards corrupt data under fstrim,
//! raspberrypi/linux#6349): `system::trim::decision` refuses an SD card
//! target, and on a root-only move, whose SD card keeps the mounted boot
//! partition, a disabled timer is left so.

use super::sd_card_stays_mounted;
use crate::bootcfg::unified_diff;
use crate::plan::Layout;
use crate::system::disks::Disk;
use crate::system::trim::decision::{self, TrimDecision};
use crate::system::trim::rule::TrimRule;
use crate::system::trim::timer::{FstrimTimer, Link};
use crate::system::trim::{Inquiry, TrimFacts};
use crate::system::System;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// TRIM in the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrimPlan {
    /// What reaches the target, and what can be done about it.
    pub decision: TrimDecision,
    /// The decision in a sentence.
    pub summary: String,
    /// The owner lets pimigrate switch TRIM on (no `--no-trim`).
    pub consent: bool,
    /// The rule the migration writes onto the new root.
    pub rule: Option<NewFile>,
    /// `fstrim.timer` on the running system's root, which the copy carries.
    pub timer: FstrimTimer,
    /// The link that enables the timer on the new root, when the
    /// migration makes it.
    pub timer_link: Option<Link>,
    /// What the timer does on the new system, in a sentence.
    pub timer_note: String,
}

impl Default for TrimPlan {
    /// The part of a plan journaled before pimigrate decided TRIM: it
    /// writes nothing.
    fn default() -> TrimPlan {
        TrimPlan {
            decision: TrimDecision::Unknown {
                why: "the plan was made before pimigrate looked at TRIM".into(),
            },
            summary: String::new(),
            consent: false,
            rule: None,
            timer: FstrimTimer::NotInstalled,
            timer_link: None,
            timer_note: String::new(),
        }
    }
}

/// A file the migration adds to the new root, and its diff from nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewFile {
    /// As the new system sees it.
    pub path: PathBuf,
    pub text: String,
    pub diff: String,
}

impl NewFile {
    fn of_rule(rule: &TrimRule) -> NewFile {
        let path = rule.path();
        let text = rule.text();
        let label = path.display().to_string();
        NewFile {
            diff: unified_diff(
                "/dev/null",
                &format!("b/{}", label.trim_start_matches('/')),
                b"",
                text.as_bytes(),
            ),
            path,
            text,
        }
    }
}

/// Decides TRIM for a move of the running system onto `target` (idle: its
/// VPD pages may be asked for), `consent` being the owner's.
pub(super) fn decide(system: &System, target: &Disk, layout: Layout, consent: bool) -> TrimPlan {
    let facts = TrimFacts::read(&system.host, target, Inquiry::WhenIdle);
    let decision = decision::decide(&facts);
    let name = target.path.display().to_string();
    let mut summary = decision.explain(&name);
    if let (TrimDecision::SwitchOn { .. }, false) = (&decision, consent) {
        summary.push_str("; --no-trim: no rule is written, and TRIM stays off");
    }
    if root_hint_needed(&decision) {
        summary.push_str(" (plan as root to read them)");
    }
    let rule = match (&decision, consent) {
        (TrimDecision::SwitchOn { rule }, true) => Some(NewFile::of_rule(rule)),
        _ => None,
    };
    let reaches = match &decision {
        TrimDecision::AlreadyOn { .. } => true,
        TrimDecision::SwitchOn { .. } => consent,
        _ => false,
    };
    let root = system.host.path(&system.host.source_root);
    let timer = FstrimTimer::of_root(&root);
    let (timer_link, timer_note) = timer_part(&timer, reaches, consent, layout);
    TrimPlan {
        decision,
        summary,
        consent,
        rule,
        timer,
        timer_link,
        timer_note,
    }
}

/// A bridge's pages that a normal user could not ask for: the device node
/// is root's.
fn root_hint_needed(decision: &TrimDecision) -> bool {
    use crate::system::trim::decision::CannotTrim;
    use crate::system::trim::VpdNotRead;
    matches!(
        decision,
        TrimDecision::Cannot {
            why: CannotTrim::VpdNotRead {
                why: VpdNotRead::Failed { error }
            }
        } if error.contains("Permission denied")
    ) && !nix::unistd::geteuid().is_root()
}

/// Whether the new root gets the timer's link, and what the timer will do
/// there.
fn timer_part(
    timer: &FstrimTimer,
    reaches: bool,
    consent: bool,
    layout: Layout,
) -> (Option<Link>, String) {
    let weekly = "it trims the new root every week";
    match timer {
        FstrimTimer::Enabled if reaches => (
            None,
            format!("fstrim.timer is enabled here, and the copy keeps it: {weekly}"),
        ),
        FstrimTimer::Enabled => (
            None,
            "fstrim.timer is enabled here, and the copy keeps it; it trims only filesystems whose disk \
             takes discards, which the new drive will not"
                .into(),
        ),
        FstrimTimer::Disabled { .. } if !consent => (
            None,
            "fstrim.timer is not enabled here; --no-trim leaves it so".into(),
        ),
        FstrimTimer::Disabled { .. } if !reaches => (
            None,
            "fstrim.timer is not enabled here, and pimigrate leaves it so: it would do nothing for a \
             disk that takes no discards"
                .into(),
        ),
        FstrimTimer::Disabled { .. } if sd_card_stays_mounted(layout) => (
            None,
            "fstrim.timer is not enabled here, and pimigrate leaves it so on a root-only move: it \
             would trim the SD card's boot partition too (some cards corrupt data under fstrim, \
             raspberrypi/linux#6349); `sudo fstrim -v /` trims the new root by hand"
                .into(),
        ),
        FstrimTimer::Disabled { .. } => (
            timer.enable_link(),
            format!(
                "fstrim.timer is installed but not enabled here: the migration enables it on the new \
                 root (the link `systemctl enable` makes), and {weekly}"
            ),
        ),
        FstrimTimer::Masked => (
            None,
            "fstrim.timer is masked here: someone turned it off on purpose, and pimigrate leaves it so"
                .into(),
        ),
        FstrimTimer::NotInstalled => (
            None,
            "fstrim.timer is not installed here (util-linux ships it): `sudo fstrim -v /` trims the new \
             root by hand"
                .into(),
        ),
    }
}

impl TrimPlan {
    /// Whether the migration writes anything for TRIM.
    pub fn writes(&self) -> bool {
        self.rule.is_some() || self.timer_link.is_some()
    }
}
