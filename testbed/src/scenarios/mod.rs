//! Scenarios: whole-machine tests, each a function that builds a [`Pi`],
//! boots it, and asserts on what the guest reports and on the disk images.
//! Add one by writing a module and listing it in [`all`].
//!
//! [`Pi`]: crate::Pi

use crate::image::ImageSet;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

mod ansible;
mod ansible_rollback;
mod boot_sd;
mod copy_debian_root;
mod disk_speed;
mod fleet;
mod full_move;
mod migrate_trial;
mod pi_copy_bench;
mod pimigrate_bin;
mod power_cut;
mod profilers;
mod raspi;
mod recommend;
mod reference_migration;
mod setup;
mod sync_standby;
mod unattended;
mod unplug_mid_copy;
mod usb_boot;
mod wizard_pty;
mod wizard_story;

/// A named scenario.
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&ImageSet) -> Result<()>,
    /// Measures speed (benchmarks decide what it asserts), so it runs
    /// with no other scenario beside it; its set-up says
    /// [`setup::Setup::timed`] too, for the disks' calibrated I/O engine.
    pub alone: bool,
    /// Runs on the ARM lane's Raspberry Pi 3 (QEMU's raspi3b, the arm64
    /// image and pimigrate built for arm64) instead of the x86 guest.
    pub arm: bool,
}

