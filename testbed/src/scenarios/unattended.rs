//! The unattended failure matrix: failures injected into migrations in
//! both layouts, and after each the harness only waits (no power cycle, no
//! console input, no command into the guest) until the Pi runs again, then
//! checks where it runs and what was recorded. The firmware stand-in adds
//! no `panic=-1` here ([`crate::qemu::MachineConfig::reset_on_panic`]): a
//! trial that nothing resets waits, as on a Pi, until the boot's time
//! limit, which counts as needing hands. Each failure goes to the tally
//! ([`crate::unattended`]) that ends the run's output:
//! `unattended: N failures injected, N came back by themselves (slowest M
//! s), 0 needed hands`.
//!
//! The failures are chained on one set of disks, as `power-cut-migrate`
//! chains its cuts: the SD card's system, back after one failed trial,
//! says what happened (`pimigrate status`, the trial's record), mends it,
//! breaks the next thing and starts the next trial.
//!
//! `unattended-root-only` (a root-only move to a USB SSD, `--trial always
//! --auto-commit`): the SSH session dropped mid-copy (the terminal hung
//! up: the migration finishes), then trials with the new root's init
//! broken, its kernel modules missing, an fstab line that fails, a clone of
//! the new drive plugged in, a power cut during the trial, the new drive
//! gone.
//!
//! `unattended-full` (a full move on a Pi 4 with Raspberry Pi OS's
//! bootloader tools): a bootloader too old for a one-shot trial of the new
//! drive (refused at plan time; the owner stages the update it names), that
//! update's write cut short by a power cut (recovery.bin writes it at the
//! next boot), then trials with the new drive's boot partition broken and
//! with the new drive gone.
//!
//! The ARM lane's case is in `pi4-trial` ([`super::raspi`]): an fstab line
//! that fails in a trial the Pi 4 model's real tryboot flag started.

use super::pimigrate_bin::{self, JOURNAL_FACTS};
use super::setup::{fact, Rig, Setup};
use super::{expect_fact, facts};
use crate::{fat, unattended, After, Boot, Bus, Ending, ImageSet, Pi};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the agent prints as it starts a job (on the console too): the Pi
/// runs again.
const AGENT_RUNS_JOB: &str = "testbed-agent: running job";

/// How long one boot may take before it counts as waiting for a person:
/// a failed trial resets within a minute or two, a normal boot takes about
/// one under emulation.
const BOOT_LIMIT: Duration = Duration::from_secs(8 * 60);

/// The job's first lines at every boot. In a trial boot (its command line
/// carries the trial's marker) it reports `in_trial=1` and what `extra`
/// prints, and leaves the Pi to itself: the trial checks itself, or
/// resets.
pub(super) fn hands_off_in_trial(extra: &str) -> String {
    format!(
        r#"
if grep -qE '(^| )pimigrate\.trial=' /proc/cmdline; then
    echo in_trial=1
    echo "root=$(findmnt -no SOURCE /)"
    {extra}
    echo stay > "$TESTBED/job/after"
    exit 0
fi
echo in_trial=0
echo "root=$(findmnt -no SOURCE /)"
"#
    )
}

/// What the SD card's system says after a trial: `pimigrate status`
/// (`stage=`, its JSON and its login text in the share) and the trial's
/// own record (`record=`, `record_reason=`), when there is one.
pub(super) const WHAT_IT_SAYS: &str = r#"
pimigrate status --json > "$TESTBED/out/status.json"
echo "stage=$(jq -r .stage "$TESTBED/out/status.json")"
pimigrate status --login > "$TESTBED/out/login.txt"
record=/var/lib/pimigrate/trial-outcome.json
if [ -f "$record" ]; then
    echo "record=$(jq -r .outcome "$record")"
    echo "record_at=$(jq -r .at "$record")"
    echo "record_reason=$(jq -r .reason "$record")"
else
    echo "record=none"
fi
"#;

/// Mounts the new root (the journal's plan names its PARTUUID) at `$new`;
/// [`UNMOUNT_NEW_ROOT`] unmounts it.
pub(super) const MOUNT_NEW_ROOT: &str = r#"
new=/run/tb-new-root
mkdir -p "$new"
mount "/dev/disk/by-partuuid/$(jq -r '.plan.table.partitions[] | select(.role == "root") | .partuuid' /var/lib/pimigrate/migration.json)" "$new"
"#;
pub(super) const UNMOUNT_NEW_ROOT: &str = "umount \"$new\"\n";

