//! Real distributions' boot layouts on the Pi 4 fixture machine (issue #15):
//! first-boot hooks, an fstab without `/`, systems that have no root
//! partition. Each case copies the fixture, writes the distribution's own
//! boot files over it (bytes as their build scripts make them) and plans.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// The Pi 4 fixture with `files` (path, contents) written over it; `None`
/// removes the file.
fn machine(files: &[FileOverride]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture("pi4").display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for (file, contents) in files {
        let path = dir.path().join(file);
        match contents {
            Some(bytes) => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
            None => std::fs::remove_file(&path).unwrap(),
        }
    }
    dir
}

fn run_plan(root: &Path, args: &[&str]) -> std::process::Output {
    pimigrate()
        .arg("--sysroot")
        .arg(root)
        .args(["plan", "--seed", "42", "--target", "/dev/sda"])
        .args(args)
        .output()
        .unwrap()
}

fn planned(root: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let output = run_plan(root, &all);
    assert_eq!(exit_code(&output), 0, "plan refused: {}", stdout(&output));
    json(&output)
}

/// The reasons of a refused plan: (code, message, hint).
fn refused(root: &Path, args: &[&str]) -> Vec<(String, String, String)> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let output = run_plan(root, &all);
    assert_eq!(
        exit_code(&output),
        3,
        "expected a refusal: {}",
        stdout(&output)
    );
    json(&output)["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("code"), text("message"), text("hint"))
        })
        .collect()
}

