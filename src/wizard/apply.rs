//! The end of the flow: trial boot or not, the plan with its diffs, the
//! typed confirmation, the migration with `migrate`'s progress display,
//! and what to do next.

use super::{Wizard, WizardEnd};
use crate::apply::migration::{self, ProgressDisplay};
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{self, Layout, Options, Plan, TrialChoice};
use crate::ui::Aborted;
use anyhow::Result;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

pub(super) fn choose_trial(wizard: &Wizard, layout: Layout) -> Result<TrialChoice> {
    if let Some(trial) = wizard.settings.trial {
        return Ok(trial);
    }
    // A trial boot needs tryboot (Pi 4, 400, CM4, Pi 5) and a root-only
    // move; elsewhere `auto` means none, and the plan says so.
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
    let journal = migration::new_journal(wizard.system, plan)?;
    let display = ProgressDisplay {
        copy_bar: wizard.ui.live_progress(),
        step_lines: true,
    };
    let journal = migration::apply_with_progress(
        wizard.system,
        journal,
        wizard.ui.interrupted(),
        display,
        Purpose::Wizard,
    )?;
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
    Ok(WizardEnd::Migrated(Box::new(journal)))
}
