//! Benchmarking drives for a recommendation, without harming them.
//!
//! * The current root: a test file on it (as `pimigrate bench` does with
//!   no target), created, used and removed.
//! * A drive with a mounted filesystem: a test file on its largest mounted
//!   partition, so its writes are measured without touching any data.
//! * Any other drive: read tests only, on the raw device opened read-only.
//!   Recommend never writes to a raw disk: its random-write figures stay
//!   unknown, and it is not recommended on reads alone.

use super::survey;
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, Report};
use crate::bench::run::{run_target, RunOptions, RunOutcome};
use crate::bench::target;
use crate::host::Host;
use crate::system::disks::Disk;
use crate::system::System;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// How one drive is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// The running root: a test file on `host.source_root`.
    SourceRoot,
    /// A test file in this directory (a mountpoint of the drive).
    TestFile(PathBuf),
    /// Read tests on the device node.
    DeviceReads,
}

impl Method {
    pub fn for_candidate(disk: &Disk) -> Method {
        match survey::mounts(disk).into_iter().next() {
            Some(dir) => Method::TestFile(dir),
            None => Method::DeviceReads,
        }
    }

    pub fn measures_writes(&self) -> bool {
        !matches!(self, Method::DeviceReads)
    }

    pub fn describe(&self, disk: &Disk) -> String {
        match self {
            Method::SourceRoot => format!(
                "{}: the current root, with a test file (removed afterwards)",
                disk.describe()
            ),
            Method::TestFile(dir) => format!(
                "{}: a test file on {} (removed afterwards)",
                disk.describe(),
                dir.display()
            ),
            Method::DeviceReads => format!(
                "{}: read tests only (nothing is written to it)",
                disk.describe()
            ),
        }
    }
}

pub enum Measured {
    Done {
        report: Box<Report>,
        /// A fallback taken, a report that could not be saved.
        notes: Vec<String>,
    },
    Interrupted,
}

pub struct Measurer<'a> {
    pub system: &'a System,
    pub host: &'a Host,
    pub options: RunOptions,
    pub ui: ProgressUi,
    pub interrupted: &'a AtomicBool,
    /// Print what is being measured.
    pub chatty: bool,
}

impl Measurer<'_> {
    /// Measures `disk` by `method`; a test file that cannot be made (a
    /// read-only mount, a filesystem without direct I/O) falls back to
    /// read tests on the device. The report is saved for later runs.
    pub fn measure(&self, disk: &Disk, method: &Method) -> Result<Measured> {
        let mut notes = Vec::new();
        let first = self.run(disk, method);
        let outcome = match (first, method) {
            (Err(e), Method::TestFile(dir)) if !self.interrupted.load(Ordering::Relaxed) => {
                notes.push(format!(
                    "a test file on {} failed ({e:#}); measured with read tests on the device instead",
                    dir.display()
                ));
                self.run(disk, &Method::DeviceReads)
            }
            (other, _) => other,
        };
        let outcome = match outcome {
            Err(_) if self.interrupted.load(Ordering::Relaxed) => return Ok(Measured::Interrupted),
            other => other?,
        };
        let report = match outcome {
            RunOutcome::Done(report) => report,
            RunOutcome::Interrupted(_) => return Ok(Measured::Interrupted),
        };
        if let Err(e) = report::save(&report, &report::reports_dir(self.host)) {
            notes.push(format!("the report was not saved: {e:#}"));
        }
        Ok(Measured::Done { report, notes })
    }

    fn run(&self, disk: &Disk, method: &Method) -> Result<RunOutcome> {
        if self.chatty {
            println!("Benchmarking {}", method.describe(disk));
        }
        let given: Option<&Path> = match method {
            Method::SourceRoot => None,
            Method::TestFile(dir) => Some(dir),
            Method::DeviceReads => Some(&disk.path),
        };
        // Never destructive: raw devices are opened read-only.
        let target = target::resolve(self.system, self.host, given, false)?;
        run_target(
            self.system,
            self.host,
            &target,
            &self.options,
            &self.ui,
            self.interrupted,
        )
    }
}
