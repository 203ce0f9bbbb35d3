//! pimigrate's trial boot, cut short twice: a root-only move to NVMe with
//! a GPT table and `--trial always`, whose power goes while the trial's
//! files are written to the SD card (tryboot.txt renamed into place, not
//! yet flushed); the SD card boots as before and `migrate --resume`
//! finishes them; the agent reboots with `"0 tryboot"`, the firmware
//! stand-in reads `tryboot.txt`, the trial boot comes up on the NVMe root,
//! and `verify --commit` loses its power right after its swap of
//! cmdline.txt. The next, normal, boot must come up on NVMe, where `verify
//! --commit` finishes the commit (the trial's files removed, the journal
//! told) and `verify` passes. Judged cut by cut as [`crate::machine::power`] says.
//!
//! The SD card's config.txt is laid out as Ubuntu 20.04's (issue #15):
//! `cmdline=` is set again by the included syscfg.txt, so the trial boot
//! reaches the NVMe root only if tryboot.txt's `cmdline=` comes after the
//! includes, and the stand-in follows `include` as the firmware does.
//!
//! The guest is x86_64 and has no device tree, so the trial boot's
//! `chosen/bootloader/tryboot` is handed to `verify` through `--sysroot`: a
//! tree whose every entry links to the running system's, plus the one
//! device-tree file the firmware would have made.

use super::{Lane, Scenario};
use crate::host::fat;
use crate::host::mbr::Partition;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS, ROOT_PARTUUID, TRIAL_SYSROOT};
use crate::machine::power::{CutAt, PowerCuts, Root};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Bus, ImageSet};
use anyhow::{ensure, Context, Result};
use pimigrate::failpoint;
use std::path::Path;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "power-cut-trial",
    lane: Lane::Shared,
    run,
    about: r#"the SD card's config.txt laid out as Ubuntu 20.04's (`cmdline=` then `include syscfg.txt`, which sets it again; the stand-in follows `include`); `pimigrate migrate --table gpt --trial always` to NVMe, its power cut while held at `boot-after-rename@2` (tryboot.txt renamed into place, not flushed): the SD root boots and `migrate --resume --yes` finishes; `cmdline.txt` unchanged, `tryboot.txt` ends with `[all]` + `cmdline=cmdline.pimigrate.txt` after the includes, `syscfg.txt` unchanged, the agent reboots with `"0 tryboot"`; the trial boot reads `tryboot.txt` and comes up on `nvme0n1p1` (the plan's partition GUID); `pimigrate verify --commit --no-bench` loses its power held at `commit-after-swap`; the SD card's `cmdline.txt` must then start the NVMe root, and the next normal boot (`config.txt`) comes up there, where `verify --commit` finishes the commit and `verify` passes; `tryboot.txt` and `cmdline.pimigrate.txt` are gone and `cmdline.txt` names the NVMe root; each cut judged as in `power-cut-migrate`, `power cuts: 2 cut, 2 booted, 2 resumed, 0 repaired by fsck`"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = Setup::new("power-cut-trial", &images.bookworm)
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .ubuntu_config()
        .build()?;
    let syscfg_before = fat::read(&sd, &sd_boot, "syscfg.txt")?.context("no syscfg.txt")?;
    let mut cuts = PowerCuts::new(pi, "power-cut-trial")?;

    // Boot 1: migrate with a trial, cut while its files are written (the
    // trial's cmdline.pimigrate.txt is the first rename, tryboot.txt the
    // second).
    cuts.cut(
        "tryboot.txt renamed into place",
        &pimigrate_bin::find_disk("TB-NVME"),
        "pimigrate migrate --target \"$target\" --yes --table gpt --trial always",
        CutAt::point("boot-after-rename@2"),
    )?;
    cuts.require(Root::Sd)?;

    let root_partuuid = resume_into_the_trial(&mut cuts, images, &sd, &sd_boot)?;
    ensure!(
        fat::read(&sd, &sd_boot, "syscfg.txt")?.as_deref() == Some(syscfg_before.as_str()),
        "the migration changed syscfg.txt"
    );
    cuts.settled("the trial's files written")?;
    trial_commit_cut_after_its_swap(&mut cuts)?;
    commit_finished_on_nvme(&mut cuts, &sd, &sd_boot, &root_partuuid)?;
    cuts.settled("committed")?;
    cuts.finish()?;
    Ok(())
}

