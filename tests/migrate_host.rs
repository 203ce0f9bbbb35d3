//! `pimigrate migrate` and `rollback` end to end on this machine: a Pi-like
//! root tree copied onto a sparse loop-device "SSD" with a real partition
//! table and real ext4. (Booting the result is the testbed's job.)

use crate::common;

use common::migration::MigrationRig;
use common::pty::{ended_within, held, Pty};
use common::standby::SourceFs;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The rig, its tree with a few things a root filesystem has that plain
/// copies lose.
fn setup() -> MigrationRig {
    MigrationRig::new(|tree| {
        std::os::unix::fs::symlink("../usr/bin/hello", tree.join("etc/hello-link")).unwrap();
        std::fs::hard_link(
            tree.join("usr/bin/hello"),
            tree.join("home/pi/hello-hardlink"),
        )
        .unwrap();
        std::os::unix::fs::chown(tree.join("home/pi/notes.txt"), Some(1000), Some(1000)).unwrap();
    })
}

/// The one migration log written so far: its name and text.
fn the_log(setup: &MigrationRig) -> (String, String) {
    let logs: Vec<PathBuf> = std::fs::read_dir(setup.log_dir())
        .expect("migrate made the log directory")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let name = logs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("migrate-") && name.ends_with(".log"),
        "{name}"
    );
    (name, std::fs::read_to_string(&logs[0]).unwrap())
}

fn migrated(output: &std::process::Output) -> Value {
    succeeded(output, "migrate")
}

