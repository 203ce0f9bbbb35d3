//! What ends a trial boot that does not come up, with nobody at the Pi.
//!
//! A trial boot is one-shot: the bootloader clears the request as it reads
//! it, so any reset during the trial starts the SD card as before. The job
//! here is to make every way a trial can fail end in a reset, within
//! minutes (PI-FACTS, "A trial that fails with nobody at the Pi"):
//!
//! - the kernel: `panic=` resets after a panic (no root, no init, a crash);
//! - the wait for the root: Linux 6.5 and later bound it (`rootwait=N`,
//!   then a panic); an initramfs bounds its own (initramfs-tools: 30 s,
//!   then its `panic`, which reboots when `panic=` is given); an older
//!   kernel without an initramfs waits for ever, which the plan says;
//! - systemd: the marker word tells the new root's generator
//!   (`apply::trial_guard`) that this is the trial, and only then does it
//!   make emergency and rescue mode reboot and give the boot a deadline;
//! - a root that vanishes (a bridge that drops the disk): every reboot the
//!   generator arranges is `reboot-force`, which needs no unit file, and
//!   `systemd.crash_reboot=1` makes PID 1 reboot by itself when it cannot
//!   run its shutdown program from the vanished root (or crashes), instead
//!   of freezing, which no `panic=` would end.
//!
//! Not `rootflags=errors=panic`: on Linux 6.6 and later a block device that
//! goes away shuts its ext4 down (`->shutdown`), and a shut-down ext4 reports no
//! error, so the option would never act on the Pis' kernels (6.6, 6.12)
//! where the drive vanishes; on the testbed's 6.1 it would, and hide the
//! path the Pis take (docs/internals/aftercare-facts.md).
//!
//! Decided here from the trial's kernel (its version, whether it starts
//! with an initramfs); shown by the plan; written into the trial's command
//! line by the edits; taken out again when `verify --commit` makes the
//! trial's command line the normal one.

use super::EditOperation;
use crate::bootcfg::Cmdline;
use crate::system::System;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The word that marks the trial's command line (its value: `1`, or
/// `auto-commit` when the trial checks and commits itself); the system
/// inspection reads it too, to know a trial boot where no device tree says.
pub use crate::system::pi::TRIAL_MARKER;
/// Seconds a trial kernel waits for its root device (Linux 6.5 and later)
/// before it panics.
pub const TRIAL_ROOT_WAIT_SECONDS: u32 = 90;
/// Seconds the trial boot has to reach its default target before systemd
/// resets the Pi: a unit that hangs, a device that never comes.
pub const TRIAL_BOOT_DEADLINE_SECONDS: u32 = 600;
/// How long initramfs-tools waits for the root device by itself
/// (`max(30, rootdelay)`, scripts/local) before its `panic`.
pub const INITRAMFS_ROOT_WAIT_SECONDS: u32 = 30;
/// How long emergency or rescue mode may take to record why before its
/// reboot (the unit's `TimeoutStartSec=`).
pub const TRIAL_EMERGENCY_SECONDS: u32 = 120;
/// How long systemd (PID 1) waits before it reboots when it cannot go on:
/// `systemd.crash_reboot`'s fixed delay.
pub const CRASH_REBOOT_SECONDS: u32 = 10;
/// The word that makes PID 1 reboot instead of freezing.
const CRASH_REBOOT: &str = "systemd.crash_reboot";
/// How long a reboot under systemd may take before the reset: its stop
/// jobs (systemd's default 90 s stop timeout), then systemd-shutdown's
/// (90 s for the processes to end, then the unmounts).
pub const REBOOT_SECONDS: u32 = 180;
/// The firmware and the kernel, up to the wait for the root device, with
/// room to spare (a Pi 4 takes about 10 s).
const KERNEL_START_SECONDS: u32 = 60;
/// The first kernel that takes `rootwait=SECONDS` (older ones pass the word
/// to init and do not wait at all).
const ROOTWAIT_SECONDS_SINCE: (u32, u32) = (6, 5);

