//! The plan for a person, in small sections. (For scripts the plan is
//! serialised as JSON.) The caller says what the text is for, and each
//! section says only what is true there: no text is patched afterwards.

use super::*;
use crate::system::bootloader::EepromBase;
use crate::system::probe::TableKind;
use crate::units::{binary, human_bytes};
use std::fmt::Write;

/// How much to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    Brief,
    Normal,
    Full,
}

impl Detail {
    /// As `-q` and `-v` ask: brief, normal, or in full.
    pub fn from_flags(quiet: bool, verbose: u8) -> Detail {
        match (quiet, verbose) {
            (true, _) => Detail::Brief,
            (false, 0) => Detail::Normal,
            (false, _) => Detail::Full,
        }
    }
}

/// What the plan is shown for: the words differ where the truth does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `pimigrate plan`: a dry run; nothing is ever written.
    DryRun,
    /// `pimigrate migrate` (and its log): the plan about to be applied.
    Migrate,
    /// The wizard: the plan about to be applied, for someone who did not
    /// type a command line (no flags to rerun with).
    Wizard,
}

pub fn plan_text(plan: &Plan, detail: Detail, purpose: Purpose) -> String {
    let mut out = String::new();
    headline(&mut out, plan);
    if detail == Detail::Brief {
        brief(&mut out, plan, purpose);
        // Short, but never silent about a first-boot hook left out.
        notes(&mut out, plan);
        return out;
    }
    if purpose == Purpose::DryRun {
        let _ = writeln!(out, "Dry run: nothing has been written.\n");
    }
    source(&mut out, plan);
    table(&mut out, plan);
    filesystems(&mut out, plan);
    copy(&mut out, plan, detail);
    edits(&mut out, plan);
    notes(&mut out, plan);
    trial_boot(&mut out, plan);
    match &plan.bootloader {
        Some(bootloader) => bootloader_section(&mut out, bootloader, purpose),
        None => {
            if let Some(order) = &plan.boot_order {
                let _ = writeln!(out, "\nBoot order\n  {}", order.message);
            }
        }
    }
    after_move(&mut out, &plan.after_move, purpose);
    warnings(&mut out, plan);
    out
}

/// TRIM, the USB bridge's driver and the power: what the new drive gets
/// beyond the copy, with the rule as an added file.
fn after_move(out: &mut String, after: &after_move::AfterMove, purpose: Purpose) {
    let trim = &after.trim;
    if trim.summary.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nAfter the move");
    let _ = writeln!(out, "  {}.", trim.summary);
    if let Some(rule) = &trim.rule {
        let made = match purpose {
            Purpose::DryRun => "would be written",
            _ => "written",
        };
        let _ = writeln!(
            out,
            "  The rule, {made} onto the new root (--no-trim leaves it out):"
        );
        for line in rule.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out, "  {}.", trim.timer_note);
    if let Some(quirk) = &after.usb_quirk {
        usb_quirk(out, quirk);
        if quirk.sets() && trim.rule.is_some() {
            let _ = writeln!(
                out,
                "  The TRIM rule above acts under usb-storage too: it sets the mode the driver leaves alone."
            );
        }
    }
    if let crate::system::power::UsbBootCurrent::Lifted { by } = &after.power.usb_boot_current {
        let _ = writeln!(
            out,
            "  USB power: the bootloader gives the USB ports their full current ({})",
            match by {
                crate::system::power::LiftedBy::Eeprom(ma) => format!("PSU_MAX_CURRENT={ma}"),
                crate::system::power::LiftedBy::Supply(ma) => format!("a {ma} mA supply"),
            }
        );
    }
    if let Some(ma) = after.power.psu_max_current {
        let _ = writeln!(
            out,
            "  USB power: PSU_MAX_CURRENT={ma} is written into the bootloader's config with the migration's change (Bootloader above)"
        );
    }
}

