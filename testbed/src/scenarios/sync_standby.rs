//! `pimigrate sync` as its users need it: after a full move the SD card is
//! the standby, kept in sync from the SSD, and it boots, with the changes
//! and its own ids, when the SSD is gone. Three boots:
//!
//! 1. On the SD card: `migrate --layout full --table mbr` to the USB SSD,
//!    then a full sync of the same root to a blank NVMe drive (`sync --target
//!    --erase`). (How fast those copies are is `scripts/bench-pi-copy.sh`'s
//!    to measure, against rsync, not this test's.)
//! 2. On the SSD (BOOT_ORDER USB first, the SD card still in): files
//!    changed, added, deleted, hard-linked, given an xattr, a mode changed
//!    alone; `pimigrate sync --yes` finds the SD card by the journal,
//!    copies, keeps its ids, and says it would boot; a second sync killed
//!    at its 20th file leaves it `syncing`, which `devices` reports as
//!    incomplete; the next sync completes it. From the host: the card's
//!    cmdline.txt names its own root, no trial or EEPROM update file there.
//! 3. The SSD gone: the firmware boots the SD card, root is its own
//!    partition 2 with its own PARTUUID, every change is there, and
//!    `devices` says the system runs from its standby copy.

use super::{Lane, Scenario};
use crate::host::fat;
use crate::machine::pimigrate_bin::{self, IDS_UNIQUE, ROOT_PARTUUID};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Bus, ImageSet};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;

/// The SD card's own root PARTUUID (the bookworm image's disk signature).
const SD_ROOT: &str = "6c586e13-02";

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "sync-standby",
    lane: Lane::Shared,
    run,
    about: r#"`pimigrate sync` ([sync.md](../sync.md)) on the SD card (`sd-unthrottled`), a blank USB SSD and a blank NVMe drive. Boot 1 on the SD card: `migrate --layout full --table mbr` to the SSD exits 0, then `sync --target <nvme> --erase --layout root-only` (a full sync) exits 0 and says the copy would boot (how fast those copies are is the benchmark `pi-copy-bench`'s to measure, [benchmarks](README.md#benchmarks)). Boot 2, NVMe detached, `BOOT_ORDER=0xf14` so the SSD boots with the card still in: a file appended to, one added, one deleted, a hard link, an xattr, a mode alone changed on the running root; `pimigrate sync --yes` finds the card by the journal (layout `full`), says it would boot; 60 new files, a sync killed at its 20th (`PIMIGRATE_FAILPOINT=copy-file@20`, exit 137) leaves `devices --json`'s `standby.state` `syncing` and `devices` saying incomplete; the next sync completes it and `devices` says `standby on /dev/mmcblk0: synced ..., bootable`; from the host (mtools) the card's `cmdline.txt` names its own `PARTUUID=6c586e13-02` and it has no `tryboot.txt`, `pieeprom.upd` or `cmdline.pimigrate.txt`. Boot 3, the SSD gone: the firmware boots the card, root `mmcblk0p2` with PARTUUID `6c586e13-02`, `/boot/firmware` `mmcblk0p1`, every change is there (contents, the hard link's shared inode, the xattr, mode 600, the deletion, the 60 files), and `devices` says it runs from its standby copy"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
        ..
    } = Setup::new("sync-standby", &images.bookworm)
        .usb_ssd()
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .build()?;

    migrate_and_sync_fresh(&mut pi)?;

    pi.detach("nvme")?;
    pi.bootloader_mut()?.set_config("[all]\nBOOT_ORDER=0xf14\n");
    sync_from_the_ssd(&mut pi)?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?
        .context("the SD card's boot partition has no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={SD_ROOT} ")),
        "the standby's cmdline.txt does not name its own root {SD_ROOT}: {cmdline:?}"
    );
    for name in ["tryboot.txt", "pieeprom.upd", "cmdline.pimigrate.txt"] {
        ensure!(
            fat::read(&sd, &sd_boot, name)?.is_none(),
            "the standby's boot partition has {name}"
        );
    }

    pi.detach("ssd")?;
    boot_the_standby(&mut pi)
}

/// Boot 1: the migration, a full sync.
fn migrate_and_sync_fresh(pi: &mut crate::Pi) -> Result<()> {
    let job = format!(
        r#"{PROBE}{ssd}
ssd=$target
{nvme}
nvme=$target
pimigrate migrate --target "$ssd" --yes --layout full --table mbr > "$TESTBED/out/migrate.txt" 2>&1 && st=0 || st=$?
echo "migrate_status=$st"
pimigrate --json sync --target "$nvme" --erase --yes --layout root-only > "$TESTBED/out/sync-full.json" 2> "$TESTBED/out/sync-full.err" && st=0 || st=$?
echo "full_sync_status=$st"
echo "full_sync_bootable=$(jq .bootable "$TESTBED/out/sync-full.json")"
"#,
        ssd = pimigrate_bin::find_disk("TB-SSD"),
        nvme = pimigrate_bin::find_disk("TB-NVME"),
    );
    let boot = pi.run(&job, After::PowerOff)?;
    let out = boot.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "migrate_status", "0").with_context(|| out.stdout.clone())?;
    expect_fact(&f, "full_sync_status", "0").with_context(|| out.stdout.clone())?;
    expect_fact(&f, "full_sync_bootable", "true")?;
    Ok(())
}

