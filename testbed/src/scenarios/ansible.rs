//! The fleet playbook (`examples/ansible/pimigrate.yml`) run by
//! `ansible-playbook` on the host against the guest over SSH on a loopback
//! port forward, twice. The Pi has its SD card and a blank NVMe drive. The
//! first run installs pimigrate, benchmarks (the blank drive destructively),
//! picks the NVMe drive from `recommend --json`, migrates with a trial boot,
//! reboots with `"0 tryboot"` through the long-running harness, and commits
//! with `verify --commit`: root is then on the NVMe drive and the SD card's
//! `cmdline.txt` names it. The second run changes nothing.
//!
//! Testbed-only accommodation: the x86 guest has no device tree, so the
//! job builds `/run/tb-sysroot` at every boot with the trial flag the
//! firmware stand-in passes (`job/tryboot`), and the playbook gets
//! `pimigrate_verify_args: [--sysroot, /run/tb-sysroot]`, as power-cut-trial
//! does. The emulated Pi's firmware cannot be identified either, so
//! `pimigrate_trial: always`. All the playbook's variables reach it through
//! the inventory (as host variables), not `-e`: the role's defaults must
//! yield to inventory, as a fleet's per-host settings need.

use super::fleet::{self, Fleet, Ssh, JOB};
use super::{Lane, Scenario};
use crate::host::fat;
use crate::machine::pimigrate_bin::TRIAL_SYSROOT;
use crate::machine::probe::PROBE;
use crate::machine::rig::Rig;
use crate::{Boot, ImageSet};
use anyhow::{ensure, Context, Result};
use std::time::Duration;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "ansible",
    lane: Lane::Shared,
    run,
    about: r#"`examples/ansible/pimigrate.yml` run by `ansible-playbook` on the host over SSH (a key made per run, installed by the job; the guest's port 22 forwarded to a free loopback port), the SD card (`sd-unthrottled`) and a blank NVMe drive (the pick beyond doubt on a loaded host, `fleet::setup`), twice, with `pimigrate_bench_args: [--size, 32M, --runtime, 0.5]` (a fleet with slow cards needs the small file: laying out the quick suite's took an emulated class 10 card most of a run; the short tests suffice for a drive ten times the card). Run 1: no failed task and some changed; the blank NVMe drive benchmarked with `bench --destructive`, picked by `recommend --json`, migrated with a trial, the reboot `"0 tryboot"` and `verify --commit` all through Ansible; over SSH then root is the NVMe drive's partition 1 with the plan's PARTUUID, `cmdline.txt` names it, no `tryboot.txt`. Run 2: `changed=0 failed=0`. From the host: normal boots from `config.txt`, then one trial boot from `tryboot.txt`; the SD card's `cmdline.txt` committed. Logs: `ansible-1.log`, `ansible-2.log`"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = fleet::setup("ansible", images).build()?;
    // The first boot holds the whole first run: benchmark, copy, and all.
    pi.boot_limit = Duration::from_secs(60 * 60);

    let fleet = Fleet::prepare(&pi)?;
    let logs = pi.logs.clone();
    let work = pi.work.clone();
    let job = format!("{JOB}{TRIAL_SYSROOT}{PROBE}");

    let (root_partuuid, boots) = pi.serve(&job, |live| {
        let (ssh, inventory) = fleet.connect(live, &work)?;

        let (recap, output) = fleet.play(&inventory, &logs.join("ansible-1.log"))?;
        fleet::nvme_was_ahead(&ssh, &output, &logs)?;
        ensure!(
            recap["failed"] == 0 && recap["unreachable"] == 0,
            "the first run failed: {recap:?}, {}; see {}",
            fleet::failed_tasks(&output),
            logs.join("ansible-1.log").display()
        );
        ensure!(
            recap["changed"] > 0,
            "the first run changed nothing: {recap:?}"
        );
        let root_partuuid = moved_to_the_nvme_and_committed(&ssh)?;

        let (recap, output) = fleet.play(&inventory, &logs.join("ansible-2.log"))?;
        ensure!(
            recap["failed"] == 0 && recap["unreachable"] == 0 && recap["changed"] == 0,
            "the second run on the migrated Pi: {recap:?} (expected changed=0 failed=0), {}; see {}",
            fleet::failed_tasks(&output),
            logs.join("ansible-2.log").display()
        );
        // Power off cleanly so the disk images hold everything.
        let _ = ssh.run("systemctl poweroff");
        live.wait_ended(Duration::from_secs(5 * 60))?;
        Ok(root_partuuid)
    })?;

    normal_boots_then_the_trial(&boots)?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={} ", root_partuuid.to_lowercase())),
        "the SD card's cmdline.txt does not name the NVMe root {root_partuuid}: {cmdline:?}"
    );
    ensure!(
        fat::read(&sd, &sd_boot, "tryboot.txt")?.is_none(),
        "tryboot.txt is still on the SD card after the commit"
    );
    Ok(())
}

/// After the first run the guest runs from the NVMe drive's plan root,
/// committed in cmdline.txt, with no tryboot.txt left; that PARTUUID.
fn moved_to_the_nvme_and_committed(ssh: &Ssh) -> Result<String> {
    // The guest now runs from the NVMe drive, on the plan's root partition.
    let nvme = ssh.run("lsblk -dno NAME,SERIAL | awk '$2 == \"TB-NVME\" { print $1 }'")?;
    let root = ssh.run("findmnt -no SOURCE /")?;
    ensure!(
        root == format!("/dev/{nvme}p1"),
        "after the first run the root is {root:?}, not the NVMe drive's /dev/{nvme}p1"
    );
    let root_partuuid = ssh.run("lsblk -no PARTUUID \"$(findmnt -no SOURCE /)\"")?;
    let planned = ssh.planned_root_partuuid("/var/lib/pimigrate/migration.json")?;
    ensure!(
        root_partuuid.eq_ignore_ascii_case(&planned),
        "root PARTUUID {root_partuuid} is not the plan's {planned}"
    );
    let cmdline = ssh.run("cat /boot/firmware/cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={} ", root_partuuid.to_lowercase())),
        "cmdline.txt is not committed to {root_partuuid}: {cmdline:?}"
    );
    ensure!(
        ssh.run("test -e /boot/firmware/tryboot.txt && echo yes || echo no")? == "no",
        "tryboot.txt is still there after the commit"
    );
    Ok(root_partuuid)
}

/// The boots the harness saw, in order.
fn normal_boots_then_the_trial(boots: &[Boot]) -> Result<()> {
    // Normal boots from config.txt (more than one only when the harness
    // had to power-cycle an emergency shell), then the trial from
    // tryboot.txt, which the second run and the power-off happened in.
    let specs: Vec<(String, bool)> = boots
        .iter()
        .map(|b| (b.spec.config_file.clone(), b.spec.tryboot))
        .collect();
    let (last, before) = specs.split_last().context("no boot at all")?;
    ensure!(
        *last == ("tryboot.txt".to_string(), true)
            && !before.is_empty()
            && before
                .iter()
                .all(|b| *b == ("config.txt".to_string(), false)),
        "expected normal boots then one trial boot, got {specs:?}"
    );
    Ok(())
}
