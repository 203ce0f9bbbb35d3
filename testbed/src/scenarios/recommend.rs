//! `pimigrate recommend --json --quick --size 16M --runtime 5` on an SD card
//! (`sd-c10`), a USB flash drive (`usb-flash`, usb-storage) and a USB SSD
//! (`usb-ssd`, UAS), each candidate with a mounted ext4 so its writes are
//! measured: it picks the SSD, warns that the flash drive is slower at
//! random writes than the SD card, and the flash drive's measured write IOPS
//! are its profile's binding limit (50, within 15 %, as issue 4 asks; see
//! docs/testbed/disks.md).

use super::{Lane, Scenario};
use crate::machine::fault::{EmulationFault, FaultKind};
use crate::machine::pimigrate_bin;
use crate::machine::rig::{Rig, Setup};
use crate::{After, Boot, Bus, ImageSet, Pi};
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

/// The `usb-flash` profile's random-write limit, which binds (docs/testbed/disks.md).
const FLASH_WRITE_IOPS: f64 = 50.0;

/// How far a binding limit's measurement may stray, as issue 4 asks. The
/// tests run 5 s, not the quick suite's 1.5 s: at 50 IOPS a 1.5 s window
/// holds about 75 writes, and QEMU's throttle lets requests through in small
/// bursts, so a window edge alone moved the figure by 15-20 % (58.7-59.1
/// measured); over 5 s the flash drive's random writes measured 47.0.
const TOLERANCE: f64 = 0.15;

// The job's `--size 16M`: the quick suite's 64 MiB file is laid out at the
// SD card's 150 writes a second, 0.42 MB/s under emulation (2026-12-03),
// 150 s of a scenario that runs alone. The figures checked here are bound
// by QEMU's throttles, which count every request whatever the file's size,
// so a smaller file changes the layout's time, not what is measured.

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
pimigrate recommend --json --quick --size 16M --runtime 5 > "$TESTBED/out/recommend.json"
"#;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "recommend",
    lane: Lane::Speed,
    run,
    about: r#"SD card (`sd-c10`, an older card: beside an A1 card the SSD's CPU-bound gain sat at the 2x threshold), USB flash (`usb-flash`) and USB SSD (`usb-ssd`), each USB disk with a mounted ext4 so its writes are measured: `pimigrate recommend --json --quick --size 16M --runtime 5` (16 MiB files: the card lays out 64 at 0.42 MB/s, 150 s; 5 s tests: in the quick suite's 1.5 s a window edge and the throttle's bursts move a 50 IOPS figure by 15-20 %) picks the SSD, warns `slower-random-writes` for the flash drive (not worth it), whose RND4K Q32 write IOPS are its binding limit, 50 within 15 % (Q1 at most 57.5); a boot stuck in the emergency shell before the job starts (a device missing systemd's 90 s timeout on a loaded host) is power-cycled, at most twice"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("recommend", &images.bookworm)
        .timed()
        // An older class 10 card, not an A1: the UAS SSD's random 4K is
        // bound by the emulation's CPU, and beside an A1 card it measured
        // 1.9-2.0x on a loaded host, the 2.0 threshold itself, so the pick
        // could go either way. Beside this card's 150 writes a second it
        // is several times the threshold, and the flash drive's 50 are
        // still a third of the card's (docs/testbed/disks.md).
        .sd_profile("sd-c10")
        .blank("flash", Bus::UsbStorage, 4 << 30, "usb-flash")
        .usb_ssd()
        .build()?;

    let boot = run_job(&mut pi)?;
    let f = crate::machine::probe::facts(&boot.job_ok()?.stdout);
    let ssd = f.get("SSD").context("no SSD path")?;
    let flash = f.get("FLASH").context("no FLASH path")?;
    let path = pi.share().dir.join("out/recommend.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    // Kept with the boot's logs: the work folder goes when the scenario ends.
    let kept = pi.logs.join("recommend.json");
    std::fs::write(&kept, &text).with_context(|| format!("writing {}", kept.display()))?;
    let doc: Value = serde_json::from_str(&text).context("recommend.json is not JSON")?;

    card_reached_its_profile(&doc, flash)?;
    let entry = pimigrate_bin::check_ssd_over_flash(&doc, ssd, flash)?;
    // The same drive's random reads (limit 500, ~365-500 in the emulation)
    // show whether the write limit could bind at all: far below that, the
    // guest was starved of CPU by a loaded host, and the message says so.
    let reads = entry["figures"]["rnd4k_q32_read_iops"]
        .as_f64()
        .unwrap_or(0.0);
    let starved = if reads < 4.0 * FLASH_WRITE_IOPS {
        format!(
            "; its random reads reached only {reads:.0} IOPS: the guest, not the \
             limit, was the bottleneck (host load {})",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        )
    } else {
        String::new()
    };
    for test in ["rnd4k_q32_write_iops", "rnd4k_q1_write_iops"] {
        let iops = entry["figures"][test]
            .as_f64()
            .with_context(|| format!("the flash drive has no {test}: {}", entry["figures"]))?;
        let low = FLASH_WRITE_IOPS * (1.0 - TOLERANCE);
        let high = FLASH_WRITE_IOPS * (1.0 + TOLERANCE);
        if test == "rnd4k_q32_write_iops" {
            ensure!(
                (low..=high).contains(&iops),
                "flash {test} = {iops:.1}, expected {FLASH_WRITE_IOPS} within {:.0} %{starved}",
                TOLERANCE * 100.0
            );
        } else {
            // At queue depth 1 the emulation may not reach the limit.
            ensure!(
                iops <= high,
                "flash {test} = {iops:.1}, above the {FLASH_WRITE_IOPS} limit by more than {:.0} %",
                TOLERANCE * 100.0
            );
        }
    }
    Ok(())
}

