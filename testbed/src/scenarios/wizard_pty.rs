//! The wizard as a first-time user meets it on the Pi: `pimigrate` with no
//! arguments in an 80x24 terminal (tmux in the guest), answered by reading
//! the screen and pressing keys (`wizard_pty.sh`). First run: the user
//! reads the plan, starts typing the disk's name, and presses Ctrl-C; the
//! SSD must still be blank. Second run: the same answers, the name typed
//! in full, the migration; after the reboot, root is on the SSD.
//!
//! Every screen the driver captured lands in the scenario's log folder
//! (`<run>-NN-<step>.screen.txt`, what was visible at that moment, and
//! `<run>.transcript.txt`, the whole scrollback), for a reviewer to read.

use super::{Lane, Scenario};
use crate::host::mbr::Mbr;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The guest-side terminal driver, sourced by both jobs.
const DRIVER: &str = include_str!("wizard_pty.sh");

/// The screens up to the typed confirmation, the same in both runs: what a
/// person does who has not read the manual. Benchmarks are skipped (they
/// have a scenario of their own and cost minutes under emulation).
const TO_CONFIRMATION: &str = r#"
export TERM=xterm-256color SCREENS="$TESTBED/out/screens"
source "$TESTBED/job/wizard_pty.sh"
name=${target#/dev/}
# A terminal of the classic size: long lines wrap, as they would for many.
term_start 80 24 pimigrate
wait_for "What will not happen"
snap intro
wait_for "Benchmark the drives first?" 120
snap benchmarks-question
select_item "Skip"
wait_for "Which disk should the system move to?" 120
snap disk-question
select_item "$target "
wait_for "What should move?" 60
snap layout-question
select_item "Root only"
# A trial boot is offered only on a Pi with tryboot; this guest has no
# device tree, so the plan may come straight away. Planning scans the
# whole root on the emulated SD card: minutes, not seconds.
seen=$(wait_any 900 "Boot the moved system once on trial" "Type its name")
if [[ $seen == Boot* ]]; then
    snap trial-question
    type_text n
    press Enter
    wait_for "Type its name" 900
fi
snap confirmation
"#;

/// Run 1: half the name typed, then Ctrl-C.
const CTRL_C: &str = r#"
type_text "${name:0:2}"
press C-c
echo "status=$(wait_exit 60)"
echo "cursor=$(cursor_left)"
snap stopped
term_stop
echo "journal=$(if [ -e /var/lib/pimigrate/migration.json ]; then echo present; else echo absent; fi)"
"#;

/// Run 2: the name in full, the migration, the next steps.
const THROUGH: &str = r#"
type_text "$name"
press Enter
# Under way: what the progress display shows a little later.
sleep 20
snap migrating
wait_for "What to do next:" 1800
snap done
# The wizard offers to reboot; the scenario reboots from the host instead
# (After::Reboot), once the job has told its facts.
wait_for "Reboot now" 60
snap reboot-question
type_text n
press Enter
echo "status=$(wait_exit 60)"
echo "cursor=$(cursor_left)"
term_stop
"#;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "wizard-pty",
    lane: Lane::Shared,
    run,
    about: r#"`pimigrate` with no arguments in an 80x24 tmux terminal in the guest (`TERM=xterm-256color`, UTF-8), answered by reading the screen (`wizard_pty.sh`): benchmarks skipped, the SSD chosen, root only; run 1 reads the plan, types half the disk's name and presses Ctrl-C: exit status 130, "Stopped: nothing was changed.", the cursor shown again, no journal, and from the host the SSD has no MBR and its first and last MiB are zero; run 2 types the name: the plan for that disk, its fstab and `cmdline.txt` diffs and the question to type the name were on screen, the migration ends with "Done", the next steps (reboot, `sudo pimigrate verify`, `sudo pimigrate rollback`), the offer to reboot now (answered no: the host reboots the guest), status 0, the SSD's partition 1 has the journal's PARTUUID; reboot: root is that partition, `/boot/firmware` still `mmcblk0p1`"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("wizard-pty", &images.bookworm)
        .usb_ssd()
        .build()?;
    pi.share().place_file("wizard_pty.sh", DRIVER.as_bytes())?;
    let ssd = pi.disk("ssd")?.image.clone();
    let find = pimigrate_bin::find_disk("TB-SSD");

    let target = ctrl_c_changes_nothing(&mut pi, &ssd, &find)?;
    let root_partuuid = wizard_migrates(&mut pi, &ssd, &find, &target)?;

    // Boot 3: root on the SSD, the boot partition still the SD card's.
    let third = pi.run(
        &format!(
            "{find}{PROBE}echo \"root_partuuid=$(lsblk -no PARTUUID \"$(findmnt -no SOURCE /)\")\"\n"
        ),
        After::PowerOff,
    )?;
    let f = facts(&third.job_ok()?.stdout);
    let target = f.get("target").context("no target")?;
    expect_fact(&f, "root", &format!("{target}1"))?;
    expect_fact(&f, "root_partuuid", &root_partuuid)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    Ok(())
}

