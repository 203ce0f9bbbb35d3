//! The end of the flow: trial boot or not, the plan with its diffs, the
//! typed confirmation, the migration with `migrate`'s progress display,
//! and what to do next.

use super::{Wizard, WizardEnd};
use crate::apply::migration::{self, ProgressDisplay};
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{self, BootOrderChoice, HandoverChoice, Layout, Options, Plan, TrialChoice};
use crate::ui::Aborted;
use anyhow::Result;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

pub(super) fn choose_trial(wizard: &Wizard, layout: Layout) -> Result<TrialChoice> {
    if let Some(trial) = wizard.settings.trial {
        return Ok(trial);
    }
    // A trial boot needs tryboot (Pi 4, 400, CM4, Pi 5); elsewhere `auto`
    // means none, and the plan says so. A full move's trial is the
    // bootloader's question (`choose_bootloader`).
    if layout != Layout::RootOnly || !wizard.system.pi.tryboot_available {
        return Ok(TrialChoice::Auto);
    }
    if wizard.settings.yes {
        wizard.ui.say(&format!(
            "Trial boot: yes{}.",
            wizard.not_asked("--trial/--no-trial", false)
        ));
    }
    let trial = wizard.answer(None, true, || {
        wizard.ui.confirm(
            "Boot the moved system once on trial before making it permanent? (if it fails, \
             switching the Pi off and on brings back the SD card system)",
            true,
        )
    })?;
    Ok(if trial {
        TrialChoice::Auto
    } else {
        TrialChoice::Never
    })
}

/// A full move on a Pi with the EEPROM bootloader: may pimigrate change the
/// bootloader's config (the trial's one-shot order, the permanent order,
/// PCIE_PROBE), and after the trial, does the SD card stay in as the
/// fallback or come out? Unattended, nothing is changed without
/// `--boot-order apply`: consent is given, not assumed.
pub(super) fn choose_bootloader(
    wizard: &Wizard,
    layout: Layout,
) -> Result<(BootOrderChoice, HandoverChoice)> {
    let settings = wizard.settings;
    if layout != Layout::Full || !wizard.system.pi.eeprom_bootloader {
        return Ok((
            settings.boot_order.unwrap_or_default(),
            settings.handover.unwrap_or_default(),
        ));
    }
    if wizard.system.pi.eeprom_config.is_none() && settings.boot_order.is_none() {
        wizard.ui.say(
            "Bootloader config: left as it is: rpi-eeprom-config (package rpi-eeprom) could not read it here, \
             so after the trial the SD card comes out.",
        );
        return Ok((
            BootOrderChoice::Show,
            settings.handover.unwrap_or(HandoverChoice::RemoveCard),
        ));
    }
    if settings.yes {
        wizard.ui.say(&format!(
            "Bootloader config: {}{}.",
            match settings.boot_order.unwrap_or_default() {
                BootOrderChoice::Apply => "changed as the plan shows",
                BootOrderChoice::Show => "shown, not changed",
            },
            wizard.not_asked("--boot-order", settings.boot_order.is_some())
        ));
    }
    let apply = wizard.answer(
        settings.boot_order.map(|b| b == BootOrderChoice::Apply),
        false,
        || {
            wizard.ui.confirm(
                "May pimigrate change the bootloader's boot order (through rpi-eeprom-config)? It lets the \
                 trial boot the new drive once with the SD card as the fallback, and after the trial puts the \
                 new drive first. The plan shows the exact change; the old config is kept and `pimigrate \
                 rollback` puts it back",
                true,
            )
        },
    )?;
    let boot_order = match apply {
        true => BootOrderChoice::Apply,
        false => BootOrderChoice::Show,
    };
    if !apply {
        return Ok((
            boot_order,
            settings.handover.unwrap_or(HandoverChoice::RemoveCard),
        ));
    }
    let keep = wizard.answer(
        settings.handover.map(|h| h != HandoverChoice::RemoveCard),
        true,
        || {
            wizard.ui.confirm(
                "After the trial, keep the SD card in as a fallback (the new drive first in the boot order)? \
                 No: you take it out",
                true,
            )
        },
    )?;
    Ok((
        boot_order,
        match keep {
            true => HandoverChoice::BootOrder,
            false => HandoverChoice::RemoveCard,
        },
    ))
}

/// The usb-storage quirk for the new drive's USB bridge, asked only when
/// the plan would offer it (the bridge runs on uas and is known for
/// trouble there, or the kernel log shows it resetting) and it can be set;
/// unattended, only `--usb-quirk` sets it.
pub(super) fn choose_usb_quirk(
    wizard: &Wizard,
    target: &crate::system::disks::Disk,
) -> Result<bool> {
    let given = wizard.settings.usb_quirk;
    let log = crate::system::kernel_events::KernelLog::read(wizard.host);
    let cmdline = wizard
        .system
        .source
        .cmdline
        .as_ref()
        .ok()
        .and_then(|c| c.parsed.as_ref().ok());
    let offer =
        plan::after_move::quirk::decide(wizard.host, target, cmdline, &log, false, &mut Vec::new())
            .filter(|q| q.offered && q.refused.is_none() && !q.already);
    let Some(offer) = offer else {
        return Ok(given.unwrap_or(false));
    };
    if wizard.settings.yes {
        wizard.ui.say(&format!(
            "USB bridge {}: {}{}.",
            offer.bridge,
            match given {
                Some(true) => "moved to usb-storage",
                _ => "left on uas",
            },
            wizard.not_asked("--usb-quirk", given.is_some())
        ));
    }
    wizard.answer(given, false, || {
        wizard.ui.confirm(
            &format!(
                "The new drive's USB bridge {} runs on the uas driver and {}. Move it to usb-storage                  ({} on the new command line)? {}",
                offer.bridge,
                offer.evidence.join("; "),
                offer.argument.as_deref().unwrap_or("usb-storage.quirks"),
                offer.cost
            ),
            false,
        )
    })
}

