//! Scenario (d): the firmware stand-in's trial boot, and a power cut.
//! A guest asks for `reboot "0 tryboot"`; the next boot reads tryboot.txt
//! (whose `[tryboot]` section names another command line); a power cut
//! during that boot must bring back the normal config.txt, as on a Pi.

use super::setup::{Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::{After, Ending, ImageSet};
use anyhow::{ensure, Result};

const MARK: &str = "testbed.trial=1";

fn prepare() -> String {
    format!(
        r#"
cd /boot/firmware
cp config.txt tryboot.txt
printf '\n[tryboot]\ncmdline=cmdline-trial.txt\n' >> tryboot.txt
echo "$(cat cmdline.txt) {MARK}" > cmdline-trial.txt
sync
"#
    )
}

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("tryboot", &images.bookworm)
        .without_pimigrate()
        .build()?;

    let first = pi.run(&prepare(), After::Tryboot)?;
    first.job_ok()?;
    ensure!(
        first.record.ending == Ending::TrybootReboot,
        "no trial reboot seen: {:?}",
        first.record.ending
    );
    ensure!(
        pi.tryboot_pending(),
        "the harness did not record the trial boot request"
    );

    // The trial boot: cut the power once the job has reported.
    let trial = pi.run_then_cut(PROBE, |share, _| share.output().ok().flatten().is_some())?;
    ensure!(
        trial.spec.config_file == "tryboot.txt",
        "trial boot read {}",
        trial.spec.config_file
    );
    let f = facts(&trial.job_ok()?.stdout);
    ensure!(
        f.get("cmdline").is_some_and(|c| c.contains(MARK)),
        "trial boot cmdline lacks {MARK}: {f:?}"
    );
    ensure!(
        trial.record.ending == Ending::Killed,
        "expected the power cut, got {:?}",
        trial.record.ending
    );
    ensure!(!pi.tryboot_pending(), "the trial flag survived a boot");

    // After the power cut: normal config.txt, normal cmdline, root comes up.
    let after = pi.run(PROBE, After::PowerOff)?;
    ensure!(
        after.spec.config_file == "config.txt",
        "boot after the cut read {}",
        after.spec.config_file
    );
    let f = facts(&after.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    ensure!(
        f.get("cmdline").is_some_and(|c| !c.contains(MARK)),
        "normal boot still has {MARK}: {f:?}"
    );
    ensure!(
        after.record.ending == Ending::PowerOff,
        "the guest did not power off: {:?}",
        after.record.ending
    );
    Ok(())
}
