//! Changes to the EEPROM bootloader, made only through the system's own
//! tools, as raspi-config makes them, and checked rather than assumed.
//!
//! - Where: [`EepromSite`] is the one place that decides it. An update is
//!   staged on the SD card's boot partition, whichever system runs (in a
//!   full move's trial /boot/firmware is the new drive's: the SD card's is
//!   mounted for the moment), because that is where the boot ROM runs
//!   recovery.bin from, and where rpi-eeprom-update leaves its files when
//!   a Pi 5's flashrom write fails; it is flushed there.
//! - On what: the config that is in the EEPROM now ([`EepromSite::now`]):
//!   an update staged for the next boot, else the flash read back with
//!   flashrom where rpi-eeprom-update writes at once, else the config the
//!   bootloader started with. Only the plan's settings change
//!   ([`crate::bootcfg::eeprom::EepromEdit`]), every other line stays, on
//!   the very image of the staged update or the flash, or on a release
//!   image never older than the running bootloader, passed to
//!   `rpi-eeprom-config --apply FILE IMAGE` explicitly (left to itself it
//!   takes the release channel's newest, which may be older).
//! - Checked: what was staged (`pieeprom.upd`) or flashed is read back
//!   with `rpi-eeprom-config IMAGE` and compared with what was meant
//!   before the next step; a staged update that differs is cancelled
//!   (`rpi-eeprom-update -r`) and the step fails.
//!
//! `vcmailbox` sets the Pi 5's one-shot `set_reboot_order`. pimigrate
//! never writes an EEPROM image itself.

use super::sd_boot::SdBoot;
use super::state::StateLock;
use crate::bootcfg::eeprom::{same_config, EepromConfig, EepromEdit, EepromSetting};
use crate::plan::bootloader::SET_REBOOT_ORDER_TAG;
use crate::plan::{BootloaderPlan, EepromChange};
use crate::state::journal::Journal;
use crate::system::bootloader::{
    pending_in, EepromBase, EepromFacts, EepromWrites, PENDING_UPDATE_FILE,
};
use crate::system::System;
use crate::tools::{package_for, which};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs one of the bootloader's tools, its output in the error when it fails.
fn run(program: &Path, args: &[&str], bootfs: Option<&Path>) -> Result<Output> {
    let mut command = Command::new(program);
    command.args(args);
    // rpi-eeprom-update stages an update in BOOTFS.
    if let Some(dir) = bootfs {
        command.env("BOOTFS", dir);
    }
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let output = command
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    if !output.status.success() {
        let said: Vec<String> = [&output.stdout, &output.stderr]
            .iter()
            .map(|bytes| String::from_utf8_lossy(bytes).trim().to_string())
            .filter(|text| !text.is_empty())
            .collect();
        bail!(
            "`{name} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            said.join("\n")
        );
    }
    Ok(output)
}

/// A tool that must be installed.
fn tool(program: &str) -> Result<PathBuf> {
    which(program).with_context(|| {
        format!(
            "{program} is not installed: sudo apt install {}",
            package_for(program)
        )
    })
}

/// The bootloader's tools, found once (tests point them elsewhere).
#[derive(Debug, Clone)]
pub struct EepromTools {
    /// `rpi-eeprom-config`.
    pub config: PathBuf,
    /// `rpi-eeprom-update`, which `--apply` runs and which cancels.
    pub update: Option<PathBuf>,
    /// `flashrom`, which reads the EEPROM back where it is written at once.
    pub flashrom: Option<PathBuf>,
}

impl EepromTools {
    pub fn system() -> Result<EepromTools> {
        Ok(EepromTools {
            config: tool("rpi-eeprom-config")?,
            update: which("rpi-eeprom-update"),
            flashrom: which("flashrom"),
        })
    }
}