#[test]
fn a_root_only_move_copies_everything_and_switches_cmdline_last() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let cmdline_before = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    let out = migrated(&setup.run(
        &[
            "--json",
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "never",
        ],
        None,
    ));
    assert_eq!(out["status"], "migrated");
    let plan = &out["journal"]["plan"];
    // A loop device takes discards by itself: no rule, and the TRIM step
    // is journaled all the same.
    assert_eq!(
        plan["after_move"]["trim"]["decision"]["verdict"],
        "already-on"
    );
    assert_eq!(plan["after_move"]["trim"]["rule"], Value::Null);
    assert!(
        out["journal"]["done"]
            .as_array()
            .unwrap()
            .contains(&Value::from("trim-set-up")),
        "{:#}",
        out["journal"]["done"]
    );
    let root = &plan["table"]["partitions"][0];
    let partuuid = root["partuuid"].as_str().unwrap().to_string();
    let fs_uuid = plan["filesystems"][0]["uuid"].as_str().unwrap().to_string();

    // The SD card's cmdline.txt points at the new root, and its old self is kept.
    let cmdline = std::fs::read_to_string(setup.boot().join("cmdline.txt")).unwrap();
    assert!(
        cmdline.contains(&format!("root=PARTUUID={partuuid} ")),
        "{cmdline}"
    );
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt.pimigrate-backup")).unwrap(),
        cmdline_before
    );

    // The table on the disk is the planned one.
    let devices = json(
        &pimigrate()
            .args(["devices", "--all", "--json"])
            .output()
            .unwrap(),
    );
    let disk = devices["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == setup.device.as_str())
        .unwrap();
    assert_eq!(disk["disk_id"], plan["table"]["disk_id"]);
    assert_eq!(disk["partitions"][0]["partuuid"], partuuid.as_str());
    assert_eq!(disk["partitions"][0]["uuid"], fs_uuid.as_str());
    assert_eq!(disk["partitions"][0]["fstype"], "ext4");

    // The log has the plan and every step, in order, each with its time.
    let (log_name, log) = the_log(&setup);
    let steps = [
        "the plan:",
        "writing a new mbr partition table",
        "creating ext4 on",
        "copying the root filesystem",
        "editing fstab",
        "copying this log to the new root",
        "updating the SD card's boot files",
        "done",
    ];
    let mut at = 0;
    for step in steps {
        let found = log[at..]
            .find(step)
            .unwrap_or_else(|| panic!("the log lacks {step:?} (in order):\n{log}"));
        at += found + step.len();
    }
    assert!(log.contains(&partuuid), "the plan is in the log:\n{log}");

    let tree = setup.tree.path().to_path_buf();
    setup.inspect_partition(root["start_sector"].as_u64().unwrap(), |mnt| {
        let copied = std::fs::read_to_string(mnt.join("var/log/pimigrate").join(&log_name))
            .expect("the log travels along");
        assert!(copied.contains("copying the root filesystem"), "{copied}");
        let fstab = std::fs::read_to_string(mnt.join("etc/fstab")).unwrap();
        assert!(
            fstab.contains(&format!("PARTUUID={partuuid}  /               ext4")),
            "{fstab}"
        );
        assert!(mnt.join("etc/fstab.pimigrate-backup").exists());
        assert!(
            mnt.join("var/lib/pimigrate/migration.json").exists(),
            "the journal travels along"
        );
        // rsync, the reference, finds nothing else to do.
        let output = Command::new("rsync")
            .args(["-naHAXc", "--itemize-changes", "--numeric-ids"])
            .arg(format!("{}/", tree.display()))
            .arg(format!("{}/", mnt.display()))
            .output()
            .expect("rsync is needed to check the copy");
        let listing = String::from_utf8_lossy(&output.stdout);
        let unexpected: Vec<&str> = listing
            .lines()
            .filter(|line| {
                let path = line.split_whitespace().nth(1).unwrap_or("");
                // Left out on purpose (boot files not on a mounted partition,
                // swap, /tmp contents) or changed on purpose (fstab and the
                // directories the migration wrote into: var/lib/pimigrate
                // and var/log/pimigrate).
                !(path.starts_with("boot/firmware/")
                    || [
                        "var/swap",
                        "tmp/scratch",
                        "etc/fstab",
                        "etc/",
                        "var/",
                        "var/lib/",
                    ]
                    .contains(&path))
            })
            .collect();
        assert!(unexpected.is_empty(), "rsync finds differences:\n{listing}");
        let meta = std::fs::symlink_metadata(mnt.join("etc/hello-link")).unwrap();
        assert!(meta.file_type().is_symlink());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(mnt.join("home/pi/notes.txt"))
                .unwrap()
                .uid(),
            1000
        );
        assert_eq!(
            std::fs::metadata(mnt.join("usr/bin/hello")).unwrap().ino(),
            std::fs::metadata(mnt.join("home/pi/hello-hardlink"))
                .unwrap()
                .ino()
        );
    });

    // Running it again changes nothing.
    let again = migrated(&setup.run(
        &["--json", "migrate", "--target", &setup.device, "--yes"],
        None,
    ));
    assert_eq!(again["status"], "pending-reboot");

    // Rollback puts the SD card back as it was.
    let output = setup.run(&["rollback", "--yes"], None);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before
    );
    assert!(!setup.boot().join("cmdline.txt.pimigrate-backup").exists());
}

