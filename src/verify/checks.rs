//! The pass/fail checks: is the system running from what the migration
//! built, and does every name in the boot files point at exactly one device?

use super::expected::Expected;
use crate::bootcfg::{Cmdline, CmdlineError, ConfigTxt, DeviceSpec, FilterContext};
use crate::check::Check;
use crate::system::disks::device_name;
use crate::system::source::{id_uses, resolve, IdUse};
use crate::system::System;
use std::path::PathBuf;

pub fn run(system: &System, expected: &Expected) -> Vec<Check> {
    let mut checks = vec![root_mounted(system, expected)];
    checks.push(kernel_root(system, expected));
    checks.extend(fstab_entries(system, expected));
    checks.push(ids_unique(system, expected));
    checks.push(boot_partition(system, expected));
    checks.extend(boot_mode(system, expected));
    checks.extend(bootloader_config(system, expected));
    checks.extend(trial_boot(system, expected));
    checks
}

/// A full move: the bootloader started this boot from the new drive (the
/// device tree's `chosen/bootloader/boot-mode`), or from the SD card in a
/// trial that starts the SD card's kernel. Without the entry (not a Pi
/// with the EEPROM bootloader) there is nothing to check.
fn boot_mode(system: &System, expected: &Expected) -> Option<Check> {
    const CODE: &str = "boot-mode";
    let wanted = expected.boot_mode(system.pi.in_trial_boot)?;
    let mode = system.pi.boot_mode?;
    let entry = "/proc/device-tree/chosen/bootloader/boot-mode";
    let name = |mode: u32| {
        u8::try_from(mode)
            .map(crate::bootcfg::eeprom::mode_name)
            .unwrap_or("other")
    };
    if mode == u32::from(wanted) {
        return Some(Check::pass(
            CODE,
            format!(
                "the bootloader started this boot from {} ({entry} reads {mode})",
                name(mode)
            ),
        ));
    }
    let hint = match (system.pi.in_trial_boot, expected.committed) {
        (true, _) => "the trial did not start the new drive: `sudo pimigrate rollback` undoes the migration's changes",
        (false, Some(_)) => {
            "the boot order does not start the new drive: take the SD card out, or set BOOT_ORDER with `sudo rpi-eeprom-config --edit`"
        }
        (false, None) => "`sudo pimigrate verify --commit` in the trial boot hands the Pi over to the new drive",
    };
    Some(
        Check::fail(
            CODE,
            format!(
                "the bootloader started this boot from {} ({entry} reads {mode}), not from {} ({wanted})",
                name(mode),
                name(u32::from(wanted))
            ),
        )
        .hint(hint),
    )
}

/// A full move that changed the bootloader's config: the running config
/// (`rpi-eeprom-config`, read back) reads the settings the migration, or
/// after the hand-over the commit, set.
fn bootloader_config(system: &System, expected: &Expected) -> Option<Check> {
    const CODE: &str = "bootloader-config";
    let plan = expected.bootloader.as_ref().filter(|b| b.consent)?;
    let wanted = match expected.committed {
        Some(_) => plan.at_commit.as_ref().or(plan.at_migrate.as_ref()),
        None => plan.at_migrate.as_ref(),
    }?;
    let Some(running) = system.pi.eeprom_config.as_deref() else {
        return Some(
            Check::fail(
                CODE,
                "the bootloader's config could not be read (rpi-eeprom-config did not answer)"
                    .into(),
            )
            .hint("install rpi-eeprom (sudo apt install rpi-eeprom) and run `rpi-eeprom-config`"),
        );
    };
    // The settings the change made, as this board reads them; a change
    // journaled before it named them: the whole config.
    let reads = match wanted.edits.is_empty() {
        true => crate::bootcfg::eeprom::same_config(running, &wanted.config),
        false => crate::bootcfg::EepromConfig::parse(running.as_bytes())
            .ok()
            .and_then(|c| c.reads_all(&wanted.edits, system.pi.config_filter).ok())
            .unwrap_or(false),
    };
    if reads {
        return Some(Check::pass(
            CODE,
            format!(
                "the bootloader's config is the one the migration set: {}",
                wanted.purpose
            ),
        ));
    }
    let order = |text: &str| {
        crate::system::pi::parse_eeprom_boot_order(text, system.pi.config_filter)
            .map(|o| o.describe())
            .unwrap_or_else(|| "unreadable".into())
    };
    Some(
        Check::fail(
            CODE,
            format!(
                "the bootloader's config is not the one the migration set ({}): BOOT_ORDER is {}, the migration's {}",
                wanted.purpose,
                order(running),
                order(&wanted.config)
            ),
        )
        .hint("an update staged by `verify --commit` is written at the next reboot; otherwise the config was changed since (`rpi-eeprom-config` shows it)"),
    )
}