/// The bootloader's running config, as `rpi-eeprom-config` prints it: the
/// one it started this boot with.
pub fn read_config() -> Result<String> {
    let output =
        run(&tool("rpi-eeprom-config")?, &[], None).context("reading the bootloader's config")?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The Pi 5's one-shot boot order for the next reboot (`set_reboot_order`
/// through the firmware's mailbox); the bootloader clears it once used.
pub fn set_reboot_order(order: crate::bootcfg::BootOrder) -> Result<()> {
    let order = order.to_string();
    run(
        &tool("vcmailbox")?,
        &[SET_REBOOT_ORDER_TAG, "4", "4", &order],
        None,
    )
    .with_context(|| format!("setting the one-shot boot order {order} for the next reboot"))?;
    Ok(())
}

/// Where the config that is in the EEPROM now was read.
#[derive(Debug)]
pub enum NowFrom {
    /// An update staged for the next boot: this image.
    Staged(PathBuf),
    /// The EEPROM, read with flashrom into this file.
    Flash(tempfile::NamedTempFile),
    /// The config the bootloader started with (`rpi-eeprom-config`): the
    /// EEPROM's when nothing was written since this boot began.
    Running,
}

/// The config that is in the EEPROM now, or will be from the next boot.
#[derive(Debug)]
pub struct Now {
    pub text: String,
    pub config: EepromConfig,
    pub from: NowFrom,
}

impl Now {
    /// Where it was read, for messages.
    pub fn describe(&self) -> String {
        match &self.from {
            NowFrom::Staged(image) => format!("the update staged in {}", image.display()),
            NowFrom::Flash(_) => "the EEPROM (read with flashrom)".into(),
            NowFrom::Running => "the config the bootloader started with".into(),
        }
    }
}

/// A change worked out on the config in the EEPROM now, before it is made.
#[derive(Debug)]
pub struct Prepared {
    pub now: Now,
    /// The config to apply: `now`'s with the edits.
    pub wanted: EepromConfig,
    /// The image it is built on (`None`: nothing to change).
    pub image: Option<PathBuf>,
}

/// What a change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// The EEPROM already read so; nothing was written.
    Already,
    /// Staged for the next boot (recovery.bin writes it), read back.
    Staged { tool_said: String },
    /// Written at once, read back from the flash.
    Written { tool_said: String },
}

/// Where this Pi's bootloader updates go and how they are read back.
pub struct EepromSite {
    /// The SD card's boot partition, a real path.
    bootfs: PathBuf,
    _sd_boot: Option<SdBoot>,
    board: Option<&'static str>,
    /// The running bootloader's build time.
    built: Option<u64>,
    facts: EepromFacts,
    tools: EepromTools,
}

impl EepromSite {
    /// The site of `journal`'s migration on `system`: the SD card's boot
    /// partition (mounted when the running system has not), for a Pi 4 and
    /// a Pi 5 alike.
    pub fn open(system: &System, journal: &Journal) -> Result<EepromSite> {
        let sd_boot = SdBoot::open(system, journal).context(
            "the bootloader's updates go to the SD card's boot partition, where the boot ROM reads them",
        )?;
        let mut site = EepromSite::at(
            system.host.path(sd_boot.dir()),
            system.pi.config_filter,
            system.pi.bootloader_built,
            system.pi.eeprom.clone(),
            EepromTools::system()?,
        );
        site._sd_boot = Some(sd_boot);
        Ok(site)
    }

    /// A site at `bootfs` (a real path) with these facts and tools.
    pub fn at(
        bootfs: PathBuf,
        board: Option<&'static str>,
        built: Option<u64>,
        facts: EepromFacts,
        tools: EepromTools,
    ) -> EepromSite {
        EepromSite {
            bootfs,
            _sd_boot: None,
            board,
            built,
            // A staged update counts where it is staged: here, not on the
            // boot partition the facts were read from.
            facts: EepromFacts {
                staged: None,
                ..facts
            },
            tools,
        }
    }

    /// The boot partition updates are staged on (a real path).
    pub fn bootfs(&self) -> &Path {
        &self.bootfs
    }