/// The bridge's driver now, and the quirk: offered, set, or why not.
fn usb_quirk(out: &mut String, quirk: &after_move::UsbQuirk) {
    let driver = quirk.driver.as_deref().unwrap_or("no driver");
    let _ = writeln!(
        out,
        "  USB bridge {} runs on {driver}{}.",
        quirk.bridge,
        match quirk.evidence.is_empty() {
            true => String::new(),
            false => format!(": it {}", quirk.evidence.join("; ")),
        }
    );
    if let Some(why) = &quirk.log_unreadable {
        let _ = writeln!(
            out,
            "  (the kernel log could not be read, so uas resets were not looked for: {why})"
        );
    }
    let argument = quirk.argument.as_deref().unwrap_or("usb-storage.quirks");
    let line = match (&quirk.refused, quirk.already, quirk.sets(), quirk.offered) {
        (_, true, _, _) => format!("The command line already keeps uas off it ({argument})."),
        (Some(why), ..) if quirk.offered || quirk.consent => {
            format!("The usb-storage quirk cannot be set: {why}.")
        }
        (Some(_), ..) => return,
        (None, _, true, _) => format!(
            "The new command line gets {argument} (--usb-quirk; see the cmdline.txt changes): {}.",
            quirk.cost
        ),
        (None, _, false, true) => format!(
            "Offered: {argument} on the new command line moves it to usb-storage (--usb-quirk sets it): {}.",
            quirk.cost
        ),
        (None, _, false, false) => return,
    };
    let _ = writeln!(out, "  {line}");
}

/// A full move's way through the EEPROM bootloader: the trial's route, the
/// config's changes as diffs (made only with consent), the hand-over.
fn bootloader_section(out: &mut String, bootloader: &BootloaderPlan, purpose: Purpose) {
    let _ = writeln!(out, "\nBootloader");
    trial_route(out, bootloader);
    config_base(out, bootloader);
    config_changes(out, bootloader, purpose);
    handover(out, bootloader);
}

/// How the trial boots, and the one-shot boot order its reboot sets.
fn trial_route(out: &mut String, bootloader: &BootloaderPlan) {
    let route = match bootloader.trial {
        Some(TrialRoute::Device) => "Trial: the new drive boots once, its own boot partition and all",
        Some(TrialRoute::KernelFromSd) => {
            "Trial: the SD card's kernel with the new drive's root (the new drive boots by itself after the hand-over)"
        }
        None => "No trial boot",
    };
    let _ = writeln!(out, "  {route}: {}.", bootloader.reason);
    if let Some(order) = &bootloader.reboot_order {
        let _ = writeln!(
            out,
            "  The trial reboot first sets the one-shot boot order {order} (set_reboot_order, `vcmailbox {} 4 4 {order}`); nothing is written to the EEPROM for it.",
            super::bootloader::SET_REBOOT_ORDER_TAG
        );
    }
}

/// Which config the changes are made on, and which bootloader image.
fn config_base(out: &mut String, bootloader: &BootloaderPlan) {
    if bootloader.current_from == EepromSource::Staged {
        let _ = writeln!(
            out,
            "  The config shown is the update staged for the next boot (pieeprom.upd): the one the EEPROM holds from then on."
        );
    }
    let changing = bootloader.consent || bootloader.power.is_some();
    if let (true, Some(base)) = (changing, &bootloader.base) {
        let day = crate::clock::day;
        let line = match base {
            EepromBase::Staged { .. } => "the changes are built on the staged update, its bootloader and config".to_string(),
            EepromBase::Flash => "the changes are built on the EEPROM's own image, read back with flashrom: the same bootloader".to_string(),
            EepromBase::Release { image, built } => format!(
                "the changes are built on {} (built {}), never older than the bootloader in the EEPROM",
                image.display(),
                day(*built)
            ),
        };
        let _ = writeln!(
            out,
            "  Only the settings below change, on the config in the EEPROM when they are made; {line}."
        );
    }
}