/// The name of the one partition the target's root PARTUUID matches, or a
/// failed check that says why there is not exactly one.
fn target_root(system: &System, expected: &Expected, code: &'static str) -> Result<String, Check> {
    let spec = expected.root_spec();
    let matches = resolve(&spec, &system.disks);
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Check::fail(
            code,
            format!("the target's root partition {spec} is not attached"),
        )
        .hint("plug the target disk in; `pimigrate devices` lists what is attached")),
        many => Err(Check::fail(
            code,
            format!(
                "{spec} names {} partitions: {}; the kernel may mount either",
                many.len(),
                many.join(", ")
            ),
        )
        .devices(many.to_vec())),
    }
}

fn root_mounted(system: &System, expected: &Expected) -> Check {
    const CODE: &str = "root-mounted";
    let target = match target_root(system, expected, CODE) {
        Ok(name) => name,
        Err(check) => return check,
    };
    let running = system
        .source
        .running_root_devno
        .and_then(|devno| device_name(&system.disks, devno));
    let spec = expected.root_spec();
    match running {
        Some(running) if running == target => Check::pass(
            CODE,
            format!("/ is mounted from {target} ({spec}), the migration's target"),
        )
        .devices(vec![target]),
        running => Check::fail(
            CODE,
            format!(
                "/ is mounted from {}, not from the target's {target} ({spec})",
                running.as_deref().unwrap_or("an unknown device")
            ),
        )
        .devices(running.into_iter().chain([target]).collect()),
    }
}

/// The command-line file the firmware read for this boot: tryboot.txt's
/// `cmdline=` in a trial boot, config.txt's otherwise (a view path).
pub fn cmdline_in_use(system: &System, expected: &Expected) -> PathBuf {
    cmdline_named_by(system, expected, system.pi.in_trial_boot)
}

/// The command-line file a boot reads: tryboot.txt's `cmdline=` in a trial
/// boot (when tryboot.txt exists), config.txt's otherwise (a view path).
pub fn cmdline_named_by(system: &System, expected: &Expected, trial: bool) -> PathBuf {
    let config_name = if trial
        && system
            .host
            .path(expected.on_boot_named("tryboot.txt"))
            .exists()
    {
        "tryboot.txt"
    } else {
        "config.txt"
    };
    let settings = std::fs::read(system.host.path(expected.on_boot_named(config_name)))
        .ok()
        .and_then(|bytes| ConfigTxt::parse(&bytes).ok())
        .map(|config| {
            config.effective_with(
                &FilterContext {
                    model: system.pi.config_filter.map(str::to_string),
                    tryboot: trial,
                },
                &mut crate::system::source::include_reader(&system.host, &expected.boot_dir),
            )
        })
        .unwrap_or_default();
    expected.on_boot_named(&settings.cmdline_file())
}

/// `root=` of a command line, or why there is none.
fn root_of(bytes: &[u8]) -> Result<DeviceSpec, CmdlineError> {
    Cmdline::parse(bytes).and_then(|c| c.root())
}