/// Every scenario, in the order the suite starts them: of those that time
/// nothing the longest first (about 11 minutes down to seconds beside the
/// builds on this 2-core machine), so that the lane's two at a time end
/// together;
/// then the speed scenarios, which run alone.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "pi3-root-only",
            about: r#"ARM lane, `raspi3b`, a blank 4 GiB USB disk behind dwc2. Boot 1, before the move: the console says `Machine model: Raspberry Pi 3 Model B`, root is `mmcblk0p2`, and the arm64 `pimigrate devices --json` names the model, family `pi3`, section `pi3`, boots SD `yes`, USB `needs-otp`, NVMe `no`, no EEPROM bootloader or tryboot; `mmcblk0` (transport `mmc`) is `source-root` on controller `sdhost-bcm2835`; `sda` (serial `TB-USB`, transport `usb`, driver `usb-storage`) is a `candidate` on controller `dwc2`. Then `pimigrate migrate --no-trial` (root only: the boot files stay on the SD card, as a Pi 3 without the OTP bit needs), its power cut while held at `source-boot-written` (the swap flushed through the Pi's sdhost SD controller, the journal not told); judged as the power-cut scenarios judge a cut, and the SD card's `cmdline.txt` must be the original with the plan's PARTUUID as `root=`. Boot 2: root is `sda1` (the USB root, as cmdline.txt says), `migrate --resume --yes` exits 0, `/boot/firmware` `mmcblk0p1`, fstab names the plan's PARTUUID, every id unique, `pimigrate verify --no-bench` exits 0 with nothing but the running system; then what a kernel upgrade runs, `/etc/kernel/postinst.d` with the kernel's version (`DEB_MAINT_PARAMS=configure`, as linux-image's postinst): initramfs-tools rebuilds the initrd and raspi-firmware rewrites `config.txt` and `cmdline.txt`, which still names the USB root (from the new root's `ROOTPART`). Boot 3 from those files: root still `sda1`; `pimigrate rollback --yes`. Boot 4: root `mmcblk0p2`, and every file of the SD card's boot partition is byte-identical to the pristine card's but the initrd, which the kernel hooks rebuilt"#,
            run: raspi::pi3_root_only,
            alone: false,
            arm: true,
        },
        Scenario {
            name: "pi4-trial",
            about: r#"ARM lane, QEMU 10's `raspi4b` (device tree fitted, `src/raspi4b.rs`), a blank USB disk behind dwc2, the unattended matrix's ARM case. Boot 1: `pimigrate migrate --trial always --auto-commit`: `cmdline.txt` unchanged, `tryboot.txt` written; an fstab line that fails put on the new root; the agent reboots with `"0 tryboot"`. Boot 2 reads `tryboot.txt` (the console says `Machine model: Raspberry Pi 4 Model B`), its systemd stops in emergency mode, records why (on the SD card's root too) and reboots by itself; boot 3, the SD card's system: `status` says `trial-failed`, the record names `mnt-tbbroken.mount`; mended, `"0 tryboot"` again. Boot 4, the trial: the guest reads the flag in /proc/device-tree as `0 0 0 1`, boot mode `0 0 0 1` (the SD card's firmware), root `sda1` with the plan's PARTUUID; then the trial checks and commits itself and says so on the console, and a transient unit the job started (`systemd-run`: the agent's own processes end with it) powers the Pi off once the check has run, so the disks hold ext4's journal applied: `cmdline.txt` names the USB root without the trial's words, `tryboot.txt` is gone, and both roots hold the record `committed`"#,
            run: raspi::pi4_trial,
            alone: false,
            arm: true,
        },
        Scenario {
            name: "unattended-root-only",
            about: r#"[the failure matrix](#unattended), root-only: a root-only move to a blank USB SSD, `migrate --trial always --auto-commit --table mbr`, run in a terminal that hangs up 3 s into the copy (`script` gives it a pty with an interactive bash as the session leader, as an SSH login has; the job kills `script`, which closes the pty's master): the migration finishes by itself, its log ends with `done` and has no panic. Then six trials, each failing in its own way, chained on the same disks; after each the harness only boots what the firmware starts until the SD card's system runs its job, which reports `pimigrate status --json` and the trial's record, mends the failure and breaks the next thing: the new root's init broken (systemd an empty file: the kernel panics "Attempted to kill init", resets after `panic=10`; no record: `trial-did-not-come-up`); its kernel modules moved away (vfat for /boot/firmware cannot load: emergency mode, the record names `boot-firmware.mount`); an fstab line that fails (a bind mount of nothing: emergency mode, `mnt-tbbroken.mount`); a clone of the new drive plugged in for the trial (a 64 MiB stick with the SSD's MBR: the trial's check fails `ids-unique`, records it and reboots); a power cut as the trial's systemd starts (no record); the SSD gone (the initramfs gives up after 30 s, panics, `panic=` resets; the login message says the drive is not attached). Last, on the SD card: `verify` exits 5, `rollback`, and the card's boot partition is file for file what it was before"#,
            run: unattended::root_only,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "unattended-full",
            about: r#"[the failure matrix](#unattended), full move, the x86 guest as a Pi 4 with Raspberry Pi OS's tools, its bootloader the release but built 2023-11-14 (`set_build_timestamp`): `plan --layout full --trial device --boot-order apply --auto-commit` is refused (`device-trial-unavailable`), and `rpi-eeprom-update -a`, what the refusal advises, stages the update; the power is cut while recovery.bin writes it (`Pi::power_cut_in_recovery`: nothing written, the files stay); at the next power-on recovery.bin writes it and the SD card's system migrates (`--trial device --auto-commit`), which stages the `[tryboot]` order for the reboot after; the new drive's boot partition loses `start4.elf` and the trial starts: the bootloader passes over the SSD and starts the SD card (`trial-did-not-come-up`); mended, the SSD unplugged for the next trial: the same; `verify` exits 5 and `rollback` there"#,
            run: unattended::full,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "power-cut-migrate",
            about: r#"a root-only move to a blank USB SSD (`migrate --no-trial --table mbr`, found by serial `TB-SSD`) whose power is cut ten times on one set of disks (`pi_testbed::power`, [internals/migrate.md](../internals/migrate.md#power-cuts)): held at `after-table`, `after-mkfs`, `copy-file@2000`, `after-target-edits`, `boot-backup-after-rename` (the target's edits and the journal's copy there done and journaled in the same resume), `boot-after-temp`, `boot-after-rename` and `source-boot-written` (`PIMIGRATE_FAILPOINT=name:stop`), and twice at a random moment within 8 s of the copy's start (the first copy and the one resumed after `copy-file@2000`); after each cut, from the host: `fsck.fat -n` of the SD card's boot partition and `e2fsck -fn` of its root (the journal replayed first) find nothing, every backup the journal names is whole, `cmdline.txt` and the journal agree on the root that must boot; each next boot comes up there and `migrate --resume --yes` carries on to the next cut: the SD root until the swap is flushed, the SSD after `source-boot-written` (the swap flushed, the journal not told). Then, from the host with the machine off: `rsync -naHAXc --numeric-ids` of the SD root and the SSD's root lists nothing but what a running system rewrites (`RUNTIME_FILES` in `src/power.rs`) and what the plan left out, the SSD's MBR signature is the plan's, the SD card's `cmdline.txt` names the new root and its `.pimigrate-backup` is the pristine one, the SSD's fstab names it. On the SSD's root: `/boot/firmware` still `mmcblk0p1`, `/proc/cmdline` and fstab name the plan's PARTUUID, ids unique, `migrate --resume --yes` exits 0 and the journal then holds `source-boot-edited`, the plan counted at least 90 % of the files `find / -xdev` sees on the copy, `verify --no-bench` exits 0, `rollback --yes` exits 0; the next boot: root `mmcblk0p2`, `cmdline.txt` byte-identical to the pristine card's. Every boot file of every cut is the original or the migrated version; it prints `power cuts: 10 cut, 10 booted, 10 resumed, 0 repaired by fsck`"#,
            run: power_cut::migrate,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "power-cut-trial",
            about: r#"the SD card's config.txt laid out as Ubuntu 20.04's (`cmdline=` then `include syscfg.txt`, which sets it again; the stand-in follows `include`); `pimigrate migrate --table gpt --trial always` to NVMe, its power cut while held at `boot-after-rename@2` (tryboot.txt renamed into place, not flushed): the SD root boots and `migrate --resume --yes` finishes; `cmdline.txt` unchanged, `tryboot.txt` ends with `[all]` + `cmdline=cmdline.pimigrate.txt` after the includes, `syscfg.txt` unchanged, the agent reboots with `"0 tryboot"`; the trial boot reads `tryboot.txt` and comes up on `nvme0n1p1` (the plan's partition GUID); `pimigrate verify --commit --no-bench` loses its power held at `commit-after-swap`; the SD card's `cmdline.txt` must then start the NVMe root, and the next normal boot (`config.txt`) comes up there, where `verify --commit` finishes the commit and `verify` passes; `tryboot.txt` and `cmdline.pimigrate.txt` are gone and `cmdline.txt` names the NVMe root; each cut judged as in `power-cut-migrate`, `power cuts: 2 cut, 2 booted, 2 resumed, 0 repaired by fsck`"#,
            run: migrate_trial::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "pi4-full-trial",
            about: r#"the full move on a Pi 4: the x86 guest plays a Pi 4 whose bootloader is the 2026-05-17 release with its own config (no BOOT_ORDER: SD, then USB), with Raspberry Pi OS's tools (`Pi::raspberry_pi_os_tools`), every pimigrate command through `tb-as-pi`. Boot 1: `migrate --layout full --table mbr --boot-order apply`; the journal keeps the old config; the real rpi-eeprom-update staged `pieeprom.upd`, `pieeprom.sig` and `recovery.bin` on the SD card, whose `cmdline.txt` is unchanged; the SSD has `tryboot.txt` ending `cmdline=cmdline.pimigrate.txt` and that command line with the SSD's root and `panic=10`; its `cmdline.txt` has no `panic=`; then `migrate --resume --reboot` (`After::Then`) reboots plainly, as the update waits. Boot 2 from the SD card: recovery.bin wrote the config (`RECOVERY.000`; BOOT_ORDER `0xf41`, `[tryboot]` `0xf14`; `vcgencmd bootloader_config` in the guest shows it); `verify` exits 4 naming `migrate --resume --reboot`, which reboots with `"0 tryboot"`. Boot 3, the trial: the stand-in starts the SSD's `tryboot.txt`; `verify --commit` passes `boot-mode` (USB), `bootloader-config`, `trial-boot`, `ids-unique`, stages the permanent order on the SD card (mounted for it) and removes the SSD's trial files. Boot 4: recovery.bin writes `BOOT_ORDER=0xf14`; the SSD boots normally with the card in, `verify` passes; `rollback --yes` stages the old config. Boot 5: the SD card boots; the bootloader's config is the release one again, and the card's boot partition is as before but for the update files (`pieeprom.upd`, `pieeprom.sig`, `RECOVERY.000`)"#,
            run: full_move::pi4,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "pi5-nvme-trial",
            about: r#"the full move on a Pi 5: the x86 guest plays a Pi 5 (`Pi::play(Model::Pi5)`, the 2026-05-26 release, BOOT_ORDER `0xf461`, no HAT+) with Raspberry Pi OS's tools, a blank NVMe drive. Boot 1: `migrate --layout full --table mbr --boot-order apply`: `PCIE_PROBE=1` flashed at once (flashrom), nothing staged on the SD card; `migrate --resume --reboot` sets the one-shot order `0xf16` and reboots with `"0 tryboot"`. Boot 2, the trial, on NVMe: `verify --commit` passes `boot-mode` (NVMe) and `bootloader-config` and flashes `BOOT_ORDER=0xf416` (rpi-eeprom-update's files on the SD card, mounted for it); boot 3, a normal boot, comes up on NVMe with the card in, `verify` passes, and `rollback --yes` flashes the settings the migration changed back (compared with the EEPROM read back with flashrom): the bootloader's config is the release one again, and the NVMe drive's boot partition never held an update file (trials that fail: [the failure matrix](#unattended))"#,
            run: full_move::pi5,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "ansible-rollback",
            about: r#"the playbook's rescue (step 8 of [fleet.md](../fleet.md)) for a real failure: the disks of `ansible` and a 64 MiB USB stick, too small to be a candidate. The job of the trial boot only writes a partition table with the NVMe drive's MBR disk id to the stick (a clone of the new disk plugged in), so `verify --commit` fails `ids-unique`. The run must end `failed=1 rescued=1` with the rescue's own report and the duplicate PARTUUID in its output; the journal is retired (`migration.rolled-back.json`), the stick really holds the new root's PARTUUID, root is `/dev/mmcblk0p2`; boots: normal, one trial (`tryboot.txt`), normal; after the power-off the SD card's boot partition is file for file what it was before (`cmdline.txt` unchanged, `tryboot.txt` and the trial `cmdline` file gone)"#,
            run: ansible_rollback::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "ansible",
            about: r#"`examples/ansible/pimigrate.yml` run by `ansible-playbook` on the host over SSH (a key made per run, installed by the job; the guest's port 22 forwarded to a free loopback port), the SD card (`sd-unthrottled`) and a blank NVMe drive (the pick beyond doubt on a loaded host, `fleet::setup`), twice, with `pimigrate_bench_args: [--size, 32M, --runtime, 0.5]` (a fleet with slow cards needs the small file: laying out the quick suite's took an emulated class 10 card most of a run; the short tests suffice for a drive ten times the card). Run 1: no failed task and some changed; the blank NVMe drive benchmarked with `bench --destructive`, picked by `recommend --json`, migrated with a trial, the reboot `"0 tryboot"` and `verify --commit` all through Ansible; over SSH then root is the NVMe drive's partition 1 with the plan's PARTUUID, `cmdline.txt` names it, no `tryboot.txt`. Run 2: `changed=0 failed=0`. From the host: normal boots from `config.txt`, then one trial boot from `tryboot.txt`; the SD card's `cmdline.txt` committed. Logs: `ansible-1.log`, `ansible-2.log`"#,
            run: ansible::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "unplug-mid-copy",
            about: r#"`pimigrate migrate --no-trial --table mbr` to a blank USB SSD (UAS); 5 s after pimigrate's stderr (written straight into the share) says `copying the root filesystem`, the harness unplugs the SSD through QEMU's monitor (`Pi::prepare_unplug`, QMP `device_del` of `uas-ssd`, waiting for `DEVICE_DELETED`) while the guest keeps running. pimigrate exits 1 (not the 124 of a hang) with an error naming `/dev/sda` as unplugged and advising `pimigrate migrate --resume`; the journal's `done` is `["partitioned","formatted"]`, no `/run/pimigrate` mount is left, and every file of the SD card's boot partition is byte-identical to before. Boot 2, the SSD plugged in again: root `mmcblk0p2` (the SD card boots as before), then `pimigrate migrate --resume --yes` finishes; boot 3: root is the SSD's partition 1, `verify --no-bench` exits 0, the SD card's `cmdline.txt` names the plan's PARTUUID"#,
            run: unplug_mid_copy::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "wizard-pty",
            about: r#"`pimigrate` with no arguments in an 80x24 tmux terminal in the guest (`TERM=xterm-256color`, UTF-8), answered by reading the screen (`wizard_pty.sh`): benchmarks skipped, the SSD chosen, root only; run 1 reads the plan, types half the disk's name and presses Ctrl-C: exit status 130, "Stopped: nothing was changed.", the cursor shown again, no journal, and from the host the SSD has no MBR and its first and last MiB are zero; run 2 types the name: the plan for that disk, its fstab and `cmdline.txt` diffs and the question to type the name were on screen, the migration ends with "Done", the next steps (reboot, `sudo pimigrate verify`, `sudo pimigrate rollback`), the offer to reboot now (answered no: the host reboots the guest), status 0, the SSD's partition 1 has the journal's PARTUUID; reboot: root is that partition, `/boot/firmware` still `mmcblk0p1`"#,
            run: wizard_pty::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "reference-migration",
            about: r#"(b) in the guest: sfdisk a fresh MBR (new signature) on the SSD, mkfs.ext4, `rsync -aHAXx --numeric-ids`, sed fstab and `cmdline.txt`; reboot: root is `sda1`, `/boot/firmware` still `mmcblk0p1`, a pre-copy marker survived; from the host: the SSD's PARTUUID and fstab, the second boot's file is on the SSD and not on the SD root"#,
            run: reference_migration::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sync-standby",
            about: r#"`pimigrate sync` ([sync.md](../sync.md)) on the SD card (`sd-unthrottled`), a blank USB SSD and a blank NVMe drive. Boot 1 on the SD card: `migrate --layout full --table mbr` to the SSD exits 0, then `sync --to <nvme> --fresh --layout root-only` (a full sync) exits 0 and says the copy would boot (how fast those copies are is the benchmark `pi-copy-bench`'s to measure, [benchmarks](README.md#benchmarks)). Boot 2, NVMe detached, `BOOT_ORDER=0xf14` so the SSD boots with the card still in: a file appended to, one added, one deleted, a hard link, an xattr, a mode alone changed on the running root; `pimigrate sync --yes` finds the card by the journal (layout `full`), says it would boot; 60 new files, a sync killed at its 20th (`PIMIGRATE_FAILPOINT=copy-file@20`, exit 137) leaves `devices --json`'s `standby.state` `syncing` and `devices` saying incomplete; the next sync completes it and `devices` says `standby on /dev/mmcblk0: synced ..., bootable`; from the host (mtools) the card's `cmdline.txt` names its own `PARTUUID=6c586e13-02` and it has no `tryboot.txt`, `pieeprom.upd` or `cmdline.pimigrate.txt`. Boot 3, the SSD gone: the firmware boots the card, root `mmcblk0p2` with PARTUUID `6c586e13-02`, `/boot/firmware` `mmcblk0p1`, every change is there (contents, the hard link's shared inode, the xattr, mode 600, the deletion, the 60 files), and `devices` says it runs from its standby copy"#,
            run: sync_standby::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sd-boot",
            about: r#"(a) bookworm SD boots from `config.txt`; root is `mmcblk0p2`, `/boot/firmware` is `mmcblk0p1`; cmdline came from the card; the guest has exactly `mmcblk0` and `sda`, the SSD with transport `usb` and 8G"#,
            run: boot_sd::bookworm,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sd-boot-bullseye",
            about: r#"the bullseye layout: boot partition at `/boot`, nothing at `/boot/firmware`; the machine, stopped through the scenario's monitor as its job starts (as a stalled emulator stands), is woken by the harness within a minute and the job finishes, the wake and the guest running again in `boot-01.serial.wake.txt`"#,
            run: boot_sd::bullseye,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "usb-boot",
            about: r#"the SD card removed, the firmware boots the USB SSD (a copy of the card): root `sda2`, `/boot/firmware` `sda1`"#,
            run: usb_boot::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "copy-debian-root",
            about: r#"host only, no boot: the SD image's root partition (the Debian root debootstrap made) on a read-only loop device at its offset, copied by pimigrate's copier (`examples/copy-tree`, which run.sh builds) into a fresh ext4; `rsync -naHAXc --itemize-changes --numeric-ids` lists nothing"#,
            run: copy_debian_root::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: wizard_story::NAME,
            about: r#"the whole story, what `scripts/demo.sh` shows: SD card (`sd-a1`), USB flash (`usb-flash`, 4 GiB, a mounted ext4 with files, as a user's stick is) and a blank USB SSD (`usb-ssd`, 8 GiB, no table or filesystem, as a new one comes: the wizard measures its writes on the raw device itself, since `--yes --target` names it and it is erased anyway). Boot 1: `pimigrate wizard --yes --target <ssd> --layout root-only --quick --trial` benchmarks, recommends, plans, migrates; `recommend --reuse --json` on the reports it saved picks the SSD, warns `slower-random-writes` for the flash drive (not worth it), every drive with write figures (the SSD's from the raw device); `cmdline.txt` unchanged, `tryboot.txt` and the trial command line on the SD card; the agent reboots with `"0 tryboot"`. Boot 2 reads `tryboot.txt`: root is the SSD's partition 1 with the plan's PARTUUID; `verify --commit --sysroot` commits, then a live `verify --quick` prints the before/after table against the SD card's report (`before-after.txt`); from the host: `cmdline.txt` names the SSD, `cmdline.txt.pimigrate-backup` is the pristine one, the tryboot files are gone. Boot 3 reads `config.txt`: root on the SSD, `verify --json --quick` passes, sees the commit, and its RND4K Q32 write speed-up against the SD card's report is above 1. Kept in the log folder: `recommendation.txt` (the wizard's table and verdict), `before-after.txt`, `recommend.json`, `verify.json`, `wizard.txt`"#,
            run: wizard_story::run,
            alone: true,
            arm: false,
        },
        Scenario {
            name: "recommend",
            about: r#"SD card (`sd-c10`, an older card: beside an A1 card the SSD's CPU-bound gain sat at the 2x threshold), USB flash (`usb-flash`) and USB SSD (`usb-ssd`), each USB disk with a mounted ext4 so its writes are measured: `pimigrate recommend --json --quick --size 16M --runtime 5` (16 MiB files: the card lays out 64 at 0.42 MB/s, 150 s; 5 s tests: in the quick suite's 1.5 s a window edge and the throttle's bursts move a 50 IOPS figure by 15-20 %) picks the SSD, warns `slower-random-writes` for the flash drive (not worth it), whose RND4K Q32 write IOPS are its binding limit, 50 within 15 % (Q1 at most 57.5); a boot stuck in the emergency shell before the job starts (a device missing systemd's 90 s timeout on a loaded host) is power-cycled, at most twice"#,
            run: recommend::run,
            alone: true,
            arm: false,
        },
        Scenario {
            name: "disk-speed",
            about: r#"(c) fio on the SD card (through a file on root), USB flash (usb-storage), USB SSD (UAS) and NVMe, each throttled by its profile, judged as [disks.md](disks.md#what-the-emulation-can-deliver) describes"#,
            run: disk_speed::run,
            alone: true,
            arm: false,
        },
    ]
}

