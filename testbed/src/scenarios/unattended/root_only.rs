//! `unattended-root-only`: a root-only move to a USB SSD (`--trial always
//! --auto-commit`) whose SSH session drops mid-copy (the terminal hung up:
//! the migration finishes), then the trials of [`matrix::ROOT_ONLY`]: the
//! new root's init broken, its kernel modules missing, an fstab line that
//! fails, a clone of the new drive plugged in, a power cut during the
//! trial, the new drive pulled out during the trial at three moments (as
//! its systemd starts, once its system is up, while it checks itself), the
//! new drive gone. Last, on the SD card: `verify` says so, `rollback`
//! leaves the boot partition as it was.

use super::chain::{self, Chain, BOOT_LIMIT};
use super::matrix;
use super::tally;
use crate::host::fat;
use crate::host::mbr::Partition;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::probe::{expect_fact, facts};
use crate::machine::rig::{fact, Rig, Setup};
use crate::scenarios::{Lane, Scenario};
use crate::{After, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The scenario `unattended-root-only`, in [`crate::scenarios::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: NAME,
    lane: Lane::Shared,
    run,
    about: r#"[the failure matrix](#unattended), root-only: a root-only move to a blank USB SSD, `migrate --trial always --auto-commit --table mbr`, run in a terminal that hangs up 3 s into the copy (`script` gives it a pty with an interactive bash as the session leader, as an SSH login has; the job kills `script`, which closes the pty's master): the migration finishes by itself, its log ends with `done` and has no panic. Then nine trials, each failing in its own way, chained on the same disks; after each the harness only boots what the firmware starts until the SD card's system runs its job, which reports `pimigrate status --json` (whose `trial_return.by_itself` must not be false) and the trial's record, mends the failure and breaks the next thing: the new root's init broken (systemd an empty file: the kernel panics "Attempted to kill init", resets after `panic=10`; no record: `trial-did-not-come-up`); its kernel modules moved away (vfat for /boot/firmware cannot load: emergency mode, the record names `boot-firmware.mount`); an fstab line that fails (a bind mount of nothing: emergency mode, `mnt-tbbroken.mount`); a clone of the new drive plugged in for the trial (a 64 MiB stick with the SSD's MBR: the trial's check fails `ids-unique`, records it and reboots); a power cut as the trial's systemd starts (no record); the SSD pulled out through QEMU's monitor (`device_del`, the guest running on, as a bridge that drops the disk) at three moments of the trial: as its systemd starts, the root just mounted (the console's `Welcome to`: systemd meets the missing pages of its own program, `Caught <BUS>`, and reboots after `systemd.crash_reboot=1`'s 10 s where it would have frozen; a PID 1 killed outright would be a kernel panic, `panic=10`), once its system is up (the agent starts its job: the check cannot start, and systemd, unable to run its shutdown program from the vanished root, says `Failed to execute shutdown binary` and reboots after `systemd.crash_reboot=1`'s 10 s), and while it checks itself (pimigrate's `checking the trial of`; the trial's job keeps udev busy with the SSD for 45 s and says on the console once udev is seen held, so the check is still waiting for udev to settle when the SSD goes: it commits nothing, and its reboot goes the same way; were the check past its wait, the commit's own look at the drive, read past the page cache, would refuse): each time the trial resets itself within 180 s of the unplug and the SD card's system says it came back by itself with nothing committed, the SSD plugged in again for the next trial; the SSD gone (the initramfs gives up after 30 s, panics, `panic=` resets; the login message says the drive is not attached). Last, on the SD card: `verify` exits 5, `rollback`, and the card's boot partition is file for file what it was before"#,
};

const NAME: &str = "unattended-root-only";

/// The job that starts the next trial once the job is done (it records the
/// trial reboot in the journal).
const START_TRIAL: &str = "pimigrate migrate --resume --reboot";

/// What the SD card's system does once back from the last failure:
/// `verify` (which must fail, `verify_status=`), then `rollback`.
const ENDING: &str = "set +e\npimigrate verify --no-bench > \"$TESTBED/out/verify.txt\" 2>&1\n\
             echo \"verify_status=$?\"\nset -e\npimigrate rollback --yes\n";

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = Setup::new(NAME, &images.bookworm).usb_ssd().build()?;
    let scratch = pi.work.join("fat-snapshot");
    let pristine = fat::snapshot(&sd, &sd_boot, &scratch)?;
    let mut chain = Chain::new(pi, NAME);
    migrate_with_the_terminal_hung_up(&mut chain, &sd, &sd_boot)?;

    // Each trial fails; the SD card's system, back by itself, says why,
    // mends it and breaks the next thing. The new drive gone at the last:
    // back on the SD card, verify says how to roll back, rollback leaves
    // the boot partition as it was.
    let back = chain.run_matrix(matrix::ROOT_ONLY, ENDING)?;
    chain::verify_ended(&chain, &back, "5")?;
    let diff = fat::snapshot_diff(&pristine, &fat::snapshot(&sd, &sd_boot, &scratch)?);
    ensure!(
        diff.is_empty(),
        "after rollback the SD card's boot partition differs from before the migration: {diff:?}"
    );
    Ok(())
}

/// Boot 1: the migration, its terminal hung up mid-copy; it finishes by
/// itself. Then the first failure is made for the first trial, which the
/// migration starts.
fn migrate_with_the_terminal_hung_up(
    chain: &mut Chain,
    sd: &Path,
    sd_boot: &Partition,
) -> Result<()> {
    chain.pi.boot_limit = Duration::from_secs(20 * 60);
    let failure = "the SSH session dropped mid-copy";
    chain.pi.share().set_then(START_TRIAL)?;
    let job = format!(
        "{}{}",
        migrate_in_a_terminal_that_hangs_up("--trial always --auto-commit --table mbr"),
        matrix::ROOT_ONLY[0].make.job_lines()
    );
    let boot = chain.pi.run(&job, After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    match check_it_carried_on(&chain.pi, &f) {
        Ok(took) => tally::came_back(NAME, failure, took),
        Err(e) => {
            tally::needed_hands(NAME, failure, &format!("{e:#}"));
            return Err(e);
        }
    }
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "migrate --resume --reboot did not start the trial: {:?}; see {}",
        boot.record.ending,
        chain.pi.share().dir.join("out/then.log").display()
    );
    chain.pi.boot_limit = BOOT_LIMIT;
    let trial_cmdline = fat::read(sd, sd_boot, "cmdline.pimigrate.txt")?
        .context("no trial command line on the SD card")?;
    for word in [
        " panic=10",
        " systemd.crash_reboot=1",
        " pimigrate.trial=auto-commit",
    ] {
        ensure!(
            trial_cmdline.contains(word),
            "the trial's command line has no{word}: {trial_cmdline}"
        );
    }
    Ok(())
}

/// The migration's job, run in a terminal that hangs up mid-copy as a
/// dropped SSH session's does: `script` gives it a pty with an
/// interactive bash as the session leader (which passes the SIGHUP on to
/// its job, as a login shell does); the job kills `script` a moment into
/// the copy, which closes the pty's master. It reports when it hung up
/// and when the migration ended, and keeps its log in the share.
fn migrate_in_a_terminal_that_hangs_up(args: &str) -> String {
    format!(
        r#"
{find}
logs=/var/log/pimigrate
command="pimigrate migrate --target $target --yes {args}"
setsid script -qfec "bash --norc --noprofile -i -c '$command'" /dev/null < <(sleep 100000) > /dev/null 2>&1 &
session=$!
for _ in $(seq 1200); do
    grep -qs 'copying the root filesystem' $logs/migrate-*.log && break
    sleep 1
done
grep -qs 'copying the root filesystem' $logs/migrate-*.log || {{ echo "the copy never started"; cat $logs/migrate-*.log; exit 1; }}
sleep 3
kill -KILL "$session"
echo "hung_up_at=$(date +%s)"
while pgrep -x pimigrate > /dev/null; do sleep 1; done
echo "ended_at=$(date +%s)"
log=$(ls $logs/migrate-*.log | tail -1)
cp "$log" "$TESTBED/out/migrate.log"
{JOURNAL_FACTS}
echo "journal_last=$(jq -r '.done | last' "$journal")"
"#,
        find = pimigrate_bin::find_disk("TB-SSD")
    )
}

/// What `migrate_in_a_terminal_that_hangs_up` left: the migration ended
/// by itself after the hang-up, its log has its end and no panic.
fn check_it_carried_on(pi: &Pi, f: &BTreeMap<String, String>) -> Result<Duration> {
    expect_fact(f, "journal_last", "source-boot-edited")?;
    let log_path = pi.share().dir.join("out/migrate.log");
    let log =
        std::fs::read_to_string(&log_path).with_context(|| format!("no {}", log_path.display()))?;
    ensure!(
        log.lines().any(|l| l.ends_with("s done")),
        "the migration's log has no end after the hang-up; see {}",
        log_path.display()
    );
    ensure!(
        !log.contains("panicked"),
        "pimigrate panicked on the hung-up terminal; see {}",
        log_path.display()
    );
    let number = |key: &str| -> Result<u64> {
        fact(f, key)?
            .parse()
            .with_context(|| format!("{key} is no number"))
    };
    let (hung_up, ended) = (number("hung_up_at")?, number("ended_at")?);
    ensure!(ended >= hung_up, "it ended before the hang-up?");
    Ok(Duration::from_secs(ended - hung_up))
}