fn kernel_root(system: &System, expected: &Expected) -> Check {
    const CODE: &str = "kernel-root";
    let host = &system.host;
    let proc_path = host.proc("cmdline");
    let kernel = match std::fs::read(&proc_path).map(|bytes| root_of(&bytes)) {
        Ok(Ok(spec)) => spec,
        Ok(Err(err)) => return Check::fail(CODE, format!("the running kernel's root=: {err}")),
        Err(err) => {
            return Check::fail(
                CODE,
                format!(
                    "the running kernel's root=: cannot read {}: {err}",
                    proc_path.display()
                ),
            )
        }
    };
    let file = cmdline_in_use(system, expected);
    let unreadable = |why: String| {
        Check::fail(CODE, format!("{}: {why}", file.display()))
            .hint("the firmware read this file at boot; restore it with `pimigrate rollback`")
    };
    let from_file = match std::fs::read(host.path(&file)).map(|bytes| root_of(&bytes)) {
        Ok(Ok(spec)) => spec,
        Ok(Err(err)) => return unreadable(err.to_string()),
        Err(err) => return unreadable(format!("cannot read it: {err}")),
    };
    if kernel != from_file {
        return Check::fail(
            CODE,
            format!(
                "the kernel started with root={kernel} (/proc/cmdline), but {} says root={from_file}",
                file.display()
            ),
        )
        .hint("the boot files changed since this boot, or the firmware read another file");
    }
    let target = match target_root(system, expected, CODE) {
        Ok(name) => name,
        Err(check) => return check,
    };
    let named = resolve(&kernel, &system.disks);
    if named != [target.clone()] {
        let named = if named.is_empty() {
            "no attached device".to_string()
        } else {
            named.join(", ")
        };
        return Check::fail(
            CODE,
            format!("the kernel's root={kernel} names {named}, not the target's {target}"),
        );
    }
    Check::pass(
        CODE,
        format!(
            "the kernel's root={kernel} (/proc/cmdline) is the one in {} and names {target}",
            file.display()
        ),
    )
    .devices(vec![target])
}

/// Every device an fstab entry names must be exactly one; `/` must be the
/// target's root partition.
fn fstab_entries(system: &System, expected: &Expected) -> Vec<Check> {
    const CODE: &str = "fstab";
    let fstab = match &system.source.fstab {
        Ok(file) => match &file.parsed {
            Ok(fstab) => fstab,
            Err(err) => return vec![Check::fail(CODE, err.to_string())],
        },
        Err(err) => return vec![Check::fail(CODE, err.to_string())],
    };
    let target = resolve(&expected.root_spec(), &system.disks);
    let mut checks = Vec::new();
    for entry in fstab.entries() {
        let Ok(spec) = entry.device_spec() else {
            continue;
        };
        let place = format!(
            "/etc/fstab line {} ({} {})",
            entry.line, entry.spec, entry.mountpoint
        );
        let matches = resolve(&spec, &system.disks);
        let nofail = entry.options.split(',').any(|o| o == "nofail");
        let check = match matches.as_slice() {
            [] if nofail => Check::pass(
                CODE,
                format!("{place}: not attached (nofail: the boot does not wait for it)"),
            ),
            [] => Check::fail(CODE, format!("{place}: matches no attached device"))
                .hint("the boot waits for it and drops to an emergency shell: attach it, fix the line, or add nofail"),
            [one] if entry.mountpoint == "/" && target.as_slice() != [one.clone()] => {
                Check::fail(
                    CODE,
                    format!("{place}: names {one}, not the target's root partition"),
                )
                .devices(vec![one.clone()])
                .hint(format!(
                    "put {} in the first field of the / line",
                    expected.root_spec()
                ))
            }
            [one] => Check::pass(CODE, format!("{place} → {one}")).devices(vec![one.clone()]),
            many => Check::fail(
                CODE,
                format!(
                    "{place}: matches {} devices: {} (duplicate {})",
                    many.len(),
                    many.join(", "),
                    spec.kind_name()
                ),
            )
            .devices(many.to_vec())
            .hint("give the other device new ids, or detach it"),
        };
        checks.push(check);
    }
    checks
}

