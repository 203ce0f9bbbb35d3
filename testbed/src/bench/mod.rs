//! Benchmarks: run by name only (`pi-testbed run NAME`, as
//! `scripts/bench-pi-copy.sh` runs `pi-copy-bench`), never by `run`
//! without names, a lane, or `scripts/test.sh`. They measure and print;
//! they fail only when something broke, never on a figure. Each runs alone,
//! the only guest, as the scenarios that measure speed do. Built on the
//! machine room as the scenarios are; add one by writing a module and
//! listing its constant in [`all`].

use crate::host::image::ImageSet;
use anyhow::Result;

pub mod pi_copy;
mod profilers;

/// A named benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Benchmark {
    pub name: &'static str,
    pub run: fn(&ImageSet) -> Result<()>,
    /// What it measures, as `pi-testbed list` says it.
    pub about: &'static str,
}

/// Every benchmark.
pub fn all() -> Vec<Benchmark> {
    vec![pi_copy::BENCHMARK]
}
