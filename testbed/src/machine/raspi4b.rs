//! What QEMU 10's `raspi4b` needs of a Pi 4's device tree (upstream
//! Linux's bcm2711-rpi-4-b.dtb, as raspi-firmware copies it) that a real
//! Pi 4 does not: the model lacks parts the tree describes. The harness
//! edits the copy it hands QEMU, never the SD card's file, as the real
//! firmware edits its own copy (the tryboot flag, memory, serials).
//!
//! - The HDMI block at 0x7ef00000 is not emulated; the 6.1 kernel's
//!   HDMI, CEC and DDC drivers abort on it: disabled.
//! - The dwc2 controller at 0x7e980000 is the Pi 4's USB-C port, in
//!   peripheral mode; QEMU has no PCIe and so no VL805 USB 3 controller,
//!   so dwc2 in host mode is the only USB there is.
//! - QEMU wires the SD card to the Arasan sdhci at 0x7e300000 (the Pi 4's
//!   Wi-Fi slot): its Wi-Fi child and power sequence go, and emmc2 (the
//!   real SD slot, empty under QEMU) is disabled.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

/// The nodes of the HDMI block under /soc.
const HDMI_BLOCK: [&str; 6] = [
    "/soc/clock@7ef00000",
    "/soc/interrupt-controller@7ef00100",
    "/soc/hdmi@7ef00700",
    "/soc/i2c@7ef04500",
    "/soc/hdmi@7ef05700",
    "/soc/i2c@7ef09500",
];
const USB: &str = "/soc/usb@7e980000";
const ARASAN: &str = "/soc/mmc@7e300000";
const EMMC2: &str = "/emmc2bus/mmc@7e340000";

/// Edits `dtb` in place for QEMU's raspi4b (see the module's comment).
pub fn fit_device_tree(dtb: &Path) -> Result<()> {
    for node in HDMI_BLOCK.iter().chain([&EMMC2]) {
        fdt(
            "fdtput",
            &["-t", "s", path(dtb), node, "status", "disabled"],
        )?;
    }
    fdt("fdtput", &["-t", "s", path(dtb), USB, "dr_mode", "host"])?;
    fdt("fdtput", &["-d", path(dtb), ARASAN, "mmc-pwrseq"])?;
    fdt("fdtput", &["-r", path(dtb), &format!("{ARASAN}/wifi@1")])?;
    Ok(())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

fn fdt(tool: &str, args: &[&str]) -> Result<()> {
    crate::host::cmd::run(Command::new(tool).args(args)).with_context(|| {
        format!(
            "cannot fit the Pi 4 device tree for QEMU's raspi4b ({tool} {}); \
             is it upstream Linux's bcm2711-rpi-4-b.dtb?",
            args.join(" ")
        )
    })?;
    Ok(())
}