/// Boot 2: the SD card as before; the resume finishes the trial's files
/// (cmdline.txt untouched, tryboot.txt naming the trial's command line
/// after config.txt's includes), and the agent reboots into the trial.
/// Returns the plan's root PARTUUID, in lower case.
fn resume_into_the_trial(
    cuts: &mut PowerCuts,
    images: &ImageSet,
    sd: &Path,
    sd_boot: &Partition,
) -> Result<String> {
    let boot = cuts.boot(&format!("{RESUME}\n{JOURNAL_FACTS}"), After::Tryboot)?;
    let f = facts(&boot.job_ok()?.stdout);
    let root_partuuid = fact(&f, "plan_root_partuuid")?.to_lowercase();
    ensure!(
        root_partuuid.len() == 36,
        "the plan's root PARTUUID {root_partuuid:?} is not a GPT partition GUID"
    );
    let cmdline = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={}-02", images.bookworm_signature)),
        "a trial migration changed cmdline.txt before the trial: {cmdline:?}"
    );
    let tryboot = fat::read(sd, sd_boot, "tryboot.txt")?.context("no tryboot.txt")?;
    ensure!(
        tryboot
            .trim_end()
            .ends_with("[all]\ncmdline=cmdline.pimigrate.txt"),
        "tryboot.txt does not end with the trial's cmdline= after the includes: {tryboot:?}"
    );
    Ok(root_partuuid)
}

/// Boot 3: the trial, on the NVMe root; its commit loses its power right
/// after the swap of cmdline.txt.
fn trial_commit_cut_after_its_swap(cuts: &mut PowerCuts) -> Result<()> {
    let trial = cuts.cut(
        "verify --commit's swap",
        &format!("{ROOT_PARTUUID}{TRIAL_SYSROOT}"),
        "pimigrate verify --commit --no-bench --sysroot \"$sysroot\"",
        CutAt::point(failpoint::COMMIT_AFTER_SWAP),
    )?;
    ensure!(
        trial.boot.spec.config_file == "tryboot.txt",
        "the trial boot read {}",
        trial.boot.spec.config_file
    );
    ensure!(
        trial.root == "/dev/nvme0n1p1",
        "the trial boot came up on {}",
        trial.root
    );
    cuts.require(Root::Target)
}

/// Boot 4: a normal boot, on NVMe; verify --commit finishes the commit:
/// cmdline.txt names the NVMe root, the trial's files are gone, and
/// verify passes.
fn commit_finished_on_nvme(
    cuts: &mut PowerCuts,
    sd: &Path,
    sd_boot: &Partition,
    root_partuuid: &str,
) -> Result<()> {
    let job = format!(
        r#"{PROBE}{ROOT_PARTUUID}
set +e
pimigrate verify --commit --no-bench
echo "commit_status=$?"
pimigrate verify --no-bench
echo "verify_status=$?"
"#
    );
    let normal = cuts.boot(&job, After::PowerOff)?;
    ensure!(
        normal.spec.config_file == "config.txt",
        "the boot after the commit read {}",
        normal.spec.config_file
    );
    let out = normal.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", "/dev/nvme0n1p1")?;
    expect_fact(&f, "root_partuuid", root_partuuid)?;
    expect_fact(&f, "commit_status", "0").with_context(|| out.stdout.clone())?;
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    let cmdline = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={root_partuuid} ")),
        "the committed cmdline.txt does not name {root_partuuid}: {cmdline:?}"
    );
    for gone in ["tryboot.txt", "cmdline.pimigrate.txt"] {
        ensure!(
            fat::read(sd, sd_boot, gone)?.is_none(),
            "{gone} is still on the SD card after the commit"
        );
    }
    Ok(())
}

const RESUME: &str = "pimigrate migrate --resume --yes";
