//! One benchmark of one target, from opening it to the finished report.

use super::dio::{self, DirectIoAlignment};
use super::engine::EngineChoice;
use super::job::TestResult;
use super::machine;
use super::progress::ProgressUi;
use super::report::{self, DeviceIdentity, Parameters, Report, TargetInfo};
use super::suite::{self, Preset, SuiteParams};
use super::target::{Target, TargetKind};
use super::testfile;
use crate::host::Host;
use crate::system::System;
use crate::units::MIB;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub struct RunOptions {
    pub params: SuiteParams,
    /// --size as given; `None` means the preset's default.
    pub size_given: Option<u64>,
    pub engine: EngineChoice,
    /// --test: run only these tests (names as in the report, any case,
    /// spaces optional); empty runs them all.
    pub only: Vec<String>,
    /// Run on this existing file instead of a fresh test file: it is
    /// neither laid out nor removed. For comparing with fio on one file.
    pub existing_file: Option<std::path::PathBuf>,
}

pub enum RunOutcome {
    Done(Box<Report>),
    /// Ctrl-C: the results so far; the test file is already gone.
    Interrupted(Vec<TestResult>),
}

/// What the I/O runs against, while the tests run.
struct Prepared {
    file: File,
    span: u64,
    alignment: DirectIoAlignment,
    size_note: Option<String>,
    layout_seconds: Option<f64>,
    /// Held so the test file is removed when the run ends, however it ends.
    _test_file: Option<testfile::TestFile>,
}

pub fn run_target(
    system: &System,
    host: &Host,
    target: &Target,
    options: &RunOptions,
    ui: &ProgressUi,
    interrupted: &AtomicBool,
) -> Result<RunOutcome> {
    let wall_start = SystemTime::now();
    let started = Instant::now();
    let prepared = match target.kind {
        TargetKind::File => match &options.existing_file {
            Some(path) => prepare_existing_file(path, options)?,
            None => prepare_file(target, options, ui, interrupted)?,
        },
        TargetKind::Device => prepare_device(target, options)?,
    };
    let Some(prepared) = prepared else {
        return Ok(RunOutcome::Interrupted(Vec::new()));
    };
    let jobs = suite::select(
        options.params.jobs(prepared.span, target.writes_allowed()),
        &options.only,
    )?;
    for job in &jobs {
        prepared
            .alignment
            .check_block_size(job.block_size, &target.given)?;
    }
    let outcome = suite::run(
        options.engine.kind,
        &prepared.file,
        prepared.alignment,
        interrupted,
        &jobs,
        ui,
    )?;
    if outcome.interrupted {
        return Ok(RunOutcome::Interrupted(outcome.results));
    }
    let unix_time = wall_start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let device_name = target
        .disk
        .as_ref()
        .map_or_else(|| "unknown".to_string(), |d| d.name.clone());
    let report = Report {
        schema: report::SCHEMA.to_string(),
        id: format!("{unix_time}-{device_name}-{}", std::process::id()),
        started_at: crate::clock::rfc3339_utc(unix_time),
        unix_time,
        duration_seconds: started.elapsed().as_secs_f64(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: machine::collect(system, host),
        target: TargetInfo {
            kind: target.kind,
            path: target.given.clone(),
            filesystem: target.filesystem.clone(),
            mountpoint: target.mountpoint.clone(),
            partition: target.partition,
            device: target.disk.as_ref().map(DeviceIdentity::from_disk),
        },
        engine: options.engine.clone(),
        parameters: Parameters {
            suite: options.params,
            span_bytes: prepared.span,
            size_note: prepared.size_note.clone(),
            layout_seconds: prepared.layout_seconds,
            direct_io: prepared.alignment,
            writes: target.writes_allowed(),
            destructive: target.destructive,
        },
        grades: report::grade(options.params.preset, &outcome.results),
        results: outcome.results,
    };
    Ok(RunOutcome::Done(Box::new(report)))
}

/// Sizes, creates and lays out the test file; `None` when interrupted.
fn prepare_file(
    target: &Target,
    options: &RunOptions,
    ui: &ProgressUi,
    interrupted: &AtomicBool,
) -> Result<Option<Prepared>> {
    let dir = &target.open_path;
    let free = testfile::free_bytes(dir)?;
    let sizing = testfile::size_for(options.params.file_size, free, dir)?;
    let test = testfile::create(dir, sizing.bytes)?;
    let alignment = dio::alignment(&test.file, &test.path, false)?;
    let bar = ui.layout(test.size);
    let laid_out = testfile::lay_out(&test, alignment.buffer_align(), interrupted, &mut |done| {
        if let Some(bar) = &bar {
            bar.set_position(done);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let layout = match laid_out {
        Ok(duration) => duration,
        Err(_) if interrupted.load(std::sync::atomic::Ordering::Relaxed) => return Ok(None),
        Err(e) => return Err(e),
    };
    let file = test
        .file
        .try_clone()
        .with_context(|| format!("{}: reopening the test file", test.path.display()))?;
    Ok(Some(Prepared {
        file,
        span: test.size,
        alignment,
        size_note: sizing.note.clone(),
        layout_seconds: Some(layout.as_secs_f64()),
        _test_file: Some(test),
    }))
}

fn prepare_existing_file(path: &Path, options: &RunOptions) -> Result<Option<Prepared>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("{}: opening the file to benchmark", path.display()))?;
    let length = file
        .metadata()
        .with_context(|| format!("{}: reading its size", path.display()))?
        .len();
    let span = options.size_given.unwrap_or(length).min(length) / MIB * MIB;
    if span < testfile::MIN_TEST_FILE {
        anyhow::bail!(
            "{}: the file is smaller than {}; give a larger one",
            path.display(),
            crate::units::binary(testfile::MIN_TEST_FILE)
        );
    }
    let alignment = dio::alignment(&file, path, false)?;
    Ok(Some(Prepared {
        file,
        span,
        alignment,
        size_note: Some(format!("existing file {}", path.display())),
        layout_seconds: None,
        _test_file: None,
    }))
}

fn prepare_device(target: &Target, options: &RunOptions) -> Result<Option<Prepared>> {
    let path = &target.open_path;
    let file = open_device(path, target.destructive)?;
    let size = dio::device_size(&file, path)?;
    let alignment = dio::alignment(&file, path, true)?;
    // Reads may cover the whole device; writes (and the a1 preset's
    // size-based passes) stay within the test size to bound the wear.
    let bounded = target.destructive || options.params.preset == Preset::A1;
    let wanted = match (options.size_given, bounded) {
        (Some(size), _) => size,
        (None, true) => options.params.file_size,
        (None, false) => size,
    };
    let span = wanted.min(size) / MIB * MIB;
    if span < MIB {
        anyhow::bail!(
            "{}: the device is only {} bytes, too small to benchmark",
            path.display(),
            size
        );
    }
    let size_note =
        (wanted > size).then(|| format!("the device is smaller than the {wanted} bytes asked for"));
    Ok(Some(Prepared {
        file,
        span,
        alignment,
        size_note,
        layout_seconds: None,
        _test_file: None,
    }))
}

fn open_device(path: &Path, writable: bool) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_DIRECT);
    if writable {
        // O_EXCL on a block device fails while anything has it mounted or
        // claimed: a last guard against writing to a disk in use.
        options
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_EXCL);
    }
    options.open(path).with_context(|| {
        if writable {
            format!(
                "{}: opening for raw writes (is it mounted or in use?)",
                path.display()
            )
        } else {
            format!("{}: opening for reading (are you root?)", path.display())
        }
    })
}