    /// The config that is in the EEPROM now, or will be from the next
    /// boot: an update staged here, else the flash where rpi-eeprom-update
    /// writes at once, else the config the bootloader started with.
    pub fn now(&self) -> Result<Now> {
        let (text, from) = if pending_in(&self.bootfs) {
            let image = self.bootfs.join(PENDING_UPDATE_FILE);
            (self.image_config(&image)?, NowFrom::Staged(image))
        } else if let EepromWrites::AtOnce { spidev } = self.facts.writes {
            let dump = self.read_flash(spidev)?;
            (self.image_config(dump.path())?, NowFrom::Flash(dump))
        } else {
            let out =
                run(&self.tools.config, &[], None).context("reading the bootloader's config")?;
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                NowFrom::Running,
            )
        };
        let config = EepromConfig::parse(text.as_bytes())
            .with_context(|| format!("the bootloader's config:\n{text}"))?;
        Ok(Now { text, config, from })
    }

    /// `rpi-eeprom-config IMAGE`.
    fn image_config(&self, image: &Path) -> Result<String> {
        let out = run(&self.tools.config, &[&image.to_string_lossy()], None)
            .with_context(|| format!("reading the bootloader's config in {}", image.display()))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The whole EEPROM, read with flashrom as rpi-eeprom-update writes it.
    fn read_flash(&self, spidev: &str) -> Result<tempfile::NamedTempFile> {
        let flashrom = self
            .tools
            .flashrom
            .as_deref()
            .context("flashrom is not installed: sudo apt install flashrom")?;
        let dump = tempfile::Builder::new()
            .prefix("pimigrate-eeprom")
            .suffix(".bin")
            .tempfile()
            .context("creating a temporary file for the EEPROM's image")?;
        let programmer = format!("linux_spi:dev={spidev},spispeed=16000");
        run(
            flashrom,
            &["-p", &programmer, "-r", &dump.path().to_string_lossy()],
            None,
        )
        .context("reading the bootloader's EEPROM back")?;
        Ok(dump)
    }

    /// `edits` worked out on the config in the EEPROM now, and the image
    /// the change is built on: the staged update's or the flash's own, else
    /// a release image never older than the running bootloader.
    pub fn prepare(&self, edits: &[EepromEdit]) -> Result<Prepared> {
        let now = self.now()?;
        let wanted = now.config.with_edits(edits, self.board).with_context(|| {
            format!(
                "changing {} of the bootloader's config ({})",
                edits_text(edits),
                now.describe()
            )
        })?;
        if wanted == now.config {
            return Ok(Prepared {
                now,
                wanted,
                image: None,
            });
        }
        let image = match &now.from {
            NowFrom::Staged(image) => {
                self.not_older(image)?;
                image.clone()
            }
            NowFrom::Flash(dump) => dump.path().to_path_buf(),
            NowFrom::Running => match self.facts.base(self.built) {
                Ok(EepromBase::Release { image, .. }) => image,
                // The facts changed since the plan read them: an update was
                // staged, or the EEPROM is now written at once.
                Ok(other) => bail!(
                    "no release image to build the change on: {}; nothing was changed, make the plan again",
                    match other {
                        EepromBase::Staged { .. } => "an update is staged for the next boot now",
                        EepromBase::Flash => "the EEPROM is written at once now (read back with flashrom)",
                        EepromBase::Release { .. } => "the release image is gone",
                    }
                ),
                Err(crate::system::bootloader::BaseError::Downgrade(why))
                | Err(crate::system::bootloader::BaseError::Unknown(why)) => {
                    bail!("{why}; nothing was changed")
                }
            },
        };
        Ok(Prepared {
            now,
            wanted,
            image: Some(image),
        })
    }

    /// An error when `image` holds a bootloader older than the running one.
    fn not_older(&self, image: &Path) -> Result<()> {
        let bytes = std::fs::read(image).with_context(|| format!("reading {}", image.display()))?;
        let built = crate::bootcfg::eeprom::image_build_time(&bytes);
        if let (Some(built), Some(running)) = (built, self.built) {
            if built < running {
                bail!(
                    "{} holds a bootloader built at {built}, older than the one in the EEPROM (built at {running}): \
                     it would downgrade the bootloader",
                    image.display()
                );
            }
        }
        Ok(())
    }

    /// Makes `edits` on the config in the EEPROM now, through
    /// `rpi-eeprom-config --apply`, and reads back what was staged or
    /// written. A staged update that reads otherwise is cancelled.
    pub fn change(&self, edits: &[EepromEdit]) -> Result<Changed> {
        let prepared = self.prepare(edits)?;
        let Some(image) = &prepared.image else {
            return Ok(Changed::Already);
        };
        // The image is copied first: rpi-eeprom-update removes a staged
        // update before it stages the new one.
        let base = tempfile::Builder::new()
            .prefix("pimigrate-eeprom-base")
            .suffix(".bin")
            .tempfile()
            .context("creating a temporary file for the bootloader's image")?;
        std::fs::copy(image, base.path())
            .with_context(|| format!("copying {}", image.display()))?;
        let mut config = tempfile::Builder::new()
            .prefix("pimigrate-bootconf")
            .suffix(".txt")
            .tempfile()
            .context("creating a temporary file for the bootloader's config")?;
        config
            .write_all(&prepared.wanted.to_bytes())
            .and_then(|()| config.flush())
            .context("writing the bootloader's config to a temporary file")?;
        let output = run(
            &self.tools.config,
            &[
                "--apply",
                &config.path().to_string_lossy(),
                &base.path().to_string_lossy(),
            ],
            Some(&self.bootfs),
        )
        .with_context(|| {
            format!(
                "applying the bootloader's config (staged in {}); nothing else was changed",
                self.bootfs.display()
            )
        })?;
        super::atomic::sync_filesystem(&self.bootfs)?;
        let tool_said = String::from_utf8_lossy(&output.stdout).into_owned();
        self.check(&prepared, edits, tool_said)
    }

    /// Reads back what `--apply` staged or wrote and compares it with
    /// `prepared.wanted`; a staged update that differs is cancelled.
    pub fn check(
        &self,
        prepared: &Prepared,
        edits: &[EepromEdit],
        tool_said: String,
    ) -> Result<Changed> {
        let back = self
            .now()
            .context("reading back the bootloader's new config")?;
        let staged = matches!(back.from, NowFrom::Staged(_));
        let problem = match &back.from {
            NowFrom::Running => Some(format!(
                "rpi-eeprom-update staged nothing in {} and wrote nothing that can be read back",
                self.bootfs.display()
            )),
            NowFrom::Staged(image) => self.not_older(image).err().map(|e| e.to_string()),
            NowFrom::Flash(_) => None,
        }
        .or_else(|| {
            let reads = back.config.reads_all(edits, self.board).unwrap_or(false);
            (!reads || !same_config(&back.text, &prepared.wanted.to_text())).then(|| {
                format!(
                    "{} reads:\n{}\nnot what was meant:\n{}",
                    back.describe(),
                    back.text.trim_end(),
                    prepared.wanted.to_text().trim_end()
                )
            })
        });
        let Some(problem) = problem else {
            return Ok(match staged {
                true => Changed::Staged { tool_said },
                false => Changed::Written { tool_said },
            });
        };
        if staged {
            self.cancel()?;
            bail!(
                "the bootloader's update is not what was meant, so it was cancelled (`rpi-eeprom-update -r`) \
                 and nothing else was changed: {problem}"
            );
        }
        bail!(
            "the bootloader's EEPROM is not what was meant: {problem}\n\
             `pimigrate rollback` puts the migration's settings back"
        )
    }

    /// Cancels an update staged here and not yet written
    /// (`rpi-eeprom-update -r`).
    pub fn cancel(&self) -> Result<()> {
        let update = match &self.tools.update {
            Some(update) => update.clone(),
            None => tool("rpi-eeprom-update")?,
        };
        run(&update, &["-r"], Some(&self.bootfs)).with_context(|| {
            format!(
                "cancelling the bootloader update staged in {}",
                self.bootfs.display()
            )
        })?;
        super::atomic::sync_filesystem(&self.bootfs)?;
        Ok(())
    }
}