/// Boot 2's job, between where it came up and the ids: changes on the
/// running root, a sync, a sync killed midway, the sync that completes it,
/// a sync cut in the boot tree and the one after it, then the timer's
/// service run by systemd.
const CHANGE_AND_SYNC: &str = r#"
set -u
t=/srv/sync-test
mkdir -p "$t/dir"
echo "changed by the testbed" >> /etc/motd
printf 'a new file\n' > "$t/new.txt"
ln "$t/new.txt" "$t/dir/hard-link.txt"
printf 'same bytes\n' > "$t/xattr.txt"
setfattr -n user.pimigrate -v standby "$t/xattr.txt"
chmod 0600 /etc/debian_version
rm -f /etc/issue.net
# The full move itself, before any sync: the SSD runs the system.
pimigrate verify --no-bench > "$TESTBED/out/verify.txt" 2>&1 && st=0 || st=$?
echo "verify_status=$st"
pimigrate --json sync --yes > "$TESTBED/out/sync-1.json" 2> "$TESTBED/out/sync-1.err" && st=0 || st=$?
echo "sync1_status=$st"
echo "sync1_found_by=$(jq -r .plan.standby.found_by "$TESTBED/out/sync-1.json")"
echo "sync1_layout=$(jq -r .plan.standby.layout "$TESTBED/out/sync-1.json")"
echo "sync1_bootable=$(jq -r .bootable "$TESTBED/out/sync-1.json")"
for i in $(seq 1 60); do head -c 65536 /dev/urandom > "$t/bulk-$i"; done
# The job stops at a command that fails: the status is kept instead.
PIMIGRATE_FAILPOINT=copy-file@20 pimigrate sync --yes > /dev/null 2>&1 && st=0 || st=$?
echo "killed_status=$st"
echo "after_kill=$(pimigrate --json devices | jq -r .standby.state)"
pimigrate devices | grep -i standby > "$TESTBED/out/devices-after-kill.txt" || true
pimigrate --json sync --yes > "$TESTBED/out/sync-2.json" 2> "$TESTBED/out/sync-2.err" && st=0 || st=$?
echo "sync2_status=$st"
echo "sync2_bootable=$(jq -r .bootable "$TESTBED/out/sync-2.json")"
echo "after_sync=$(pimigrate --json devices | jq -r .standby.state)"
echo "standby_line=$(pimigrate devices | grep 'standby on')"
echo "new_sum=$(sha256sum < "$t/new.txt" | cut -c1-16)"
# A boot file changed, and a sync cut in the standby's boot tree, just
# after a file was renamed into place: the card's own cmdline.txt still
# names the card's root (the copy leaves it out, the sync writes it).
echo '# changed by the testbed' >> /boot/firmware/config.txt
PIMIGRATE_FAILPOINT=boot-tree-after-rename pimigrate sync --yes > /dev/null 2>&1 && st=0 || st=$?
echo "boot_cut_status=$st"
# Read where the killed run left it mounted (a second, read-only mount of
# a filesystem mounted read-write is refused), else mounted here.
m=$(awk '$1 == "/dev/mmcblk0p1" {print $2; exit}' /proc/mounts)
[ -n "$m" ] || { m=$(mktemp -d); mount -o ro /dev/mmcblk0p1 "$m"; }
echo "boot_cut_root=$(grep -o 'root=[^ ]*' "$m/cmdline.txt")"
pimigrate --json sync --yes > "$TESTBED/out/sync-3.json" 2> "$TESTBED/out/sync-3.err" && st=0 || st=$?
echo "sync3_status=$st"
# The timer's service, hardened as the package ships it, run by systemd.
echo "a change for the timer's run" > "$t/timer.txt"
pimigrate sync --install-timer daily > "$TESTBED/out/timer.txt" 2>&1 && st=0 || st=$?
echo "timer_status=$st"
systemctl start pimigrate-sync.service && st=0 || st=$?
echo "service_status=$st"
echo "service_result=$(systemctl show -p Result --value pimigrate-sync.service)"
journalctl -u pimigrate-sync.service --no-pager > "$TESTBED/out/service.log" 2>&1 || true
echo "after_service=$(pimigrate --json devices | jq -r .standby.state)"
"#;

/// Boot 2: changes on the running root, a sync, a sync killed midway, the
/// sync that completes it.
fn sync_from_the_ssd(pi: &mut crate::Pi) -> Result<()> {
    let job = format!("{PROBE}{ROOT_PARTUUID}{CHANGE_AND_SYNC}{IDS_UNIQUE}\n");
    let boot = pi.run(&job, After::PowerOff)?;
    ensure!(
        boot.spec.disk == "ssd",
        "BOOT_ORDER 0xf14 should boot the SSD: {:?}",
        boot.spec
    );
    let out = boot.job_ok()?;
    let f = facts(&out.stdout);
    the_syncs_completed(pi, &f, &out.stdout)?;
    the_timers_service_ran(pi, &f, &out.stdout)?;
    ensure!(
        fact(&f, "root_partuuid")? != SD_ROOT,
        "the SSD's root carries the SD card's PARTUUID"
    );
    Ok(())
}

