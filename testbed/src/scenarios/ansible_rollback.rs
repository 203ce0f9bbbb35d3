//! The fleet playbook's rescue, for real: the trial boot comes up, but
//! `verify --commit` fails, and the playbook must roll back and reboot the
//! Pi onto its SD card.
//!
//! The cause is one a fleet meets: a clone of the new disk is plugged in.
//! Besides the SD card and the blank NVMe drive (as in `ansible`) the Pi
//! has a 64 MiB USB stick, too small to be a candidate, so `recommend`
//! leaves it alone. The job of the trial boot only (`job/tryboot` = 1; the
//! agent is a oneshot unit, so the playbook's `systemctl
//! is-system-running --wait` waits for it) gives the stick a partition
//! table with the NVMe drive's MBR disk identifier: PARTUUID `<id>-01`, the new root, then exists twice and
//! verify's `ids-unique` check fails naming it.
//!
//! Asserted: the run fails with recap failed=1 rescued=1 and its output
//! names the duplicate PARTUUID; the Pi is back on the SD card's root; the
//! SD card's boot partition (read from its image after the power-off) is
//! file for file, byte for byte what it was before the playbook ran, so
//! `cmdline.txt` is unchanged and `tryboot.txt` and the trial's cmdline
//! file are gone.

use super::fleet::{self, Fleet, Ssh, JOB};
use super::{Lane, Scenario};
use crate::host::fat;
use crate::machine::pimigrate_bin::TRIAL_SYSROOT;
use crate::machine::probe::facts;
use crate::machine::rig::Rig;
use crate::{Boot, Bus, ImageSet};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The trial boot's part of the job: the NVMe drive's disk identifier on
/// the stick (both found by serial), reported as `cloned_id=`.
const CLONE_ON_TRIAL: &str = r#"
if [ "$tryboot_flag" = 1 ]; then
    disk() { echo "/dev/$(lsblk -dno NAME,SERIAL | awk -v s="$1" '$2 == s { print $1 }')"; }
    new=$(disk TB-NVME); stick=$(disk TB-STICK)
    [ -b "$new" ] && [ -b "$stick" ] || { echo "no NVMe drive or stick"; lsblk; exit 1; }
    sfdisk --dump "$new" | grep -qx 'label: dos' || { echo "the NVMe drive has no MBR"; exit 1; }
    id=$(sfdisk --dump "$new" | awk '$1 == "label-id:" { print $2 }')
    printf 'label: dos\nlabel-id: %s\n,\n' "$id" | sfdisk -q "$stick"
    udevadm settle
    echo "cloned_id=$id"
fi
"#;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "ansible-rollback",
    lane: Lane::Shared,
    run,
    about: r#"the playbook's rescue (step 8 of [fleet.md](../fleet.md)) for a real failure: the disks of `ansible` and a 64 MiB USB stick, too small to be a candidate. The job of the trial boot only writes a partition table with the NVMe drive's MBR disk id to the stick (a clone of the new disk plugged in), so `verify --commit` fails `ids-unique`. The run must end `failed=1 rescued=1` with the rescue's own report and the duplicate PARTUUID in its output; the journal is retired (`migration.rolled-back.json`), the stick really holds the new root's PARTUUID, root is `/dev/mmcblk0p2`; boots: normal, one trial (`tryboot.txt`), normal; after the power-off the SD card's boot partition is file for file what it was before (`cmdline.txt` unchanged, `tryboot.txt` and the trial `cmdline` file gone)"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = fleet::setup("ansible-rollback", images)
        .blank("stick", Bus::UsbStorage, 64 << 20, "usb-flash")
        .build()?;
    // The first boot holds the whole migration: benchmark, copy, and all.
    pi.boot_limit = Duration::from_secs(60 * 60);
    let scratch = pi.work.join("fat-scratch");
    let pristine = fat::snapshot(&sd, &sd_boot, &scratch)?;
    ensure!(
        pristine.contains_key("cmdline.txt"),
        "the pristine SD card has no cmdline.txt"
    );

    let fleet = Fleet::prepare(&pi)?;
    let logs = pi.logs.clone();
    let work = pi.work.clone();
    let job = format!("{JOB}{TRIAL_SYSROOT}{CLONE_ON_TRIAL}");

    let ((root_partuuid, trial_cmdline), boots) = pi.serve(&job, |live| {
        let (ssh, inventory) = fleet.connect(live, &work)?;
        let log = logs.join("ansible-1.log");
        let (recap, output) = fleet.play(&inventory, &log)?;
        let rolled_back = check_rescued(&ssh, &recap, &output, &log)?;
        // Power off cleanly so the disk images hold everything.
        let _ = ssh.run("systemctl poweroff");
        live.wait_ended(Duration::from_secs(5 * 60))?;
        Ok(rolled_back)
    })?;

    let trial = trial_between_normal_boots(&boots)?;
    check_clone_of(&boots[trial], &root_partuuid)?;
    let after = fat::snapshot(&sd, &sd_boot, &scratch)?;
    check_sd_as_before(&pristine, &after, &trial_cmdline)
}

