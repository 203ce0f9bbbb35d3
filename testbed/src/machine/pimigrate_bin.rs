//! What the pimigrate scenarios share: the host-built binary placed in the
//! guest, and job snippets that find the target disk and read the journal.

use crate::machine::pi::target_dir;
use crate::Pi;
use anyhow::{ensure, Context, Result};

/// Puts pimigrate on the job's PATH: for the x86 guest the binary
/// `PI_TESTBED_PIMIGRATE` names (a build of another worktree, which
/// `scripts/bench-pi-copy.sh --worktree` measures) or else
/// `target/release/pimigrate`, and for a raspi machine the arm64 build that
/// `PI_TESTBED_ARM64_PIMIGRATE` names (run.sh builds it with
/// `scripts/build-deb.sh --arch arm64 --binary-only` and sets it).
pub fn place(pi: &Pi) -> Result<()> {
    if pi.config.board.is_raspi() {
        let bin = std::env::var_os("PI_TESTBED_ARM64_PIMIGRATE").context(
            "PI_TESTBED_ARM64_PIMIGRATE is not set: run the ARM lane's scenarios through \
             testbed/run.sh, which builds pimigrate for arm64",
        )?;
        let bin = std::path::PathBuf::from(bin);
        ensure!(
            bin.is_file(),
            "{} is missing: scripts/build-deb.sh --arch arm64 --binary-only builds it",
            bin.display()
        );
        pi.share().place_binary(&bin, "pimigrate")?;
        return Ok(());
    }
    let bin = match std::env::var_os("PI_TESTBED_PIMIGRATE") {
        Some(bin) => std::path::PathBuf::from(bin),
        None => target_dir().join("release/pimigrate"),
    };
    ensure!(
        bin.is_file(),
        "{} is missing: run `cargo build --release -p pimigrate` (testbed/run.sh does)",
        bin.display()
    );
    pi.share().place_binary(&bin, "pimigrate")?;
    Ok(())
}

/// A job snippet setting `$target` to the disk whose serial is `serial`.
pub fn find_disk(serial: &str) -> String {
    format!(
        r#"
target=/dev/$(lsblk -dno NAME,SERIAL | awk '$2 == "{serial}" {{ print $1 }}')
[ -b "$target" ] || {{ echo "no disk with serial {serial}"; lsblk; exit 1; }}
echo "target=$target"
"#
    )
}

/// A job snippet reporting the plan's ids from the journal (`plan_*` facts).
pub const JOURNAL_FACTS: &str = r#"
journal=/var/lib/pimigrate/migration.json
echo "plan_disk_id=$(jq -r .plan.table.disk_id "$journal")"
echo "plan_root_partuuid=$(jq -r '.plan.table.partitions[] | select(.role == "root") | .partuuid' "$journal")"
echo "plan_boot_partuuid=$(jq -r '[.plan.table.partitions[] | select(.role == "boot") | .partuuid][0] // ""' "$journal")"
echo "plan_copy_files=$(jq -r .plan.copy.files "$journal")"
echo "root_files=$(find / -xdev ! -type d | wc -l)"
"#;

/// A job snippet that fails unless every PARTUUID and filesystem UUID of
/// the attached disks is unique, and reports them (`ids=`).
pub const IDS_UNIQUE: &str = r#"
lsblk -J -e 7,11 -o NAME,PARTUUID,UUID > "$TESTBED/out/ids.json"
ids=$(jq -r '[.. | objects | (.partuuid, .uuid) | select(. != null)] | .[]' "$TESTBED/out/ids.json")
echo "ids=$(echo $ids)"
dups=$(echo "$ids" | sort | uniq -d)
[ -z "$dups" ] || { echo "duplicate ids across disks: $dups"; exit 1; }
"#;

/// Job snippet: `$sysroot`, the running system plus a trial boot's flag.
/// The guest is x86_64 and has no device tree, so the trial boot's
/// `chosen/bootloader/tryboot` reaches `verify` through `--sysroot`: a tree
/// whose every entry links to the running system's, plus the one
/// device-tree file the firmware would have made: the trial flag set,
/// unless the job set `tryboot_flag` to something other than 1 first.
pub const TRIAL_SYSROOT: &str = r#"
sysroot=/run/tb-sysroot
rm -rf "$sysroot"; mkdir -p "$sysroot/proc"
# One ln for all the links of a directory: under TCG every process costs
# tens of milliseconds, and /proc has some 150 entries (a ln each: 14.5 s
# of every boot's job; one ln: 0.7 s).
top=(); for d in /*; do [ "$d" = /proc ] || top+=("$d"); done
ln -s "${top[@]}" "$sysroot/"
ln -s /proc/* "$sysroot/proc/"
mkdir -p "$sysroot/proc/device-tree/chosen/bootloader"
case "${tryboot_flag:-1}" in
    1) printf '\000\000\000\001' ;;
    *) printf '\000\000\000\000' ;;
esac > "$sysroot/proc/device-tree/chosen/bootloader/tryboot"
"#;

/// Job snippet: the PARTUUID of the partition mounted at /.
pub const ROOT_PARTUUID: &str = r#"
echo "root_partuuid=$(lsblk -no PARTUUID "$(findmnt -no SOURCE /)")"
"#;

/// `recommend --json` picked the SSD at `ssd` and ranked the flash drive at
/// `flash` as not worth it, slower than the SD card at random writes;
/// returns the flash drive's ranking entry.
pub fn check_ssd_over_flash<'a>(
    doc: &'a serde_json::Value,
    ssd: &str,
    flash: &str,
) -> Result<&'a serde_json::Value> {
    let pick = doc["pick"]["path"].as_str();
    // With the SSD's own figures and gain: a pick that fails on a gain
    // near the threshold reads differently from one that fails on a bug.
    let ssd_entry = doc["ranking"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["path"].as_str() == Some(ssd)));
    ensure!(
        pick == Some(ssd),
        "recommend picked {pick:?}, expected the SSD {ssd}; reasons: {}; the SSD's gain: {}, \
         figures: {}",
        doc["reasons"],
        ssd_entry.map_or(serde_json::Value::Null, |e| e["gain"].clone()),
        ssd_entry.map_or(serde_json::Value::Null, |e| e["figures"].clone())
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
        entry["worth_it"] == serde_json::Value::Bool(false),
        "the flash drive is rated worth it: {}",
        entry["verdict"]
    );
    Ok(entry)
}
