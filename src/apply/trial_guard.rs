//! The trial guard's part on the new root: a systemd generator that, only
//! in a boot whose command line carries the trial's marker
//! (`plan::trial_guard`), makes emergency and rescue mode reboot and gives
//! the boot a deadline, and (`--auto-commit`) adds the unit that checks
//! and commits the trial. Outside the trial boot it writes nothing, so the
//! committed system never meets it; its output lives in /run, gone at the
//! next boot.
//!
//! Why a generator rather than drop-ins in /etc: a drop-in cannot say "only
//! in this boot" (a condition in it would stop emergency.service in every
//! boot), and the SoC's watchdog covers a hung kernel, not a boot that
//! waits at the emergency shell.
//!
//! Every reboot here is `reboot-force`: PID 1 goes straight to its
//! shutdown program, with no unit to load. A plain `reboot` starts
//! reboot.target, whose unit file a root that vanished cannot give, and
//! then nothing happens at all. When the shutdown program itself cannot be
//! run (the root gone), `systemd.crash_reboot=1` on the trial's command
//! line makes PID 1 reboot 10 s later instead of freezing. Not
//! `reboot-immediate`: its `sync()` runs in PID 1, and on a drive that
//! hangs rather than vanishes it would wait for ever, where
//! systemd-shutdown gives up on a sync that makes no progress.
//!
//! The units call a copy of the pimigrate that made the migration, kept on
//! the new root: the trial must not depend on where pimigrate was run from
//! (a tree of its own, a share that a trial boot does not have).

