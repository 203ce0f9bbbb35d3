//! The failure matrix: each layout's failures, in the order its trials
//! meet them on one set of disks ([`ROOT_ONLY`], [`FULL`]), one
//! [`Breakage`] a row. A new failure is a row here (and, for what the
//! harness does to the machine or a check of its own, a small function
//! below), placed where it should meet the chain.

use super::breakage::{Breakage, Make, Mend, Place, Report, NEW_DRIVE};
use super::chain::AGENT_RUNS_JOB;
use super::chain::{Back, Chain};
use crate::Bus;
use anyhow::{ensure, Result};

/// `unattended-root-only`'s trials, after a migration whose terminal hung
/// up and which broke the new root's init for the first.
pub(super) const ROOT_ONLY: &[Breakage] = &[
    INIT,
    MODULES,
    FSTAB,
    CLONE,
    POWER_CUT,
    PULLED_AS_ROOT_MOUNTS,
    PULLED_ONCE_UP,
    PULLED_DURING_THE_CHECK,
    NEW_DRIVE_GONE_ROOT_ONLY,
];

/// `unattended-full`'s trials, after a bootloader too old for one (refused
/// at plan time) and its update's write cut short, the new drive's boot
/// partition broken for the first.
pub(super) const FULL: &[Breakage] = &[BOOT_FILES, NEW_DRIVE_GONE_FULL];

/// systemd, the new root's init, an empty file: run-init's exec fails and
/// the kernel panics ("Attempted to kill init"), `panic=10` resets. Nothing
/// of the trial ran to write a record: said as what is known.
const INIT: Breakage = Breakage {
    what: "the new root's init broken",
    make: Make::OnTheDrive(
        Place::NewRoot,
        r#"cp -a "$new/lib/systemd/systemd" "$new/lib/systemd/systemd.tb-away"; : > "$new/lib/systemd/systemd""#,
    ),
    signs: &["Attempted to kill init", "Rebooting in 10 seconds"],
    report: Report::stage("trial-did-not-come-up")
        .record("none")
        .login(&["did not come up", "nothing was committed"]),
    mend: Mend::OnTheDrive(
        Place::NewRoot,
        r#"mv "$new/lib/systemd/systemd.tb-away" "$new/lib/systemd/systemd""#,
    ),
};

/// The running kernel's modules gone from the new root: the initramfs
/// still mounts it, then vfat for /boot/firmware cannot be loaded and
/// systemd goes to emergency mode.
const MODULES: Breakage = Breakage {
    what: "the new root's kernel modules missing",
    make: Make::OnTheDrive(
        Place::NewRoot,
        r#"mv "$new/lib/modules/$(uname -r)" "$new/lib/modules/tb-away""#,
    ),
    signs: &["stopped in emergency mode"],
    report: Report::stage("trial-failed")
        .record("emergency")
        .login(&["emergency mode", "the Pi is back on the SD card"]),
    mend: Mend::OnTheDrive(
        Place::NewRoot,
        r#"mv "$new/lib/modules/tb-away" "$new/lib/modules/$(uname -r)""#,
    ),
};

/// An fstab line whose mount fails at once (a tmpfs with a size it
/// rejects; systemd makes a bind mount's missing source, so that would
/// mount): local-fs.target fails, emergency mode. The ARM lane's
/// `pi4-trial` meets it too.
pub(in crate::scenarios) const FSTAB: Breakage = Breakage {
    what: "an fstab line on the new root that fails (emergency mode)",
    make: Make::OnTheDrive(
        Place::NewRoot,
        r#"cp "$new/etc/fstab" "$new/etc/fstab.tb-away"; echo "tmpfs /mnt/tbbroken tmpfs size=tb-broken 0 0" >> "$new/etc/fstab""#,
    ),
    signs: &["stopped in emergency mode"],
    report: Report::stage("trial-failed").reason_names(FSTAB_UNIT),
    mend: Mend::OnTheDrive(
        Place::NewRoot,
        r#"mv "$new/etc/fstab.tb-away" "$new/etc/fstab""#,
    ),
};