/// The edit of the command line the new root boots with.
fn cmdline_edit(plan: &Value) -> &Value {
    plan["edits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["site"] != "target-root")
        .unwrap_or_else(|| panic!("no cmdline edit in {:#}", plan["edits"]))
}

/// The added line of a one-line diff.
fn added_line(diff: &str) -> String {
    let added: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .collect();
    assert_eq!(added.len(), 1, "{diff}");
    added[0][1..].to_string()
}

fn notes(plan: &Value) -> Vec<String> {
    plan["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

const CMDLINE: &str = "boot/firmware/cmdline.txt";

/// A file written over the fixture (path, contents), or removed (`None`).
type FileOverride<'a> = (&'a str, Option<&'a [u8]>);

/// Each resize-only hook (pi-gen buster's init_resize.sh, trixie's
/// `resize`) is left out of the new command line, in every layout, with a
/// note naming it; every other argument stays where it was.
#[test]
fn resize_hooks_are_left_out_of_the_new_command_line_and_said_so() {
    let cases = [
        (
            "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 elevator=deadline fsck.repair=yes rootwait quiet init=/usr/lib/raspi-config/init_resize.sh\n",
            "init=/usr/lib/raspi-config/init_resize.sh",
        ),
        (
            "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait resize\n",
            "resize",
        ),
    ];
    for (line, hook) in cases {
        let tree = machine(&[(CMDLINE, Some(line.as_bytes()))]);
        for args in [
            &["--trial", "always"][..],
            &["--trial", "never"],
            &["--layout", "full"],
        ] {
            let plan = planned(tree.path(), args);
            let new = added_line(cmdline_edit(&plan)["diff"].as_str().unwrap());
            // root-only: root is partition 1; full: partition 2.
            let number = if args == ["--layout", "full"] { 2 } else { 1 };
            let disk_id = plan["table"]["disk_id"].as_str().unwrap();
            let expected = line
                .trim_end()
                .replace(&format!(" {hook}"), "")
                .replace("6c586e13-02", &format!("{disk_id}-{number:02}"));
            // A root-only trial's command line also gets what resets a
            // trial that does not come up (this tree has no kernel to
            // read a version from: no rootwait=SECONDS).
            let expected = match args == ["--trial", "always"] {
                true => format!("{expected} panic=10 systemd.crash_reboot=1 pimigrate.trial=1"),
                false => expected,
            };
            assert_eq!(new, expected, "{hook} {args:?}");
            let notes = notes(&plan);
            assert!(
                notes
                    .iter()
                    .any(|n| n.contains(&format!("`{hook}`")) && n.contains("goes without it")),
                "{hook} {args:?}: {notes:?}"
            );
        }
        // The human plan, which the wizard shows too, says it.
        let text = stdout(&run_plan(tree.path(), &[]));
        assert!(text.contains("This system's boot files"), "{text}");
        assert!(
            text.contains(&format!("first-boot hook `{hook}`")),
            "{text}"
        );
    }
}

/// bookworm's firstboot and the Imager's firstrun.sh set the system up:
/// planned only after the first boot, with that as the way out.
#[test]
fn set_up_hooks_are_refused_until_the_system_has_booted_once() {
    let cases = [
        (
            "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot\n",
            vec!["init=/usr/lib/raspberrypi-sys-mods/firstboot"],
        ),
        (
            "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot systemd.run=/boot/firstrun.sh systemd.run_success_action=reboot systemd.unit=kernel-command-line.target\n",
            vec!["init=/usr/lib/raspberrypi-sys-mods/firstboot", "systemd.run=/boot/firstrun.sh"],
        ),
    ];
    for (line, hooks) in cases {
        let tree = machine(&[(CMDLINE, Some(line.as_bytes()))]);
        for layout in ["root-only", "full"] {
            let reasons = refused(tree.path(), &["--layout", layout]);
            assert_eq!(reasons.len(), hooks.len(), "{reasons:?}");
            for ((code, message, hint), hook) in reasons.iter().zip(&hooks) {
                assert_eq!(code, "first-boot-pending");
                assert!(message.contains(hook), "{message}");
                assert!(hint.contains("boot the system once"), "{hint}");
            }
        }
    }
}

/// Arch Linux ARM's fstab has no `/` line: cmdline.txt alone changes,
/// fstab stays as it is, and the plan says why.
#[test]
fn fstab_without_a_root_line_is_migrated_through_cmdline_txt_alone() {
    let fstab = b"# Static information about the filesystems.\n# See fstab(5) for details.\n\n# <file system> <dir> <type> <options> <dump> <pass>\n/dev/mmcblk0p1  /boot   vfat    defaults        0       0\n";
    let tree = machine(&[("etc/fstab", Some(&fstab[..]))]);
    for layout in ["root-only", "full"] {
        let plan = planned(tree.path(), &["--layout", layout]);
        let edits = plan["edits"].as_array().unwrap();
        let fstab_edits: Vec<&Value> = edits.iter().filter(|e| e["file"] == "/etc/fstab").collect();
        match layout {
            // No /boot/firmware line and a /boot line: a full move renames it.
            "full" => {
                assert_eq!(fstab_edits.len(), 1);
                let diff = fstab_edits[0]["diff"].as_str().unwrap();
                assert!(
                    !diff.contains("+PARTUUID=") || diff.contains("/boot"),
                    "{diff}"
                );
            }
            _ => assert!(fstab_edits.is_empty(), "{fstab_edits:?}"),
        }
        assert_eq!(plan["source"]["fstab_names_root"], false);
        assert_eq!(plan["source"]["root_spec"]["value"], "6c586e13-02");
        assert!(notes(&plan).iter().any(|n| n.contains("no line for /")));
        assert!(
            added_line(cmdline_edit(&plan)["diff"].as_str().unwrap()).contains("root=PARTUUID=")
        );
    }
    let text = stdout(&run_plan(tree.path(), &[]));
    assert!(text.contains("fstab has no / line"), "{text}");
}

/// LibreELEC, Volumio and Alpine diskless (with its files on the boot
/// partition, and from its cmdline.txt alone) are named, alone, with a way
/// to move them that is not "add a root= line".
#[test]
fn systems_without_a_root_partition_are_refused_by_name() {
    let cases: [(&str, &[FileOverride], &str); 4] = [
        (
            "LibreELEC",
            &[
                (CMDLINE, Some(b"boot=UUID=2306-0801 disk=UUID=f1ab2bd5-8ad8-4d6b-a5b3-0fe6b4d0e8a6 quiet console=tty0\n")),
                ("boot/firmware/SYSTEM", Some(b"hsqs")),
                ("boot/firmware/KERNEL", Some(b"kernel")),
                ("etc/fstab", None),
            ],
            "boot=UUID=2306-0801",
        ),
        (
            "Volumio",
            &[(CMDLINE, Some(b"splash quiet console=serial0,115200 console=tty1 imgpart=UUID=6a4f8c7e-1b2d-4e9a-9f0c-3d5e7a1b2c4d imgfile=/volumio_current.sqsh bootpart=UUID=1A2B-3C4D datapart=UUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 uuidconfig bootconfig=/boot/config.txt rootwait bootdelay=5 logo.nologo vt.global_cursor_default=0 net.ifnames=0 loglevel=0\n"))],
            "imgfile=/volumio_current.sqsh",
        ),
        (
            "Alpine",
            &[
                (CMDLINE, Some(b"modules=loop,squashfs,sd-mod,usb-storage quiet console=tty1\n")),
                ("boot/firmware/pi.apkovl.tar.gz", Some(b"\x1f\x8b")),
                ("boot/firmware/boot/modloop-rpi", Some(b"hsqs")),
            ],
            "pi.apkovl.tar.gz",
        ),
        (
            "Alpine",
            &[(CMDLINE, Some(b"modules=loop,squashfs,sd-mod,usb-storage quiet console=tty1\n"))],
            "modules=loop,squashfs,sd-mod,usb-storage",
        ),
    ];
    for (system, files, evidence) in cases {
        let tree = machine(files);
        let reasons = refused(tree.path(), &[]);
        assert_eq!(reasons.len(), 1, "{system}: {reasons:?}");
        let (code, message, hint) = &reasons[0];
        assert_eq!(code, "not-on-a-partition");
        assert!(message.contains(system), "{message}");
        assert!(message.contains(evidence), "{message}");
        assert!(!hint.contains("root="), "{hint}");
    }
}

/// Debian's raspi image: its fstab, the cmdline.txt its hook wrote, and
/// /etc/default/raspi-firmware as the package ships it with the image's
/// `ROOTPART=LABEL=RASPIROOT`.
fn debian_raspi() -> tempfile::TempDir {
    let data = |name: &str| {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/bootfiles/debian-raspi")
                .join(name),
        )
        .unwrap()
    };
    let (cmdline, fstab, defaults) = (data("cmdline.txt"), data("fstab"), data("raspi-firmware"));
    machine(&[
        (CMDLINE, Some(&cmdline[..])),
        ("etc/fstab", Some(&fstab[..])),
        ("etc/default/raspi-firmware", Some(&defaults[..])),
    ])
}

/// The edit of a file on the new root.
fn target_root_edit<'a>(plan: &'a Value, file: &str) -> &'a Value {
    plan["edits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["site"] == "target-root" && e["file"] == file)
        .unwrap_or_else(|| panic!("no {file} edit in {:#}", plan["edits"]))
}

/// ROOTPART= follows root= on the new root, shown as a one-line diff, with
/// a note; a root-only move without trial also says to reboot soon.
#[test]
fn raspi_firmware_rootpart_follows_the_new_root() {
    let tree = debian_raspi();
    for (args, partition) in [(&["--layout", "full"][..], 2), (&["--trial", "never"], 1)] {
        let plan = planned(tree.path(), args);
        let sig = plan["table"]["disk_id"].as_str().unwrap();
        let edit = target_root_edit(&plan, "/etc/default/raspi-firmware");
        assert_eq!(
            added_line(edit["diff"].as_str().unwrap()),
            format!("ROOTPART=PARTUUID={sig}-{partition:02}")
        );
        assert!(edit["diff"]
            .as_str()
            .unwrap()
            .contains("-ROOTPART=LABEL=RASPIROOT"));
        assert_eq!(
            edit["backup"],
            "/etc/default/raspi-firmware.pimigrate-backup"
        );
        assert!(notes(&plan)
            .iter()
            .any(|n| n.contains("raspi-firmware rebuilds cmdline.txt")));
        let reboot_soon = plan["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("reboot soon"));
        assert_eq!(reboot_soon, args == ["--trial", "never"], "{args:?}");
    }
}

/// Issue #15 item 2, end to end with Debian's own hook: after the plan's
/// edits (the executor's very function), a kernel update on the new root
/// rewrites cmdline.txt with the root the migration chose; without the
/// ROOTPART edit it would name the SD card's RASPIROOT again.
#[test]
fn the_real_raspi_firmware_hook_keeps_the_new_root_after_a_migration() {
    let Some(package) = raspi_firmware::package() else {
        return;
    };
    let tree = debian_raspi();
    let output = run_plan(tree.path(), &["--json", "--layout", "full"]);
    assert_eq!(exit_code(&output), 0, "{}", stdout(&output));
    let plan: pimigrate::plan::Plan = serde_json::from_slice(&output.stdout).unwrap();
    let edit_of = |file: &str| {
        plan.edits
            .iter()
            .find(|e| {
                e.file == pimigrate::plan::PartitionPath::known(file)
                    && (file != "/cmdline.txt" || e.site != pimigrate::plan::EditSite::TargetRoot)
            })
            .unwrap()
    };
    let shipped = std::fs::read(tree.path().join("etc/default/raspi-firmware")).unwrap();
    let cmdline = std::fs::read(tree.path().join(CMDLINE)).unwrap();
    let migrated_defaults =
        pimigrate::plan::edits::apply(&shipped, &edit_of("/etc/default/raspi-firmware").operations)
            .unwrap();
    let migrated_cmdline =
        pimigrate::plan::edits::apply(&cmdline, &edit_of("/cmdline.txt").operations).unwrap();
    let root_of = |bytes: &[u8]| {
        pimigrate::bootcfg::Cmdline::parse(bytes)
            .unwrap()
            .root()
            .unwrap()
    };
    let chosen = root_of(&migrated_cmdline);

    for (defaults, expected) in [
        (&migrated_defaults, chosen.clone()),
        (
            &shipped,
            pimigrate::bootcfg::DeviceSpec::Label("RASPIROOT".into()),
        ),
    ] {
        let new_root = tempfile::tempdir().unwrap();
        let sysroot = new_root.path();
        std::fs::create_dir_all(sysroot.join("etc/default")).unwrap();
        std::fs::create_dir_all(sysroot.join("boot/firmware")).unwrap();
        std::fs::write(sysroot.join("etc/default/raspi-firmware"), defaults).unwrap();
        std::fs::write(sysroot.join("boot/firmware/cmdline.txt"), &migrated_cmdline).unwrap();
        raspi_firmware::run_hook(package.path(), sysroot);
        let regenerated = std::fs::read(sysroot.join("boot/firmware/cmdline.txt")).unwrap();
        assert_ne!(
            regenerated, migrated_cmdline,
            "the hook did not rewrite cmdline.txt"
        );
        assert_eq!(
            root_of(&regenerated),
            expected,
            "{}",
            String::from_utf8_lossy(&regenerated)
        );
    }
}

fn ubuntu_focal(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/bootfiles/ubuntu-focal")
            .join(name),
    )
    .unwrap()
}

/// Ubuntu 20.04's config.txt sets cmdline=cmdline.txt and then includes
/// syscfg.txt, which sets it again: tryboot.txt's cmdline= goes after the
/// includes, read as the firmware reads them, and the plan says why.
#[test]
fn a_trial_boot_through_ubuntus_includes_puts_cmdline_where_nothing_overrides_it() {
    let (config, syscfg, usercfg) = (
        ubuntu_focal("config.txt"),
        ubuntu_focal("syscfg.txt"),
        ubuntu_focal("usercfg.txt"),
    );
    let tree = machine(&[
        ("boot/firmware/config.txt", Some(&config[..])),
        ("boot/firmware/syscfg.txt", Some(&syscfg[..])),
        ("boot/firmware/usercfg.txt", Some(&usercfg[..])),
    ]);
    let plan = planned(tree.path(), &["--trial", "always"]);
    let trial = &plan["trial_boot"];
    let diff = trial["diff"].as_str().unwrap();
    let added: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .collect();
    assert_eq!(
        added,
        ["+[all]", "+cmdline=cmdline.pimigrate.txt"],
        "{diff}"
    );
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with('-') && !l.starts_with("---")),
        "{diff}"
    );
    let note = trial["note"].as_str().unwrap();
    assert!(
        note.contains("syscfg.txt") && note.contains("last assignment wins"),
        "{note}"
    );

    // The tryboot.txt that results, read with its includes for a Pi 4 in
    // a trial boot, selects the trial's command line.
    let mut tryboot = config.clone();
    tryboot.extend_from_slice(b"[all]\ncmdline=cmdline.pimigrate.txt\n");
    let settings = pimigrate::bootcfg::ConfigTxt::parse(&tryboot)
        .unwrap()
        .effective_with(
            &pimigrate::bootcfg::FilterContext::new(Some("pi4"), true),
            &mut |name: &str| Ok(std::fs::read(tree.path().join("boot/firmware").join(name)).ok()),
        );
    assert_eq!(settings.cmdline_file(), "cmdline.pimigrate.txt");
    assert!(settings.is_certain());

    let text = stdout(&run_plan(tree.path(), &["--trial", "always"]));
    assert!(text.contains("where nothing overrides it"), "{text}");
}