/// A failure of the new root, made and mended from the SD card's system
/// (with the new root mounted at `$new`).
pub(super) struct Breakage {
    pub what: &'static str,
    pub make: &'static str,
    pub mend: &'static str,
}

/// systemd, the new root's init, an empty file: run-init's exec fails and
/// the kernel panics ("Attempted to kill init").
const INIT: Breakage = Breakage {
    what: "the new root's init broken",
    make: r#"cp -a "$new/lib/systemd/systemd" "$new/lib/systemd/systemd.tb-away"; : > "$new/lib/systemd/systemd""#,
    mend: r#"mv "$new/lib/systemd/systemd.tb-away" "$new/lib/systemd/systemd""#,
};

/// The running kernel's modules gone from the new root: the initramfs
/// still mounts it, then vfat for /boot/firmware cannot be loaded and
/// systemd goes to emergency mode.
const MODULES: Breakage = Breakage {
    what: "the new root's kernel modules missing",
    make: r#"mv "$new/lib/modules/$(uname -r)" "$new/lib/modules/tb-away""#,
    mend: r#"mv "$new/lib/modules/tb-away" "$new/lib/modules/$(uname -r)""#,
};

/// An fstab line whose mount fails at once (a tmpfs with a size it
/// rejects; systemd makes a bind mount's missing source, so that would
/// mount): local-fs.target fails, emergency mode.
pub(super) const FSTAB: Breakage = Breakage {
    what: "an fstab line on the new root that fails (emergency mode)",
    make: r#"cp "$new/etc/fstab" "$new/etc/fstab.tb-away"; echo "tmpfs /mnt/tbbroken tmpfs size=tb-broken 0 0" >> "$new/etc/fstab""#,
    mend: r#"mv "$new/etc/fstab.tb-away" "$new/etc/fstab""#,
};

/// The unit of [`FSTAB`]'s line, as systemd names it.
pub(super) const FSTAB_UNIT: &str = "mnt-tbbroken.mount";

/// A chain of failures on one Pi: each injected, then hands off until the
/// SD card's system runs again.
pub(super) struct Chain {
    pub pi: Pi,
    pub name: &'static str,
    /// What the job prints in a trial boot besides `in_trial=1`.
    pub in_trial: String,
}

/// The SD card's system ran again after a failure: its job's facts, and
/// every boot it took.
pub(super) struct Back {
    pub facts: BTreeMap<String, String>,
    pub boots: Vec<Boot>,
}

impl Back {
    /// What the failed trial's consoles said, in order.
    pub fn consoles(&self) -> String {
        self.boots.iter().map(|b| b.record.console()).collect()
    }
}

impl Chain {
    pub fn new(mut pi: Pi, name: &'static str) -> Chain {
        pi.config.reset_on_panic = false;
        pi.boot_limit = BOOT_LIMIT;
        Chain {
            pi,
            name,
            in_trial: String::new(),
        }
    }

    /// `failure` was injected and the trial requested by the boot before
    /// (or, with `cut`, the power is cut during the trial as soon as its
    /// console shows those words). Boots with hands off until the SD
    /// card's system runs `job` (then does `after`), and checks that it
    /// came back by itself, on the SD card's root, each of `signs` on the
    /// consoles of the boots in between (what reset it).
    pub fn failed_trial(
        &mut self,
        failure: &str,
        signs: &[&str],
        cut: Option<&str>,
        job: &str,
        after: After,
    ) -> Result<Back> {
        let result = self.failed_trial_inner(failure, signs, cut, job, after);
        if let Err(e) = &result {
            unattended::needed_hands(self.name, failure, &format!("{e:#}"));
        }
        result
    }