#[test]
fn a_trial_boot_leaves_cmdline_txt_alone_and_rollback_removes_its_files() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let before: Vec<(String, Vec<u8>)> = boot_files(&setup.boot());
    let out = migrated(&setup.run(
        &[
            "--json",
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "always",
        ],
        None,
    ));
    let partuuid = out["journal"]["plan"]["table"]["partitions"][0]["partuuid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        before.iter().find(|(n, _)| n == "cmdline.txt").unwrap().1
    );
    let trial = std::fs::read_to_string(setup.boot().join("cmdline.pimigrate.txt")).unwrap();
    assert!(
        trial.contains(&format!("root=PARTUUID={partuuid} ")),
        "{trial}"
    );
    // What resets a trial that does not come up, with nobody at the Pi.
    assert!(
        trial.contains(" panic=10 systemd.crash_reboot=1")
            && trial.trim_end().ends_with(" pimigrate.trial=1"),
        "{trial}"
    );
    let tryboot = std::fs::read_to_string(setup.boot().join("tryboot.txt")).unwrap();
    assert!(
        tryboot.ends_with("cmdline=cmdline.pimigrate.txt\n"),
        "{tryboot}"
    );
    // The journal on the new root knows the SD card's changes too, so a
    // rollback from the migrated system undoes them.
    let start = out["journal"]["plan"]["table"]["partitions"][0]["start_sector"]
        .as_u64()
        .unwrap();
    setup.inspect_partition(start, |mnt| {
        let journal: Value = serde_json::from_slice(
            &std::fs::read(mnt.join("var/lib/pimigrate/migration.json")).unwrap(),
        )
        .unwrap();
        let created = journal["created"].to_string();
        assert!(created.contains("cmdline.pimigrate.txt"), "{created}");
        assert!(created.contains("tryboot.txt"), "{created}");
        // The trial's guard on the new root: the generator, and the
        // pimigrate its units run, both executable.
        use std::os::unix::fs::PermissionsExt;
        for file in [
            "etc/systemd/system-generators/pimigrate-trial",
            "var/lib/pimigrate/trial/pimigrate",
        ] {
            let mode = std::fs::metadata(mnt.join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755, "{file}");
        }
        let generator =
            std::fs::read_to_string(mnt.join("etc/systemd/system-generators/pimigrate-trial"))
                .unwrap();
        assert!(generator.contains("pimigrate.trial="), "{generator}");
    });
    let output = setup.run(&["rollback", "--yes"], None);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        boot_files(&setup.boot()),
        before,
        "the boot files are exactly as before"
    );
}

#[test]
fn migrate_without_yes_off_a_terminal_writes_nothing() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let output = setup.run(&["migrate", "--target", &setup.device], None);
    // A usage error: without a terminal no one can be asked.
    assert_eq!(exit_code(&output), 2);
    assert!(stderr(&output).contains("--yes"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Usage: pimigrate migrate"),
        "{}",
        stderr(&output)
    );
    assert_first_mib_blank(&setup.image);
}

/// Regression (issues #15 and #17): `-q migrate` printed the brief plan of
/// a dry run ("dry run, nothing written") right before erasing the target.
#[test]
fn quiet_migrate_does_not_call_itself_a_dry_run() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let output = setup.run(&["-q", "migrate", "--target", &setup.device], None);
    // No terminal to confirm on, and no --yes: a usage error.
    assert_eq!(exit_code(&output), 2, "{}", stderr(&output));
    let brief = stdout(&output);
    assert!(brief.starts_with("Plan: "), "{brief}");
    assert!(!brief.to_lowercase().contains("dry run"), "{brief}");
    assert!(brief.contains("nothing written yet"), "{brief}");
    assert_first_mib_blank(&setup.image);
}

/// Starts a migration that stops itself (SIGSTOP) at `point`, and waits
/// until it has.
fn start_stopped(setup: &MigrationRig, args: &[&str], point: &str) -> std::process::Child {
    let child = setup
        .command(args, Some(&format!("{point}:stop")))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stat = format!("/proc/{}/stat", child.id());
    for _ in 0..300 {
        let state = std::fs::read_to_string(&stat).unwrap_or_default();
        if state
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('T'))
        {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
    panic!("pimigrate never reached {point}");
}

fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

#[test]
fn ctrl_c_during_the_copy_stops_cleanly_and_resume_finishes() {
    if !require_root("migrating to a loop device") {
        return;
    }
    use nix::sys::signal::Signal;
    let setup = setup();
    let cmdline_before = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    let child = start_stopped(
        &setup,
        &[
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "never",
        ],
        "after-mount",
    );
    signal(&child, Signal::SIGINT);
    signal(&child, Signal::SIGCONT);
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert_eq!(exit_code(&output), 130, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("interrupted") || stderr(&output).contains("cancel"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&format!("/run/pimigrate/target-root-{pid} ")),
        "the target was unmounted on the way out"
    );
    let output = setup.run(&["migrate", "--resume", "--yes"], None);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_ne!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before
    );
}

