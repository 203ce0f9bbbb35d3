//! How candidates are compared with the current root: random 4K I/O,
//! weighted as PiBenchmarks weighs it, relative to the current root.
//!
//! Random 4K I/O is what makes a running system feel slow (package
//! installs, databases, logs, browsers), and it is where SD cards and cheap
//! flash drives fall apart; sequential speed barely matters for a root
//! filesystem. So:
//!
//! * each of the four RND4K tests (Q32 and Q1, read and write) gives a
//!   ratio: candidate IOPS / current root IOPS;
//! * reads weigh 4 and writes 10, as in the PiBenchmarks score (fio and
//!   iozone random reads x4, random writes x10; deep queue and queue depth 1
//!   count alike there, and here);
//! * the combined gain is the weighted geometric mean of the ratios. A
//!   geometric mean is the one average of ratios that does not let a single
//!   huge ratio (an NVMe drive's Q32 reads) hide a poor one, and a drive
//!   twice as fast at everything scores exactly 2.
//!
//! A candidate is worth migrating to when the combined gain is at least
//! [`WORTH_IT_GAIN`] and it is not slower at random writes (the geometric
//! mean of its two write ratios is at least 1). Writes must have been
//! measured: a drive only read from cannot be vouched for.

use super::figures::{self, Figures};
use serde::Serialize;

/// PiBenchmarks' weights: random reads x4, random writes x10.
pub const READ_WEIGHT: f64 = 4.0;
pub const WRITE_WEIGHT: f64 = 10.0;
/// A migration costs time and a drive; below twice the current root's
/// random 4K performance the difference is hard to notice.
pub const WORTH_IT_GAIN: f64 = 2.0;
/// Random writes at least as fast as the current root's.
pub const MIN_WRITE_GAIN: f64 = 1.0;

/// One test's comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestGain {
    pub test: &'static str,
    pub iops: f64,
    pub baseline_iops: f64,
    /// `iops / baseline_iops`.
    pub ratio: f64,
    pub weight: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gain {
    /// Weighted geometric mean of the ratios of every test both sides ran.
    pub combined: f64,
    /// Geometric mean of the read ratios (Q32 and Q1).
    pub random_read: Option<f64>,
    /// Geometric mean of the write ratios; `None` when writes were not
    /// measured on either side.
    pub random_write: Option<f64>,
    /// Some RND4K tests are missing: `combined` covers only the others.
    pub partial: bool,
    pub tests: Vec<TestGain>,
}

/// The candidate against the baseline; `None` when they share no RND4K test.
pub fn gain(candidate: &Figures, baseline: &Figures) -> Option<Gain> {
    let pairs = [
        (
            figures::RND4K_Q32_READ,
            candidate.rnd4k_q32_read_iops,
            baseline.rnd4k_q32_read_iops,
            READ_WEIGHT,
        ),
        (
            figures::RND4K_Q1_READ,
            candidate.rnd4k_q1_read_iops,
            baseline.rnd4k_q1_read_iops,
            READ_WEIGHT,
        ),
        (
            figures::RND4K_Q32_WRITE,
            candidate.rnd4k_q32_write_iops,
            baseline.rnd4k_q32_write_iops,
            WRITE_WEIGHT,
        ),
        (
            figures::RND4K_Q1_WRITE,
            candidate.rnd4k_q1_write_iops,
            baseline.rnd4k_q1_write_iops,
            WRITE_WEIGHT,
        ),
    ];
    let tests: Vec<TestGain> = pairs
        .iter()
        .filter_map(|&(test, iops, baseline_iops, weight)| {
            let (iops, baseline_iops) = (iops?, baseline_iops?);
            // A baseline of zero IOPS cannot be divided by; such a report is
            // broken rather than informative.
            (baseline_iops > 0.0).then(|| TestGain {
                test,
                iops,
                baseline_iops,
                ratio: iops / baseline_iops,
                weight,
            })
        })
        .collect();
    if tests.is_empty() {
        return None;
    }
    let reads: Vec<&TestGain> = tests.iter().filter(|t| t.weight == READ_WEIGHT).collect();
    let writes: Vec<&TestGain> = tests.iter().filter(|t| t.weight == WRITE_WEIGHT).collect();
    Some(Gain {
        combined: weighted_geometric_mean(&tests.iter().collect::<Vec<_>>()),
        random_read: (!reads.is_empty()).then(|| weighted_geometric_mean(&reads)),
        random_write: (!writes.is_empty()).then(|| weighted_geometric_mean(&writes)),
        partial: tests.len() < pairs.len(),
        tests,
    })
}

fn weighted_geometric_mean(tests: &[&TestGain]) -> f64 {
    let total: f64 = tests.iter().map(|t| t.weight).sum();
    // A test that completed nothing has ratio 0; clamp so the logarithm
    // stays finite and the mean is tiny rather than NaN.
    let log_sum: f64 = tests
        .iter()
        .map(|t| t.weight * t.ratio.max(1e-6).ln())
        .sum();
    (log_sum / total).exp()
}

/// Whether a candidate is worth the migration, and why, in one sentence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub worth_it: bool,
    pub summary: String,
}

/// Applies the rule above. `baseline_name` reads "your SD card".
pub fn judge(gain: Option<&Gain>, writes_measured: bool, baseline_name: &str) -> Judgement {
    let no = |summary: String| Judgement {
        worth_it: false,
        summary,
    };
    let Some(gain) = gain else {
        return no("not measured: no comparable figures".into());
    };
    let reads = gain
        .random_read
        .map(|r| compare_phrase(r, "random 4K reads", baseline_name));
    let Some(writes) = gain.random_write.filter(|_| writes_measured) else {
        return no(format!(
            "random 4K writes not measured, so it cannot be recommended{}",
            reads.map(|r| format!(" ({r})")).unwrap_or_default()
        ));
    };
    let write_phrase = compare_phrase(writes, "random 4K writes", baseline_name);
    let both = match &reads {
        Some(r) => format!("{write_phrase}; {r}"),
        None => write_phrase,
    };
    if writes < MIN_WRITE_GAIN {
        return no(format!("not worth it: {both}"));
    }
    if gain.combined < WORTH_IT_GAIN {
        return no(format!(
            "not worth it: {} at random 4K overall (worth it from {}x): {both}",
            times(gain.combined),
            WORTH_IT_GAIN
        ));
    }
    Judgement {
        worth_it: true,
        summary: format!("{both} ({} overall)", times(gain.combined)),
    }
}

/// "random 4K writes 14x faster than your SD card", or "3.2x slower".
pub fn compare_phrase(ratio: f64, what: &str, baseline_name: &str) -> String {
    if ratio >= 1.05 {
        format!("{what} {} faster than {baseline_name}", times(ratio))
    } else if ratio <= 0.95 {
        format!(
            "{what} {} slower than {baseline_name}",
            times(1.0 / ratio.max(1e-6))
        )
    } else {
        format!("{what} about as fast as {baseline_name}")
    }
}

/// "14x" for large ratios, "2.3x" below 10.
pub fn times(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.1}x")
    }
}