    fn failed_trial_inner(
        &mut self,
        failure: &str,
        signs: &[&str],
        cut: Option<&str>,
        job: &str,
        after: After,
    ) -> Result<Back> {
        ensure!(
            self.pi.tryboot_pending(),
            "{failure}: no trial boot was requested before it"
        );
        let script = format!("{}{job}", hands_off_in_trial(&self.in_trial));
        let started = Instant::now();
        let mut boots: Vec<Boot> = Vec::new();
        for attempt in 0..4 {
            self.pi.share().set_job(&script, after)?;
            let mut job_seen = None;
            let boot = self.pi.boot_through_faults(&mut |_, console: &str| {
                if job_seen.is_none() && console.contains(AGENT_RUNS_JOB) {
                    job_seen = Some(Instant::now());
                }
                attempt == 0 && cut.is_some_and(|words| console.contains(words))
            })?;
            let cut_here = attempt == 0 && cut.is_some();
            let back = boot
                .job
                .as_ref()
                .map(|job| facts(&job.stdout))
                .filter(|f| f.get("in_trial").map(String::as_str) == Some("0"));
            let ending = boot.record.ending;
            let console = boot.record.serial_log.display().to_string();
            boots.push(boot);
            if let Some(facts) = back {
                let after = job_seen.map_or(started.elapsed(), |t| t - started);
                let back = Back { facts, boots };
                self.check_back(failure, signs, &back)?;
                unattended::came_back(self.name, failure, after);
                return Ok(back);
            }
            ensure!(
                ending.restarted() || (cut_here && ending == Ending::Killed),
                "after {failure} boot {} ended {ending:?} without the SD card's system coming back \
                 (a boot that ran to its {} s limit waited for a person); see {console}",
                boots.len(),
                BOOT_LIMIT.as_secs()
            );
        }
        bail!("after {failure} the SD card's system did not run again within 4 boots")
    }

    fn check_back(&self, failure: &str, signs: &[&str], back: &Back) -> Result<()> {
        let last = back.boots.last().expect("the boot it came back in");
        ensure!(
            last.spec.disk == "sd",
            "after {failure} the Pi came back from disk {}, not the SD card",
            last.spec.disk
        );
        expect_fact(&back.facts, "root", self.sd_root())
            .with_context(|| format!("after {failure}"))?;
        let consoles = back.consoles();
        for sign in signs {
            ensure!(
                consoles.contains(sign),
                "after {failure} no console of the boots in between says {sign:?}; see {}",
                self.pi.logs.display()
            );
        }
        Ok(())
    }

    /// The SD card's root as the guest names it.
    pub fn sd_root(&self) -> &'static str {
        "/dev/mmcblk0p2"
    }
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

/// The job that starts the next trial once the job is done (it records the
/// trial reboot in the journal).
const START_TRIAL: &str = "pimigrate migrate --resume --reboot";

