//! One benchmark run over the targets a person named, as `pimigrate bench`
//! runs it: every target resolved (and refused) before anything is opened,
//! then each measured in turn and its report saved.

use super::engine::{self, EngineKind};
use super::progress::{ProgressUi, Shown};
use super::render::{engine_line, heading, report_text};
use super::report::{self, Report};
use super::run::{run_target, RunOptions, RunOutcome};
use super::suite::SuiteParams;
use super::target::{self, Refused, Target};
use crate::host::Host;
use crate::system::System;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What to measure, and how (`bench`'s flags).
#[derive(Debug, Clone)]
pub struct Request {
    /// The targets as given; none means the running root.
    pub targets: Vec<PathBuf>,
    /// Run on this existing file instead (its directory is the target).
    pub file: Option<PathBuf>,
    /// Raw writes on device targets.
    pub destructive: bool,
    pub params: SuiteParams,
    /// --size as given; `None` means the preset's default.
    pub size_given: Option<u64>,
    /// The engine asked for; `None` picks io_uring where it works.
    pub engine: Option<EngineKind>,
    /// Only these tests; empty runs them all.
    pub only: Vec<String>,
    /// Save each report for `recommend` and `verify`.
    pub save: bool,
}

/// The targets, resolved and allowed: nothing has been opened yet.
pub struct Session<'a> {
    system: &'a System,
    host: &'a Host,
    request: Request,
    targets: Vec<Target>,
}

/// How a benchmark session ended.
pub enum BenchEnd {
    Done(Vec<Report>),
    /// Ctrl-C after this many tests of the target being measured: its test
    /// file, if any, is removed and no report of it is saved.
    Interrupted {
        tests: usize,
    },
}

impl<'a> Session<'a> {
    /// Resolves every target; the refusals of all of them when any is
    /// refused (the source disk, a disk in use, raw writes not allowed).
    pub fn prepare(
        system: &'a System,
        host: &'a Host,
        request: Request,
    ) -> Result<Result<Session<'a>, Vec<Refused>>> {
        // An existing file is benchmarked where it lies: its directory is
        // the target that identifies the filesystem and the disk.
        let file_dir = request.file.as_ref().map(|f| match f.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        });
        let given: Vec<Option<&Path>> = if let Some(dir) = &file_dir {
            vec![Some(dir.as_path())]
        } else if request.targets.is_empty() {
            vec![None]
        } else {
            request.targets.iter().map(|p| Some(p.as_path())).collect()
        };
        let mut targets = Vec::new();
        let mut refusals = Vec::new();
        for path in given {
            match target::resolve(system, host, path, request.destructive) {
                Ok(t) => targets.push(t),
                Err(e) => refusals.push(e.downcast::<Refused>()?),
            }
        }
        if !refusals.is_empty() {
            return Ok(Err(refusals));
        }
        Ok(Ok(Session {
            system,
            host,
            request,
            targets,
        }))
    }

    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// Measures each target in turn, printing what it measures and each
    /// report when `shown.chatty`.
    pub fn run(&self, shown: Shown, interrupted: &AtomicBool) -> Result<BenchEnd> {
        let request = &self.request;
        let engine = engine::choose(request.engine)?;
        let ui = ProgressUi::new(shown.progress_bars);
        if shown.chatty {
            println!("{}", engine_line(&engine));
        }
        let options = RunOptions {
            params: request.params,
            size_given: request.size_given,
            engine,
            only: request.only.clone(),
            existing_file: request.file.clone(),
        };
        let mut reports = Vec::new();
        for target in &self.targets {
            if shown.chatty {
                println!("{}", heading(target));
            }
            let outcome = run_target(self.system, self.host, target, &options, &ui, interrupted);
            let outcome = match outcome {
                Err(_) if interrupted.load(Ordering::Relaxed) => {
                    RunOutcome::Interrupted(Vec::new())
                }
                other => other?,
            };
            let report = match outcome {
                RunOutcome::Done(report) => report,
                RunOutcome::Interrupted(partial) => {
                    return Ok(BenchEnd::Interrupted {
                        tests: partial.len(),
                    })
                }
            };
            let saved = if request.save {
                Some(report::save(&report, &report::reports_dir(self.host))?)
            } else {
                None
            };
            if shown.chatty {
                print!("{}", report_text(&report));
                if let Some(path) = saved {
                    println!("Report saved to {}", path.display());
                }
            }
            reports.push(*report);
        }
        Ok(BenchEnd::Done(reports))
    }
}
