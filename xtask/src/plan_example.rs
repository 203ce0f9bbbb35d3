//! docs/plan.md's example of what `pimigrate plan` prints, written from
//! the real program's output on the tests' Pi 4 fixture machine
//! (tests/fixtures/pi4), so its figures (the trial's bounds, the ids, the
//! diffs) are the ones the code prints now.
//!
//! The machine is a copy of the fixture set up as the tests set it up
//! (tests/full_move_fixture.rs, tests/after_move.rs): a bootloader as new
//! as the rpi-eeprom image beside it, `rpi-eeprom-config` printing its
//! config, a 64-bit kernel with its initramfs on the boot partition,
//! `fstrim.timer` enabled, a uas reset in the kernel log. Every tool the
//! planner looks up comes from a folder of stand-ins
//! (`PIMIGRATE_TOOLS_PATH`), so the output is the same on any machine.

use anyhow::{bail, Context, Result};
use pimigrate::bootcfg::eeprom::image_build_time;
use pimigrate::system::trim::timer::WANTS_LINK;
use pimigrate::tools::TOOLS_PATH_VAR;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The command the example shows.
pub const COMMAND: [&str; 7] = [
    "plan",
    "--target",
    "/dev/sda",
    "--layout",
    "full",
    "--boot-order",
    "apply",
];

/// Fixes the plan's random ids (disk signature, filesystem ids), as the
/// tests' `--seed 42` does; a flag `--help` hides, so the example's
/// command line leaves it out.
const SEED: &str = "42";

/// The rpi-eeprom release image the Pi 4 runs and the package holds (in
/// testbed/data/rpi-eeprom), and where Raspberry Pi OS installs it.
const IMAGE: &str = "firmware-2711/pieeprom-2026-05-17.bin";
const IMAGE_DIR: &str = "usr/lib/firmware/raspberrypi/bootloader-2711/default";

/// What `rpi-eeprom-config` prints for that image's config (as the tests'
/// `PI4_CONFIG`).
const EEPROM_CONFIG: &str =
    "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\nNET_INSTALL_AT_POWER_ON=1\n";

/// The kernel on the boot partition, by its banner (the version the
/// trial's `rootwait=SECONDS` depends on).
const KERNEL_BANNER: &str = "Linux version 6.12.25+rpt-rpi-v8 (builder@pi) #1 SMP PREEMPT";

/// One uas reset of the SSD's bridge since boot, as `/dev/kmsg` gives it.
const UAS_RESET: &str = "6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n";

/// The plan's sections ("Bootloader", "After the move", ...), each its
/// heading line and what follows up to the next blank line.
#[derive(Debug, Clone)]
pub struct PlanOutput {
    pub sections: Vec<String>,
}

impl PlanOutput {
    /// The section whose first line is `heading`.
    pub fn section(&self, heading: &str) -> Result<&str> {
        self.sections
            .iter()
            .find(|s| s.lines().next() == Some(heading))
            .map(String::as_str)
            .with_context(|| format!("the plan printed no section `{heading}`"))
    }