pub fn root_only(images: &ImageSet) -> Result<()> {
    const NAME: &str = "unattended-root-only";
    let Rig { pi, sd, sd_boot } = Setup::new(NAME, &images.bookworm).usb_ssd().build()?;
    let scratch = pi.work.join("fat-snapshot");
    let pristine = fat::snapshot(&sd, &sd_boot, &scratch)?;
    let mut chain = Chain::new(pi, NAME);
    let ssd = chain.pi.disk("ssd")?.image.clone();

    // Boot 1: the migration, its terminal hung up mid-copy; it finishes by
    // itself. Then the new root's init is broken for the first trial.
    chain.pi.boot_limit = Duration::from_secs(20 * 60);
    let failure = "the SSH session dropped mid-copy";
    chain.pi.share().set_then(START_TRIAL)?;
    let job = format!(
        "{}{MOUNT_NEW_ROOT}{}\n{UNMOUNT_NEW_ROOT}",
        migrate_in_a_terminal_that_hangs_up("--trial always --auto-commit --table mbr"),
        INIT.make
    );
    let boot = chain.pi.run(&job, After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    match check_it_carried_on(&chain.pi, &f) {
        Ok(took) => unattended::came_back(NAME, failure, took),
        Err(e) => {
            unattended::needed_hands(NAME, failure, &format!("{e:#}"));
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
    let trial_cmdline = fat::read(&sd, &sd_boot, "cmdline.pimigrate.txt")?
        .context("no trial command line on the SD card")?;
    for word in [" panic=10", " pimigrate.trial=auto-commit"] {
        ensure!(
            trial_cmdline.contains(word),
            "the trial's command line has no{word}: {trial_cmdline}"
        );
    }

    // Each trial fails; the SD card's system, back by itself, says why,
    // mends it and breaks the next thing.
    let next = |mend: &Breakage, make: Option<&Breakage>| {
        format!(
            "{WHAT_IT_SAYS}{MOUNT_NEW_ROOT}{}\n{}\n{UNMOUNT_NEW_ROOT}",
            mend.mend,
            make.map_or("", |b| b.make)
        )
    };
    let back = chain.failed_trial(
        INIT.what,
        &["Attempted to kill init", "Rebooting in 10 seconds"],
        None,
        &next(&INIT, Some(&MODULES)),
        After::Then,
    )?;
    // Nothing of the trial ran to write a record: said as what is known.
    expect_fact(&back.facts, "stage", "trial-did-not-come-up")?;
    expect_fact(&back.facts, "record", "none")?;
    said_at_login(&chain, &["did not come up", "nothing was committed"])?;

    let back = chain.failed_trial(
        MODULES.what,
        &["stopped in emergency mode"],
        None,
        &next(&MODULES, Some(&FSTAB)),
        After::Then,
    )?;
    expect_fact(&back.facts, "stage", "trial-failed")?;
    expect_fact(&back.facts, "record", "emergency")?;
    said_at_login(&chain, &["emergency mode", "the Pi is back on the SD card"])?;

    let back = chain.failed_trial(
        FSTAB.what,
        &["stopped in emergency mode"],
        None,
        &next(&FSTAB, None),
        After::Then,
    )?;
    expect_fact(&back.facts, "stage", "trial-failed")?;
    let reason = fact(&back.facts, "record_reason")?;
    ensure!(
        reason.contains(FSTAB_UNIT),
        "the record does not name {FSTAB_UNIT}: {reason}"
    );

    // A clone of the new drive plugged in for the next trial: a stick
    // with its partition table (the same MBR disk id, so the same
    // PARTUUIDs). verify's checks fail in the trial, which reboots.
    chain
        .pi
        .attach_blank("stick", Bus::UsbStorage, 64 << 20, "usb-flash")?;
    clone_partition_table(&ssd, &chain.pi.disk("stick")?.image)?;
    let back = chain.failed_trial(
        "a clone of the new drive plugged in (verify's checks fail in the trial)",
        &["is not committed"],
        None,
        WHAT_IT_SAYS,
        After::Then,
    )?;
    chain.pi.detach("stick")?;
    expect_fact(&back.facts, "stage", "trial-failed")?;
    expect_fact(&back.facts, "record", "checks-failed")?;
    let reason = fact(&back.facts, "record_reason")?;
    ensure!(reason.contains("ids-unique"), "the record: {reason}");

    // The power is cut as the trial's systemd starts.
    let back = chain.failed_trial(
        "a power cut during the trial's first boot",
        &[],
        Some("Welcome to"),
        WHAT_IT_SAYS,
        After::Then,
    )?;
    ensure!(
        back.boots[0].record.ending == Ending::Killed,
        "the trial was not cut"
    );
    expect_fact(&back.facts, "stage", "trial-did-not-come-up")?;

    // The new drive gone at the trial: the initramfs gives up on its root
    // and panics, panic= resets. Back on the SD card: verify says how to
    // roll back, rollback leaves the boot partition as it was.
    chain.pi.detach("ssd")?;
    let back = chain.failed_trial(
        "the new drive gone at the trial (root-only)",
        &[
            "Gave up waiting for",
            "Rebooting automatically due to panic= boot argument",
        ],
        None,
        &format!(
            "{WHAT_IT_SAYS}set +e\npimigrate verify --no-bench > \"$TESTBED/out/verify.txt\" 2>&1\n\
             echo \"verify_status=$?\"\nset -e\npimigrate rollback --yes\n"
        ),
        After::PowerOff,
    )?;
    expect_fact(&back.facts, "stage", "trial-did-not-come-up")?;
    expect_fact(&back.facts, "verify_status", "5")?;
    said_at_login(&chain, &["is not attached now"])?;
    let diff = fat::snapshot_diff(&pristine, &fat::snapshot(&sd, &sd_boot, &scratch)?);
    ensure!(
        diff.is_empty(),
        "after rollback the SD card's boot partition differs from before the migration: {diff:?}"
    );
    Ok(())
}

/// The login message the last job left (`pimigrate status --login`) says
/// each of `words`.
fn said_at_login(chain: &Chain, words: &[&str]) -> Result<()> {
    let path = chain.pi.share().dir.join("out/login.txt");
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    for word in words {
        ensure!(
            text.contains(word),
            "the login message does not say {word:?}:\n{text}"
        );
    }
    Ok(())
}

/// Gives `clone` the partition table of `image`: the MBR, disk id and all.
fn clone_partition_table(image: &std::path::Path, clone: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut mbr = [0u8; 512];
    std::fs::File::open(image)
        .and_then(|f| f.read_exact_at(&mut mbr, 0))
        .with_context(|| format!("reading the MBR of {}", image.display()))?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(clone)
        .and_then(|f| f.write_all_at(&mbr, 0))
        .with_context(|| format!("writing the MBR of {}", clone.display()))
}

/// Runs a command as on the Pi the stand-in plays (its device tree, the
/// official bootloader tools).
const TB: &str = "tb=\"$TESTBED/pi/bin/tb-as-pi\"\n";
const START_DEVICE_TRIAL: &str = "\"$TESTBED/pi/bin/tb-as-pi\" pimigrate migrate --resume --reboot";
/// A Pi 4 bootloader from 2023-11-14: it boots USB, but has no EEPROM
/// `[tryboot]` section (2024-05-17) for a one-shot boot of another drive.
const OLD_BOOTLOADER: u32 = 1_700_000_000;

pub fn full(images: &ImageSet) -> Result<()> {
    const NAME: &str = "unattended-full";
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new(NAME, &images.bookworm).usb_ssd().build()?;
    pi.raspberry_pi_os_tools()?;
    let released = crate::bootloader::Bootloader::release(crate::eeprom::Board::Pi4)?
        .config()
        .to_string();
    pi.bootloader_mut()?
        .set_config(&released)
        .set_build_timestamp(OLD_BOOTLOADER);
    let mut chain = Chain::new(pi, NAME);
    let ssd_serial = "TB-SSD";
    let find = pimigrate_bin::find_disk(ssd_serial);
    let migrate = "--layout full --table mbr --boot-order apply --trial device --auto-commit";

    // Boot 1: the bootloader is too old for a one-shot trial of the new
    // drive: refused at plan time, nothing written. The owner does what
    // the refusal says: rpi-eeprom-update -a stages the update.
    let failure = "a bootloader too old for a trial";
    let job = format!(
        "{find}{TB}set +e\n\"$tb\" pimigrate plan --target \"$target\" {migrate} --json > \"$TESTBED/out/refused.json\"\n\
         echo \"plan_status=$?\"\nset -e\n\
         echo \"refusal=$(jq -r '[.reasons[].code] | join(\",\")' \"$TESTBED/out/refused.json\")\"\n\
         BOOTFS=/boot/firmware \"$tb\" rpi-eeprom-update -a > \"$TESTBED/out/update.txt\" 2>&1\n"
    );
    let boot = chain.pi.run(&job, After::Reboot)?;
    let f = facts(&boot.job_ok()?.stdout);
    let refused = expect_fact(&f, "plan_status", "3").and_then(|()| {
        let codes = fact(&f, "refusal")?;
        ensure!(
            codes.contains("device-trial-unavailable"),
            "refused, but not for the bootloader: {codes}"
        );
        ensure!(
            crate::recovery::staged(chain.pi.disks())?,
            "rpi-eeprom-update -a staged nothing; see {}",
            chain.pi.share().dir.join("out/update.txt").display()
        );
        Ok(())
    });
    match refused {
        Ok(()) => unattended::came_back(
            NAME,
            &format!("{failure} (refused at plan time)"),
            Duration::ZERO,
        ),
        Err(e) => {
            unattended::needed_hands(NAME, failure, &format!("{e:#}"));
            return Err(e);
        }
    }

    // The update's write cut short by a power cut; at the next power-on
    // recovery.bin writes it, and the SD card's system migrates.
    let failure = "the bootloader's staged update cut short (recovery.bin tries again)";
    let started = Instant::now();
    chain.pi.power_cut_in_recovery()?;
    let job = format!(
        "{find}{TB}\"$tb\" pimigrate migrate --target \"$target\" --yes {migrate}\n{JOURNAL_FACTS}"
    );
    chain.pi.share().set_job(&job, After::Reboot)?;
    let mut job_seen = None;
    chain.pi.boot_limit = Duration::from_secs(20 * 60);
    let boot = chain.pi.boot_through_faults(&mut |_, console: &str| {
        if job_seen.is_none() && console.contains(AGENT_RUNS_JOB) {
            job_seen = Some(Instant::now());
        }
        false
    })?;
    chain.pi.boot_limit = BOOT_LIMIT;
    let updated = chain
        .pi
        .bootloader()
        .is_some_and(|b| b.build_timestamp() > OLD_BOOTLOADER);
    if !updated || boot.job.is_none() {
        let why = format!(
            "after the cut the next boot did not write the update and run the SD card's system; see {}",
            chain.pi.logs.display()
        );
        unattended::needed_hands(NAME, failure, &why);
        bail!(why);
    }
    unattended::came_back(
        NAME,
        failure,
        job_seen.map_or(started.elapsed(), |t| t - started),
    );
    boot.job_ok()?;

    // Boot 3: recovery.bin writes the [tryboot] order the migration
    // staged; the SD card's system breaks the new drive's boot partition
    // (its firmware file gone) and starts the trial.
    chain.pi.share().set_then(START_DEVICE_TRIAL)?;
    let job = format!(
        "{WHAT_IT_SAYS}{find}mkdir -p /run/tb-new-boot\nmount \"${{target}}1\" /run/tb-new-boot\n\
         mv /run/tb-new-boot/start4.elf /run/tb-new-boot/start4.elf.tb-away\numount /run/tb-new-boot\n"
    );
    let boot = chain.pi.run(&job, After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "stage", "trial-pending")?;
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate did not start the trial: {:?}",
        boot.record.ending
    );

    // The bootloader passes over the new drive (no firmware on it) and
    // starts the SD card: the trial is over before it began. (job/then.sh
    // still starts the next trial.)
    let back = chain.failed_trial(
        "the new drive's boot partition broken (full move)",
        &[],
        None,
        &format!(
            "{WHAT_IT_SAYS}{find}mkdir -p /run/tb-new-boot\nmount \"${{target}}1\" /run/tb-new-boot\n\
             mv /run/tb-new-boot/start4.elf.tb-away /run/tb-new-boot/start4.elf\numount /run/tb-new-boot\n"
        ),
        After::Then,
    )?;
    expect_fact(&back.facts, "stage", "trial-did-not-come-up")?;
    // The trial's boot order, and the new drive passed over for it.
    let notes = back.boots[0].spec.notes.join("; ");
    ensure!(
        notes.contains("[tryboot]") && notes.contains("ssd: no start4.elf"),
        "the trial's boot did not pass over the new drive for its missing firmware: {notes}"
    );

    // The new drive gone at the trial: the bootloader finds no USB disk
    // and starts the SD card. There: verify, and rollback puts the
    // bootloader's config back.
    chain.pi.detach("ssd")?;
    let back = chain.failed_trial(
        "the new drive gone at the trial (full move)",
        &[],
        None,
        &format!(
            "{WHAT_IT_SAYS}{TB}set +e\n\"$tb\" pimigrate verify --no-bench > \"$TESTBED/out/verify.txt\" 2>&1\n\
             echo \"verify_status=$?\"\nset -e\n\"$tb\" pimigrate rollback --yes\n"
        ),
        After::PowerOff,
    )?;
    expect_fact(&back.facts, "stage", "trial-did-not-come-up")?;
    expect_fact(&back.facts, "verify_status", "5")?;
    said_at_login(&chain, &["is not attached now"])?;
    ensure!(
        fat::read(&sd, &sd_boot, "tryboot.txt")?.is_none(),
        "a full move's trial files are the new drive's, never the SD card's"
    );
    Ok(())
}
