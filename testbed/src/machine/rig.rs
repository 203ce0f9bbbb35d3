//! What the scenarios set up alike: a Pi with a copy of an SD image and the
//! blank disks a scenario names, pimigrate on the job's PATH, and where the
//! card's boot partition is ([`Setup`]); the job that migrates to a disk
//! found by serial ([`migrate_job`]); and one fact of a job's output that
//! must be there ([`fact`]).

use crate::host::disks::IoEngine;
use crate::host::fat;
use crate::host::mbr::{self, Partition};
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::qemu::Board;
use crate::{Bus, Pi};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The SD card of scenarios that time nothing: QEMU's card with no
/// throttle (`testbed/profiles.tsv`), whose reads are about three times
/// those of `sd-a1` under emulation, and still below a real A1 card's. The
/// scenarios that measure or rank the card keep `sd-a1` or `sd-c10`.
pub const UNTIMED_SD: &str = "sd-unthrottled";

/// A Pi before its first boot: built by [`Setup::build`].
pub struct Setup {
    name: String,
    image: PathBuf,
    sd_profile: &'static str,
    blanks: Vec<Blank>,
    pimigrate: bool,
    timed: bool,
    ubuntu_config: bool,
    board: Board,
}

/// A blank disk to attach, and how QEMU presents it.
struct Blank {
    name: &'static str,
    bus: Bus,
    size: u64,
    profile: &'static str,
    discard: bool,
    scsi_version: Option<u8>,
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
    /// [`UNTIMED_SD`], with pimigrate on the job's PATH.
    pub fn new(name: &str, image: &Path) -> Setup {
        Setup {
            name: name.to_string(),
            image: image.to_path_buf(),
            sd_profile: UNTIMED_SD,
            blanks: Vec::new(),
            pimigrate: true,
            timed: false,
            ubuntu_config: false,
            board: Board::X86,
        }
    }

    /// One of the ARM lane's Raspberry Pis ([`Pi::raspi3b`],
    /// [`Pi::raspi4b`]) instead of the x86 guest, with pimigrate built for
    /// arm64; `image` must be the ARM lane's ([`crate::host::image::ArmImage`]).
    pub fn board(mut self, board: Board) -> Setup {
        self.board = board;
        self
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
        self.blanks.push(Blank {
            name,
            bus,
            size,
            profile,
            discard: false,
            scsi_version: None,
        });
        self
    }

    /// The disk added last passes the guest's discards on to its image
    /// (`discard=unmap`), so a TRIM shows on the host as blocks freed.
    pub fn passing_discards(mut self) -> Setup {
        if let Some(blank) = self.blanks.last_mut() {
            blank.discard = true;
        }
        self
    }