/// An include pimigrate cannot read leaves it unsure which command line a
/// trial boot reads: it says so, and offers --no-trial.
#[test]
fn an_unreadable_include_refuses_the_trial_and_offers_no_trial() {
    let config = ubuntu_focal("config.txt");
    let tree = machine(&[("boot/firmware/config.txt", Some(&config[..]))]);
    // A directory where syscfg.txt should be: there, but not readable.
    std::fs::create_dir(tree.path().join("boot/firmware/syscfg.txt")).unwrap();
    let reasons = refused(tree.path(), &["--trial", "always"]);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    let (code, message, hint) = &reasons[0];
    assert_eq!(code, "trial-unavailable");
    assert!(
        message.contains("cannot be sure") && message.contains("syscfg.txt"),
        "{message}"
    );
    assert!(hint.contains("--no-trial"), "{hint}");
    // Without the trial, the plan goes ahead.
    planned(tree.path(), &["--trial", "never"]);
}

/// A copy of fixture `name` with `files` written over it.
fn machine_from(name: &str, files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture(name).display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for (file, contents) in files {
        std::fs::write(dir.path().join(file), contents).unwrap();
    }
    dir
}

/// A full-move plan on `root` with a fake `rpi-eeprom-config` printing
/// `eeprom` (none when `None`): its exit code and JSON.
fn full_plan(root: &Path, target: &str, eeprom: Option<&str>) -> (i32, Value) {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    if let Some(config) = eeprom {
        let tool = bin.path().join("rpi-eeprom-config");
        std::fs::write(&tool, format!("#!/bin/sh\nprintf '{config}'\n")).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let output = pimigrate()
        .arg("--sysroot")
        .arg(root)
        .args([
            "plan", "--json", "--seed", "42", "--layout", "full", "--target", target,
        ])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", bin.path().display()),
        )
        .output()
        .unwrap();
    (exit_code(&output), json(&output))
}