/// How a trial boot that does not come up resets itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialGuard {
    /// The words the trial's command line gets, in order, each with why.
    pub words: Vec<GuardWord>,
    /// What else ends a trial that does not come up, line by line: the
    /// initramfs's own wait, and what the marker makes the new root's
    /// systemd do in the trial boot.
    pub resets: Vec<String>,
    /// What nothing here can bound on this kernel, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unbounded: Option<String>,
    /// The trial kernel's version as read, when it could be.
    pub kernel: Option<String>,
    /// Where that version came from, when not from the kernel image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_note: Option<String>,
    /// The trial starts an initramfs (which bounds its own wait for root).
    pub initramfs: bool,
    /// The trial checks itself with `verify`'s checks and commits, or
    /// reboots to the SD card (`--auto-commit`).
    pub auto_commit: bool,
}

/// One word of the trial's command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardWord {
    pub arg: String,
    /// The word of the normal command line it stands in for (`rootwait`,
    /// an own `panic=`), put back when the trial is committed; none: the
    /// word is the trial's alone and goes.
    pub replaces: Option<String>,
    pub why: String,
}

/// What the trial kernel is, as far as the boot partition tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrialKernel {
    /// Its version (`6.1.0-28-arm64`), when the image or `/boot` names it.
    pub version: Option<String>,
    /// Where the version came from, when not from the image itself.
    pub version_note: Option<String>,
    pub initramfs: bool,
}

