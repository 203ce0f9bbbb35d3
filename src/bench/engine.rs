//! Runs one job on an open file or device with the best engine the kernel
//! offers: io_uring for real queue depth, or a pool of threads doing
//! pread/pwrite where io_uring is missing, disabled, or not built for this
//! architecture.

use super::job::{Direction, Measurement};
use super::measure::{cpu_time, JobContext, Progress};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    IoUring,
    Threads,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Threads => "threads (pread/pwrite)",
        })
    }
}

/// The engine a run uses, and why, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineChoice {
    pub kind: EngineKind,
    /// Why the preferred engine was not used, if it was not.
    pub fallback_reason: Option<String>,
}

/// Picks io_uring when it works here, else threads. `wanted` forces one
/// (io_uring is refused with the reason when it cannot work).
pub fn choose(wanted: Option<EngineKind>) -> Result<EngineChoice> {
    match (wanted, super::uring::available()) {
        (Some(EngineKind::Threads), _) => Ok(EngineChoice {
            kind: EngineKind::Threads,
            fallback_reason: None,
        }),
        (_, Ok(())) => Ok(EngineChoice {
            kind: EngineKind::IoUring,
            fallback_reason: None,
        }),
        (Some(EngineKind::IoUring), Err(reason)) => {
            anyhow::bail!("io_uring cannot be used here: {reason}; leave out --engine or use --engine threads")
        }
        (None, Err(reason)) => Ok(EngineChoice {
            kind: EngineKind::Threads,
            fallback_reason: Some(reason.to_string()),
        }),
    }
}

pub fn run_job(
    kind: EngineKind,
    ctx: &JobContext<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Measurement> {
    let cpu_before = cpu_time();
    let mut measurement = match kind {
        EngineKind::IoUring => super::uring::run(ctx, progress)?,
        EngineKind::Threads => super::threads::run(ctx, progress)?,
    };
    if ctx.spec.direction == Direction::Write && !measurement.interrupted {
        // Write timing includes the flush, as fio's end_fsync: data still in
        // the drive's cache has not been written yet.
        let started = Instant::now();
        ctx.file.sync_all().map_err(|e| {
            anyhow::anyhow!(
                "flushing after {}: {e}; the device may have gone away",
                ctx.spec.name
            )
        })?;
        let flush = started.elapsed();
        measurement.flush = Some(flush);
        measurement.elapsed += flush;
    }
    // CPU is counted from the end of the ramp, like the I/Os, so CPU time
    // per I/O compares with fio's figures.
    let cpu_start = measurement.cpu_start.unwrap_or(cpu_before);
    measurement.cpu = cpu_time().saturating_sub(cpu_start);
    Ok(measurement)
}