use crate::plan::trial_guard::{
    TrialGuard, TRIAL_BOOT_DEADLINE_SECONDS, TRIAL_EMERGENCY_SECONDS, TRIAL_MARKER,
};
use crate::plan::Plan;
use anyhow::{Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The generator, as the new root has it.
pub const GENERATOR: &str = "/etc/systemd/system-generators/pimigrate-trial";
/// pimigrate as the trial's units run it.
pub const TRIAL_PROGRAM: &str = "/var/lib/pimigrate/trial/pimigrate";
/// The unit that checks and commits the trial (`--auto-commit`).
pub const CHECK_UNIT: &str = "pimigrate-trial-check.service";

/// Writes the generator and pimigrate's own copy onto the new root mounted
/// at `target_root`, for a plan with a trial. Written again on a resume.
pub fn install(plan: &Plan, target_root: &Path) -> Result<()> {
    let Some(guard) = plan.trial_boot.as_ref().and_then(|t| t.guard.as_ref()) else {
        return Ok(());
    };
    let program = std::env::current_exe()
        .context("finding the pimigrate program to copy onto the new root for the trial")?;
    let copy = under(target_root, TRIAL_PROGRAM);
    write_executable(
        &copy,
        &std::fs::read(&program).with_context(|| format!("reading {}", program.display()))?,
    )?;
    write_executable(
        &under(target_root, GENERATOR),
        generator(guard, TRIAL_PROGRAM).as_bytes(),
    )
}

fn under(root: &Path, absolute: &str) -> std::path::PathBuf {
    root.join(absolute.trim_start_matches('/'))
}

/// A whole new file, executable, under a temporary name first: a
/// resumed migration never finds half of one in place.
fn write_executable(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("a file with no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let temp = crate::apply::atomic::temp_name(path);
    std::fs::write(&temp, bytes).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming {}", temp.display()))
}

/// The generator's text: POSIX sh, as generators run before most of the
/// system (no D-Bus, the root may still be read-only; only /run is written).
pub fn generator(guard: &TrialGuard, program: &str) -> String {
    let mut script = prologue();
    script.push_str(&emergency_reboots(program));
    script.push_str(&boot_deadline());
    if guard.auto_commit {
        script.push_str(&auto_commit_check(program));
    }
    script
}

/// The generator's start: the trial's marker read from the kernel's
/// command line (none: the generator writes nothing), and the helper that
/// writes a drop-in.
fn prologue() -> String {
    format!(
        r#"#!/bin/sh
# pimigrate's trial-boot guard, written by `pimigrate migrate` (see the plan,
# "Trial boot"). It acts only when the kernel's command line carries
# {TRIAL_MARKER}=, which only the trial's own command line has; in any
# other boot it writes nothing.
set -euf
out="${{1:-/run/systemd/generator}}"
mode=
for word in $(cat /proc/cmdline); do
	case "$word" in
	{TRIAL_MARKER}=*) mode="${{word#{TRIAL_MARKER}=}}" ;;
	esac
done
[ -n "$mode" ] || exit 0

dropin() {{
	mkdir -p "$out/$1.d"
	cat >"$out/$1.d/99-pimigrate-trial.conf"
}}

"#
    )
}

/// Emergency and rescue mode, in the trial: record why, then reboot.
fn emergency_reboots(program: &str) -> String {
    let emergency = TRIAL_EMERGENCY_SECONDS;
    format!(
        r#"# Emergency or rescue mode waits for a person at the console: in the trial
# it records why (on this root and the SD card's) and reboots instead, and
# the one-shot trial is over. Each command may fail (a root that vanished
# has neither): the reboot comes all the same.
for mode_unit in emergency rescue; do
	dropin "$mode_unit.service" <<EOF
[Unit]
SuccessAction=reboot-force
FailureAction=reboot-force
[Service]
ExecStartPre=-{program} trial failed --why $mode_unit
ExecStart=
ExecStart=-/bin/echo "pimigrate: the trial boot stopped in $mode_unit mode; rebooting, the SD card starts next"
StandardInput=null
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec={emergency}
EOF
done

"#
    )
}

/// The trial boot's deadline for reaching its target.
fn boot_deadline() -> String {
    let deadline = TRIAL_BOOT_DEADLINE_SECONDS;
    format!(
        r#"# A boot that never reaches its target (a unit that hangs) is reset.
# reboot-force everywhere: PID 1 reboots without loading a unit, and with
# systemd.crash_reboot=1 even without its shutdown program.
for target in multi-user.target graphical.target; do
	dropin "$target" <<EOF
[Unit]
JobTimeoutSec={deadline}
JobTimeoutAction=reboot-force
EOF
done
"#
    )
}

/// `--auto-commit`: the unit that checks and commits the trial once the
/// system is up.
fn auto_commit_check(program: &str) -> String {
    let deadline = TRIAL_BOOT_DEADLINE_SECONDS;
    format!(
        r#"
# --auto-commit: once the system is up, check the trial and commit it, or
# record why not and reboot (FailureAction), so the SD card starts next.
# Its job, queued as the boot starts, has the boot's deadline: a check that
# hangs resets the Pi too.
if [ "$mode" = auto-commit ]; then
	cat >"$out/{CHECK_UNIT}" <<EOF
[Unit]
Description=pimigrate: check the trial boot, then commit it or go back to the SD card
After=multi-user.target
FailureAction=reboot-force
JobTimeoutSec={deadline}
JobTimeoutAction=reboot-force
[Service]
Type=oneshot
ExecStart={program} trial check
TimeoutStartSec={deadline}
StandardOutput=journal+console
StandardError=journal+console
EOF
	mkdir -p "$out/multi-user.target.wants"
	ln -sf "../{CHECK_UNIT}" "$out/multi-user.target.wants/{CHECK_UNIT}"
fi
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::trial_guard::{decide, TrialKernel};

    fn guard(auto_commit: bool) -> TrialGuard {
        let normal =
            crate::bootcfg::Cmdline::parse(b"root=PARTUUID=0b4c1d2e-02 rootwait\n").unwrap();
        decide(&TrialKernel::default(), &normal, auto_commit)
    }

    /// The generator run for real (sh) with a command line of its own.
    fn run(script: &str, cmdline: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let proc_cmdline = dir.path().join("cmdline");
        std::fs::write(&proc_cmdline, cmdline).unwrap();
        let script = script.replace("/proc/cmdline", &proc_cmdline.to_string_lossy());
        let out = dir.path().join("generator");
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg("pimigrate-trial")
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success());
        dir
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut found: Vec<String> = walkdir::WalkDir::new(dir.join("generator"))
            .into_iter()
            .flatten()
            .filter(|e| !e.file_type().is_dir())
            .map(|e| {
                e.path()
                    .strip_prefix(dir.join("generator"))
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn the_generator_writes_nothing_outside_the_trial() {
        let script = generator(&guard(true), TRIAL_PROGRAM);
        let dir = run(&script, "root=PARTUUID=0b4c1d2e-02 rootwait panic=10\n");
        assert!(files(dir.path()).is_empty(), "{:?}", files(dir.path()));
    }

    #[test]
    fn in_the_trial_emergency_and_rescue_reboot_and_the_boot_has_a_deadline() {
        let script = generator(&guard(false), TRIAL_PROGRAM);
        let dir = run(
            &script,
            "root=PARTUUID=0b4c1d2e-02 panic=10 pimigrate.trial=1\n",
        );
        assert_eq!(
            files(dir.path()),
            [
                "emergency.service.d/99-pimigrate-trial.conf",
                "graphical.target.d/99-pimigrate-trial.conf",
                "multi-user.target.d/99-pimigrate-trial.conf",
                "rescue.service.d/99-pimigrate-trial.conf",
            ]
        );
        let emergency = std::fs::read_to_string(
            dir.path()
                .join("generator/emergency.service.d/99-pimigrate-trial.conf"),
        )
        .unwrap();
        assert!(
            emergency.contains("SuccessAction=reboot-force"),
            "{emergency}"
        );
        assert!(emergency.contains("ExecStart=\nExecStart=-"), "{emergency}");
        assert!(emergency.contains("in emergency mode"), "{emergency}");
        assert!(
            emergency.contains(&format!(
                "ExecStartPre=-{TRIAL_PROGRAM} trial failed --why emergency\n"
            )),
            "{emergency}"
        );
        let target = std::fs::read_to_string(
            dir.path()
                .join("generator/multi-user.target.d/99-pimigrate-trial.conf"),
        )
        .unwrap();
        assert!(
            target.contains(&format!("JobTimeoutSec={TRIAL_BOOT_DEADLINE_SECONDS}\n")),
            "{target}"
        );
        assert!(target.contains("JobTimeoutAction=reboot-force"), "{target}");
    }

    #[test]
    fn auto_commit_adds_the_check_unit_wanted_by_multi_user() {
        let script = generator(&guard(true), TRIAL_PROGRAM);
        let dir = run(
            &script,
            "root=PARTUUID=0b4c1d2e-02 pimigrate.trial=auto-commit quiet\n",
        );
        let all = files(dir.path());
        assert!(all.contains(&CHECK_UNIT.to_string()), "{all:?}");
        let link = dir
            .path()
            .join("generator/multi-user.target.wants")
            .join(CHECK_UNIT);
        assert_eq!(
            std::fs::read_link(link).unwrap(),
            Path::new("..").join(CHECK_UNIT)
        );
        let unit = std::fs::read_to_string(dir.path().join("generator").join(CHECK_UNIT)).unwrap();
        assert!(
            unit.contains(&format!("ExecStart={TRIAL_PROGRAM} trial check")),
            "{unit}"
        );
        assert!(unit.contains("FailureAction=reboot-force\n"), "{unit}");
        assert!(
            unit.contains(&format!(
                "JobTimeoutSec={TRIAL_BOOT_DEADLINE_SECONDS}\nJobTimeoutAction=reboot-force\n"
            )),
            "{unit}"
        );
        // A guard-only trial's marker never starts the check.
        let dir = run(&script, "root=PARTUUID=0b4c1d2e-02 pimigrate.trial=1\n");
        assert!(!files(dir.path()).contains(&CHECK_UNIT.to_string()));
    }
}
