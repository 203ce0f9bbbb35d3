//! What a guest job reports: `key=value` lines of its output ([`facts`]),
//! the probe every boot scenario starts with ([`PROBE`]) and the disks as
//! the guest's lsblk lists them ([`guest_disks`]).

use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// `key=value` lines of a job's output (other lines are ignored).
pub fn facts(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Asserts that fact `key` equals `want`.
pub fn expect_fact(facts: &BTreeMap<String, String>, key: &str, want: &str) -> Result<()> {
    match facts.get(key) {
        Some(v) if v == want => Ok(()),
        Some(v) => bail!("guest reports {key}={v:?}, expected {want:?}"),
        None => bail!("guest did not report {key}; facts: {facts:?}"),
    }
}

/// The guest commands every boot scenario starts with: where / and the boot
/// partition come from, and the disks as lsblk sees them.
pub const PROBE: &str = r#"
echo "root=$(findmnt -no SOURCE /)"
echo "boot_firmware=$(findmnt -no SOURCE /boot/firmware || true)"
echo "boot=$(findmnt -no SOURCE /boot || true)"
echo "cmdline=$(cat /proc/cmdline)"
lsblk -J -d -e 7,11 -o NAME,TRAN,SIZE,SERIAL,TYPE > "$TESTBED/out/lsblk.json"
"#;

/// A disk as the guest's lsblk lists it.
#[derive(Debug, Clone)]
pub struct GuestDisk {
    pub name: String,
    pub tran: Option<String>,
    pub serial: Option<String>,
    pub size: String,
}

/// Parses the `lsblk.json` that [`PROBE`] leaves in the share.
pub fn guest_disks(share: &crate::Share) -> Result<Vec<GuestDisk>> {
    use anyhow::Context;
    let path = share.dir.join("out/lsblk.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let devices = v["blockdevices"]
        .as_array()
        .with_context(|| format!("{} has no blockdevices", path.display()))?;
    let s = |d: &serde_json::Value, k: &str| d[k].as_str().map(str::to_string);
    Ok(devices
        .iter()
        .map(|d| GuestDisk {
            name: s(d, "name").unwrap_or_default(),
            tran: s(d, "tran"),
            serial: s(d, "serial"),
            size: s(d, "size").unwrap_or_default(),
        })
        .collect())
}
