//! The figures a recommendation compares, taken from a benchmark report.

use crate::bench::grade::AppClass;
use crate::bench::report::Report;
use serde::Serialize;

/// The standard suite's test names, as reports key their results.
pub const RND4K_Q32_READ: &str = "RND4K Q32 read";
pub const RND4K_Q32_WRITE: &str = "RND4K Q32 write";
pub const RND4K_Q1_READ: &str = "RND4K Q1 read";
pub const RND4K_Q1_WRITE: &str = "RND4K Q1 write";
pub const SEQ_READ: &str = "SEQ1M Q8 read";
pub const SEQ_WRITE: &str = "SEQ1M Q8 write";

/// One drive's figures; `None` where the test did not run (write tests
/// are skipped on a raw device, which recommend never writes to).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    pub rnd4k_q32_read_iops: Option<f64>,
    pub rnd4k_q32_write_iops: Option<f64>,
    pub rnd4k_q1_read_iops: Option<f64>,
    pub rnd4k_q1_write_iops: Option<f64>,
    pub seq_read_mb_s: Option<f64>,
    pub seq_write_mb_s: Option<f64>,
    /// A1/A2 as Raspberry Pi's SD card test grades it (needs the writes).
    pub app_class: Option<AppClass>,
    /// The PiBenchmarks-style score of the whole suite (needs the writes).
    pub pibenchmarks_score: Option<f64>,
}

impl Figures {
    pub fn from_report(report: &Report) -> Figures {
        let iops = |name: &str| report.result(name).map(|r| r.iops);
        let mb_s = |name: &str| report.result(name).map(|r| r.mb_per_s);
        Figures {
            rnd4k_q32_read_iops: iops(RND4K_Q32_READ),
            rnd4k_q32_write_iops: iops(RND4K_Q32_WRITE),
            rnd4k_q1_read_iops: iops(RND4K_Q1_READ),
            rnd4k_q1_write_iops: iops(RND4K_Q1_WRITE),
            seq_read_mb_s: mb_s(SEQ_READ),
            seq_write_mb_s: mb_s(SEQ_WRITE),
            app_class: report.grades.app_class.as_ref().map(|c| c.class),
            pibenchmarks_score: report.grades.pibenchmarks.as_ref().map(|s| s.score),
        }
    }

    /// Both random-write tests ran: the figures that matter most.
    pub fn has_random_writes(&self) -> bool {
        self.rnd4k_q32_write_iops.is_some() && self.rnd4k_q1_write_iops.is_some()
    }
}
