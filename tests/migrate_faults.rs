//! A migration killed (SIGKILL) at every failure point: the source's boot
//! files are the old or the new version, never half of one; the source is
//! unchanged; `migrate --resume` finishes it and `rollback` undoes it. And
//! one that fails with an error at every point: the owner is told where
//! the Pi stands, truly, and the command that goes on, which finishes it.

use crate::common;

use common::migration::MigrationRig;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

/// Points and hit counts to kill at: every point once, and later hits of
/// the atomic writes (the journal is saved through them after every step).
fn kill_points() -> Vec<String> {
    let mut points: Vec<String> = pimigrate::failpoint::MIGRATE
        .iter()
        .map(|p| p.to_string())
        .collect();
    for n in 2..=6 {
        points.push(format!("atomic-after-temp@{n}"));
        points.push(format!("atomic-after-rename@{n}"));
    }
    points
}

/// The rig with enough files for the copy to be caught in the middle.
fn rig() -> MigrationRig {
    MigrationRig::new(|tree| {
        for i in 0..400 {
            std::fs::write(tree.join(format!("usr/file{i}")), vec![i as u8; 64 * 1024]).unwrap();
        }
    })
}

fn planned_partuuid(run: &MigrationRig) -> String {
    run.journal()["plan"]["table"]["partitions"][0]["partuuid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The two tests kill pimigrate mid-way; run them one at a time so neither
/// sees the other's leftovers.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Everything in the source tree but its boot directory.
fn source_snapshot(root: &Path) -> Vec<(PathBuf, u32, i64, i64, Vec<u8>)> {
    let boot = root.join("boot");
    snapshot(root, |path| path.starts_with(&boot))
}

fn killed(output: &std::process::Output) -> bool {
    output.status.signal() == Some(9)
}

#[test]
fn killed_anywhere_the_sd_card_still_boots_and_resume_finishes() {
    if !require_root("fault injection on a loop device") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for point in kill_points() {
        let run = rig();
        let cmdline_before = std::fs::read(run.boot().join("cmdline.txt")).unwrap();
        let source_before = source_snapshot(run.tree.path());
        let output = run.run(
            &[
                "migrate",
                "--target",
                &run.device,
                "--yes",
                "--trial",
                "never",
            ],
            Some(&point),
        );
        assert!(
            killed(&output),
            "{point}: not reached ({:?})\n{}",
            output.status,
            stderr(&output)
        );

        let cmdline_now = std::fs::read(run.boot().join("cmdline.txt")).unwrap();
        if !run.state.path().join("migration.json").exists() {
            // Killed before the journal's first save: nothing was done yet.
            assert_eq!(cmdline_now, cmdline_before, "{point}");
            let output = run.run(
                &[
                    "migrate",
                    "--target",
                    &run.device,
                    "--yes",
                    "--trial",
                    "never",
                ],
                None,
            );
            assert_eq!(
                exit_code(&output),
                0,
                "{point}: a fresh start failed:\n{}",
                stderr(&output)
            );
            continue;
        }
        let partuuid = planned_partuuid(&run);
        let new_cmdline = String::from_utf8(cmdline_before.clone()).unwrap().replace(
            "root=PARTUUID=6c586e13-02",
            &format!("root=PARTUUID={partuuid}"),
        );
        assert!(
            cmdline_now == cmdline_before || cmdline_now == new_cmdline.as_bytes(),
            "{point}: cmdline.txt is neither the old nor the new version:\n{}",
            String::from_utf8_lossy(&cmdline_now)
        );
        assert_eq!(
            source_snapshot(run.tree.path()),
            source_before,
            "{point}: the source changed"
        );

        let output = run.run(&["migrate", "--resume", "--yes"], None);
        assert_eq!(
            exit_code(&output),
            0,
            "{point}: resume failed:\n{}",
            stderr(&output)
        );
        assert_eq!(
            std::fs::read(run.boot().join("cmdline.txt")).unwrap(),
            new_cmdline.as_bytes(),
            "{point}"
        );
        assert_eq!(
            std::fs::read(run.boot().join("cmdline.txt.pimigrate-backup")).unwrap(),
            cmdline_before,
            "{point}: the backup is the version that booted"
        );
        assert_eq!(
            source_snapshot(run.tree.path()),
            source_before,
            "{point}: the source changed"
        );
    }
}

#[test]
fn killed_anywhere_rollback_restores_the_boot_files() {
    if !require_root("fault injection on a loop device") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A trial backs nothing up on the SD card when it has no tryboot.txt
    // of its own: it only creates the trial's two files.
    let trial_points = kill_points()
        .into_iter()
        .filter(|p| !p.starts_with("boot-backup-"));
    for point in trial_points {
        let run = rig();
        let boot_before = boot_files(&run.boot());
        let output = run.run(
            &[
                "migrate",
                "--target",
                &run.device,
                "--yes",
                "--trial",
                "always",
            ],
            Some(&point),
        );
        assert!(killed(&output), "{point}: not reached\n{}", stderr(&output));
        let output = run.run(&["rollback", "--yes"], None);
        assert_eq!(
            exit_code(&output),
            0,
            "{point}: rollback failed:\n{}",
            stderr(&output)
        );
        let after: Vec<_> = boot_files(&run.boot())
            .into_iter()
            .filter(|(name, _)| !name.ends_with(".pimigrate-new"))
            .collect();
        assert_eq!(
            after, boot_before,
            "{point}: the boot files are not as before"
        );
    }
}

/// Every point of a migration failing with an error (`name:error`), as a
/// failing mkfs, a full disk or a tool's error would: the owner reads the
/// cause, then where the Pi stands and the command that goes on, and no
/// Debug text. What it says is true of the SD card (unchanged when it
/// says so), and the command it names finishes the migration.
#[test]
fn failing_anywhere_says_where_the_pi_stands_and_the_command_that_goes_on() {
    if !require_root("fault injection on a loop device") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let migrate = |run: &MigrationRig, failpoint: Option<&str>| {
        let args = [
            "migrate",
            "--target",
            &run.device,
            "--yes",
            "--trial",
            "never",
        ];
        run.run(&args, failpoint)
    };
    let mut points = kill_points();
    points.retain(|p| !p.contains('@') || p.ends_with("@2") || p.ends_with("@4"));
    for point in points {
        let run = rig();
        let cmdline_before = std::fs::read(run.boot().join("cmdline.txt")).unwrap();
        let source_before = source_snapshot(run.tree.path());
        let failed = migrate(&run, Some(&format!("{point}:error")));
        let said = stderr(&failed);
        if point == "copy-file" {
            // The first pass's failed file is copied again by the second,
            // which catches up with what changed meanwhile: no error.
            assert_eq!(exit_code(&failed), 0, "{point}: {said}");
            continue;
        }
        assert_eq!(exit_code(&failed), 1, "{point}: {said}");
        let name = point.split('@').next().unwrap();
        assert!(
            said.contains(&format!("fail point {name}")),
            "{point}: the cause is not said:\n{said}"
        );
        let (stands, _, command) = told(&point, &said);
        let cmdline_now = std::fs::read(run.boot().join("cmdline.txt")).unwrap();
        if stands.contains("which is unchanged") || stands.starts_with("nothing was written") {
            assert_eq!(
                cmdline_now, cmdline_before,
                "{point}: said unchanged, but:\n{said}"
            );
        }
        assert_eq!(
            source_snapshot(run.tree.path()),
            source_before,
            "{point}: the source changed"
        );
        // The command it names goes on, and finishes the migration.
        let next = match command.as_str() {
            "sudo pimigrate migrate --resume" => run.run(&["migrate", "--resume", "--yes"], None),
            again if again.contains(" migrate --target ") => migrate(&run, None),
            other => panic!("{point}: goes on with {other}, which this test does not know"),
        };
        assert_eq!(
            exit_code(&next),
            0,
            "{point}: `{command}` failed:\n{}",
            stderr(&next)
        );
        let cmdline_after =
            String::from_utf8(std::fs::read(run.boot().join("cmdline.txt")).unwrap()).unwrap();
        assert!(
            cmdline_after.contains(&format!("root=PARTUUID={}", planned_partuuid(&run))),
            "{point}: after `{command}`: {cmdline_after}"
        );
    }
}
