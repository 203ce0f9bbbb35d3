//! The wizard, unattended: `pimigrate wizard --yes --target ... --layout
//! root-only --no-bench --no-trial`, reboot, root on the USB SSD.

use super::pimigrate_bin::{self, JOURNAL_FACTS};
use super::{expect_fact, facts, PROBE};
use crate::{After, Bus, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};

pub fn run(images: &ImageSet) -> Result<()> {
    let mut pi = Pi::new("wizard-unattended")?;
    pi.insert_sd_copy(&images.bookworm, "sd-a1")?;
    pi.attach_blank("ssd", Bus::UsbUas, 8 << 30, "usb-ssd")?;
    pimigrate_bin::place(&pi)?;

    let job = format!(
        "{}\npimigrate wizard --yes --target \"$target\" --layout root-only --no-bench --no-trial\n{JOURNAL_FACTS}",
        pimigrate_bin::find_disk("TB-SSD")
    );
    let first = pi.run(&job, After::Reboot)?;
    let f = facts(&first.job_ok()?.stdout);
    ensure!(
        first.record.ending == Ending::Reboot,
        "the guest did not reboot after the wizard: {:?}",
        first.record.ending
    );
    let root_partuuid = f
        .get("plan_root_partuuid")
        .context("no plan_root_partuuid")?
        .clone();

    let second = pi.run(
        &format!(
            "{}{PROBE}echo \"root_partuuid=$(lsblk -no PARTUUID \"$(findmnt -no SOURCE /)\")\"\n",
            pimigrate_bin::find_disk("TB-SSD")
        ),
        After::PowerOff,
    )?;
    let f = facts(&second.job_ok()?.stdout);
    let target = f.get("target").context("no target")?;
    expect_fact(&f, "root", &format!("{target}1"))?;
    expect_fact(&f, "root_partuuid", &root_partuuid)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    Ok(())
}