/// Power-cycles a boot that dropped to the emergency shell before the job
/// started, at most this often.
const EMERGENCY_RETRIES: u32 = 2;

/// Runs the job. On a host loaded with other guests, udev can miss
/// systemd's 90 s device timeout for the SD card's boot partition and the
/// boot stops in the emergency shell, where it would wait out the whole
/// boot limit; like a person at a real Pi, cut the power and boot again.
/// sd-c10's random 4K write limit (testbed/profiles.tsv), which the
/// emulated card reaches in a normal run (149 of 150 on 2026-12-03).
const CARD_WRITE_IOPS: f64 = 150.0;

/// The scenario's premise: the card writes at its profile, three times the
/// flash drive. Once (2026-12-03, the same commit passing right after) the
/// emulated card wrote 46 random 4K writes a second with nothing else on
/// the host, below the flash drive's 50, and the warning this scenario
/// checks rightly did not come: a fault of the emulation, which the suite
/// runs once more ([`FaultKind::DiskBelowProfile`]), not of pimigrate.
fn card_reached_its_profile(doc: &Value, flash: &str) -> Result<()> {
    let card = doc["ranking"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["path"].as_str() == Some(flash)))
        .and_then(|e| e["gain"]["tests"].as_array())
        .and_then(|t| t.iter().find(|t| t["test"] == "RND4K Q32 write"))
        .and_then(|t| t["baseline_iops"].as_f64());
    match card {
        Some(iops) if iops < CARD_WRITE_IOPS / 2.0 => Err(EmulationFault::new(
            FaultKind::DiskBelowProfile {
                what: format!(
                    "the SD card (sd-c10, {CARD_WRITE_IOPS:.0} random 4K writes/s) measured \
                     {iops:.0}, under half its profile"
                ),
            },
            crate::machine::pi::target_dir()
                .join("testbed-logs")
                .join("recommend"),
            true,
        )
        .into()),
        _ => Ok(()),
    }
}

fn run_job(pi: &mut Pi) -> Result<Boot> {
    for _ in 0..=EMERGENCY_RETRIES {
        pi.share().set_job(JOB, After::PowerOff)?;
        let mut emergency = false;
        let boot = pi.boot_until(|share, console| {
            emergency = !share.started() && console.contains("Emergency Mode");
            emergency
        })?;
        if !emergency {
            return Ok(boot);
        }
        eprintln!(
            "testbed: recommend boot {}: emergency shell before the job started; power-cycling",
            boot.number
        );
    }
    bail!(
        "recommend: {} boots in a row stopped in the emergency shell before the job started \
         (see the serial logs in {})",
        EMERGENCY_RETRIES + 1,
        pi.logs.display()
    )
}

#[cfg(test)]
mod card_tests {
    use super::*;

    fn doc(card_write_iops: f64) -> Value {
        serde_json::json!({"ranking": [{"path": "/dev/sdb", "gain": {"tests": [
            {"test": "RND4K Q32 write", "iops": 48.0, "baseline_iops": card_write_iops}
        ]}}]})
    }

    #[test]
    fn a_card_far_below_its_profile_is_the_emulations_fault() {
        assert!(card_reached_its_profile(&doc(149.0), "/dev/sdb").is_ok());
        let slow = card_reached_its_profile(&doc(46.0), "/dev/sdb").unwrap_err();
        let fault = EmulationFault::find(&slow).expect("an emulation fault");
        assert!(matches!(fault.kind, FaultKind::DiskBelowProfile { .. }));
    }
}