    /// Every section but those headed by one of `left_out`, in order.
    pub fn without(&self, left_out: &[&str]) -> String {
        self.sections
            .iter()
            .filter(|s| !left_out.iter().any(|h| s.lines().next() == Some(*h)))
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// The program's words, split into sections.
pub fn sections(text: &str) -> PlanOutput {
    PlanOutput {
        sections: text
            .split("\n\n")
            .map(|s| s.trim_end_matches('\n').to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

/// Runs [`COMMAND`] with the pimigrate program at `pimigrate` on the
/// example machine, laid out in a temporary folder from the fixture and
/// the data of the repository at `repo`.
pub fn run(repo: &Path, pimigrate: &Path) -> Result<PlanOutput> {
    let dir = tempfile::tempdir().context("making a folder for the example machine")?;
    // The planner prints the release image's real path: canonical, so
    // that the machine's folder can be taken off it below.
    let base = dir
        .path()
        .canonicalize()
        .context("reading the example machine's folder")?;
    let root = base.join("root");
    let tools = base.join("tools");
    lay_out(repo, &root, &tools)?;
    let output = Command::new(pimigrate)
        .arg("--sysroot")
        .arg(&root)
        .args(COMMAND)
        .args(["--seed", SEED])
        .env(TOOLS_PATH_VAR, &tools)
        .env("NO_COLOR", "1")
        .env("LC_ALL", "C")
        .output()
        .with_context(|| format!("running {}", pimigrate.display()))?;
    if !output.status.success() {
        bail!(
            "pimigrate {} on the Pi 4 example machine failed ({}): {}{}",
            COMMAND.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
    }
    let text = String::from_utf8(output.stdout).context("the plan's output is not UTF-8")?;
    // Paths inside the machine as the Pi sees them: without the folder.
    let text = text.replace(&format!("{}/", root.display()), "/");
    if text.contains(&base.display().to_string()) {
        bail!("the plan names the example machine's folder:\n{text}");
    }
    Ok(sections(&text))
}

/// Copies the fixture to `root` and sets it up; stand-ins for the tools
/// the planner asks go into `tools`.
fn lay_out(repo: &Path, root: &Path, tools: &Path) -> Result<()> {
    let fixture = repo.join("tests/fixtures/pi4");
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture.display()))
        .arg(root)
        .status()
        .context("running cp")?;
    if !status.success() {
        bail!(
            "copying {} to {}: cp failed",
            fixture.display(),
            root.display()
        );
    }
    let eeprom = repo.join("testbed/data/rpi-eeprom");
    let image = eeprom.join(IMAGE);
    let bytes = std::fs::read(&image).with_context(|| format!("reading {}", image.display()))?;
    let built = image_build_time(&bytes)
        .with_context(|| format!("{} has no build time", image.display()))?;
    let installed = root
        .join(IMAGE_DIR)
        .join(image.file_name().context("the image has a name")?);
    crate::write(&installed, &bytes)?;
    // The bootloader in the EEPROM is that image's.
    crate::write(
        &root.join("proc/device-tree/chosen/bootloader/build-timestamp"),
        u32::try_from(built)?.to_be_bytes(),
    )?;
    let mut kernel = vec![0u8; 64];
    kernel.extend_from_slice(KERNEL_BANNER.as_bytes());
    crate::write(&root.join("boot/firmware/kernel8.img"), kernel)?;
    crate::write(&root.join("boot/firmware/initramfs8"), "the initramfs")?;
    crate::write(
        &root.join("usr/lib/systemd/system/fstrim.timer"),
        "[Timer]\nOnCalendar=weekly\n",
    )?;
    let wants = root.join(WANTS_LINK);
    std::fs::create_dir_all(wants.parent().context("the link has a folder")?)?;
    std::os::unix::fs::symlink("/usr/lib/systemd/system/fstrim.timer", &wants)
        .with_context(|| format!("linking {}", wants.display()))?;
    let kmsg = root.join("dev/kmsg");
    let log =
        std::fs::read_to_string(&kmsg).with_context(|| format!("reading {}", kmsg.display()))?;
    crate::write(&kmsg, log + UAS_RESET)?;

    let official = eeprom.join("rpi-eeprom-config");
    tool(
        tools,
        "rpi-eeprom-config",
        &format!(
            "[ $# -gt 0 ] && exec python3 '{}' \"$@\"\ncat <<'EOF'\n{EEPROM_CONFIG}EOF\n",
            official.display()
        ),
    )?;
    tool(
        tools,
        "rpi-eeprom-update",
        &format!("echo '{}'\n", installed.display()),
    )?;
    // The e2fsprogs of Raspberry Pi OS bookworm; the plan is never carried
    // out, so neither mkfs runs.
    tool(
        tools,
        "mkfs.ext4",
        "echo 'mke2fs 1.47.0 (5-Feb-2023)' >&2\n",
    )?;
    tool(tools, "mkfs.vfat", "exit 0\n")?;
    Ok(())
}

/// A shell script `name` in `dir` running `body`.
fn tool(dir: &Path, name: &str, body: &str) -> Result<PathBuf> {
    let path = crate::write(&dir.join(name), format!("#!/bin/sh\n{body}"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))?;
    Ok(path)
}

/// The pimigrate program of the repository at `repo`, built now (a debug
/// build, as the tests run it) so that it is the code as it is.
pub fn build(repo: &Path) -> Result<PathBuf> {
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(repo)
        .args([
            "build",
            "--locked",
            "--quiet",
            "--package",
            "pimigrate",
            "--bin",
            "pimigrate",
            "--message-format",
            "json-render-diagnostics",
        ])
        .output()
        .context("running cargo build")?;
    if !output.status.success() {
        bail!(
            "cargo build --package pimigrate failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "pimigrate")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo build named no pimigrate program")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_split_at_blank_lines() {
        let output = sections("Plan: x\nDry run\n\nCopy\n  a\n\nAfter the move\n  b\n");
        assert_eq!(output.section("Copy").unwrap(), "Copy\n  a");
        assert_eq!(
            output.section("After the move").unwrap(),
            "After the move\n  b"
        );
        assert_eq!(
            output.without(&["Copy"]),
            "Plan: x\nDry run\n\nAfter the move\n  b"
        );
        assert!(output.section("Bootloader").is_err());
    }
}