fn edits_text(edits: &[EepromEdit]) -> String {
    edits
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Makes `change` (the migration's, or the hand-over's) on `system`, at
/// `journal`'s site; returns what the tools said, for the log, and a line
/// for the owner.
pub fn make(system: &System, journal: &Journal, change: &EepromChange) -> Result<(String, String)> {
    let site = EepromSite::open(system, journal)?;
    let changed = site.change(&change.edits)?;
    Ok(match changed {
        Changed::Already => (
            String::new(),
            format!("the bootloader already has {}", change.purpose),
        ),
        Changed::Staged { tool_said } => (
            tool_said,
            format!(
                "{} is staged on the SD card's boot partition and read back: the bootloader writes it at the next \
                 reboot (recovery.bin)",
                change.purpose
            ),
        ),
        Changed::Written { tool_said } => (
            tool_said,
            format!(
                "the bootloader now has {} (read back from its EEPROM)",
                change.purpose
            ),
        ),
    })
}

/// The settings a plan's changes touch.
fn settings(plan: &BootloaderPlan) -> Vec<EepromSetting> {
    let changes: Vec<&EepromChange> = [&plan.at_migrate, &plan.power, &plan.at_commit]
        .into_iter()
        .flatten()
        .collect();
    let mut settings: Vec<EepromSetting> = Vec::new();
    for edit in changes.iter().flat_map(|c| &c.edits) {
        if !settings.contains(&edit.setting()) {
            settings.push(edit.setting());
        }
    }
    // A journal written before changes named their settings: every one
    // pimigrate ever changes.
    if settings.is_empty() && !changes.is_empty() {
        settings = vec![
            EepromSetting::BootOrder,
            EepromSetting::TrialBootOrder,
            EepromSetting::PcieProbe,
        ];
    }
    settings
}

/// Before the first write of a migration that changes the bootloader's
/// config: the config in the EEPROM now, in the journal (which travels to
/// the new root), so `rollback` can put its settings back from either
/// system. Settings the plan changes that read otherwise now than when
/// the plan was made are refused: the plan's diffs would lie.
pub fn remember(
    system: &System,
    lock: &StateLock,
    journal: &mut Journal,
    state_dir: &Path,
) -> Result<()> {
    let Some(planned) = journal
        .plan
        .bootloader
        .as_ref()
        .filter(|b| b.changes().next().is_some())
    else {
        return Ok(());
    };
    if journal.bootloader_before.is_some() {
        return Ok(());
    }
    let board = system.pi.config_filter;
    let site = EepromSite::open(system, journal)?;
    let now = site.now()?;
    let then = planned
        .current
        .as_deref()
        .map(|text| EepromConfig::parse(text.as_bytes()))
        .transpose()
        .context("the plan's bootloader config")?;
    for setting in settings(planned) {
        let was = then
            .as_ref()
            .map(|c| c.reading(setting, board))
            .transpose()?;
        let is = now.config.reading(setting, board)?;
        if was.as_ref() != Some(&is) {
            let reboot = match now.from {
                NowFrom::Flash(_) => {
                    " (the EEPROM was written since this boot began, and a plan reads the config the \
                     bootloader started with: reboot first)"
                }
                _ => "",
            };
            bail!(
                "the bootloader's config changed since the plan was made: {} now reads {is}, the plan was made on {}; \
                 nothing was written: make the plan again{reboot}",
                now.describe(),
                was.map(|w| w.to_string())
                    .unwrap_or_else(|| "no config".into()),
            );
        }
    }
    journal.bootloader_before = Some(now.text);
    lock.save_journal(journal, state_dir)
}

/// Whether the bootloader runs with the migration's change now (a Pi 4's
/// `[tryboot]` order once recovery.bin wrote it): until then a trial
/// reboot would not reach the new drive.
pub fn migrate_change_running(plan: &BootloaderPlan, board: Option<&str>) -> Result<bool> {
    let Some(change) = &plan.at_migrate else {
        return Ok(true);
    };
    let running = read_config()?;
    let config = EepromConfig::parse(running.as_bytes())
        .with_context(|| format!("the bootloader's running config:\n{running}"))?;
    Ok(config.reads_all(&change.edits, board)?)
}

/// What puts the settings a migration changed back as `before` (the
/// config in the EEPROM before it) had them.
pub fn restore_edits(
    plan: &BootloaderPlan,
    before: &str,
    board: Option<&str>,
) -> Result<Vec<EepromEdit>> {
    let before = EepromConfig::parse(before.as_bytes())
        .with_context(|| format!("the bootloader's config before the migration:\n{before}"))?;
    settings(plan)
        .into_iter()
        .map(|s| Ok(before.reading(s, board)?))
        .collect()
}

/// `rollback`'s part: the settings the migration changed as they were
/// before it (`before`, from the journal), on the config that is in the
/// EEPROM now, whatever else changed since. An update the migration
/// staged that is not written yet is cancelled when that alone gives them
/// back. Returns what it did.
pub fn restore(system: &System, journal: &Journal, before: &str) -> Result<Vec<String>> {
    let Some(plan) = journal.plan.bootloader.as_ref() else {
        return Ok(Vec::new());
    };
    let board = system.pi.config_filter;
    let edits = restore_edits(plan, before, board)?;
    let site = EepromSite::open(system, journal)?;
    let prepared = site.prepare(&edits)?;
    if prepared.image.is_none() {
        return Ok(vec![format!(
            "the bootloader's settings are as they were before the migration ({}: {})",
            prepared.now.describe(),
            edits_text(&edits)
        )]);
    }
    // A staged update that only carries the migration's settings: cancelled,
    // the EEPROM keeps what it has.
    if matches!(prepared.now.from, NowFrom::Staged(_))
        && same_config(&read_config()?, &prepared.wanted.to_text())
    {
        site.cancel()?;
        return Ok(vec![format!(
            "cancelled the bootloader update staged in {}: the EEPROM keeps its settings ({})",
            site.bootfs().display(),
            edits_text(&edits)
        )]);
    }
    let changed = site.change(&edits)?;
    Ok(vec![match changed {
        Changed::Already => "the bootloader's settings are as they were before the migration".into(),
        Changed::Staged { .. } => format!(
            "the bootloader's settings from before the migration ({}) are staged on the SD card's boot partition \
             and read back: reboot, and the bootloader writes them (recovery.bin) and starts the SD card as before",
            edits_text(&edits)
        ),
        Changed::Written { .. } => format!(
            "the bootloader's settings are back as they were before the migration ({}; read back from its EEPROM)",
            edits_text(&edits)
        ),
    }])
}

#[cfg(test)]
mod tests {
    //! Against the real bootloader images in testbed/data/rpi-eeprom and
    //! the official rpi-eeprom-config (python3), which builds the images a
    //! Pi would have staged or flashed; flashrom and rpi-eeprom-update,
    //! which need the Pi's SPI flash and board, are played by small
    //! scripts that do what their manuals say.
    use super::*;
    use crate::bootcfg::BootOrder;
    use crate::plan::{EepromSource, EepromTakesEffect, Handover, TrialRoute};
    use crate::system::bootloader::ReleaseImage;
    use std::os::unix::fs::PermissionsExt;

    const PI4_IMAGE: &str = "firmware-2711/pieeprom-2026-05-17.bin";
    const PI5_IMAGE: &str = "firmware-2712/pieeprom-2026-05-26.bin";
    const PI4_BUILT: u64 = 1_779_045_198;
    const PI5_BUILT: u64 = 1_779_807_685;
    /// The configs the two images carry.
    const PI4_CONFIG: &str =
        "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\nNET_INSTALL_AT_POWER_ON=1\n";
    const PI5_CONFIG: &str = "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\nNET_INSTALL_AT_POWER_ON=1\n";

    fn data() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/data/rpi-eeprom")
    }

    fn official() -> PathBuf {
        data().join("rpi-eeprom-config")
    }

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `base` with `config`, built by the official tool into `out`.
    fn image_with(base: &Path, config: &str, out: &Path) {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("bootconf.txt");
        std::fs::write(&conf, config).unwrap();
        let built = dir.path().join("out.bin");
        let status = Command::new(official())
            .arg("--config")
            .arg(&conf)
            .arg("--out")
            .arg(&built)
            .arg(base)
            .status()
            .expect("python3 runs the official rpi-eeprom-config");
        assert!(status.success(), "rpi-eeprom-config --config --out");
        std::fs::copy(&built, out).unwrap();
    }

    /// A Pi with its tools in `dir`: rpi-eeprom-config printing `running`
    /// when asked for the running config, else the official tool;
    /// flashrom reading `dir/chip.bin`; rpi-eeprom-update -r removing
    /// the staged files from $BOOTFS and noting that it ran.
    fn tools(dir: &Path, running: &str) -> EepromTools {
        std::fs::write(dir.join("running.txt"), running).unwrap();
        let config = script(
            dir,
            "rpi-eeprom-config",
            &format!(
                "[ $# -eq 0 ] && exec cat '{0}/running.txt'\nexec '{1}' \"$@\"\n",
                dir.display(),
                official().display()
            ),
        );
        let flashrom = script(
            dir,
            "flashrom",
            &format!(
                "while [ $# -gt 0 ]; do [ \"$1\" = -r ] && cp '{}/chip.bin' \"$2\"; shift; done\n",
                dir.display()
            ),
        );
        let update = script(
            dir,
            "rpi-eeprom-update",
            &format!(
                "echo \"$* BOOTFS=$BOOTFS\" >> '{}/update.log'\n\
                 rm -f \"$BOOTFS/recovery.bin\" \"$BOOTFS/pieeprom.upd\" \"$BOOTFS/pieeprom.sig\"\n",
                dir.display()
            ),
        );
        EepromTools {
            config,
            update: Some(update),
            flashrom: Some(flashrom),
        }
    }

    /// A boot partition with `config` staged on the Pi 4 image, as
    /// rpi-eeprom-update leaves it.
    fn staged(bootfs: &Path, base: &Path, config: &str) {
        image_with(base, config, &bootfs.join("pieeprom.upd"));
        std::fs::copy(
            data().join("firmware-2711/recovery.bin"),
            bootfs.join("recovery.bin"),
        )
        .unwrap();
    }

    fn trial(order: u32) -> EepromEdit {
        EepromEdit::TrialBootOrder(Some(BootOrder { value: order }))
    }

    /// The owner's own settings, changed since the bootloader started.
    const OWNERS: &str = "[all]\nBOOT_UART=1\nWAKE_ON_GPIO=0\nPOWER_OFF_ON_HALT=1\n\
                          NET_INSTALL_AT_POWER_ON=1\nSD_BOOT_MAX_RETRIES=3\n";

    #[test]
    fn an_owners_staged_settings_survive_and_only_the_trial_order_changes() {
        let dir = tempfile::tempdir().unwrap();
        let bootfs = tempfile::tempdir().unwrap();
        staged(bootfs.path(), &data().join(PI4_IMAGE), OWNERS);
        let site = EepromSite::at(
            bootfs.path().to_path_buf(),
            Some("pi4"),
            Some(PI4_BUILT),
            EepromFacts::default(),
            tools(dir.path(), PI4_CONFIG),
        );
        let edits = [trial(0xf14)];
        let prepared = site.prepare(&edits).unwrap();
        // The change is made on what is staged, not on the config the
        // bootloader started with, and built on the staged image.
        assert!(matches!(prepared.now.from, NowFrom::Staged(_)));
        assert_eq!(prepared.now.text, OWNERS);
        let upd = bootfs.path().join("pieeprom.upd");
        assert_eq!(prepared.image.as_deref(), Some(upd.as_path()));
        assert_eq!(
            prepared.wanted.to_text(),
            format!("{OWNERS}[tryboot]\nBOOT_ORDER=0xf14\n")
        );
        // What `rpi-eeprom-config --apply` stages, read back: every line of
        // the owner's, and the trial order.
        image_with(&upd, &prepared.wanted.to_text(), &upd);
        assert_eq!(
            site.check(&prepared, &edits, String::new()).unwrap(),
            Changed::Staged {
                tool_said: String::new()
            }
        );
        let back = site.now().unwrap();
        assert_eq!(
            back.config.boot_order(Some("pi4"), true).unwrap().value,
            0xf14
        );
        assert_eq!(
            back.config.boot_order(Some("pi4"), false).unwrap().value,
            0xf41
        );
        assert_eq!(
            back.text.strip_suffix("[tryboot]\nBOOT_ORDER=0xf14\n"),
            Some(OWNERS)
        );
    }

    #[test]
    fn a_staged_update_that_is_not_what_was_meant_is_cancelled_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let bootfs = tempfile::tempdir().unwrap();
        staged(bootfs.path(), &data().join(PI4_IMAGE), PI4_CONFIG);
        let site = EepromSite::at(
            bootfs.path().to_path_buf(),
            Some("pi4"),
            Some(PI4_BUILT),
            EepromFacts::default(),
            tools(dir.path(), PI4_CONFIG),
        );
        let edits = [trial(0xf14)];
        let prepared = site.prepare(&edits).unwrap();
        // The tool staged another order than the one meant.
        let upd = bootfs.path().join("pieeprom.upd");
        image_with(
            &upd,
            &format!("{PI4_CONFIG}[tryboot]\nBOOT_ORDER=0xf41\n"),
            &upd,
        );
        let err = site.check(&prepared, &edits, String::new()).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("not what was meant")
                && text.contains("cancelled")
                && text.contains("BOOT_ORDER=0xf41")
                && text.contains("BOOT_ORDER=0xf14"),
            "{text}"
        );
        // Cancelled where it was staged; nothing of it is left.
        let log = std::fs::read_to_string(dir.path().join("update.log")).unwrap();
        assert_eq!(log.trim(), format!("-r BOOTFS={}", bootfs.path().display()));
        assert!(!pending_in(bootfs.path()));
    }

    /// A copy of `image` whose bootloader says it was built at `built`.
    fn built_at(image: &Path, built: u64, out: &Path) {
        let mut bytes = std::fs::read(image).unwrap();
        let marker = b"BUILD_TIMESTAMP=";
        let at = bytes
            .windows(marker.len())
            .position(|w| w == marker)
            .unwrap()
            + marker.len();
        let digits = built.to_string();
        bytes[at..at + digits.len()].copy_from_slice(digits.as_bytes());
        std::fs::write(out, bytes).unwrap();
        assert_eq!(
            crate::bootcfg::eeprom::image_build_time(&std::fs::read(out).unwrap()),
            Some(built)
        );
    }

    #[test]
    fn no_change_is_built_on_an_image_older_than_the_bootloader() {
        let dir = tempfile::tempdir().unwrap();
        let bootfs = tempfile::tempdir().unwrap();
        let older = dir.path().join("pieeprom-2025-01-01.bin");
        built_at(&data().join(PI4_IMAGE), 1_735_689_600, &older);
        // The release channel's newest is older than the running
        // bootloader: refused, not staged.
        let facts = |images: Vec<ReleaseImage>| EepromFacts {
            channel_latest: Some(older.clone()),
            images,
            ..EepromFacts::default()
        };
        let site = EepromSite::at(
            bootfs.path().to_path_buf(),
            Some("pi4"),
            Some(PI4_BUILT),
            facts(vec![ReleaseImage {
                path: older.clone(),
                built: 1_735_689_600,
            }]),
            tools(dir.path(), PI4_CONFIG),
        );
        let err = format!("{:#}", site.prepare(&[trial(0xf14)]).unwrap_err());
        assert!(
            err.contains("downgrade") && err.contains("nothing was changed"),
            "{err}"
        );
        // With the running bootloader's own build there, that one is used.
        let site = EepromSite::at(
            bootfs.path().to_path_buf(),
            Some("pi4"),
            Some(PI4_BUILT),
            facts(vec![
                ReleaseImage {
                    path: data().join(PI4_IMAGE),
                    built: PI4_BUILT,
                },
                ReleaseImage {
                    path: older.clone(),
                    built: 1_735_689_600,
                },
            ]),
            tools(dir.path(), PI4_CONFIG),
        );
        let prepared = site.prepare(&[trial(0xf14)]).unwrap();
        assert!(matches!(prepared.now.from, NowFrom::Running));
        assert_eq!(prepared.image, Some(data().join(PI4_IMAGE)));
        // A staged update with an older bootloader is no base either.
        staged(bootfs.path(), &older, PI4_CONFIG);
        let err = format!("{:#}", site.prepare(&[trial(0xf14)]).unwrap_err());
        assert!(err.contains("downgrade"), "{err}");
    }

    fn pi5_plan() -> BootloaderPlan {
        let change = |edits: Vec<EepromEdit>| EepromChange {
            edits,
            config: String::new(),
            diff: String::new(),
            purpose: String::new(),
        };
        BootloaderPlan {
            trial: Some(TrialRoute::Device),
            reason: String::new(),
            target_mode: 6,
            reboot_order: Some(BootOrder { value: 0xf16 }),
            current: Some(PI5_CONFIG.into()),
            current_from: EepromSource::Running,
            base: Some(EepromBase::Flash),
            at_migrate: Some(change(vec![EepromEdit::PcieProbe(Some("1".into()))])),
            handover: Handover::BootOrder,
            at_commit: Some(change(vec![EepromEdit::BootOrder(Some(BootOrder {
                value: 0xf416,
            }))])),
            consent: true,
            power: None,
            takes_effect: EepromTakesEffect::AtOnce,
        }
    }

    /// A Pi 5 writes its EEPROM at once: the config it started with stays
    /// the old one until it reboots, so a rollback compares with the flash.
    #[test]
    fn a_pi5_rollback_puts_the_eeproms_own_settings_back_before_and_after_the_reboot() {
        let dir = tempfile::tempdir().unwrap();
        let bootfs = tempfile::tempdir().unwrap();
        let plan = pi5_plan();
        let edits = restore_edits(&plan, PI5_CONFIG, Some("pi5")).unwrap();
        assert_eq!(
            edits,
            [
                EepromEdit::PcieProbe(None),
                EepromEdit::BootOrder(Some(BootOrder { value: 0xf461 }))
            ]
        );
        let site = EepromSite::at(
            bootfs.path().to_path_buf(),
            Some("pi5"),
            Some(PI5_BUILT),
            EepromFacts {
                writes: EepromWrites::AtOnce {
                    spidev: "/dev/spidev10.0",
                },
                ..EepromFacts::default()
            },
            // The bootloader still runs with the config it started with.
            tools(dir.path(), PI5_CONFIG),
        );
        let chip = dir.path().join("chip.bin");
        for flashed in [
            // Migrated, not rebooted yet.
            format!("{PI5_CONFIG}PCIE_PROBE=1\n"),
            // Committed: the permanent order too.
            format!("{}PCIE_PROBE=1\n", PI5_CONFIG.replace("0xf461", "0xf416")),
        ] {
            image_with(&data().join(PI5_IMAGE), &flashed, &chip);
            let prepared = site.prepare(&edits).unwrap();
            assert!(matches!(prepared.now.from, NowFrom::Flash(_)));
            assert_eq!(prepared.now.text, flashed);
            // Something to write, built on the flash's own image.
            assert!(prepared.image.is_some());
            assert_eq!(prepared.wanted.to_text(), PI5_CONFIG);
        }
        // Once the flash reads as before, there is nothing to do.
        image_with(&data().join(PI5_IMAGE), PI5_CONFIG, &chip);
        assert_eq!(site.prepare(&edits).unwrap().image, None);
    }

    /// A journal written before changes named their settings still reads,
    /// and its rollback puts back every setting pimigrate ever changes.
    #[test]
    fn a_journal_from_before_the_edits_still_rolls_back() {
        let old = serde_json::json!({
            "trial": "device",
            "reason": "set_reboot_order",
            "target_mode": 6,
            "reboot_order": "0xf16",
            "current": PI5_CONFIG,
            "at_migrate": {"config": format!("{PI5_CONFIG}PCIE_PROBE=1\n"), "diff": "", "purpose": "PCIE_PROBE=1"},
            "handover": "boot-order",
            "at_commit": null,
            "consent": true,
            "takes_effect": "at-once"
        });
        let plan: BootloaderPlan = serde_json::from_value(old).unwrap();
        assert_eq!(plan.reboot_order, Some(BootOrder { value: 0xf16 }));
        assert_eq!(plan.current_from, EepromSource::Running);
        let edits = restore_edits(&plan, PI5_CONFIG, Some("pi5")).unwrap();
        assert_eq!(
            edits,
            [
                EepromEdit::BootOrder(Some(BootOrder { value: 0xf461 })),
                EepromEdit::TrialBootOrder(None),
                EepromEdit::PcieProbe(None)
            ]
        );
    }

    #[test]
    fn a_rollback_puts_back_only_the_migrations_settings() {
        let plan = BootloaderPlan {
            at_migrate: Some(EepromChange {
                edits: vec![trial(0xf14)],
                config: String::new(),
                diff: String::new(),
                purpose: String::new(),
            }),
            at_commit: Some(EepromChange {
                edits: vec![
                    EepromEdit::TrialBootOrder(None),
                    EepromEdit::BootOrder(Some(BootOrder { value: 0xf14 })),
                ],
                config: String::new(),
                diff: String::new(),
                purpose: String::new(),
            }),
            ..pi5_plan()
        };
        let edits = restore_edits(&plan, PI4_CONFIG, Some("pi4")).unwrap();
        assert_eq!(
            edits,
            [
                EepromEdit::TrialBootOrder(None),
                EepromEdit::BootOrder(None)
            ]
        );
        // The owner changed BOOT_UART since; it stays.
        let now = EepromConfig::parse(
            format!(
                "{}BOOT_ORDER=0xf14\n",
                PI4_CONFIG.replace("BOOT_UART=0", "BOOT_UART=1")
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            now.with_edits(&edits, Some("pi4")).unwrap().to_text(),
            PI4_CONFIG.replace("BOOT_UART=0", "BOOT_UART=1")
        );
    }
}