/// Boot 1: Ctrl-C at the confirmation, with the target's name half
/// typed, stops the wizard and leaves the SSD blank; the target it chose.
fn ctrl_c_changes_nothing(pi: &mut Pi, ssd: &Path, find: &str) -> Result<String> {
    let first = pi.run(
        &format!("SCREEN_RUN=1-ctrl-c\n{find}{TO_CONFIRMATION}{CTRL_C}"),
        After::PowerOff,
    )?;
    let screens = keep_screens(pi, "1-ctrl-c")?;
    let out = first.job_ok()?;
    let f = facts(&out.stdout);
    let target = fact(&f, "target")?;
    let name = target.trim_start_matches("/dev/");
    let transcript = screen(&screens, "1-ctrl-c.transcript.txt")?;
    expect_fact(&f, "status", "130").with_context(|| transcript.to_string())?;
    expect_fact(&f, "cursor", "shown")?;
    expect_fact(&f, "journal", "absent")?;
    plan_is_shown(transcript, &target)?;
    let stopped = step(&screens, "1-ctrl-c", "stopped")?;
    ensure!(
        stopped.contains("Stopped: nothing was changed."),
        "after Ctrl-C at the confirmation, the screen does not say \
         \"Stopped: nothing was changed.\":\n{stopped}"
    );
    let half_typed = format!("Type its name ({name}) to go on › {}", &name[..2]);
    ensure!(
        transcript.contains(&half_typed),
        "the half-typed name is not on the screen ({half_typed:?}):\n{transcript}"
    );
    ensure!(
        !transcript.contains("Done:"),
        "something ran after Ctrl-C:\n{transcript}"
    );
    ssd_is_blank(ssd)?;
    Ok(target)
}

/// Boot 2: the same answers, the name typed: the wizard shows the plan,
/// migrates, says what to do next and reboots; the new root's PARTUUID.
fn wizard_migrates(pi: &mut Pi, ssd: &Path, find: &str, target: &str) -> Result<String> {
    let second = pi.run(
        &format!("SCREEN_RUN=2-migrate\n{find}{TO_CONFIRMATION}{THROUGH}{JOURNAL_FACTS}"),
        After::Reboot,
    )?;
    let screens = keep_screens(pi, "2-migrate")?;
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    let transcript = screen(&screens, "2-migrate.transcript.txt")?;
    expect_fact(&f, "status", "0").with_context(|| transcript.to_string())?;
    expect_fact(&f, "cursor", "shown")?;
    ensure!(
        second.record.ending == Ending::Reboot,
        "the guest did not reboot after the wizard: {:?}",
        second.record.ending
    );
    plan_is_shown(transcript, target)?;
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    ensure!(
        transcript.contains(&format!("+PARTUUID={root_partuuid}")),
        "the plan shown did not name the new root PARTUUID={root_partuuid} that the journal \
         records:\n{transcript}"
    );
    let done = step(&screens, "2-migrate", "done")?;
    ensure!(
        done.contains("What to do next:"),
        "the last screen does not show the next steps:\n{done}"
    );
    // The whole text, wrapped lines joined, for the wording.
    let reboot = step(&screens, "2-migrate", "reboot-question")?;
    ensure!(
        reboot.contains("Reboot now"),
        "the wizard did not offer to reboot:\n{reboot}"
    );
    for words in [
        &format!("Done: the system is on {target}."),
        "  1. reboot: the SD card's boot partition now starts the new root",
        "sudo pimigrate verify",
        "sudo pimigrate rollback",
    ] {
        ensure!(
            transcript.contains(words),
            "the end of the migration does not say {words:?}:\n{transcript}"
        );
    }
    let mbr = Mbr::read(ssd)?.context("the SSD has no MBR after the migration")?;
    ensure!(
        mbr.partuuid(1) == root_partuuid,
        "the SSD's partition 1 is {}, the plan's root {root_partuuid}",
        mbr.partuuid(1)
    );
    Ok(root_partuuid)
}