/// The plan, shown in full; `None` when the planner refused (every reason
/// shown).
pub(super) fn make_plan(wizard: &Wizard, options: &Options) -> Result<Option<Plan>> {
    let spinner = wizard.ui.live_progress().then(|| {
        let spinner = indicatif::ProgressBar::new_spinner();
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        spinner.set_message("scanning the system to plan the copy");
        spinner
    });
    let interrupted = wizard.ui.interrupted();
    let result = plan::plan_with_progress(wizard.system, options, &mut |usage| {
        if let Some(spinner) = &spinner {
            spinner.set_message(format!(
                "scanning the system to plan the copy: {} files, {}",
                usage.files,
                crate::units::binary(usage.bytes)
            ));
        }
        // Ctrl-C stops the scan now rather than after the whole walk.
        if interrupted.load(Ordering::SeqCst) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    // Before the plan or the refusal: a scan cut short by Ctrl-C is
    // neither, and the person asked to stop.
    if interrupted.load(Ordering::SeqCst) {
        return Err(Aborted.into());
    }
    match result {
        Ok(plan) => {
            // The same plan `pimigrate plan` prints; not a dry run here.
            let text = plan_text(&plan, Detail::Normal, Purpose::Wizard);
            wizard.ui.say(&format!(
                "\n{}\nThe plan in full:\n\n{text}",
                super::summary::in_short(&plan)
            ));
            Ok(Some(plan))
        }
        Err(refusal) => {
            wizard.ui.say(&format!("{refusal}\nNothing was changed."));
            Ok(None)
        }
    }
}

/// The person types the target's name (or its path): the last point where
/// stopping changes nothing.
pub(super) fn confirmed(wizard: &Wizard, plan: &Plan) -> Result<bool> {
    if wizard.settings.yes {
        wizard.ui.say(&format!(
            "Erasing {} as --yes says.",
            plan.target.path.display()
        ));
        return Ok(true);
    }
    let accepted = [
        plan.target.name.clone(),
        plan.target.path.display().to_string(),
    ];
    wizard.ui.type_to_confirm(
        &format!(
            "Everything on {} will be erased. Type its name ({}) to go on",
            plan.target.path.display(),
            plan.target.name
        ),
        &accepted,
    )
}

pub(super) fn migrate(wizard: &Wizard, plan: Plan) -> Result<WizardEnd> {
    if !wizard.host.is_live() {
        // The plan names this machine's device nodes only by coincidence:
        // an inspected tree is never written to.
        wizard.ui.say(
            "Rehearsal over: on the running system, the migration would start here. \
             Nothing was written.",
        );
        return Ok(WizardEnd::Rehearsed);
    }
    // The last question is answered: from here on a closed terminal does
    // not stop the migration (its output goes to the migration's log).
    crate::signals::carry_on_after_hangup();
    let journal = migration::new_journal(wizard.system, plan)?;
    // Its errors end with where the Pi stands and what goes on, told from
    // this journal as the state directory holds it then.
    let state_dir = wizard.host.path(&wizard.host.state_dir);
    let about = journal.clone();
    let stopped = |err| migration::stopped(err, &state_dir, Some(&about), false, Purpose::Wizard);
    let display = ProgressDisplay {
        copy_bar: wizard.ui.live_progress(),
        step_lines: true,
    };
    let journal = match migration::apply_with_progress(
        wizard.system,
        journal,
        wizard.ui.interrupted(),
        display,
        Purpose::Wizard,
    ) {
        Ok(journal) => journal,
        Err(err) if wizard.ui.interrupted().load(Ordering::SeqCst) => {
            wizard.ui.say(&format!("\nStopped: {:#}", stopped(err)));
            return Ok(WizardEnd::Interrupted);
        }
        Err(err) => return Err(stopped(err)),
    };
    let mut text = format!(
        "\nDone: the system is on {}.\nWhat to do next:\n",
        journal.plan.target.path.display()
    );
    for (n, step) in migration::next_steps(&journal.plan, Purpose::Wizard)
        .iter()
        .enumerate()
    {
        text.push_str(&format!("  {}. {step}\n", n + 1));
    }
    wizard.ui.say(&text);
    let mut journal = journal;
    offer_reboot(wizard, &mut journal).map_err(stopped)?;
    Ok(WizardEnd::Migrated(Box::new(journal)))
}

/// Reboots now, into the trial where there is one (a Pi 4 whose
/// bootloader must first write its new config reboots plainly, and the
/// next steps say what follows), when the person says so or `--reboot`.
fn offer_reboot(wizard: &Wizard, journal: &mut crate::state::journal::Journal) -> Result<()> {
    let into = migration::reboot_into(journal)?;
    let question = match into {
        migration::RebootInto::Trial => "Reboot now into the trial boot?",
        migration::RebootInto::Normal => "Reboot now?",
    };
    if crate::signals::hung_up() && wizard.settings.reboot.is_none() {
        // Nobody is left to answer; a reboot is the owner's to start.
        wizard
            .ui
            .say("The terminal went away: not rebooting. The next steps above are in this log.");
        return Ok(());
    }
    let reboot = wizard.answer(wizard.settings.reboot, false, || {
        wizard.ui.confirm(question, false)
    })?;
    if reboot {
        wizard.ui.say("Rebooting.");
        let state_dir = wizard.host.path(&wizard.host.state_dir);
        migration::reboot(journal, &state_dir, into)?;
    }
    Ok(())
}
