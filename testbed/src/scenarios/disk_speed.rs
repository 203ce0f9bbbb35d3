//! Scenario (c): each throttled disk runs at its profile's speed, measured
//! in the guest with fio. This is the ground truth later benchmark tests
//! compare against: if the emulation does not deliver the table's figures,
//! nothing measured on top of it means anything.

use super::{Lane, Scenario};
use crate::host::profiles::Profile;
use crate::machine::rig::{Rig, Setup};
use crate::{After, Bus, ImageSet};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;

/// A binding limit must be met within this fraction (fio's ramp, TCG
/// jitter, QEMU's throttling bursts).
const TOLERANCE: f64 = 0.25;

/// What each emulated bus delivers unthrottled, under TCG on this 2-core
/// host (random 4 KiB IOPS read, write; sequential 1 MiB B/s read, write;
/// measured with this scenario's fio jobs, see docs/testbed/disks.md). A limit is
/// *binding*, and then checked to be met, only below half of this: above,
/// the emulation itself is the bottleneck and the limit can only be checked
/// as not exceeded. QEMU's SD card is slow by nature, far below an A1 card.
fn ceiling(bus: Bus) -> [f64; 4] {
    match bus {
        Bus::Sd => [330.0, 260.0, 3.6e6, 2.1e6],
        Bus::UsbUas => [1600.0, 2300.0, 270e6, 300e6],
        Bus::UsbStorage => [800.0, 800.0, 100e6, 80e6],
        Bus::Nvme => [9000.0, 7800.0, 470e6, 650e6],
    }
}

/// The disks under test: name, bus, profile, size (0 = the boot SD card).
const DISKS: [(&str, Bus, &str, u64); 4] = [
    ("sd", Bus::Sd, "sd-a1", 0),
    ("flash", Bus::UsbStorage, "usb-flash", 4 << 30),
    ("ssd", Bus::UsbUas, "usb-ssd", 8 << 30),
    ("nvme", Bus::Nvme, "nvme", 8 << 30),
];

/// fio patterns: name, rw, block size, queue depth.
const TESTS: [(&str, &str, &str, u32); 4] = [
    ("randread", "randread", "4k", 16),
    ("randwrite", "randwrite", "4k", 16),
    ("read", "read", "1M", 4),
    ("write", "write", "1M", 4),
];

