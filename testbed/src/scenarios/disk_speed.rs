//! Scenario (c): each throttled disk runs at its profile's speed, measured
//! in the guest with fio. This is the ground truth later benchmark tests
//! compare against: if the emulation does not deliver the table's figures,
//! nothing measured on top of it means anything.

use crate::profiles::Profile;
use crate::{After, Bus, ImageSet, Pi};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;

/// Measured may sit this far below a limit (fio's ramp, TCG jitter) and
/// this far above it (QEMU's throttling bursts).
const BELOW: f64 = 0.25;
const ABOVE: f64 = 0.15;

/// What the guest can reach under TCG on a 2-core host, however fast the
/// disk: limits above these cannot be confirmed, only the ceiling itself
/// (measured with unthrottled disks; see docs/testbed.md).
const CEILING_IOPS: f64 = 1_800.0;
const CEILING_BPS: f64 = 250e6;

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

fn guest_script() -> String {
    let mut s = String::from(
        r#"
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
"#,
    );
    for (name, rw, bs, qd) in TESTS {
        let _ = writeln!(s, "{name} {rw} {bs} {qd}");
    }
    s.push_str("TESTS\n}\n");
    // The SD card holds the running root, so it is measured through a file
    // on it (O_DIRECT, laid out before timing); the others are blank, raw.
    s.push_str("bench sd /var/tmp/fio-sd.dat 128M\n");
    for (name, _, _, _) in &DISKS[1..] {
        let _ = writeln!(
            s,
            "bench {name} \"$(dev_of TB-{})\" 2G",
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

/// Checks one figure against its limit; returns a line for the report and
/// whether it passed.
fn judge(what: &str, got: f64, limit: Option<u64>, ceiling: f64) -> (String, bool) {
    let Some(limit) = limit.map(|l| l as f64) else {
        return (format!("{what}: {got:.0} (no limit)"), true);
    };
    let low = limit.min(ceiling) * (1.0 - BELOW);
    let high = limit * (1.0 + ABOVE);
    let ok = got >= low && got <= high;
    let verdict = if ok { "ok" } else { "OUT OF RANGE" };
    (
        format!("{what}: {got:.0}, limit {limit:.0}, accepted {low:.0}..{high:.0}: {verdict}"),
        ok,
    )
}

pub fn run(images: &ImageSet) -> Result<()> {
    let mut pi = Pi::new("disk-speed")?;
    pi.insert_sd_copy(&images.bookworm, "sd-a1")?;
    for (name, bus, profile, size) in &DISKS[1..] {
        pi.attach_blank(name, *bus, *size, profile)?;
    }
    let boot = pi.run(&guest_script(), After::PowerOff)?;
    boot.job_ok()?;

    let mut report = String::new();
    let mut bad = 0;
    for (disk, _, profile, _) in DISKS {
        let p = Profile::named(profile)?;
        for (name, _, _, _) in TESTS {
            let file = pi.share().dir.join(format!("out/fio-{disk}-{name}.json"));
            let json = std::fs::read_to_string(&file)
                .with_context(|| format!("the guest left no {}", file.display()))?;
            let write = name.contains("write");
            let iops = name.starts_with("rand");
            let got = measured(&json, write, iops)?;
            let (limit, ceiling) = match (iops, write) {
                (true, false) => (p.iops_read, CEILING_IOPS),
                (true, true) => (p.iops_write, CEILING_IOPS),
                (false, false) => (p.bps_read, CEILING_BPS),
                (false, true) => (p.bps_write, CEILING_BPS),
            };
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
        assert!(judge("x", 1450.0, Some(1500), CEILING_IOPS).1);
        assert!(!judge("x", 900.0, Some(1500), CEILING_IOPS).1);
        assert!(!judge("x", 2000.0, Some(1500), CEILING_IOPS).1);
        assert!(judge("x", 123.0, None, CEILING_IOPS).1);
    }

    #[test]
    fn reads_fio_json() {
        let j =
            r#"{"jobs":[{"read":{"iops":10.5,"bw_bytes":42},"write":{"iops":2.0,"bw_bytes":7}}]}"#;
        assert_eq!(measured(j, false, true).unwrap(), 10.5);
        assert_eq!(measured(j, true, false).unwrap(), 7.0);
    }
}