/// A dropped SSH session in the middle of the copy: the terminal hangs up
/// while pimigrate is held at a file of the copy, the kernel sends it
/// SIGHUP (and SIGCONT), and the migration carries on to its end, its
/// output in the migration's log, without a panic on the dead terminal.
#[test]
fn a_terminal_that_hangs_up_mid_copy_leaves_the_migration_running_into_its_log() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let cmdline_before = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    let pty = Pty::open();
    let mut command = setup.command(
        &[
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "never",
        ],
        Some("copy-file@3:stop"),
    );
    pty.attach(&mut command);
    let stop_reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = pty.drain(stop_reading.clone());
    let mut child = command.spawn().unwrap();
    assert!(
        held(&child),
        "pimigrate never reached the copy's third file"
    );
    stop_reading.store(true, std::sync::atomic::Ordering::SeqCst);
    let shown = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert!(shown.contains("copying the root filesystem"), "{shown}");
    // The hang-up: the last descriptor of the master closes. The kernel
    // sends the session leader SIGHUP and SIGCONT, so nothing else here
    // touches the process.
    drop(pty);
    let status = ended_within(&mut child, 300);
    let (_, log) = the_log(&setup);
    assert_eq!(status.code(), Some(0), "{status:?}; the log:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    // The end, in the log: the executor's last lines, then what migrate
    // printed once done (stdout went to the log after the hang-up).
    let done = log
        .find(" done\n")
        .unwrap_or_else(|| panic!("no end in the log:\n{log}"));
    assert!(log[done..].contains("next:"), "{log}");
    assert!(
        log[done..].contains("pimigrate rollback"),
        "migrate's closing text is in the log too:\n{log}"
    );
    assert!(
        !log.contains("\u{1b}["),
        "no progress bar was drawn into the log:\n{log}"
    );
    assert_eq!(
        setup.journal()["done"].as_array().unwrap().last().unwrap(),
        "source-boot-edited"
    );
    assert_ne!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before,
        "the migration finished: cmdline.txt starts the new root"
    );
}

