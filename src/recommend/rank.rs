//! Ranking the drives as `recommend` and the wizard do: fresh saved
//! reports reused, the current root and every candidate measured where
//! none is, then [`super::recommend`] over the evidence.

use super::figures::Figures;
use super::freshness::Freshness;
use super::measure::{Measured, Measurer, Method};
use super::survey::survey;
use super::warnings::Usb3Ports;
use super::{Drive, Evidence, Origin, Recommendation, Setting};
use crate::bench::engine;
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, DeviceIdentity, StoredReport};
use crate::bench::run::RunOptions;
use crate::bench::suite::{Preset, SuiteParams};
use crate::host::Host;
use crate::system::disks::Disk;
use crate::system::pi::PiFamily;
use crate::system::System;
use anyhow::Result;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

/// What is printed while drives are measured (as for `bench`).
pub use crate::bench::progress::Shown;

/// What the ranking measures and reuses (`recommend`'s flags, or the
/// wizard's answers).
#[derive(Debug, Clone)]
pub struct RankOptions {
    /// Shorter benchmarks on a smaller test file.
    pub quick: bool,
    /// Seconds each timed test runs after its ramp.
    pub runtime: Option<f64>,
    /// Size of each drive's test file.
    pub size: Option<u64>,
    /// Only use saved reports, never benchmark.
    pub reuse: bool,
    /// Benchmark every drive again, ignoring saved reports.
    pub fresh: bool,
    /// Saved reports older than this many days are not reused.
    pub max_age: u32,
    /// Also compare loop devices (for testing).
    pub all: bool,
    /// Blank drives whose writes may be measured on the raw device: the
    /// `recommend` command writes to no raw disk; the wizard fills it in
    /// once the person agreed (or `--yes` names the target).
    pub raw_writes_allowed: Vec<PathBuf>,
    /// Blank drives nobody allowed to be written: read tests only, with a
    /// note that says how to measure their writes.
    pub blank_declined: Vec<PathBuf>,
}

/// Reuses fresh reports or benchmarks the current root and every
/// candidate, then ranks them (the wizard's benchmark step too). `None`
/// when `interrupted` was set: test files are removed by then.
pub fn rank_drives(
    system: &System,
    args: &RankOptions,
    host: &Host,
    shown: Shown,
    interrupted: &AtomicBool,
) -> Result<Option<Recommendation>> {
    let survey = survey(system, args.all)?;
    let preset = if args.quick {
        Preset::Quick
    } else {
        Preset::Standard
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let freshness = Freshness {
        now,
        max_age_days: args.max_age,
        preset,
        pi_model: system.pi.model.clone(),
    };
    let stored = if args.fresh {
        Vec::new()
    } else {
        report::list(&report::reports_dir(host))?
    };
    let ui = ProgressUi::new(shown.progress_bars);
    let gatherer = Gatherer {
        args,
        freshness: &freshness,
        stored: &stored,
        // An inspected tree (--sysroot) has no devices to open.
        can_measure: host.is_live() && !args.reuse,
        measurer: Measurer {
            system,
            host,
            options: RunOptions {
                params: SuiteParams::new(preset, args.runtime, args.size),
                size_given: args.size,
                engine: engine::choose(None)?,
                only: Vec::new(),
                existing_file: None,
            },
            ui,
            interrupted,
            chatty: shown.chatty,
        },
    };

    let Some(current_root) = gatherer.drive(&survey.current_root, &Method::SourceRoot)? else {
        return Ok(None);
    };
    let Some((candidates, blank_unmeasured)) = gatherer.candidates(&survey.candidates)? else {
        return Ok(None);
    };
    let setting = Setting {
        baseline_name: Setting::baseline_name_for(&current_root.identity),
        usb3_ports: usb3_ports(system.pi.family),
        now,
    };
    let mut recommendation =
        super::recommend(&current_root, &candidates, survey.excluded, &setting)?;
    recommendation.blank_unmeasured = blank_unmeasured;
    Ok(Some(recommendation))
}

/// Finds or makes the evidence for each drive.
struct Gatherer<'a> {
    args: &'a RankOptions,
    freshness: &'a Freshness,
    stored: &'a [StoredReport],
    can_measure: bool,
    measurer: Measurer<'a>,
}