/// Copies the run's screens from the share into the log folder (before
/// anything is asserted, so a failed run leaves them too) and returns them
/// by file name.
fn keep_screens(pi: &Pi, run: &str) -> Result<BTreeMap<String, String>> {
    let dir = pi.share().dir.join("out/screens");
    let mut screens = BTreeMap::new();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        // The job failed before its first screen; its stderr says why.
        Err(_) => return Ok(screens),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        fs::copy(entry.path(), pi.logs.join(&file))
            .with_context(|| format!("keeping screen {file} of run {run}"))?;
        if file.ends_with(".txt") {
            let text = fs::read_to_string(entry.path())
                .with_context(|| format!("reading screen {file}"))?;
            screens.insert(file, text);
        }
    }
    Ok(screens)
}

/// The screen captured at `step` of `run` (`<run>-NN-<step>.screen.txt`:
/// the numbers depend on which questions came).
fn step<'a>(screens: &'a BTreeMap<String, String>, run: &str, step: &str) -> Result<&'a str> {
    let suffix = format!("-{step}.screen.txt");
    screens
        .iter()
        .find(|(file, _)| file.starts_with(&format!("{run}-")) && file.ends_with(&suffix))
        .map(|(_, text)| text.as_str())
        .with_context(|| {
            format!(
                "the guest captured no {step} screen in run {run}; it has: {:?}",
                screens.keys().collect::<Vec<_>>()
            )
        })
}

fn screen<'a>(screens: &'a BTreeMap<String, String>, file: &str) -> Result<&'a str> {
    screens.get(file).map(String::as_str).with_context(|| {
        format!(
            "the guest captured no {file}; it has: {:?}",
            screens.keys().collect::<Vec<_>>()
        )
    })
}

/// What the person must have read before typing the name: the plan for
/// this disk with its boot-file diffs, and the question that warns.
fn plan_is_shown(transcript: &str, target: &str) -> Result<()> {
    let name = target.trim_start_matches("/dev/");
    for words in [
        "What will not happen:".to_string(),
        "Benchmarks skipped.".to_string(),
        format!("Plan: root-only move (boot stays on the SD card) to {target}"),
        "--- a/etc/fstab".to_string(),
        "--- a/cmdline.txt".to_string(),
        format!("Everything on {target} will be erased. Type its name ({name}) to go on"),
    ] {
        ensure!(
            transcript.contains(&words),
            "the wizard's screens never said {words:?}:\n{transcript}"
        );
    }
    Ok(())
}

/// Nothing written to the SSD: no MBR, and its first and last MiB (where
/// any partition table, primary or backup GPT, would be) all zero.
fn ssd_is_blank(image: &Path) -> Result<()> {
    ensure!(
        Mbr::read(image)?.is_none(),
        "the SSD has a partition table after Ctrl-C"
    );
    let mut file = fs::File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let len = file.metadata()?.len();
    for start in [0, len - (1 << 20)] {
        let mut chunk = vec![0u8; 1 << 20];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)
            .with_context(|| format!("reading {} at {start}", image.display()))?;
        ensure!(
            chunk.iter().all(|&b| b == 0),
            "the SSD was written to after Ctrl-C (non-zero bytes in the MiB at {start})"
        );
    }
    Ok(())
}
