//! Measuring the drives before the choice, with the recommend command's
//! own ranking: the comparison table, and the gain in plain words.

use super::{Benchmarks, Wizard};
use crate::bench::suite::Preset;
use crate::bench::times::{self, SuiteTime};
use crate::recommend::freshness::DEFAULT_MAX_AGE_DAYS;
use crate::recommend::rank::{rank_drives, RankOptions, Shown};
use crate::recommend::{render, Recommendation};
use crate::ui::Aborted;
use anyhow::Result;

/// The recommendation, or `None` when the benchmarks were skipped or could
/// not compare anything (the flow goes on without them).
pub(super) fn compare(wizard: &Wizard) -> Result<Option<Recommendation>> {
    let quick = match how(wizard)? {
        Benchmarks::Skip => {
            wizard.ui.say("Benchmarks skipped.\n");
            return Ok(None);
        }
        Benchmarks::Quick => true,
        Benchmarks::Standard | Benchmarks::Ask => false,
    };
    let blank = super::blank::allowed(wizard)?;
    let options = RankOptions {
        quick,
        runtime: None,
        size: None,
        // Fresh saved reports are reused, as `recommend` does: measuring
        // costs time and flash endurance.
        reuse: false,
        fresh: false,
        max_age: DEFAULT_MAX_AGE_DAYS,
        all: false,
        raw_writes_allowed: blank.allowed,
        blank_declined: blank.declined,
    };
    let shown = Shown {
        chatty: true,
        progress_bars: wizard.ui.live_progress(),
    };
    wizard.ui.say(
        "Measuring random 4K reads and writes (what makes a Pi feel slow) of the current root \
         and of every candidate; test files are removed afterwards, and a disk without a \
         mounted filesystem is only read (but for a blank one you let be written).",
    );
    match rank_drives(
        wizard.system,
        &options,
        wizard.host,
        shown,
        wizard.ui.interrupted(),
    ) {
        Ok(Some(recommendation)) => {
            show(wizard, &recommendation);
            Ok(Some(recommendation))
        }
        Ok(None) => {
            wizard
                .ui
                .say("Benchmarks interrupted; their test files were removed.");
            Err(Aborted.into())
        }
        Err(err) => {
            wizard
                .ui
                .say(&format!("No comparison: {err:#}. Going on without one.\n"));
            Ok(None)
        }
    }
}

fn how(wizard: &Wizard) -> Result<Benchmarks> {
    let given = match wizard.settings.benchmarks {
        Benchmarks::Ask => None,
        other => Some(other),
    };
    if given.is_none() && wizard.settings.yes {
        wizard.ui.say(&format!(
            "Benchmarks: thorough{}.",
            wizard.not_asked("--quick/--no-bench", false)
        ));
    }
    wizard.answer(given, Benchmarks::Standard, || {
        let items = [
            format!("Quick: {}", per_drive(Preset::Quick)),
            format!("Thorough: {}", per_drive(Preset::Standard)),
            "Skip: choose without measuring".to_string(),
        ];
        let choice = wizard.ui.choose("Benchmark the drives first?", &items, 0)?;
        Ok([Benchmarks::Quick, Benchmarks::Standard, Benchmarks::Skip][choice])
    })
}

/// "14 s a drive, plus laying out 64 MiB (7 s on an A1 card)": from the
/// suite's definition, as `--help` says it.
fn per_drive(preset: Preset) -> String {
    let time = SuiteTime::of(preset);
    format!(
        "{} a drive, plus laying out {} ({} on an A1 card)",
        times::duration(time.tests_seconds),
        times::size(time.file_size),
        times::duration(time.a1_layout_seconds())
    )
}

fn show(wizard: &Wizard, recommendation: &Recommendation) {
    // The wizard goes on to the plan itself: no "Next:" hint.
    let table = render::table(recommendation);
    wizard.ui.say(&format!("\n{table}"));
    match &recommendation.pick {
        Some(pick) => wizard.ui.say(&format!(
            "In plain words: moving to {} makes {}.\n\
             (Random 4K reads and writes are the many small ones behind starting programs, \
             installing updates and browsing: what makes a Pi feel slow. \"Overall\" weighs \
             reads and writes together, writes more, as they are where SD cards are slowest.)\n",
            pick.path.display(),
            pick.summary
        )),
        None => wizard.ui.say(
            "In plain words: none of the drives would make this Pi noticeably faster; \
             you can still move to one (for its size, or to spare the SD card).\n",
        ),
    }
}
