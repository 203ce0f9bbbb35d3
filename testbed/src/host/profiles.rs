//! Disk speed profiles: the data in `testbed/profiles.tsv`, turned into QEMU
//! drive throttling options. The table is compiled in so the library works
//! from any folder; add a row there to add a profile.

use anyhow::{bail, Context, Result};

const TABLE: &str = include_str!("../../profiles.tsv");

/// Throughput limits of one emulated disk. `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub iops_read: Option<u64>,
    pub iops_write: Option<u64>,
    /// Bytes per second.
    pub bps_read: Option<u64>,
    /// Bytes per second.
    pub bps_write: Option<u64>,
    pub description: String,
}

impl Profile {
    /// Looks a profile up by name in the built-in table.
    pub fn named(name: &str) -> Result<Profile> {
        all()?
            .into_iter()
            .find(|p| p.name == name)
            .with_context(|| format!("no disk profile {name:?}: add a row to testbed/profiles.tsv"))
    }

    /// The `-drive` suboptions that make QEMU enforce this profile on a disk
    /// whose emulation issues requests of `request_size` bytes at most.
    ///
    /// IOPS in the table mean 4 KiB operations, as fio and PI-FACTS.md count
    /// them. QEMU's SD card model reads and writes one 512-byte block per
    /// request, so there a 4 KiB operation is 8 requests and the limit is
    /// scaled to match; other buses pass whole requests (`request_size` 0).
    pub fn drive_options(&self, request_size: u64) -> String {
        let scale = |v: Option<u64>| match request_size {
            0 => v,
            n => v.map(|v| v * (4096 / n).max(1)),
        };
        let limits = [
            ("iops-read", scale(self.iops_read)),
            ("iops-write", scale(self.iops_write)),
            ("bps-read", self.bps_read),
            ("bps-write", self.bps_write),
        ];
        limits
            .iter()
            .filter_map(|(k, v)| v.map(|v| format!(",throttling.{k}={v}")))
            .collect()
    }
}

/// Every profile in the table, in table order.
pub fn all() -> Result<Vec<Profile>> {
    parse(TABLE).context("testbed/profiles.tsv is malformed")
}

fn parse(text: &str) -> Result<Vec<Profile>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 5 {
            bail!(
                "line {}: want name iops-read iops-write bps-read bps-write [description]",
                n + 1
            );
        }
        let num =
            |s: &str| parse_amount(s).with_context(|| format!("line {}: bad number {s:?}", n + 1));
        out.push(Profile {
            name: cols[0].to_string(),
            iops_read: num(cols[1])?,
            iops_write: num(cols[2])?,
            bps_read: num(cols[3])?,
            bps_write: num(cols[4])?,
            description: cols[5..].join(" "),
        });
    }
    Ok(out)
}

/// `-` is no limit; K/M/G are powers of 1000.
fn parse_amount(s: &str) -> Result<Option<u64>> {
    if s == "-" {
        return Ok(None);
    }
    let (digits, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1_000),
        Some('M') => (&s[..s.len() - 1], 1_000_000),
        Some('G') => (&s[..s.len() - 1], 1_000_000_000),
        _ => (s, 1),
    };
    Ok(Some(digits.parse::<u64>()? * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_the_required_profiles() {
        for name in ["sd-a1", "usb-flash", "usb-ssd", "nvme"] {
            Profile::named(name).unwrap();
        }
        let a1 = Profile::named("sd-a1").unwrap();
        assert_eq!(a1.iops_read, Some(1500));
        assert_eq!(a1.bps_write, Some(20_000_000));
    }

    #[test]
    fn options_skip_unlimited_columns() {
        let p = parse("x - 50 3M -").unwrap().remove(0);
        assert_eq!(
            p.drive_options(0),
            ",throttling.iops-write=50,throttling.bps-read=3000000"
        );
        // 512-byte requests (the SD card): 8 per 4 KiB operation.
        assert_eq!(
            p.drive_options(512),
            ",throttling.iops-write=400,throttling.bps-read=3000000"
        );
    }

    #[test]
    fn unknown_profile_is_an_error() {
        assert!(Profile::named("floppy").is_err());
    }
}