fn texts(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Item 7: a Pi 4 whose bootloader predates USB boot (2020-09-03) is
/// refused a full move to USB with the update as the fix; a newer one
/// passes; one whose date cannot be read is planned with that said.
#[test]
fn a_pi4_bootloader_too_old_for_usb_boot_is_refused_with_the_update() {
    let ts = "proc/device-tree/chosen/bootloader/build-timestamp";
    // 2020-04-16, the bootloader Pi 4s shipped with before USB boot.
    let old = machine_from("pi4", &[(ts, &1_587_038_400u32.to_be_bytes())]);
    let (code, refusal) = full_plan(old.path(), "/dev/sda", None);
    assert_eq!(code, 3, "{refusal:#}");
    let reason = &refusal["reasons"][0];
    assert_eq!(reason["code"], "bootloader-too-old");
    assert!(reason["message"].as_str().unwrap().contains("2020-04-16"));
    assert!(reason["hint"]
        .as_str()
        .unwrap()
        .contains("rpi-eeprom-update -a"));
    // A root-only move does not need the bootloader to boot USB.
    assert_eq!(exit_code(&run_plan(old.path(), &["--json"])), 0);

    let new = machine_from("pi4", &[(ts, &1_700_000_000u32.to_be_bytes())]);
    let (code, plan) = full_plan(new.path(), "/dev/sda", None);
    assert_eq!(code, 0, "{plan:#}");
    assert!(!texts(&plan["notes"])
        .iter()
        .any(|n| n.contains("bootloader's date")));

    let (code, plan) = full_plan(&fixture("pi4"), "/dev/sda", None);
    assert_eq!(code, 0, "{plan:#}");
    assert!(
        texts(&plan["notes"])
            .iter()
            .any(|n| n.contains("2020-09-03")),
        "{:#}",
        plan["notes"]
    );
}

/// Item 7: a Pi 5 NVMe full move without a HAT+ says PCIE_PROBE=1 and
/// dtparam=pciex1 exactly, as far as it can read them.
#[test]
fn a_pi5_nvme_move_without_a_hat_plus_names_pcie_probe_and_pciex1() {
    let warns =
        |plan: &Value, what: &str| texts(&plan["warnings"]).iter().any(|w| w.contains(what));
    let (code, plan) = full_plan(
        &fixture("pi5"),
        "/dev/nvme0n1",
        Some("[all]\\nBOOT_ORDER=0xf416\\n"),
    );
    assert_eq!(code, 0, "{plan:#}");
    assert!(
        warns(&plan, "add the line PCIE_PROBE=1"),
        "{:#}",
        plan["warnings"]
    );
    // The fixture's config.txt has dtparam=pciex1 (near its end).
    assert!(!warns(&plan, "dtparam=pciex1"), "{:#}", plan["warnings"]);

    let config =
        String::from_utf8(std::fs::read(fixture("pi5").join("boot/firmware/config.txt")).unwrap())
            .unwrap();
    let without_pciex1 = config.replace("dtparam=pciex1\n", "");
    let bare = machine_from(
        "pi5",
        &[("boot/firmware/config.txt", without_pciex1.as_bytes())],
    );
    let (code, plan) = full_plan(
        bare.path(),
        "/dev/nvme0n1",
        Some("[all]\\nBOOT_ORDER=0xf416\\nPCIE_PROBE=1\\n"),
    );
    assert_eq!(code, 0, "{plan:#}");
    assert!(!warns(&plan, "PCIE_PROBE"), "{:#}", plan["warnings"]);
    assert!(
        warns(&plan, "Add the line dtparam=pciex1"),
        "{:#}",
        plan["warnings"]
    );

    let ready = machine_from("pi5", &[]);
    let (code, plan) = full_plan(
        ready.path(),
        "/dev/nvme0n1",
        Some("[all]\\nBOOT_ORDER=0xf416\\nPCIE_PROBE=1\\n"),
    );
    assert_eq!(code, 0, "{plan:#}");
    assert!(
        !warns(&plan, "PCIE_PROBE") && !warns(&plan, "pciex1"),
        "{:#}",
        plan["warnings"]
    );

    // Unreadable bootloader configuration: said, not guessed.
    let (_, plan) = full_plan(ready.path(), "/dev/nvme0n1", None);
    assert!(texts(&plan["notes"])
        .iter()
        .any(|n| n.contains("could not be read") && n.contains("PCIE_PROBE=1")));

    let hat = machine_from("pi5", &[]);
    std::fs::create_dir_all(hat.path().join("proc/device-tree/hat")).unwrap();
    std::fs::write(
        hat.path().join("proc/device-tree/hat/product"),
        b"M.2 HAT+\0",
    )
    .unwrap();
    let (_, plan) = full_plan(
        hat.path(),
        "/dev/nvme0n1",
        Some("[all]\\nBOOT_ORDER=0xf416\\n"),
    );
    assert!(!warns(&plan, "PCIE_PROBE"), "{:#}", plan["warnings"]);
    assert!(texts(&plan["notes"]).iter().any(|n| n.contains("M.2 HAT+")));
}
