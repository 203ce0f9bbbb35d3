//! `pimigrate recommend`: benchmark (or reuse fresh reports of) the current
//! root and every candidate, rank them, pick one or say none is worth it.

use super::bench::EXIT_INTERRUPTED;
use super::{print_json, EXIT_OK};
use crate::bench::engine;
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, DeviceIdentity, StoredReport};
use crate::bench::run::RunOptions;
use crate::bench::suite::{Preset, SuiteParams};
use crate::cli::{Cli, RecommendArgs};
use crate::host::Host;
use crate::recommend::freshness::Freshness;
use crate::recommend::measure::{Measured, Measurer, Method};
use crate::recommend::survey::survey;
use crate::recommend::warnings::Usb3Ports;
use crate::recommend::{self, Drive, Evidence, Origin, Recommendation, Setting};
use crate::system::disks::Disk;
use crate::system::pi::PiFamily;
use crate::system::System;
use anyhow::Result;
use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn run(cli: &Cli, args: &RecommendArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    let chatty = !cli.json && !cli.quiet;
    let interrupted = crate::bench::stop_on_signals()?;
    let shown = Shown {
        chatty,
        progress_bars: chatty && std::io::stdout().is_terminal(),
    };
    let Some(recommendation) = rank_drives(&system, args, host, shown, &interrupted)? else {
        return interrupted_exit();
    };
    if cli.json {
        print_json(&recommendation)?;
    } else {
        if chatty {
            println!();
        }
        print!("{}", recommend::render::text(&recommendation));
    }
    Ok(EXIT_OK)
}

/// What is printed while drives are measured.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// Which drive is being measured, and how.
    pub chatty: bool,
    /// A progress bar per test.
    pub progress_bars: bool,
}

/// Reuses fresh reports or benchmarks the current root and every
/// candidate, then ranks them (the wizard's benchmark step too). `None`
/// when `interrupted` was set: test files are removed by then.
pub fn rank_drives(
    system: &System,
    args: &RecommendArgs,
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
    let mut candidates = Vec::new();
    for disk in &survey.candidates {
        let Some(drive) =
            gatherer.drive(disk, &Method::for_candidate(disk, &args.raw_writes_allowed))?
        else {
            return Ok(None);
        };
        candidates.push(drive);
    }
    let setting = Setting {
        baseline_name: Setting::baseline_name_for(&current_root.identity),
        usb3_ports: usb3_ports(system.pi.family),
        now,
    };
    recommend::recommend(&current_root, &candidates, survey.excluded, &setting).map(Some)
}

fn interrupted_exit() -> Result<u8> {
    eprintln!("pimigrate: interrupted; test files were removed and nothing was recommended");
    Ok(EXIT_INTERRUPTED)
}

/// Finds or makes the evidence for each drive.
struct Gatherer<'a> {
    args: &'a RecommendArgs,
    freshness: &'a Freshness,
    stored: &'a [StoredReport],
    can_measure: bool,
    measurer: Measurer<'a>,
}

impl Gatherer<'_> {
    /// The drive with a fresh report, reused or measured now; `None` after
    /// Ctrl-C.
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
