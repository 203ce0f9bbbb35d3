//! Benchmarking drives for a recommendation, without harming them.
//!
//! * The current root: a test file on it (as `pimigrate bench` does with
//!   no target), created, used and removed.
//! * A drive with a mounted filesystem: a test file on its largest mounted
//!   partition, so its writes are measured without touching any data.
//! * A blank drive the caller explicitly allowed (after the person agreed,
//!   see [`super::blank`]): read and write tests on the raw
//!   device, as `pimigrate bench --destructive` runs them: the wizard and
//!   `recommend` after the person agreed or `--bench-blank`.
//! * Any other drive: read tests only, on the raw device opened read-only.
//!   Its random-write figures stay unknown, and it is not recommended on
//!   reads alone.

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
    /// Read and write tests on the device node: only for a blank drive in
    /// the caller's allow-list.
    DeviceWrites,
}

impl Method {
    /// A test file where the drive has a mounted filesystem; raw writes
    /// only when `raw_writes_allowed` names the drive (and
    /// [`crate::bench::target::refuse_destructive`] checks it again before
    /// the device is opened); read tests otherwise.
    pub fn for_candidate(disk: &Disk, raw_writes_allowed: &[PathBuf]) -> Method {
        match survey::mounts(disk).into_iter().next() {
            Some(dir) => Method::TestFile(dir),
            None if raw_writes_allowed.contains(&disk.path) => Method::DeviceWrites,
            None => Method::DeviceReads,
        }
    }

    pub fn measures_writes(&self) -> bool {
        !matches!(self, Method::DeviceReads)
    }

    /// Where the writes of a method that writes go, for a note when they
    /// fail.
    fn writes_where(&self, disk: &Disk) -> String {
        match self {
            Method::TestFile(dir) => format!("a test file on {}", dir.display()),
            _ => format!("writing to {}", disk.path.display()),
        }
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
            Method::DeviceWrites => format!(
                "{}: blank, read and write tests on the device itself (test data overwrites its start)",
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
    /// read-only mount, a filesystem without direct I/O) or raw writes
    /// that are refused fall back to read tests on the device. The report
    /// is saved for later runs.
    pub fn measure(&self, disk: &Disk, method: &Method) -> Result<Measured> {
        let mut notes = Vec::new();
        let first = self.run(disk, method);
        let outcome = match (first, method) {
            (Err(e), Method::TestFile(_) | Method::DeviceWrites)
                if !self.interrupted.load(Ordering::Relaxed) =>
            {
                notes.push(format!(
                    "{} failed ({e:#}); measured with read tests on the device instead",
                    method.writes_where(disk)
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
            Method::DeviceReads | Method::DeviceWrites => Some(&disk.path),
        };
        // Raw devices are opened read-only, but for an allowed blank one;
        // resolve refuses even that if the disk is a source or in use.
        let destructive = *method == Method::DeviceWrites;
        let target = target::resolve(self.system, self.host, given, destructive)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn disks(machine: &str) -> Vec<Disk> {
        crate::system::inspect_fixture(machine).1.disks
    }

    #[test]
    fn raw_writes_only_for_a_disk_in_the_allow_list() {
        let disks = disks("pizero");
        let sda = disks.iter().find(|d| d.name == "sda").unwrap();
        assert_eq!(Method::for_candidate(sda, &[]), Method::DeviceReads);
        assert_eq!(
            Method::for_candidate(sda, &[PathBuf::from("/dev/sdb")]),
            Method::DeviceReads,
            "another disk's permission is not this one's"
        );
        let method = Method::for_candidate(sda, std::slice::from_ref(&sda.path));
        assert_eq!(method, Method::DeviceWrites);
        assert!(method.measures_writes());
    }

    #[test]
    fn a_mounted_filesystem_gets_a_test_file_even_when_raw_writes_are_allowed() {
        let mut disks = disks("pizero");
        let sda = disks.iter_mut().find(|d| d.name == "sda").unwrap();
        sda.mountpoints.push(PathBuf::from("/media/pi/SSD"));
        assert_eq!(
            Method::for_candidate(sda, std::slice::from_ref(&sda.path)),
            Method::TestFile(PathBuf::from("/media/pi/SSD"))
        );
    }
}