impl TrialKernel {
    /// The kernel and initramfs config.txt starts from `boot_dir` (the
    /// trial's tryboot.txt is a copy of config.txt, so it starts the same
    /// ones), and the version: from the image, an identical
    /// `/boot/vmlinuz-VERSION` on the root, or else the running kernel's,
    /// which booted from that same boot partition.
    pub fn of(system: &System, boot_dir: &Path) -> TrialKernel {
        let host = &system.host;
        let boot = host.path(boot_dir);
        let images =
            crate::system::kernel::boot_images(&boot, system.pi.family, system.pi.config_filter);
        let from_image = images
            .kernel
            .as_ref()
            .and_then(|name| std::fs::read(boot.join(name)).ok())
            .and_then(|bytes| {
                crate::system::kernel::kernel_version(&bytes, &host.path(&host.source_root))
            });
        let running = || {
            std::fs::read_to_string(host.proc("sys/kernel/osrelease"))
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let (version, version_note) = match from_image {
            Some(version) => (Some(version), None),
            None => match running() {
                Some(version) => (
                    Some(version.clone()),
                    Some(format!(
                        "the kernel image names no version; taken as the running kernel's, {version}, \
                         which booted from the same boot partition"
                    )),
                ),
                None => (None, None),
            },
        };
        TrialKernel {
            version,
            version_note,
            initramfs: images.initramfs.is_some(),
        }
    }
}

/// `6.12.25+rpt-rpi-v8` → (6, 12).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The guard of a trial whose normal command line (the edited one, as the
/// committed trial will have it) is `normal`.
pub fn decide(kernel: &TrialKernel, normal: &Cmdline, auto_commit: bool) -> TrialGuard {
    let (root_wait, unbounded) = root_wait(kernel, normal);
    let mut words = vec![panic_word(kernel, normal)];
    words.extend(root_wait);
    words.push(crash_reboot_word(normal));
    let value = if auto_commit { "auto-commit" } else { "1" };
    words.push(GuardWord {
        arg: format!("{TRIAL_MARKER}={value}"),
        replaces: None,
        why: "marks the trial boot for the new root's systemd (a generator pimigrate writes there acts only \
              when this word is on the command line, which only the trial's is)"
            .to_string(),
    });
    let mut guard = TrialGuard {
        words,
        resets: resets(kernel, auto_commit),
        unbounded,
        kernel: kernel.version.clone(),
        kernel_note: kernel.version_note.clone(),
        initramfs: kernel.initramfs,
        auto_commit,
    };
    let within = guard.longest_return_seconds();
    guard.resets.push(format!(
        "whichever way the trial fails{}, the SD card's system starts again within {within} s of the \
         trial reboot, end to end; `pimigrate status` says when it took longer, a sign that something \
         pimigrate did not plan reset the Pi (a power cycle)",
        match guard.unbounded {
            Some(_) => " (but for the wait below)",
            None => "",
        }
    ));
    guard
}

/// `panic=SECONDS`: a panic resets the Pi instead of halting it.
fn panic_word(kernel: &TrialKernel, normal: &Cmdline) -> GuardWord {
    GuardWord {
        arg: format!("panic={}", super::bootloader::TRIAL_PANIC_SECONDS),
        replaces: normal.get("panic").map(|v| format!("panic={v}")),
        why: format!(
            "a kernel panic (no root file system, no init, a crash) resets the Pi after {} s{}; \
             the reset starts the SD card, as the trial is one-shot",
            super::bootloader::TRIAL_PANIC_SECONDS,
            if kernel.initramfs {
                ", and so does the initramfs when it gives up on its root"
            } else {
                ""
            }
        ),
    }
}

/// `systemd.crash_reboot=1`: PID 1 reboots instead of freezing.
fn crash_reboot_word(normal: &Cmdline) -> GuardWord {
    GuardWord {
        arg: format!("{CRASH_REBOOT}=1"),
        replaces: normal
            .get(CRASH_REBOOT)
            .map(|v| format!("{CRASH_REBOOT}={v}")),
        why: format!(
            "systemd reboots the Pi {CRASH_REBOOT_SECONDS} s after it crashes, or finds that it cannot run its \
             shutdown program (the new drive gone from under the trial: a bridge that drops the disk), instead \
             of freezing, which nothing else would end"
        ),
    }
}

/// How the trial kernel's wait for its root device ends: the
/// `rootwait=SECONDS` word that bounds it, or why nothing does (neither
/// when the normal command line or the initramfs bounds it).
fn root_wait(kernel: &TrialKernel, normal: &Cmdline) -> (Option<GuardWord>, Option<String>) {
    let version = kernel.version.as_deref();
    let bounded_rootwait = version
        .and_then(major_minor)
        .is_some_and(|v| v >= ROOTWAIT_SECONDS_SINCE);
    let own_bound = normal.get("rootwait").filter(|v| !v.is_empty());
    match (own_bound, bounded_rootwait) {
        (Some(_), _) => (None, None),
        (None, true) => (
            Some(GuardWord {
                arg: format!("rootwait={TRIAL_ROOT_WAIT_SECONDS}"),
                replaces: normal.has("rootwait").then(|| "rootwait".to_string()),
                why: format!(
                    "Linux {} gives up on a root device that does not appear within {TRIAL_ROOT_WAIT_SECONDS} s \
                     (rootwait=SECONDS, Linux 6.5 and later) and panics",
                    version.unwrap_or_default()
                ),
            }),
            None,
        ),
        (None, false) if kernel.initramfs => (None, None),
        (None, false) => (
            None,
            Some(format!(
                "the trial kernel ({}) starts no initramfs, so it waits for a root device that never \
                 appears without end (rootwait=SECONDS needs Linux 6.5). If the new drive does not come \
                 up at the trial, only a power cycle ends the wait; it starts the SD card",
                match version {
                    Some(v) => format!("Linux {v}"),
                    None => "its version could not be read".to_string(),
                }
            )),
        ),
    }
}

/// What else ends a trial that does not come up, with a reset.
fn resets(kernel: &TrialKernel, auto_commit: bool) -> Vec<String> {
    let mut resets = Vec::new();
    if kernel.initramfs {
        resets.push(format!(
            "the initramfs waits for the root device by itself, {INITRAMFS_ROOT_WAIT_SECONDS} s with \
             initramfs-tools (rootdelay= would lengthen it), then panics"
        ));
    }
    resets.push(
        "emergency or rescue mode (an fstab line that fails, a unit that cannot start) records why and \
         reboots instead of waiting for a person at the console"
            .to_string(),
    );
    resets.push(format!(
        "the boot must reach its default target within {TRIAL_BOOT_DEADLINE_SECONDS} s \
         (JobTimeoutSec= with JobTimeoutAction=reboot-force): a unit that hangs resets the Pi"
    ));
    if auto_commit {
        resets.push(format!(
            "once up, it runs verify's checks, ended within the same {TRIAL_BOOT_DEADLINE_SECONDS} s: when \
             they pass it commits; when they fail it records why and reboots, so the SD card starts as before"
        ));
    }
    resets.push(
        "each of these reboots is systemd's reboot-force, which needs nothing from the new drive; should the \
         drive vanish during the trial, the reboot cannot run its shutdown program, and \
         systemd.crash_reboot=1 resets the Pi all the same"
            .to_string(),
    );
    resets
}

impl TrialGuard {
    /// The longest a trial that fails can take, from pimigrate's reboot
    /// into it until the SD card's kernel starts again, when each reset
    /// armed here does its job: the SD card's system going down, the
    /// kernel's start and its wait for the root, then systemd's deadline,
    /// emergency mode's record, and the trial's own reboot. A trial that
    /// came back later was reset by something pimigrate did not plan (a
    /// power cycle). The panics end sooner: a root wait and 10 s.
    pub fn longest_return_seconds(&self) -> u32 {
        REBOOT_SECONDS
            + KERNEL_START_SECONDS
            + self.root_wait_seconds()
            + TRIAL_BOOT_DEADLINE_SECONDS
            + TRIAL_EMERGENCY_SECONDS
            + REBOOT_SECONDS
    }