/// What boot 2's syncs said: the first found the card by the journal and
/// would boot; the killed one left the standby `syncing`, the next
/// completed it; the one cut in the boot tree left the card's own
/// cmdline.txt, and the next completed that.
fn the_syncs_completed(pi: &crate::Pi, f: &BTreeMap<String, String>, stdout: &str) -> Result<()> {
    let say = || stdout.to_string();
    expect_fact(f, "verify_status", "0").with_context(|| {
        std::fs::read_to_string(pi.share().dir.join("out/verify.txt")).unwrap_or_default()
    })?;
    expect_fact(f, "sync1_status", "0").with_context(say)?;
    expect_fact(f, "sync1_found_by", "journal")?;
    expect_fact(f, "sync1_layout", "full")?;
    expect_fact(f, "sync1_bootable", "true")?;
    expect_fact(f, "killed_status", "137").with_context(say)?;
    expect_fact(f, "after_kill", "syncing")?;
    let devices = std::fs::read_to_string(pi.share().dir.join("out/devices-after-kill.txt"))
        .unwrap_or_default();
    ensure!(
        devices.contains("incomplete"),
        "devices after the killed sync: {devices:?}"
    );
    expect_fact(f, "sync2_status", "0").with_context(|| {
        let out = pi.share().dir.join("out");
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
        format!("{}{}", read("sync-2.json"), read("sync-2.err"))
    })?;
    expect_fact(f, "sync2_bootable", "true")?;
    expect_fact(f, "after_sync", "complete")?;
    let line = fact(f, "standby_line")?;
    ensure!(
        line.contains("/dev/mmcblk0: synced") && line.ends_with("bootable"),
        "devices says: {line:?}"
    );
    expect_fact(f, "boot_cut_status", "137").with_context(say)?;
    expect_fact(f, "boot_cut_root", &format!("root=PARTUUID={SD_ROOT}"))?;
    expect_fact(f, "sync3_status", "0").with_context(say)?;
    Ok(())
}

/// Boot 2's timer: installed, its service run by systemd, hardened as the
/// package ships it, completed the standby.
fn the_timers_service_ran(
    pi: &crate::Pi,
    f: &BTreeMap<String, String>,
    stdout: &str,
) -> Result<()> {
    let say = || stdout.to_string();
    let service_log =
        || std::fs::read_to_string(pi.share().dir.join("out/service.log")).unwrap_or_default();
    expect_fact(f, "timer_status", "0").with_context(say)?;
    expect_fact(f, "service_status", "0").with_context(service_log)?;
    expect_fact(f, "service_result", "success").with_context(service_log)?;
    expect_fact(f, "after_service", "complete").with_context(service_log)?;
    Ok(())
}

/// Boot 3: the SSD gone, the standby boots as the owner would boot it.
fn boot_the_standby(pi: &mut crate::Pi) -> Result<()> {
    let job = format!(
        r#"{PROBE}{ROOT_PARTUUID}
t=/srv/sync-test
echo "new=$(cat "$t/new.txt")"
echo "hard_linked=$([ "$(stat -c %i "$t/new.txt")" = "$(stat -c %i "$t/dir/hard-link.txt")" ] && echo yes || echo no)"
echo "xattr=$(getfattr --only-values -n user.pimigrate "$t/xattr.txt")"
echo "mode=$(stat -c %a /etc/debian_version)"
echo "deleted=$([ -e /etc/issue.net ] && echo no || echo yes)"
echo "motd=$(tail -1 /etc/motd)"
echo "bulk=$(ls "$t" | grep -c '^bulk-')"
echo "timer_file=$(cat "$t/timer.txt")"
echo "running_from_standby=$(pimigrate --json devices | jq -r .standby.running_from_standby)"
"#
    );
    let boot = pi.run(&job, After::PowerOff)?;
    ensure!(
        boot.spec.disk == "sd",
        "with the SSD gone the SD card should boot: {:?}",
        boot.spec
    );
    let out = boot.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    expect_fact(&f, "root_partuuid", SD_ROOT)?;
    expect_fact(&f, "new", "a new file")?;
    expect_fact(&f, "hard_linked", "yes")?;
    expect_fact(&f, "xattr", "standby")?;
    expect_fact(&f, "mode", "600")?;
    expect_fact(&f, "deleted", "yes")?;
    expect_fact(&f, "motd", "changed by the testbed")?;
    expect_fact(&f, "bulk", "60")?;
    expect_fact(&f, "timer_file", "a change for the timer's run")?;
    expect_fact(&f, "running_from_standby", "true")?;
    Ok(())
}
