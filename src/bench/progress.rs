//! A progress bar per test on a terminal; nothing when output goes to a
//! pipe or is JSON.

use super::job::{JobSpec, Limit, TestResult};
use super::measure::Progress;
use indicatif::{ProgressBar, ProgressStyle};

/// What is printed while drives are measured.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// Which drive is being measured, and how.
    pub chatty: bool,
    /// A progress bar per test.
    pub progress_bars: bool,
}

pub struct ProgressUi {
    enabled: bool,
}

pub struct JobBar {
    bar: Option<ProgressBar>,
    by_bytes: bool,
}

impl ProgressUi {
    pub fn new(enabled: bool) -> ProgressUi {
        ProgressUi { enabled }
    }

    pub fn job(&self, spec: &JobSpec) -> JobBar {
        if !self.enabled {
            return JobBar {
                bar: None,
                by_bytes: false,
            };
        }
        let (length, by_bytes) = match spec.limit {
            Limit::Time { .. } => (spec.expected().map_or(1, |d| d.as_millis() as u64), false),
            Limit::Bytes { bytes } => (bytes, true),
        };
        let bar = ProgressBar::new(length);
        if let Ok(style) = ProgressStyle::with_template("{prefix:>16} [{bar:30}] {msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(spec.name.clone());
        JobBar {
            bar: Some(bar),
            by_bytes,
        }
    }

    /// A bar for laying out the test file.
    pub fn layout(&self, bytes: u64) -> Option<ProgressBar> {
        if !self.enabled {
            return None;
        }
        let bar = ProgressBar::new(bytes);
        if let Ok(style) =
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {bytes}/{total_bytes}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix("test file");
        Some(bar)
    }
}

impl JobBar {
    pub fn update(&self, p: Progress) {
        let Some(bar) = &self.bar else { return };
        if self.by_bytes {
            bar.set_position(p.bytes);
        } else {
            bar.set_position(p.elapsed.as_millis() as u64);
        }
        bar.set_message(format!("{} I/Os", p.ios));
    }

    pub fn finish(&self, result: &TestResult) {
        if let Some(bar) = &self.bar {
            bar.finish_with_message(format!(
                "{:.1} MB/s, {:.0} IOPS",
                result.mb_per_s, result.iops
            ));
        }
    }

    pub fn abandon(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon_with_message("interrupted");
        }
    }
}