/// Where the scenario table is, and the markers it is written between.
pub const TABLE_DOC: &str = "docs/testbed/scenarios.md";
const TABLE_BEGIN: &str =
    "<!-- scenarios:begin (`testbed/run.sh --write-docs` writes what follows from each scenario's `about`) -->\n";
const TABLE_END: &str = "<!-- scenarios:end -->";

/// The scenario table of [`TABLE_DOC`]: each scenario's `about`, the one
/// place its words are written, in the order the suite starts them.
pub fn markdown_table() -> String {
    let mut table = String::from("| name | checks |\n| --- | --- |\n");
    for s in all() {
        table.push_str(&format!("| `{}` | {} |\n", s.name, s.about));
    }
    table
}

/// `doc` with its scenario table replaced by `table`; `None` without the
/// markers.
pub fn with_table(doc: &str, table: &str) -> Option<String> {
    let begin = doc.find(TABLE_BEGIN)? + TABLE_BEGIN.len();
    let end = begin + doc[begin..].find(TABLE_END)?;
    Some(format!("{}{table}{}", &doc[..begin], &doc[end..]))
}

/// Benchmarks: run by name only (`scripts/bench-pi-copy.sh`), never by
/// `run` without names, a lane, or `scripts/test.sh`. They measure and
/// print; they fail only when something broke, never on a figure.
pub fn benchmarks() -> Vec<Scenario> {
    vec![Scenario {
        name: pi_copy_bench::NAME,
        about: "benchmark: pimigrate migrate's copy and a full sync against rsync -aHAXx of the same root onto the same blank USB SSD, one boot, caches dropped, medians (PI_TESTBED_BENCH_RUNS, default 3; PI_TESTBED_BENCH_PROFILE=strace|perf adds a profiled run of each)",
        run: pi_copy_bench::run,
        alone: true,
        arm: false,
    }]
}

/// The SD card of scenarios that time nothing: QEMU's card with no
/// throttle (`testbed/profiles.tsv`), whose reads are about three times
/// those of `sd-a1` under emulation, and still below a real A1 card's. The
/// scenarios that measure or rank the card keep `sd-a1` or `sd-c10`.
pub const UNTIMED_SD: &str = "sd-unthrottled";

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

#[cfg(test)]
mod table_tests {
    use super::*;

    /// The doc's table is what the scenarios say of themselves.
    #[test]
    fn the_docs_scenario_table_is_each_scenarios_about() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(TABLE_DOC);
        let doc = std::fs::read_to_string(&path).unwrap();
        let now = with_table(&doc, &markdown_table()).expect("the doc has the table's markers");
        assert!(
            now == doc,
            "{TABLE_DOC}'s scenario table is not the scenarios' `about`: run `testbed/run.sh --write-docs`"
        );
    }
}