/// The job's shell functions: `dev_of SERIAL`, and `bench TAG TARGET
/// SIZE`, which runs the fio patterns of [`TESTS`] listed after it (a
/// here-document the script goes on with).
const BENCH: &str = r#"
dev_of() { lsblk -dno NAME,SERIAL | awk -v s="$1" '$2 == s { print "/dev/" $1 }'; }
bench() {
    local tag=$1 target=$2 size=$3 name rw bs qd
    [ -n "$target" ] || { echo "no device for $tag"; lsblk -o NAME,SERIAL,TRAN; exit 1; }
    while read -r name rw bs qd; do
        fio --name="$tag-$name" --filename="$target" --size="$size" --direct=1 \
            --ioengine=libaio --iodepth="$qd" --rw="$rw" --bs="$bs" \
            --ramp_time=1 --runtime=5 --time_based --randrepeat=0 \
            --output-format=json > "$TESTBED/out/fio-$tag-$name.json"
        echo "done $tag $name"
    done <<TESTS
"#;

fn guest_script() -> String {
    let mut s = String::from(BENCH);
    for (name, rw, bs, qd) in TESTS {
        let _ = writeln!(s, "{name} {rw} {bs} {qd}");
    }
    s.push_str("TESTS\n}\n");
    // The SD card holds the running root, so it is measured through a file
    // on it (O_DIRECT, laid out before timing); the others are blank, raw,
    // over their first 512 MiB: the throttles bound the rates, not the size,
    // and every byte written is a byte of the host's disk.
    s.push_str("bench sd /var/tmp/fio-sd.dat 32M\n");
    for (name, _, _, _) in &DISKS[1..] {
        let _ = writeln!(
            s,
            "bench {name} \"$(dev_of TB-{})\" 512M",
            name.to_uppercase()
        );
    }
    s.push_str("rm -f /var/tmp/fio-sd.dat\n");
    s
}

/// One measured figure from a fio JSON report.
fn measured(json: &str, write: bool, iops: bool) -> Result<f64> {
    let v: serde_json::Value = serde_json::from_str(json).context("fio output is not JSON")?;
    let side = &v["jobs"][0][if write { "write" } else { "read" }];
    let key = if iops { "iops" } else { "bw_bytes" };
    side[key]
        .as_f64()
        .with_context(|| format!("fio report lacks jobs[0].{key}"))
}

/// Checks one figure against its limit; returns a report line and whether
/// it passed. Never above the limit; at the limit when it binds.
fn judge(what: &str, got: f64, limit: Option<u64>, ceiling: f64) -> (String, bool) {
    let Some(limit) = limit.map(|l| l as f64) else {
        return (format!("{what}: {got:.0} (no limit)"), true);
    };
    let high = limit * (1.0 + TOLERANCE);
    let binding = limit <= ceiling / 2.0;
    let low = if binding {
        limit * (1.0 - TOLERANCE)
    } else {
        0.0
    };
    let ok = got > low && got <= high;
    let kind = if binding {
        "binding"
    } else {
        "above the emulation's ceiling"
    };
    let verdict = if ok { "ok" } else { "OUT OF RANGE" };
    (
        format!(
            "{what}: {got:.0}, limit {limit:.0} ({kind}), accepted {low:.0}..{high:.0}: {verdict}"
        ),
        ok,
    )
}

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "disk-speed",
    lane: Lane::Speed,
    run,
    about: r#"(c) fio on the SD card (through a file on root), USB flash (usb-storage), USB SSD (UAS) and NVMe, each throttled by its profile, judged as [disks.md](disks.md#what-the-emulation-can-deliver) describes"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let mut setup = Setup::new("disk-speed", &images.bookworm)
        .timed()
        .sd_profile(DISKS[0].2)
        .without_pimigrate();
    for &(name, bus, profile, size) in &DISKS[1..] {
        setup = setup.blank(name, bus, size, profile);
    }
    let Rig { mut pi, .. } = setup.build()?;
    let boot = pi.run(&guest_script(), After::PowerOff)?;
    boot.job_ok()?;

    let mut report = String::new();
    let mut bad = 0;
    let mut got_by = std::collections::BTreeMap::new();
    for (disk, bus, profile, _) in DISKS {
        let p = Profile::named(profile)?;
        let ceil = ceiling(bus);
        for (name, _, _, _) in TESTS {
            let file = pi.share().dir.join(format!("out/fio-{disk}-{name}.json"));
            let json = std::fs::read_to_string(&file)
                .with_context(|| format!("the guest left no {}", file.display()))?;
            let write = name.contains("write");
            let iops = name.starts_with("rand");
            let got = measured(&json, write, iops)?;
            let (limit, ceiling) = match (iops, write) {
                (true, false) => (p.iops_read, ceil[0]),
                (true, true) => (p.iops_write, ceil[1]),
                (false, false) => (p.bps_read, ceil[2]),
                (false, true) => (p.bps_write, ceil[3]),
            };
            got_by.insert((disk, name), got);
            let unit = if iops { "IOPS" } else { "B/s" };
            let (line, ok) = judge(
                &format!("{disk} ({profile}) {name} {unit}"),
                got,
                limit,
                ceiling,
            );
            bad += usize::from(!ok);
            let _ = writeln!(report, "{line}");
        }
    }
    // The flash drive's write limits bind; the SSD and NVMe, whose limits
    // are above what the emulation reaches, must then clearly beat it, or
    // the profiles went to the wrong disks.
    for fast in ["ssd", "nvme"] {
        for test in ["randwrite", "write"] {
            let (f, s) = (got_by[&("flash", test)], got_by[&(fast, test)]);
            let ok = s > 2.0 * f;
            bad += usize::from(!ok);
            let _ = writeln!(
                report,
                "{fast} {test} {s:.0} > 2 x flash {f:.0}: {}",
                if ok { "ok" } else { "NO" }
            );
        }
    }
    std::fs::write(pi.logs.join("speeds.txt"), &report)?;
    eprint!("{report}");
    if bad > 0 {
        bail!("{bad} figure(s) outside their profile's range:\n{report}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_accepts_near_the_limit_and_rejects_far() {
        // Binding: must be met.
        assert!(judge("x", 48.0, Some(50), 800.0).1);
        assert!(!judge("x", 20.0, Some(50), 800.0).1);
        assert!(!judge("x", 80.0, Some(50), 800.0).1);
        // Above the ceiling: only never exceeded.
        assert!(judge("x", 140.0, Some(1500), 140.0).1);
        assert!(!judge("x", 2000.0, Some(1500), 140.0).1);
        assert!(judge("x", 123.0, None, 140.0).1);
    }

    #[test]
    fn reads_fio_json() {
        let j =
            r#"{"jobs":[{"read":{"iops":10.5,"bw_bytes":42},"write":{"iops":2.0,"bw_bytes":7}}]}"#;
        assert_eq!(measured(j, false, true).unwrap(), 10.5);
        assert_eq!(measured(j, true, false).unwrap(), 7.0);
    }
}
