//! Scenarios: whole-machine tests, each a function that builds a [`Pi`],
//! boots it, and asserts on what the guest reports and on the disk images.
//! Each module says what its scenarios check and in which lane they run
//! (a `Scenario` constant beside the function it names); add one by
//! writing a module and listing its constant in [`all`].
//!
//! [`Pi`]: crate::Pi

use crate::host::image::ImageSet;
use anyhow::Result;

mod ansible;
mod ansible_rollback;
mod boot_sd;
mod copy_debian_root;
mod disk_speed;
mod fleet;
mod full_move;
mod migrate_trial;
mod power_cut;
mod raspi;
mod recommend;
mod sync_standby;
pub mod unattended;
mod unplug_mid_copy;
mod usb_boot;
mod wizard_pty;
mod wizard_story;

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub lane: Lane,
    pub run: fn(&ImageSet) -> Result<()>,
    /// What it checks, the one place its words are written: the row of
    /// docs/testbed/scenarios.md ([`markdown_table`]) and `pi-testbed list`.
    pub about: &'static str,
}

/// Where a scenario runs, and beside what (docs/testbed/README.md, "Two
/// lanes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Times nothing, on the x86 guest: runs beside the others that time
    /// nothing, `PI_TESTBED_JOBS` at a time (`run --lane shared`).
    Shared,
    /// Times nothing, on the ARM lane's Raspberry Pis (QEMU's raspi3b and
    /// raspi4b, the arm64 image, pimigrate built for arm64): beside the
    /// others that time nothing, as [`Lane::Shared`] (`run --lane shared`).
    Arm,
    /// Measures speed (benchmarks decide what it asserts), so it runs with
    /// no other scenario beside it (`run --lane alone`); its set-up says
    /// [`Setup::timed`] too, for the disks' calibrated I/O engine.
    ///
    /// [`Setup::timed`]: crate::machine::rig::Setup::timed
    Speed,
}

impl Lane {
    /// The lanes `run --lane WORD` runs: `shared`, the scenarios that time
    /// nothing (the ARM lane's among them); `alone`, those that measure.
    pub fn named(word: &str) -> Option<&'static [Lane]> {
        match word {
            "shared" => Some(&[Lane::Shared, Lane::Arm]),
            "alone" => Some(&[Lane::Speed]),
            _ => None,
        }
    }

    /// Whether it runs with no other scenario beside it.
    pub fn alone(self) -> bool {
        self == Lane::Speed
    }

    /// Whether it boots the ARM lane's machines (the arm64 image, and
    /// pimigrate built for arm64, made before the suite starts).
    pub fn arm(self) -> bool {
        self == Lane::Arm
    }
}

/// Every scenario, in the order the suite starts them: of those that time
/// nothing the longest first (about 11 minutes down to seconds beside the
/// builds on this 2-core machine), so that the lane's two at a time end
/// together;
/// then the speed scenarios, which run alone.
pub fn all() -> Vec<Scenario> {
    vec![
        raspi::PI3_ROOT_ONLY,
        raspi::PI4_TRIAL,
        unattended::root_only::SCENARIO,
        unattended::full::SCENARIO,
        power_cut::SCENARIO,
        migrate_trial::SCENARIO,
        full_move::PI4_FULL_TRIAL,
        full_move::PI5_NVME_TRIAL,
        ansible_rollback::SCENARIO,
        ansible::SCENARIO,
        unplug_mid_copy::SCENARIO,
        wizard_pty::SCENARIO,
        sync_standby::SCENARIO,
        boot_sd::SD_BOOT,
        boot_sd::SD_BOOT_BULLSEYE,
        usb_boot::SCENARIO,
        copy_debian_root::SCENARIO,
        wizard_story::SCENARIO,
        recommend::SCENARIO,
        disk_speed::SCENARIO,
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