    /// How long the trial kernel waits for its root at most (a wait
    /// without end counts as the longest bound there is: it is not a reset
    /// of this guard's).
    fn root_wait_seconds(&self) -> u32 {
        let bounded = self.words.iter().find_map(|w| {
            w.arg
                .strip_prefix("rootwait=")
                .and_then(|v| v.parse::<u32>().ok())
        });
        match bounded {
            Some(seconds) => seconds,
            None if self.initramfs => INITRAMFS_ROOT_WAIT_SECONDS,
            None => TRIAL_ROOT_WAIT_SECONDS,
        }
    }

    /// The edits that make the normal command line the trial's.
    pub fn operations(&self) -> Vec<EditOperation> {
        self.words
            .iter()
            .map(|w| EditOperation::CmdlineAdd { arg: w.arg.clone() })
            .collect()
    }

    /// Whether `cmdline` carries this guard's marker.
    pub fn marked(cmdline: &Cmdline) -> bool {
        cmdline.has(TRIAL_MARKER)
    }

    /// The trial's command line as the normal one: each word taken out,
    /// or the word it stood in for put back. Words changed since (a quirk
    /// added to the trial's file) stay.
    pub fn normal(&self, trial: &Cmdline) -> Cmdline {
        let mut cmdline = trial.clone();
        for word in &self.words {
            match &word.replaces {
                Some(original) => cmdline.add(original),
                None => {
                    cmdline.remove_exact(&word.arg);
                }
            }
        }
        cmdline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Cmdline {
        Cmdline::parse(text.as_bytes()).unwrap()
    }

    fn kernel(version: Option<&str>, initramfs: bool) -> TrialKernel {
        TrialKernel {
            version: version.map(str::to_string),
            version_note: None,
            initramfs,
        }
    }

    fn trial_of(guard: &TrialGuard, normal: &str) -> String {
        let bytes = crate::plan::edits::apply(normal.as_bytes(), &guard.operations()).unwrap();
        String::from_utf8(bytes).unwrap()
    }

    const PI_OS: &str =
        "console=serial0,115200 console=tty1 root=PARTUUID=0b4c1d2e-02 rootfstype=ext4 fsck.repair=yes rootwait\n";

    #[test]
    fn a_new_kernel_bounds_its_wait_for_root_and_commit_puts_the_line_back() {
        let guard = decide(
            &kernel(Some("6.12.25+rpt-rpi-v8"), true),
            &line(PI_OS),
            false,
        );
        let trial = trial_of(&guard, PI_OS);
        assert_eq!(
            trial,
            "console=serial0,115200 console=tty1 root=PARTUUID=0b4c1d2e-02 rootfstype=ext4 fsck.repair=yes \
             rootwait=90 panic=10 systemd.crash_reboot=1 pimigrate.trial=1\n"
        );
        assert!(guard.unbounded.is_none());
        assert!(TrialGuard::marked(&line(&trial)));
        let normal = guard.normal(&line(&trial));
        assert_eq!(String::from_utf8(normal.to_bytes()).unwrap(), PI_OS);
        assert!(!TrialGuard::marked(&normal));
    }

    #[test]
    fn an_old_kernel_keeps_bare_rootwait_and_the_plan_says_what_stays_unbounded() {
        let guard = decide(&kernel(Some("6.1.0-28-arm64"), false), &line(PI_OS), false);
        let trial = trial_of(&guard, PI_OS);
        assert!(
            trial.contains(" rootwait panic=10 systemd.crash_reboot=1 pimigrate.trial=1"),
            "{trial}"
        );
        let unbounded = guard.unbounded.as_deref().unwrap();
        assert!(unbounded.contains("Linux 6.1.0-28-arm64"), "{unbounded}");
        assert!(unbounded.contains("power cycle"), "{unbounded}");
        // With an initramfs, the initramfs's own wait is the bound.
        let guard = decide(&kernel(Some("6.1.0-28-arm64"), true), &line(PI_OS), true);
        assert!(guard.unbounded.is_none());
        assert!(guard.resets[0].contains("30 s"), "{:?}", guard.resets);
        assert!(trial_of(&guard, PI_OS).contains("pimigrate.trial=auto-commit"));
        // An unreadable version is never taken as new enough.
        let guard = decide(&kernel(None, false), &line(PI_OS), false);
        assert!(!trial_of(&guard, PI_OS).contains("rootwait="));
        assert!(guard.unbounded.unwrap().contains("could not be read"));
    }

    #[test]
    fn the_owners_own_panic_and_rootwait_bound_are_kept_for_later_boots() {
        let own = "root=PARTUUID=0b4c1d2e-02 rootwait=20 panic=0 systemd.crash_reboot=0 quiet\n";
        let guard = decide(&kernel(Some("6.6.31"), false), &line(own), false);
        let trial = trial_of(&guard, own);
        assert_eq!(
            trial,
            "root=PARTUUID=0b4c1d2e-02 rootwait=20 panic=10 systemd.crash_reboot=1 quiet pimigrate.trial=1\n"
        );
        // A quirk added to the trial's file before the commit stays.
        let mut quirked = line(&trial);
        quirked.add("usb-storage.quirks=174c:55aa:u");
        assert_eq!(
            String::from_utf8(guard.normal(&quirked).to_bytes()).unwrap(),
            "root=PARTUUID=0b4c1d2e-02 rootwait=20 panic=0 systemd.crash_reboot=0 quiet \
             usb-storage.quirks=174c:55aa:u\n"
        );
    }

    /// A trial whose drive vanishes: PID 1 reboots by itself, whatever
    /// the kernel; the plan says why, and how long a failed trial takes
    /// at most to bring the SD card's system back.
    #[test]
    fn every_trial_reboots_from_pid_1_and_says_how_long_a_failure_takes() {
        for kernel in [
            kernel(Some("6.12.25+rpt-rpi-v8"), true),
            kernel(Some("5.10.103-v7l+"), false),
            kernel(None, true),
        ] {
            let guard = decide(&kernel, &line(PI_OS), false);
            let word = guard
                .words
                .iter()
                .find(|w| w.arg == "systemd.crash_reboot=1")
                .expect("the crash_reboot word");
            assert_eq!(word.replaces, None);
            assert!(
                word.why.contains("cannot run its shutdown program"),
                "{}",
                word.why
            );
            assert!(
                guard.resets.iter().any(|r| r.contains("reboot-force")),
                "{:?}",
                guard.resets
            );
            let last = guard.resets.last().unwrap();
            let within = guard.longest_return_seconds();
            assert!(last.contains(&format!("within {within} s")), "{last}");
            assert_eq!(
                last.contains("(but for the wait below)"),
                guard.unbounded.is_some(),
                "{last}"
            );
        }
        // The SD card going down and the trial's own reboot, the kernel's
        // start, the wait for root, the deadline and emergency mode.
        let guard = decide(
            &kernel(Some("6.12.25+rpt-rpi-v8"), true),
            &line(PI_OS),
            true,
        );
        assert_eq!(
            guard.longest_return_seconds(),
            180 + 60 + 90 + 600 + 120 + 180
        );
        let guard = decide(&kernel(Some("6.1.0-28-arm64"), true), &line(PI_OS), true);
        assert_eq!(
            guard.longest_return_seconds(),
            180 + 60 + 30 + 600 + 120 + 180
        );
    }

    #[test]
    fn versions_read_as_numbers() {
        assert_eq!(major_minor("6.12.25+rpt-rpi-v8"), Some((6, 12)));
        assert_eq!(major_minor("6.5.0"), Some((6, 5)));
        assert_eq!(major_minor("5.15.0-1034-raspi"), Some((5, 15)));
        assert!(major_minor("6.4.16").unwrap() < ROOTWAIT_SECONDS_SINCE);
        assert_eq!(major_minor("unknown"), None);
    }
}
