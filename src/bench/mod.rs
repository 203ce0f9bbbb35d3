//! The storage benchmark: an I/O engine (io_uring, or threads where
//! io_uring is missing), fio-compatible latency statistics, the suites
//! people compare drives with, their grades, and stored reports.
//!
//! Reports are the public face: see [`report`] for the JSON types and
//! [`report::list`] / [`report::for_device`] to read them back.

pub mod buffer;
pub mod dio;
pub mod engine;
pub mod grade;
pub mod histogram;
pub mod job;
pub mod machine;
pub mod progress;
pub mod random;
pub mod render;
pub mod report;
pub mod run;
#[doc(hidden)]
pub mod sample;
pub mod session;
pub mod suite;
pub mod target;
pub mod testfile;
pub mod threads;
pub mod times;
pub mod uring;

use anyhow::{Context, Result};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Makes Ctrl-C, SIGTERM and SIGHUP set a flag instead of killing the
/// process: the engines stop issuing I/O, drain what is in flight, and the
/// test file guard removes the file on the way out.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
    }
    Ok(flag)
}