/// The unit of [`FSTAB`]'s line, as systemd names it.
pub(in crate::scenarios) const FSTAB_UNIT: &str = "mnt-tbbroken.mount";

/// A clone of the new drive plugged in for the trial: a stick with its
/// partition table (the same MBR disk id, so the same PARTUUIDs).
/// verify's checks fail in the trial, which records it and reboots.
const CLONE: Breakage = Breakage {
    what: "a clone of the new drive plugged in (verify's checks fail in the trial)",
    make: Make::Machine(plug_in_a_clone),
    signs: &["is not committed"],
    report: Report::stage("trial-failed")
        .record("checks-failed")
        .reason_names("ids-unique"),
    mend: Mend::Machine(unplug_the_clone),
};

/// The power cut as the trial's systemd starts: no record.
const POWER_CUT: Breakage = Breakage {
    what: "a power cut during the trial's first boot",
    make: Make::PowerCutAt("Welcome to"),
    signs: &[],
    report: Report::stage("trial-did-not-come-up"),
    mend: Mend::Nothing,
};

/// The new drive pulled out as the trial's systemd starts, its root just
/// mounted (the case of issue 45: a bridge that dropped the disk 3 s after
/// the root's mount): systemd, or the units it starts, can no longer read
/// the root. systemd meets the missing pages of its own program (SIGBUS)
/// and reboots 10 s later (`systemd.crash_reboot=1`; without it, it
/// froze); a PID 1 killed outright would be a kernel panic, `panic=10`.
/// No sign is asked for: which of the two comes first is a matter of
/// timing. Nothing of the trial can record it.
const PULLED_AS_ROOT_MOUNTS: Breakage = Breakage {
    what: "the new drive pulled as the trial's systemd starts",
    make: Make::UnplugAt {
        when: "Welcome to",
        in_trial: "",
    },
    signs: &[],
    report: Report::stage("trial-did-not-come-up").login(&["by itself", "nothing was committed"]),
    mend: Mend::Nothing,
};

/// The new drive pulled out once the trial's system is up (its services
/// run: the testbed's agent starts its job), before the check: the check
/// cannot start from the vanished root, and the reboot its failure asks
/// for cannot run systemd's shutdown program; `systemd.crash_reboot=1`
/// resets the Pi 10 s later.
const PULLED_ONCE_UP: Breakage = Breakage {
    what: "the new drive pulled once the trial's system is up",
    make: Make::UnplugAt {
        when: AGENT_RUNS_JOB,
        in_trial: "",
    },
    signs: &[SHUTDOWN_PROGRAM_GONE, "reboot: Restarting system"],
    report: Report::stage("trial-did-not-come-up").login(&["by itself", "nothing was committed"]),
    mend: Mend::Nothing,
};

/// The new drive pulled out while the trial checks itself (pimigrate
/// says on the console that it starts): the check finds the drive gone,
/// commits nothing, records why on the SD card when it still can, and
/// its failure's reboot is reset by `systemd.crash_reboot=1`. The check
/// first waits for udev to settle; [`UDEV_BUSY`] holds it there, so the
/// drive is gone before the check decides (its checks and commit take
/// well under the harness's half second between looks at the console).
const PULLED_DURING_THE_CHECK: Breakage = Breakage {
    what: "the new drive pulled while the trial checks itself",
    make: Make::UnplugAt {
        when: "pimigrate: checking the trial of",
        in_trial: UDEV_BUSY,
    },
    signs: &[
        UDEV_HELD,
        SHUTDOWN_PROGRAM_GONE,
        "reboot: Restarting system",
    ],
    report: Report::stage("trial-did-not-come-up")
        .or_stage("trial-failed")
        .login(&["nothing was committed"]),
    mend: Mend::Nothing,
};

/// What systemd says when the reboot cannot run its shutdown program from
/// a root that vanished; `systemd.crash_reboot=1` resets the Pi 10 s
/// later (without it: "Freezing execution").
const SHUTDOWN_PROGRAM_GONE: &str = "Failed to execute shutdown binary";