/// The ids the migration made must not exist twice (a clone, an old copy
/// of the same disk): the kernel or systemd would pick either.
pub fn ids_unique(system: &System, expected: &Expected) -> Check {
    const CODE: &str = "ids-unique";
    let uses = id_uses(expected.new_ids.iter().cloned(), &system.disks);
    let wrong: Vec<&IdUse> = uses.iter().filter(|u| !u.is_unique()).collect();
    if wrong.is_empty() {
        let ids: Vec<String> = expected.new_ids.iter().map(ToString::to_string).collect();
        return Check::pass(
            CODE,
            format!("the new ids are on one device each: {}", ids.join(", ")),
        );
    }
    let mut devices: Vec<String> = wrong.iter().flat_map(|u| u.devices.clone()).collect();
    devices.sort();
    devices.dedup();
    let said: Vec<String> = wrong.iter().map(|u| u.describe()).collect();
    Check::fail(CODE, format!("duplicate ids: {}", said.join("; ")))
        .devices(devices)
        .hint("detach the other disk, or give it new ids (sfdisk --disk-id, tune2fs -U random, e2label)")
}

fn boot_partition(system: &System, expected: &Expected) -> Check {
    const CODE: &str = "boot-partition";
    let dir = &expected.boot_dir;
    let Some(spec) = &expected.boot_spec else {
        return Check::pass(
            CODE,
            format!(
                "the boot files were in {} on the root filesystem, not a partition of their own",
                dir.display()
            ),
        );
    };
    let intended = resolve(spec, &system.disks);
    let mounted = system
        .mounts
        .at(dir)
        .and_then(|m| device_name(&system.disks, m.devno));
    match (intended.as_slice(), mounted) {
        ([one], Some(mounted)) if *one == mounted => Check::pass(
            CODE,
            format!("{} is mounted from {mounted} ({spec}), the boot partition the firmware reads", dir.display()),
        )
        .devices(vec![mounted]),
        ([one], mounted) => Check::fail(
            CODE,
            format!(
                "{} is mounted from {}, not from the boot partition {one} ({spec})",
                dir.display(),
                mounted.as_deref().unwrap_or("nothing")
            ),
        )
        .devices(mounted.into_iter().chain([one.clone()]).collect())
        .hint("kernel and firmware updates go to the mounted directory: fix the boot line in /etc/fstab"),
        ([], _) => Check::fail(CODE, format!("the boot partition {spec} is not attached")),
        (many, _) => Check::fail(
            CODE,
            format!("the boot partition {spec} matches {}", many.join(", ")),
        )
        .devices(many.to_vec()),
    }
}

fn trial_boot(system: &System, expected: &Expected) -> Option<Check> {
    const CODE: &str = "trial-boot";
    expected.trial.as_ref()?;
    let flag = "/proc/device-tree/chosen/bootloader/tryboot";
    Some(match (expected.committed, system.pi.in_trial_boot) {
        (Some(when), _) => Check::pass(
            CODE,
            format!(
                "the trial boot was made permanent at {}",
                crate::clock::rfc3339_utc(when)
            ),
        ),
        (None, true) => Check::pass(
            CODE,
            format!(
                "this is the trial boot ({flag} reads 1, or the kernel started with the trial's command line): \
                 `sudo pimigrate verify --commit` makes it permanent"
            ),
        ),
        // The other checks say whether this boot runs the target: a commit
        // whose swap reached the SD card does, from cmdline.txt.
        (None, false) if expected.commit_interrupted => Check::pass(
            CODE,
            "a commit was cut short after it replaced cmdline.txt (a power cut?): this normal boot read it; \
             `sudo pimigrate verify --commit` finishes the commit"
                .to_string(),
        ),
        // A full move's new drive that started by itself proves what its
        // trial would have (the other checks say whether it does).
        (None, false) if expected.layout == crate::plan::Layout::Full => Check::pass(
            CODE,
            "a normal boot, not the trial: the new drive started by itself; \
             `sudo pimigrate verify --commit` completes the hand-over"
                .to_string(),
        ),
        (None, false) => Check::fail(
            CODE,
            format!("this is not the trial boot ({flag} is not 1): the firmware read config.txt and cmdline.txt"),
        )
        .hint("start the trial with `sudo reboot \"0 tryboot\"`"),
    })
}
