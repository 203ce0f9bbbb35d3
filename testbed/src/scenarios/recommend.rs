//! `pimigrate recommend --json --quick` on an SD card (`sd-a1`), a USB
//! flash drive (`usb-flash`, usb-storage) and a USB SSD (`usb-ssd`, UAS),
//! each candidate with a mounted ext4 so its writes are measured: it picks
//! the SSD, warns that the flash drive is slower at random writes than the
//! SD card, and the flash drive's measured write IOPS are its profile's
//! binding limit (50, within 25 %; see docs/testbed.md).

use super::pimigrate_bin;
use crate::{After, Bus, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use serde_json::Value;

/// The `usb-flash` profile's random-write limit, which binds (docs/testbed.md).
const FLASH_WRITE_IOPS: f64 = 50.0;

const JOB: &str = r#"
for d in FLASH SSD; do
    dev=/dev/$(lsblk -dno NAME,SERIAL | awk -v s="TB-$d" '$2 == s { print $1 }')
    [ -b "$dev" ] || { echo "no disk with serial TB-$d"; lsblk; exit 1; }
    echo "$d=$dev"
    echo 'type=83' | sfdisk -q --wipe always "$dev"
    udevadm settle
    part=/dev/$(lsblk -lno NAME "$dev" | sed -n 2p)
    mkfs.ext4 -q -F "$part"
    mkdir -p "/mnt/$d"
    mount "$part" "/mnt/$d"
done
udevadm settle
pimigrate recommend --json --quick > "$TESTBED/out/recommend.json"
"#;

pub fn run(images: &ImageSet) -> Result<()> {
    let mut pi = Pi::new("recommend")?;
    pi.insert_sd_copy(&images.bookworm, "sd-a1")?;
    pi.attach_blank("flash", Bus::UsbStorage, 4 << 30, "usb-flash")?;
    pi.attach_blank("ssd", Bus::UsbUas, 8 << 30, "usb-ssd")?;
    pimigrate_bin::place(&pi)?;

    let boot = pi.run(JOB, After::PowerOff)?;
    let f = super::facts(&boot.job_ok()?.stdout);
    let ssd = f.get("SSD").context("no SSD path")?;
    let flash = f.get("FLASH").context("no FLASH path")?;
    let path = pi.share().dir.join("out/recommend.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    let doc: Value = serde_json::from_str(&text).context("recommend.json is not JSON")?;

    let pick = doc["pick"]["path"].as_str();
    ensure!(
        pick == Some(ssd.as_str()),
        "recommend picked {pick:?}, expected the SSD {ssd}; reasons: {}",
        doc["reasons"]
    );
    let entry = doc["ranking"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["path"].as_str() == Some(flash)))
        .with_context(|| format!("the flash drive {flash} is not ranked: {}", doc["excluded"]))?;
    let warnings: Vec<&str> = entry["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["code"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        warnings.contains(&"slower-random-writes"),
        "no slower-random-writes warning for the flash drive; its warnings: {warnings:?}"
    );
    ensure!(
        entry["worth_it"] == Value::Bool(false),
        "the flash drive is rated worth it: {}",
        entry["verdict"]
    );
    for test in ["rnd4k_q32_write_iops", "rnd4k_q1_write_iops"] {
        let iops = entry["figures"][test]
            .as_f64()
            .with_context(|| format!("the flash drive has no {test}: {}", entry["figures"]))?;
        let low = FLASH_WRITE_IOPS * 0.75;
        let high = FLASH_WRITE_IOPS * 1.25;
        if test == "rnd4k_q32_write_iops" {
            ensure!(
                (low..=high).contains(&iops),
                "flash {test} = {iops:.0}, expected {FLASH_WRITE_IOPS} within 25 %"
            );
        } else {
            // At queue depth 1 the emulation may not reach the limit.
            ensure!(
                iops <= high,
                "flash {test} = {iops:.0}, above the {FLASH_WRITE_IOPS} limit"
            );
        }
    }
    Ok(())
}