/// The playbook failed and was rescued: the rescue's own report, naming
/// the duplicate PARTUUID, which the stick really carries, and the Pi back
/// on the SD card's root. Returns the planned root's PARTUUID and the
/// trial's cmdline file, read from the retired journal.
fn check_rescued(
    ssh: &Ssh,
    recap: &BTreeMap<String, u64>,
    output: &str,
    log: &Path,
) -> Result<(String, String)> {
    fleet::nvme_was_ahead(ssh, output, log.parent().unwrap_or(log))?;
    ensure!(
        recap["failed"] == 1 && recap.get("rescued") == Some(&1) && recap["unreachable"] == 0,
        "expected the run to fail and be rescued (failed=1 rescued=1): {recap:?}, {}; see {}",
        fleet::failed_tasks(output),
        log.display()
    );
    // The failure is the rescue's own report, not a task inside the
    // rescue failing (that, too, counts failed=1 rescued=1).
    ensure!(
        output.contains("was rolled back; it runs from the SD card again"),
        "the run did not end with the rescue's report; see {}",
        log.display()
    );
    // rollback retired the journal; the plan in it names the new root.
    let journal = "/var/lib/pimigrate/migration.rolled-back.json";
    ensure!(
        ssh.run("test -e /var/lib/pimigrate/migration.json && echo yes || echo no")? == "no",
        "the journal is still active after the rollback"
    );
    let root_partuuid = ssh.planned_root_partuuid(journal)?;
    let trial_cmdline = ssh.run(&format!("jq -r .plan.trial_boot.cmdline_file {journal}"))?;
    ensure!(
        output.contains("ids-unique")
            && output
                .to_lowercase()
                .contains(&format!("partuuid={}", root_partuuid.to_lowercase())),
        "the playbook's output does not name the duplicate PARTUUID {root_partuuid}; see {}",
        log.display()
    );
    // The duplicate is real: the stick carries the new root's PARTUUID.
    let stick_partuuid = ssh.run(
        "lsblk -no PARTUUID /dev/$(lsblk -dno NAME,SERIAL | awk '$2 == \"TB-STICK\" { print $1 }')1",
    )?;
    ensure!(
        stick_partuuid.eq_ignore_ascii_case(&root_partuuid),
        "the stick's partition has PARTUUID {stick_partuuid:?}, not the new root's {root_partuuid}"
    );
    let root = ssh.run("findmnt -no SOURCE /")?;
    ensure!(
        root == "/dev/mmcblk0p2",
        "after the rollback the root is {root:?}, not the SD card's /dev/mmcblk0p2"
    );
    Ok((root_partuuid, trial_cmdline))
}

/// Normal boots (more than one only when the harness had to power-cycle
/// an emergency shell), the trial boot, then the rescue's reboot onto the
/// SD card from config.txt. Returns the trial boot's index.
fn trial_between_normal_boots(boots: &[Boot]) -> Result<usize> {
    let trial = boots
        .iter()
        .position(|b| b.spec.tryboot)
        .context("there was no trial boot")?;
    let specs: Vec<(&str, bool)> = boots
        .iter()
        .map(|b| (b.spec.config_file.as_str(), b.spec.tryboot))
        .collect();
    ensure!(
        trial > 0
            && boots[trial].spec.config_file == "tryboot.txt"
            && specs
                .iter()
                .enumerate()
                .all(|(i, s)| i == trial || *s == ("config.txt", false))
            && trial + 1 < boots.len(),
        "expected normal boots, one trial boot, then a normal boot: {specs:?}"
    );
    Ok(trial)
}

/// The trial boot gave the stick the new root's disk identifier.
fn check_clone_of(trial: &Boot, root_partuuid: &str) -> Result<()> {
    let f = facts(&trial.job_ok()?.stdout);
    let cloned = f.get("cloned_id").context("the trial boot cloned no id")?;
    let cloned_hex = cloned.to_lowercase();
    ensure!(
        root_partuuid
            .to_lowercase()
            .starts_with(cloned_hex.trim_start_matches("0x")),
        "the stick got disk id {cloned}, which is not the new root {root_partuuid}'s"
    );
    Ok(())
}

/// The SD card's boot partition after the rollback: cmdline.txt unchanged,
/// the trial's files gone, every file as before.
fn check_sd_as_before(
    pristine: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    trial_cmdline: &str,
) -> Result<()> {
    ensure!(
        after.get("cmdline.txt") == pristine.get("cmdline.txt"),
        "the SD card's cmdline.txt changed: {:?}",
        after.get("cmdline.txt").map(|b| String::from_utf8_lossy(b))
    );
    let trial_cmdline = trial_cmdline.trim_start_matches('/');
    for gone in ["tryboot.txt", trial_cmdline] {
        ensure!(
            !after.contains_key(gone),
            "{gone} is still on the SD card after the rollback"
        );
    }
    let diff = fat::snapshot_diff(pristine, after);
    ensure!(
        diff.is_empty(),
        "after the rollback the SD card's boot partition differs from before: {diff:?}"
    );
    Ok(())
}