#[test]
fn a_target_that_fills_up_fails_clearly_and_leaves_the_sd_card_alone() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = setup();
    let cmdline_before = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    // The plan fits a 128 MiB root partition; then the source grows.
    let args = [
        "migrate",
        "--target",
        &setup.device,
        "--yes",
        "--trial",
        "never",
        "--root-size",
        "128M",
    ];
    let child = start_stopped(&setup, &args, "after-mount");
    let big = setup.tree.path().join("home/pi/video.bin");
    let mut file = std::fs::File::create(&big).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..200 {
        std::io::Write::write_all(&mut file, &chunk).unwrap();
    }
    drop(file);
    signal(&child, nix::sys::signal::Signal::SIGCONT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(exit_code(&output), 1, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("No space left") || message.contains("full"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before
    );
    assert!(!setup.boot().join("cmdline.txt.pimigrate-backup").exists());
    let (_, log) = the_log(&setup);
    assert!(log.contains("error: "), "{log}");
    assert!(message.contains("the full log is in"), "{message}");
}

/// Issue #15 item 2 on a real migration: Debian's raspi-firmware hook,
/// run as a kernel update would on the new root, writes the migrated
/// root into cmdline.txt; after `rollback` the SD card's own setting and
/// its restored cmdline.txt name the SD card's root again.
#[test]
fn raspi_firmware_regenerates_the_migrated_root_and_rollback_agrees() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let Some(package) = common::raspi_firmware::package() else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bootfiles/debian-raspi");
    let setup = setup();
    let defaults = std::fs::read(data.join("raspi-firmware")).unwrap();
    std::fs::create_dir_all(setup.tree.path().join("etc/default")).unwrap();
    std::fs::write(
        setup.tree.path().join("etc/default/raspi-firmware"),
        &defaults,
    )
    .unwrap();
    std::fs::copy(data.join("cmdline.txt"), setup.boot().join("cmdline.txt")).unwrap();
    std::fs::copy(data.join("fstab"), setup.tree.path().join("etc/fstab")).unwrap();
    let out = migrated(&setup.run(
        &[
            "--json",
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "never",
        ],
        None,
    ));
    let plan = &out["journal"]["plan"];
    let partuuid = plan["table"]["partitions"][0]["partuuid"]
        .as_str()
        .unwrap()
        .to_string();
    let start = plan["table"]["partitions"][0]["start_sector"]
        .as_u64()
        .unwrap();
    let migrated_cmdline = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    let root_of = |bytes: &[u8]| {
        pimigrate::bootcfg::Cmdline::parse(bytes)
            .unwrap()
            .root()
            .unwrap()
            .to_string()
    };

    // A kernel update on the new root: its own setting, the SD card's boot files.
    setup.inspect_partition(start, |mnt| {
        let sysroot = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sysroot.path().join("etc/default")).unwrap();
        std::fs::create_dir_all(sysroot.path().join("boot/firmware")).unwrap();
        std::fs::copy(
            mnt.join("etc/default/raspi-firmware"),
            sysroot.path().join("etc/default/raspi-firmware"),
        )
        .unwrap();
        std::fs::write(
            sysroot.path().join("boot/firmware/cmdline.txt"),
            &migrated_cmdline,
        )
        .unwrap();
        common::raspi_firmware::run_hook(package.path(), sysroot.path());
        let regenerated = std::fs::read(sysroot.path().join("boot/firmware/cmdline.txt")).unwrap();
        assert_eq!(root_of(&regenerated), format!("PARTUUID={partuuid}"));
        assert_eq!(root_of(&regenerated), root_of(&migrated_cmdline));
    });
    // The SD card's root keeps its setting; after rollback it agrees with
    // the restored cmdline.txt again.
    assert_eq!(
        std::fs::read(setup.tree.path().join("etc/default/raspi-firmware")).unwrap(),
        defaults
    );
    let output = setup.run(&["rollback", "--yes"], None);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let sysroot = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sysroot.path().join("etc/default")).unwrap();
    std::fs::create_dir_all(sysroot.path().join("boot/firmware")).unwrap();
    std::fs::write(sysroot.path().join("etc/default/raspi-firmware"), &defaults).unwrap();
    common::raspi_firmware::run_hook(package.path(), sysroot.path());
    let regenerated = std::fs::read(sysroot.path().join("boot/firmware/cmdline.txt")).unwrap();
    let restored = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    assert_eq!(root_of(&regenerated), "LABEL=RASPIROOT");
    assert_eq!(root_of(&regenerated), root_of(&restored));
}