/// Each change of the config, when it is made, and its diff.
fn config_changes(out: &mut String, bootloader: &BootloaderPlan, purpose: Purpose) {
    let when = match bootloader.takes_effect {
        EepromTakesEffect::NextReboot => {
            "staged on the SD card's boot partition by rpi-eeprom-update; recovery.bin writes it at the next reboot, which then starts as before"
        }
        EepromTakesEffect::AtOnce => "written at once by rpi-eeprom-update",
    };
    let made = match (bootloader.consent, purpose) {
        (true, Purpose::DryRun) => "would be made through rpi-eeprom-config --apply",
        (true, _) => "made through rpi-eeprom-config --apply",
        (false, _) => "shown only, not made (--boot-order apply makes them)",
    };
    for (when_made, change) in [
        ("by the migration", &bootloader.at_migrate),
        ("by `verify --commit`", &bootloader.at_commit),
    ] {
        let Some(change) = change else { continue };
        let _ = writeln!(
            out,
            "  Config change {when_made}: {}\n  ({made}; {when})",
            change.purpose
        );
        for line in change.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    if let Some(change) = &bootloader.power {
        let made = match purpose {
            Purpose::DryRun => {
                "would be made through rpi-eeprom-config --apply (--psu-max-current)"
            }
            _ => "made through rpi-eeprom-config --apply (--psu-max-current)",
        };
        let _ = writeln!(
            out,
            "  Config change by the migration, for the USB current: {}\n  ({made}; {when})",
            change.purpose
        );
        for line in change.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// How the new drive takes over once the trial is committed, and (with
/// consent) how each change is checked and undone.
fn handover(out: &mut String, bootloader: &BootloaderPlan) {
    let handover = match (bootloader.handover, bootloader.at_commit.is_some()) {
        (Handover::BootOrder, true) => "Hand-over: `verify --commit` sets the boot order above; the SD card stays in as the fallback",
        (Handover::BootOrder, false) => "Hand-over: the boot order already starts the new drive first; the SD card stays in as the fallback",
        (Handover::RemoveCard, true) => {
            "Hand-over: `verify --commit` takes the trial's order out of the bootloader's config; then shut down and take the SD card out"
        }
        (Handover::RemoveCard, false) => {
            "Hand-over: after `verify --commit`, shut down and take the SD card out; the bootloader's order is left as it is"
        }
    };
    let _ = writeln!(out, "  {handover}.");
    if bootloader.consent || bootloader.power.is_some() {
        let _ = writeln!(
            out,
            "  Each change is read back (the staged pieeprom.upd, or the EEPROM) before the next step; the config as it \
             is now is kept in the journal, and `pimigrate rollback` puts the settings changed back."
        );
    }
}

/// `Plan: root-only move to /dev/sda (Samsung T7, 500 GB, usb)`.
fn headline(out: &mut String, plan: &Plan) {
    let target = &plan.target;
    let name = crate::units::join_present([target.vendor.as_deref(), target.model.as_deref()]);
    let layout = match plan.layout {
        Layout::RootOnly => "root-only move (boot stays on the SD card)",
        Layout::Full => "full move (boot and root)",
    };
    let _ = writeln!(
        out,
        "Plan: {layout} to {} ({}{}{}, {})",
        target.path.display(),
        name,
        if name.is_empty() { "" } else { ", " },
        human_bytes(target.size_bytes),
        target.transport
    );
}

/// The one line under the headline that `-q` shows.
fn brief(out: &mut String, plan: &Plan, purpose: Purpose) {
    let state = match purpose {
        Purpose::DryRun => "dry run, nothing written",
        Purpose::Migrate | Purpose::Wizard => "nothing written yet",
    };
    let _ = writeln!(
        out,
        "      {} partition(s), {} to copy; {state}",
        plan.disk.table.partitions.len(),
        binary(plan.copy.space.used_bytes)
    );
}

fn source(out: &mut String, plan: &Plan) {
    let source = &plan.source;
    let target = &plan.target;
    let on = |dev: &Option<String>| dev.as_ref().map(|d| format!(" on {d}")).unwrap_or_default();
    let _ = writeln!(out, "Source");
    let named_by = if source.fstab_names_root {
        format!("fstab names it {}", source.root_spec)
    } else {
        format!(
            "cmdline.txt names it {}; fstab has no / line",
            source.root_spec
        )
    };
    let _ = writeln!(
        out,
        "  root   {}{}  ({named_by})",
        source.root_dir.display(),
        on(&source.root_device),
    );
    let _ = writeln!(
        out,
        "  boot   {}{}",
        source.boot_dir.display(),
        on(&source.boot_device)
    );
    let pi = plan.pi.model.as_deref().unwrap_or("not a Raspberry Pi");
    let _ = writeln!(
        out,
        "  model  {pi}{}",
        if plan.pi.eeprom_bootloader {
            " (EEPROM bootloader)"
        } else {
            ""
        }
    );
    if let Some(serial) = &target.serial {
        let _ = writeln!(out, "\nTarget serial {serial}, {}-byte sectors: checked again right before the first write.", target.logical_sector_size);
    }
}

fn table(out: &mut String, plan: &Plan) {
    let table = &plan.disk.table;
    let id_name = match table.kind {
        TableKind::Mbr => "disk signature",
        TableKind::Gpt => "disk GUID",
    };
    let _ = writeln!(
        out,
        "\nPartition table: {} ({id_name} {})",
        table.kind.to_string().to_uppercase(),
        table.disk_id
    );
    let _ = writeln!(out, "  {}", table.reason);
    let _ = writeln!(
        out,
        "  {:<2} {:<5} {:>12} {:>12} {:>11}  {:<28} PARTUUID",
        "#", "ROLE", "START", "END", "SIZE", "TYPE"
    );
    for part in &table.partitions {
        let role = match part.role {
            PartitionRole::Boot => "boot",
            PartitionRole::Root => "root",
        };
        let kind = match table.kind {
            TableKind::Mbr => format!("{} {}", part.type_id, part.type_name),
            TableKind::Gpt => part.type_name.clone(),
        };
        let _ = writeln!(
            out,
            "  {:<2} {:<5} {:>12} {:>12} {:>11}  {:<28} {}",
            part.number,
            role,
            part.start_sector,
            part.end_sector,
            binary(part.size_bytes),
            kind,
            part.partuuid
        );
    }
    let _ = writeln!(
        out,
        "  sectors of {} bytes; every partition starts and ends on a 4 MiB boundary",
        table.sector_size
    );
}

fn filesystems(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "\nFilesystems");
    for fs in &plan.disk.filesystems {
        let node = format!("<partition {}>", fs.partition);
        let _ = writeln!(out, "  {}", fs.command_for(&node).join(" "));
    }
}

fn copy(out: &mut String, plan: &Plan, detail: Detail) {
    let copy = &plan.copy;
    let space = &copy.space;
    let _ = writeln!(out, "\nCopy");
    let _ = writeln!(
        out,
        "  {} -> new root: {} in {} files and {} directories, with owners, modes, times, links, devices, xattrs and ACLs",
        copy.from.display(),
        binary(space.used_bytes),
        copy.files,
        copy.directories
    );
    let _ = writeln!(
        out,
        "  space: needs {} free (with room to grow); the {} root partition gives {} after ext4's own overhead",
        binary(space.required_bytes),
        binary(space.root_partition_bytes),
        binary(space.usable_bytes)
    );
    if detail == Detail::Full {
        for exclusion in &copy.exclusions {
            let what = if exclusion.contents_only {
                "contents of "
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  leaves out {what}{} ({})",
                exclusion.path.display(),
                exclusion.why
            );
        }
    } else {
        let names: Vec<String> = copy
            .exclusions
            .iter()
            .map(|e| {
                format!(
                    "{}{}",
                    e.path.display(),
                    if e.contents_only { "/*" } else { "" }
                )
            })
            .collect();
        let _ = writeln!(out, "  leaves out {}", names.join(", "));
    }
    if !copy.other_filesystems.is_empty() {
        // Mounts below another listed mount (/run/credentials/..., /sys/fs/...)
        // are noise to a reader: name the outermost and count the rest. The
        // JSON plan keeps every one.
        let outermost: Vec<String> = outermost_mounts(&copy.other_filesystems)
            .map(|p| p.display().to_string())
            .collect();
        let nested = copy.other_filesystems.len() - outermost.len();
        let _ = writeln!(
            out,
            "  stays on one filesystem; not descended into: {}{}",
            outermost.join(", "),
            match nested {
                0 => String::new(),
                1 => " (and 1 mount below them)".into(),
                n => format!(" (and {n} mounts below them)"),
            }
        );
    }
    if let Some(boot) = &plan.boot_copy {
        let _ = writeln!(
            out,
            "  boot files: {} ({} files, {}) -> partition {}",
            boot.from.display(),
            boot.files,
            binary(boot.bytes),
            boot.to_partition
        );
    }
}

fn edits(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "\nBoot file changes");
    for edit in &plan.edits {
        let written = if edit.output == edit.file {
            format!("{}", edit.file.display())
        } else {
            format!(
                "{} (as a new file {})",
                edit.file.display(),
                edit.output.display()
            )
        };
        let _ = writeln!(out, "  {written} on {}", edit.device);
        match (&edit.backup, edit.site) {
            (Some(backup), EditSite::SourceBoot) => {
                let _ = writeln!(
                    out,
                    "  backup {}; changed last, atomically",
                    backup.display()
                );
            }
            (Some(backup), _) => {
                let _ = writeln!(out, "  backup {}", backup.display());
            }
            (None, _) => {}
        }
        for line in edit.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

fn trial_boot(out: &mut String, plan: &Plan) {
    if let Some(trial) = &plan.trial_boot {
        let _ = writeln!(out, "\nTrial boot");
        let auto_commit = trial.guard.as_ref().is_some_and(|g| g.auto_commit);
        let then = match (auto_commit, plan.layout) {
            (true, _) => {
                "Once up, the trial checks itself and commits (--auto-commit), or reboots to\n  \
                          the SD card without committing."
            }
            (false, Layout::Full) => {
                "`pimigrate verify --commit` in that boot hands the Pi over to the new drive."
            }
            (false, Layout::RootOnly) => {
                "`pimigrate verify --commit` in that boot makes it permanent."
            }
        };
        match (plan.layout, trial.site) {
            (Layout::Full, EditSite::TargetBoot) => {
                let _ = writeln!(
                    out,
                    "  The new drive's boot partition gets {} (its config.txt with the trial command line {}):\n  \
                     the trial reboot starts the new drive once, and any reset or power cycle starts the SD card\n  \
                     as before. {then}",
                    trial.tryboot_file.display(),
                    trial.cmdline_file.display(),
                );
            }
            (Layout::Full, _) => {
                let _ = writeln!(
                    out,
                    "  The SD card's cmdline.txt stays as it is. {} makes the next `reboot \"0 tryboot\"` start the\n  \
                     SD card's kernel with the new drive's root once; any reset or power cycle starts the SD card\n  \
                     as before. {then}",
                    trial.tryboot_file.display(),
                );
            }
            (Layout::RootOnly, _) => {
                let _ = writeln!(
                    out,
                    "  cmdline.txt stays as it is. {} makes the next `reboot \"0 tryboot\"` start the new root once;\n  \
                     any reset or power cycle starts the SD card's root as before. {then}",
                    trial.tryboot_file.display(),
                );
            }
        }
        if let Some(guard) = &trial.guard {
            trial_guard(out, guard);
        }
        if let Some(note) = &trial.note {
            let _ = writeln!(out, "  {note}");
        }
        if let Some(backup) = &trial.backup {
            let _ = writeln!(
                out,
                "  the existing tryboot.txt is kept as {}",
                backup.display()
            );
        }
        for line in trial.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// What resets a trial that does not come up, word by word.
fn trial_guard(out: &mut String, guard: &crate::plan::trial_guard::TrialGuard) {
    let _ = writeln!(
        out,
        "  If the trial does not come up, it resets by itself (the next boot is the SD card's):"
    );
    for word in &guard.words {
        let _ = writeln!(out, "    {}: {}", word.arg, word.why);
    }
    for line in &guard.resets {
        let _ = writeln!(out, "    {line}");
    }
    if let Some(note) = &guard.kernel_note {
        let _ = writeln!(out, "  ({note})");
    }
    if let Some(unbounded) = &guard.unbounded {
        let _ = writeln!(out, "  Not bounded: {unbounded}");
    }
}

/// What the migration does with this system's boot layout, and why.
fn notes(out: &mut String, plan: &Plan) {
    if !plan.notes.is_empty() {
        let _ = writeln!(out, "\nThis system's boot files");
        for note in &plan.notes {
            let _ = writeln!(out, "  * {note}");
        }
    }
}

fn warnings(out: &mut String, plan: &Plan) {
    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "\nPlease note");
        for warning in &plan.warnings {
            let _ = writeln!(out, "  ! {warning}");
        }
    }
}

/// The mount points not below another one in `all`.
fn outermost_mounts(all: &[std::path::PathBuf]) -> impl Iterator<Item = &std::path::PathBuf> {
    all.iter()
        .filter(move |p| !all.iter().any(|q| q != *p && p.starts_with(q)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Only `plan` says "dry run"; `migrate` and the wizard show the plan
    /// they are about to apply, in brief too (issue #15 item 6).
    #[test]
    fn only_the_dry_run_says_it_is_one() {
        let (_host, system) = crate::system::inspect_fixture("pi4");
        let mut options = Options::new("/dev/sda");
        options.seed = Some(7);
        let plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
        for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
            let dry = plan_text(&plan, detail, Purpose::DryRun).to_lowercase();
            assert!(dry.contains("dry run"), "{detail:?}: {dry}");
            for purpose in [Purpose::Migrate, Purpose::Wizard] {
                let text = plan_text(&plan, detail, purpose);
                assert!(
                    !text.to_lowercase().contains("dry run"),
                    "{detail:?} {purpose:?}: {text}"
                );
                assert!(text.starts_with("Plan: "), "{text}");
            }
        }
        let brief = plan_text(&plan, Detail::Brief, Purpose::Migrate);
        assert!(brief.contains("nothing written yet"), "{brief}");
    }

    /// What the plan does with a system's boot layout (a first-boot hook
    /// left out, issue #15) is said wherever the plan is shown: in the
    /// wizard, and in `-q migrate`'s brief plan too.
    #[test]
    fn boot_layout_notes_are_shown_for_every_purpose_and_detail() {
        let (_host, system) = crate::system::inspect_fixture("pi4");
        let mut options = Options::new("/dev/sda");
        options.seed = Some(7);
        let mut plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
        plan.notes
            .push("cmdline.txt still has the first-boot hook `resize` (...)".into());
        for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
            for purpose in [Purpose::DryRun, Purpose::Migrate, Purpose::Wizard] {
                let text = plan_text(&plan, detail, purpose);
                assert!(
                    text.contains("This system's boot files\n  * cmdline.txt still has the first-boot hook `resize`"),
                    "{detail:?} {purpose:?}: {text}"
                );
            }
        }
    }

    #[test]
    fn nested_mounts_are_left_to_their_outermost() {
        let all: Vec<PathBuf> = [
            "/boot/firmware",
            "/dev",
            "/dev/pts",
            "/run",
            "/run/credentials/x.service",
            "/runner",
            "/sys",
            "/sys/fs/cgroup",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let outer: Vec<&str> = outermost_mounts(&all)
            .map(|p| p.to_str().unwrap())
            .collect();
        // Whole components: /runner is not below /run.
        assert_eq!(outer, ["/boot/firmware", "/dev", "/run", "/runner", "/sys"]);
    }
}