/// Trial-boot job lines that keep udev busy with the new drive for 45 s
/// (a runtime rule whose program sleeps, on a change event), so that the
/// check, which starts by waiting for udev to settle, is still running
/// when the harness pulls the drive. The rule is in /run: gone at the
/// next boot. The job runs before multi-user.target, so before the check;
/// it says on the console ([`UDEV_HELD`], one of the row's signs) once
/// udev's queue is seen held, so a rule udev did not take fails the row
/// instead of leaving the pull to a race with the check.
const UDEV_BUSY: &str = r#"
busy=$(lsblk -dno NAME,SERIAL | awk '$2 == "TB-SSD" { print $1 }')
mkdir -p /run/udev/rules.d
printf 'ACTION=="change", KERNEL=="%s", RUN+="/bin/sleep 45"\n' "$busy" > /run/udev/rules.d/99-tb-busy.rules
udevadm control --reload
udevadm trigger --action=change "/dev/$busy"
udevadm settle --timeout=3 || echo "testbed: udev held for the check" > /dev/console
"#;

/// What [`UDEV_BUSY`] says once udev's queue is held.
const UDEV_HELD: &str = "testbed: udev held for the check";

/// The new drive gone at the trial of a root-only move: the initramfs
/// gives up on its root after 30 s and panics, `panic=` resets.
const NEW_DRIVE_GONE_ROOT_ONLY: Breakage = Breakage {
    what: "the new drive gone at the trial (root-only)",
    make: Make::Machine(unplug_the_new_drive),
    signs: &[
        "Gave up waiting for",
        "Rebooting automatically due to panic= boot argument",
    ],
    report: Report::stage("trial-did-not-come-up").login(&["is not attached now"]),
    mend: Mend::Nothing,
};

/// The new drive's boot partition without its firmware file: the
/// bootloader passes over the new drive and starts the SD card, so the
/// trial is over before it began (job/then.sh still starts the next).
const BOOT_FILES: Breakage = Breakage {
    what: "the new drive's boot partition broken (full move)",
    make: Make::OnTheDrive(
        Place::NewBoot("TB-SSD"),
        "mv /run/tb-new-boot/start4.elf /run/tb-new-boot/start4.elf.tb-away",
    ),
    signs: &[],
    report: Report::stage("trial-did-not-come-up").also(passed_over_the_new_drive),
    mend: Mend::OnTheDrive(
        Place::NewBoot("TB-SSD"),
        "mv /run/tb-new-boot/start4.elf.tb-away /run/tb-new-boot/start4.elf",
    ),
};

/// The new drive gone at the trial of a full move: the bootloader finds
/// no USB disk and starts the SD card.
const NEW_DRIVE_GONE_FULL: Breakage = Breakage {
    what: "the new drive gone at the trial (full move)",
    make: Make::Machine(unplug_the_new_drive),
    signs: &[],
    report: Report::stage("trial-did-not-come-up").login(&["is not attached now"]),
    mend: Mend::Nothing,
};

/// [`CLONE`]: a 64 MiB stick with the new drive's partition table.
fn plug_in_a_clone(chain: &mut Chain) -> Result<()> {
    chain
        .pi
        .attach_blank("stick", Bus::UsbStorage, 64 << 20, "usb-flash")?;
    let ssd = chain.pi.disk("ssd")?.image.clone();
    crate::host::mbr::copy_table(&ssd, &chain.pi.disk("stick")?.image)
}

fn unplug_the_clone(chain: &mut Chain) -> Result<()> {
    chain.pi.detach("stick").map(drop)
}

fn unplug_the_new_drive(chain: &mut Chain) -> Result<()> {
    chain.pi.detach(NEW_DRIVE).map(drop)
}

/// [`BOOT_FILES`]: the trial's boot followed the trial's boot order, and
/// passed over the new drive for its missing firmware.
fn passed_over_the_new_drive(back: &Back) -> Result<()> {
    let notes = back.boots[0].spec.notes.join("; ");
    ensure!(
        notes.contains("[tryboot]") && notes.contains("ssd: no start4.elf"),
        "the trial's boot did not pass over the new drive for its missing firmware: {notes}"
    );
    Ok(())
}