    /// The disk added last (on [`Bus::UsbStorage`]) claims SCSI version
    /// `version`: 2 has no VPD pages, so nobody learns what it passes on.
    pub fn scsi_version(mut self, version: u8) -> Setup {
        if let Some(blank) = self.blanks.last_mut() {
            blank.scsi_version = Some(version);
        }
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

    /// The SD card's config.txt laid out as Ubuntu 20.04's: `cmdline=` as a
    /// default, then `include syscfg.txt` (which sets `cmdline=` again, and
    /// wins) and `include usercfg.txt` ([`ubuntu_style`]).
    pub fn ubuntu_config(mut self) -> Setup {
        self.ubuntu_config = true;
        self
    }

    pub fn build(self) -> Result<Rig> {
        let mut pi = match self.board {
            Board::X86 => Pi::new(&self.name)?,
            Board::Raspi3b => Pi::raspi3b(&self.name)?,
            Board::Raspi4b => Pi::raspi4b(&self.name)?,
        };
        if self.timed {
            pi.config.io_engine = IoEngine::Threads;
            pi.config.cpus = 2;
        }
        pi.insert_sd_copy(&self.image, self.sd_profile)?;
        for blank in self.blanks {
            let mut disk = crate::host::disks::Disk::blank(
                pi.work.join(format!("{}.img", blank.name)),
                blank.size,
                blank.name,
                blank.bus,
                blank.profile,
            )?;
            disk.discard = blank.discard;
            disk.scsi_version = blank.scsi_version;
            pi.attach(disk)?;
        }
        if self.pimigrate {
            pimigrate_bin::place(&pi)?;
        }
        let sd = pi.disk("sd")?.image.clone();
        let sd_boot = mbr::partition_of(&sd, 1)?;
        if self.ubuntu_config {
            let config = fat::read(&sd, &sd_boot, "config.txt")?
                .context("the SD image has no config.txt")?;
            for (name, contents) in ubuntu_style(&config) {
                fat::write(&sd, &sd_boot, name, &contents)?;
            }
        }
        Ok(Rig { pi, sd, sd_boot })
    }
}

/// `config` turned into Ubuntu 20.04's layout (its config.txt ends with
/// `cmdline=cmdline.txt`, `include syscfg.txt`, `include usercfg.txt`, and
/// pibootctl's syscfg.txt sets `cmdline=cmdline.txt` again): the files to
/// write on the boot partition. A tryboot.txt that only replaced
/// config.txt's own `cmdline=` would be overridden by syscfg.txt's.
pub fn ubuntu_style(config: &str) -> [(&'static str, String); 3] {
    let mut config = config.to_string();
    if !config.ends_with('\n') {
        config.push('\n');
    }
    config.push_str(
        "\n# The following settings are \"defaults\" expected to be overridden by the\n\
         # included configuration (as Ubuntu 20.04 ships it).\n\
         [all]\ncmdline=cmdline.txt\n\ninclude syscfg.txt\ninclude usercfg.txt\n",
    );
    [
        ("config.txt", config),
        (
            "syscfg.txt",
            "# This file is intended to be modified by the pibootctl utility.\n\
             enable_uart=1\ndtparam=audio=on\ncmdline=cmdline.txt\n"
                .to_string(),
        ),
        (
            "usercfg.txt",
            "# Place \"config.txt\" changes (dtparam, dtoverlay, disable_overscan, etc.) in\n\
             # this file.\n"
                .to_string(),
        ),
    ]
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

/// The fact `key` of a job's output ([`crate::machine::probe::facts`]), which must be there.
pub fn fact(facts: &BTreeMap<String, String>, key: &str) -> Result<String> {
    facts
        .get(key)
        .cloned()
        .with_context(|| format!("the job printed no {key}="))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::config_txt::parse_config_with;

    /// What the firmware stand-in reads from the Ubuntu-style files: the
    /// same kernel as before, cmdline.txt through syscfg.txt; and a
    /// tryboot.txt with cmdline= replaced in config.txt alone still boots
    /// cmdline.txt, which is what the power-cut-trial scenario guards.
    #[test]
    fn ubuntu_style_config_boots_the_same_and_needs_cmdline_after_the_includes() {
        let original = "arm_64bit=1\n[pi4]\narm_boost=1\n[all]\nkernel=vmlinuz\ninitramfs initrd.img followkernel\n";
        let files = ubuntu_style(original);
        let read_from = |files: &[(&'static str, String); 3], name: &str| {
            files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, c)| c.clone())
        };
        let config = &files[0].1;
        let normal = parse_config_with(config, false, &mut |n| read_from(&files, n));
        assert_eq!(
            normal,
            crate::firmware::config_txt::parse_config(original, false)
        );
        let replaced_in_place =
            config.replace("cmdline=cmdline.txt", "cmdline=cmdline.pimigrate.txt");
        let trial = parse_config_with(&replaced_in_place, true, &mut |n| read_from(&files, n));
        assert_eq!(
            trial.cmdline, "cmdline.txt",
            "syscfg.txt overrides config.txt's own line"
        );
        let appended = format!("{config}[all]\ncmdline=cmdline.pimigrate.txt\n");
        let trial = parse_config_with(&appended, true, &mut |n| read_from(&files, n));
        assert_eq!(trial.cmdline, "cmdline.pimigrate.txt");
    }
}
