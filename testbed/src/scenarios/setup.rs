//! What the scenarios set up alike: a Pi with a copy of an SD image and the
//! blank disks a scenario names, pimigrate on the job's PATH, and where the
//! card's boot partition is ([`Setup`]); the boot that migrates to a disk
//! found by serial ([`migrate`], its job [`migrate_job`]); and one fact of
//! a job's output that must be there ([`fact`]).

use super::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::mbr::{self, Partition};
use crate::qemu::IoEngine;
use crate::{After, Bus, Ending, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A Pi before its first boot: built by [`Setup::build`].
pub struct Setup {
    name: String,
    image: PathBuf,
    sd_profile: &'static str,
    blanks: Vec<(&'static str, Bus, u64, &'static str)>,
    pimigrate: bool,
    timed: bool,
}

/// A set-up Pi and its SD card.
pub struct Rig {
    pub pi: Pi,
    /// The SD card's image file.
    pub sd: PathBuf,
    /// The SD card's boot partition (partition 1).
    pub sd_boot: Partition,
}

impl Setup {
    /// A Pi named `name` whose SD card is a copy of `image` at the speed of
    /// [`super::UNTIMED_SD`], with pimigrate on the job's PATH.
    pub fn new(name: &str, image: &Path) -> Setup {
        Setup {
            name: name.to_string(),
            image: image.to_path_buf(),
            sd_profile: super::UNTIMED_SD,
            blanks: Vec::new(),
            pimigrate: true,
            timed: false,
        }
    }

    /// The scenario measures the disks' speeds (it runs alone): QEMU's
    /// disks use the I/O engine the speed profiles were measured with
    /// ([`IoEngine::Threads`]).
    pub fn timed(mut self) -> Setup {
        self.timed = true;
        self
    }

    /// The SD card's speed profile (`testbed/profiles.tsv`).
    pub fn sd_profile(mut self, profile: &'static str) -> Setup {
        self.sd_profile = profile;
        self
    }

    /// A blank disk, found in the guest by its serial `TB-<NAME>`.
    pub fn blank(
        mut self,
        name: &'static str,
        bus: Bus,
        size: u64,
        profile: &'static str,
    ) -> Setup {
        self.blanks.push((name, bus, size, profile));
        self
    }

    /// The blank 8 GiB USB SSD (UAS) most migrations go to: `TB-SSD`.
    pub fn usb_ssd(self) -> Setup {
        self.blank("ssd", Bus::UsbUas, 8 << 30, "usb-ssd")
    }

    /// No host-built pimigrate in the guest (scenarios of the testbed itself).
    pub fn without_pimigrate(mut self) -> Setup {
        self.pimigrate = false;
        self
    }

    pub fn build(self) -> Result<Rig> {
        let mut pi = Pi::new(&self.name)?;
        if self.timed {
            pi.config.io_engine = IoEngine::Threads;
        }
        pi.insert_sd_copy(&self.image, self.sd_profile)?;
        for (name, bus, size, profile) in self.blanks {
            pi.attach_blank(name, bus, size, profile)?;
        }
        if self.pimigrate {
            pimigrate_bin::place(&pi)?;
        }
        let sd = pi.disk("sd")?.image.clone();
        let sd_boot = mbr::partition_of(&sd, 1)?;
        Ok(Rig { pi, sd, sd_boot })
    }
}

/// The job that finds the disk with serial `serial` as `$target`, runs
/// `pimigrate migrate --target "$target" --yes ARGS` and prints the plan's
/// ids from the journal ([`JOURNAL_FACTS`]).
pub fn migrate_job(serial: &str, args: &str) -> String {
    format!(
        "{}\npimigrate migrate --target \"$target\" --yes {args}\n{JOURNAL_FACTS}",
        pimigrate_bin::find_disk(serial)
    )
}

/// Boots `pi` with [`migrate_job`] and ends the boot with `after`, which
/// the guest must have done (a migration that failed, or a guest that died,
/// ends otherwise); returns the job's facts ([`super::facts`]).
pub fn migrate(
    pi: &mut Pi,
    serial: &str,
    args: &str,
    after: After,
) -> Result<BTreeMap<String, String>> {
    let boot = pi.run(&migrate_job(serial, args), after)?;
    let facts = super::facts(&boot.job_ok()?.stdout);
    let ended = match after {
        After::PowerOff => Ending::PowerOff,
        After::Reboot => Ending::Reboot,
        After::Tryboot => Ending::TrybootReboot,
        After::Stay => Ending::Killed,
    };
    ensure!(
        boot.record.ending == ended,
        "{}: the guest ended {:?} after migrating, not {ended:?}",
        pi.name,
        boot.record.ending
    );
    Ok(facts)
}

/// The fact `key` of a job's output ([`super::facts`]), which must be there.
pub fn fact(facts: &BTreeMap<String, String>, key: &str) -> Result<String> {
    facts
        .get(key)
        .cloned()
        .with_context(|| format!("the job printed no {key}="))
}