impl Gatherer<'_> {
    /// The drive with a fresh report, reused or measured now; `None` after
    /// Ctrl-C.
    /// Each candidate with its evidence, and the blank drives whose
    /// writes were not measured (no yes to write to them); `None` when
    /// Ctrl-C stopped a measurement.
    fn candidates(&self, disks: &[Disk]) -> Result<Option<(Vec<Drive>, Vec<PathBuf>)>> {
        let args = self.args;
        let mut candidates = Vec::new();
        let mut blank_unmeasured = Vec::new();
        for disk in disks {
            let Some(mut drive) =
                self.drive(disk, &Method::for_candidate(disk, &args.raw_writes_allowed))?
            else {
                return Ok(None);
            };
            let writes = drive
                .evidence
                .as_ref()
                .is_some_and(|e| Figures::from_report(&e.report).has_random_writes());
            if !writes && args.blank_declined.contains(&disk.path) {
                drive.notes.push(
                    "blank: its writes were not measured, as nothing is written to a drive without \
                     a yes (--bench-blank measures them on the drive itself, overwriting its start)"
                        .into(),
                );
                blank_unmeasured.push(disk.path.clone());
            }
            candidates.push(drive);
        }
        Ok(Some((candidates, blank_unmeasured)))
    }

    fn drive(&self, disk: &Disk, method: &Method) -> Result<Option<Drive>> {
        let identity = DeviceIdentity::from_disk(disk);
        let mut notes = Vec::new();
        let reusable = self
            .freshness
            .best(self.stored, &identity)
            .filter(|r| r.report.parameters.writes || self.reads_only_will_do(method));
        if reusable.is_none() && !self.args.fresh {
            notes.extend(self.freshness.newest_stale_reason(self.stored, &identity));
        }
        let uses = if *method == Method::SourceRoot {
            Vec::new()
        } else {
            disk.uses()
        };
        let mut drive = Drive {
            identity,
            evidence: None,
            unmeasured_reason: None,
            uses,
            notes,
        };
        if let Some(stored) = reusable {
            drive.evidence = Some(Evidence {
                report: stored.report.clone(),
                origin: Origin::Reused,
            });
            return Ok(Some(drive));
        }
        if !self.can_measure {
            drive.unmeasured_reason = Some(if self.args.reuse {
                "no fresh saved report, and --reuse does not benchmark".into()
            } else {
                "no fresh saved report, and an inspected system (--sysroot) cannot be benchmarked"
                    .into()
            });
            return Ok(Some(drive));
        }
        match self.measurer.measure(disk, method)? {
            Measured::Done { report, notes } => {
                drive.notes.extend(notes);
                drive.evidence = Some(Evidence {
                    report: *report,
                    origin: Origin::Measured,
                });
                Ok(Some(drive))
            }
            Measured::Interrupted => Ok(None),
        }
    }
}

impl Gatherer<'_> {
    /// Whether a saved report with read figures only may stand: never for
    /// the current root, which every gain is relative to, and not when
    /// this run can measure the writes (the drive now has a mounted
    /// filesystem).
    fn reads_only_will_do(&self, method: &Method) -> bool {
        *method != Method::SourceRoot && !(self.can_measure && method.measures_writes())
    }
}

/// Pi 4/400 and Pi 5 have USB 3 ports; Pi 1-3 and Zero only USB 2; a
/// CM4's carrier board or another machine may have either.
fn usb3_ports(family: PiFamily) -> Usb3Ports {
    match family {
        PiFamily::Pi4 | PiFamily::Pi5 => Usb3Ports::Yes,
        PiFamily::Pi1
        | PiFamily::Pi2
        | PiFamily::Pi3
        | PiFamily::Pi3Plus
        | PiFamily::Zero
        | PiFamily::Zero2 => Usb3Ports::No,
        PiFamily::Cm4 | PiFamily::UnknownPi | PiFamily::NotAPi => Usb3Ports::Unknown,
    }
}