/// An ext3 root (mounted so, named so in fstab and cmdline.txt) moved by
/// a real migration: its copy is ext4, and the copy's fstab and the SD
/// card's cmdline.txt say ext4, so the new root mounts. Rollback puts the
/// card's cmdline.txt back as it was.
#[test]
fn an_ext3_root_moves_to_ext4_and_its_boot_files_say_so() {
    if !require_root("migrating to a loop device") {
        return;
    }
    let setup = MigrationRig::new(|tree| {
        let fstab = std::fs::read_to_string(tree.join("etc/fstab")).unwrap();
        let fstab = fstab.replace("/               ext4", "/               ext3");
        assert!(fstab.contains(" ext3 "), "{fstab}");
        std::fs::write(tree.join("etc/fstab"), fstab).unwrap();
        let cmdline = tree.join("boot/firmware/cmdline.txt");
        let line = std::fs::read_to_string(&cmdline).unwrap();
        std::fs::write(&cmdline, line.replace("rootfstype=ext4", "rootfstype=ext3")).unwrap();
    });
    let source = SourceFs::under_as(setup.tree.path(), 256 << 20, "ext3");
    let mounted = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        mounted.contains(&format!(" {} ", setup.tree.path().display()))
            && mounted.contains(" - ext3 "),
        "the source root is an ext3 mount"
    );
    let cmdline_before = std::fs::read(setup.boot().join("cmdline.txt")).unwrap();
    let out = migrated(&setup.run(
        &[
            "--json",
            "migrate",
            "--target",
            &setup.device,
            "--yes",
            "--trial",
            "never",
        ],
        None,
    ));
    let plan = &out["journal"]["plan"];
    let notes = plan["notes"].to_string();
    assert!(notes.contains("root filesystem is ext3"), "{notes}");
    let partuuid = plan["table"]["partitions"][0]["partuuid"]
        .as_str()
        .unwrap()
        .to_string();
    let cmdline = std::fs::read_to_string(setup.boot().join("cmdline.txt")).unwrap();
    assert!(
        cmdline.contains(&format!("root=PARTUUID={partuuid} rootfstype=ext4 ")),
        "{cmdline}"
    );
    assert!(!cmdline.contains("ext3"), "{cmdline}");
    let start = plan["table"]["partitions"][0]["start_sector"]
        .as_u64()
        .unwrap();
    let part = Loop::attach(&setup.image, Some(start * 512), true);
    let probed = tool_output("blkid", &["-o", "value", "-s", "TYPE", &part.device]);
    assert_eq!(probed.trim(), "ext4");
    drop(part);
    setup.inspect_partition(start, |mnt| {
        let fstab = std::fs::read_to_string(mnt.join("etc/fstab")).unwrap();
        assert!(
            fstab.contains(&format!("PARTUUID={partuuid}  /               ext4")),
            "{fstab}"
        );
        assert!(!fstab.contains("ext3"), "{fstab}");
        let backup = std::fs::read_to_string(mnt.join("etc/fstab.pimigrate-backup")).unwrap();
        assert!(
            backup.contains(" ext3 "),
            "the running system's fstab is kept: {backup}"
        );
    });
    let output = setup.run(&["rollback", "--yes"], None);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        std::fs::read(setup.boot().join("cmdline.txt")).unwrap(),
        cmdline_before
    );
    drop(source);
}

/// A real btrfs root (mounted at the source root, its files saying ext4
/// as a copied Raspberry Pi OS's would): refused by `plan` and a first
/// sync while planning, the filesystem named, nothing written.
#[test]
fn a_btrfs_root_is_refused_before_anything_is_written() {
    if !require_root("planning from a btrfs loop device") || !require_btrfs() {
        return;
    }
    let setup = MigrationRig::new(|_| {});
    let source = SourceFs::under_as(setup.tree.path(), 256 << 20, "btrfs");
    let expected = format!(
        "the root filesystem ({}) is btrfs: ",
        setup.tree.path().display()
    );
    for args in [
        vec!["--json", "plan", "--target", &setup.device],
        vec!["--json", "sync", "--dry-run", "--to", &setup.device],
        vec!["--json", "migrate", "--target", &setup.device, "--yes"],
    ] {
        let output = setup.run(&args, None);
        assert_eq!(exit_code(&output), 3, "{args:?}: {}", stderr(&output));
        let refusal = json(&output);
        let reason = refusal["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["code"] == "source-root-filesystem")
            .unwrap_or_else(|| panic!("{args:?}: {refusal:#}"))
            .clone();
        assert!(
            reason["message"].as_str().unwrap().starts_with(&expected),
            "{reason}"
        );
    }
    assert_first_mib_blank(&setup.image);
    drop(source);
}

/// btrfs to test with: its mkfs and the kernel's driver. Missing, the test
/// says so and passes, except in CI (`CI=true`), where it fails.
fn require_btrfs() -> bool {
    let known = || {
        std::fs::read_to_string("/proc/filesystems").is_ok_and(|t| {
            t.lines()
                .any(|l| l.split_whitespace().last() == Some("btrfs"))
        })
    };
    if !known() {
        let _ = Command::new("modprobe").arg("btrfs").status();
    }
    let why = match (pimigrate::tools::which("mkfs.btrfs").is_some(), known()) {
        (true, true) => return true,
        (false, _) => "no mkfs.btrfs (apt install btrfs-progs)",
        (true, false) => "this kernel has no btrfs",
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must test a real btrfs root, but {why}"
    );
    eprintln!("skipping the btrfs root: {why}");
    false
}
