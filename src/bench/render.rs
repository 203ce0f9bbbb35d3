//! A benchmark as text people read: the engine, what each target is
//! measured with, and the report as a table.

use super::engine::EngineChoice;
use super::histogram::LatencySummary;
use super::job::TestResult;
use super::report::Report;
use super::target::{Target, TargetKind};

/// Which engine runs the tests, and why when it is not the one asked for.
pub fn engine_line(engine: &EngineChoice) -> String {
    match &engine.fallback_reason {
        None => format!("Engine: {}", engine.kind),
        Some(reason) => format!("Engine: {} ({reason})", engine.kind),
    }
}

/// What is about to be measured on a target, and how.
pub fn heading(target: &Target) -> String {
    let disk = target
        .disk
        .as_ref()
        .map(|d| format!(" on {}", d.describe()))
        .unwrap_or_default();
    match target.kind {
        TargetKind::File => format!(
            "Benchmarking {}{disk} with a test file (removed afterwards)",
            target.given.display()
        ),
        TargetKind::Device if target.destructive => {
            format!(
                "Benchmarking {}{disk}: read and WRITE tests",
                target.given.display()
            )
        }
        TargetKind::Device => format!(
            "Benchmarking {}{disk}: read tests only (writes need --destructive)",
            target.given.display()
        ),
    }
}

/// The report as a table people read.
pub fn report_text(report: &Report) -> String {
    let mut out = String::new();
    let p = &report.parameters;
    out.push_str(&format!(
        "Preset {}, {} s per test after a {} s ramp, over {}{}\n",
        p.suite.preset,
        p.suite.runtime_seconds,
        p.suite.ramp_seconds,
        crate::units::binary(p.span_bytes),
        p.size_note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "test", "MB/s", "MiB/s", "IOPS", "p50 us", "p99 us", "p99.9 us"
    ));
    for r in &report.results {
        out.push_str(&result_line(r));
    }
    if let Some(class) = &report.grades.app_class {
        out.push_str(&format!(
            "SD card class: {} ({})\n",
            class.class, class.basis
        ));
        for check in &class.checks {
            out.push_str(&format!(
                "  {:<24} {:>10.0} (A1 needs {:.0}) {}\n",
                check.what,
                check.value,
                check.target,
                if check.pass { "PASS" } else { "FAIL" }
            ));
        }
    }
    if let Some(score) = &report.grades.pibenchmarks {
        out.push_str(&format!("PiBenchmarks-style score: {:.0}\n", score.score));
    }
    for note in &report.grades.notes {
        out.push_str(&format!("Note: {note}\n"));
    }
    if let Some(t) = &report.machine.throttled {
        if t.under_voltage_now || t.under_voltage_occurred || t.throttling_occurred {
            out.push_str(&format!(
                "Warning: the Pi reports under-voltage or throttling ({}); figures may be low\n",
                t.raw
            ));
        }
    }
    out
}

fn result_line(r: &TestResult) -> String {
    let lat = |f: fn(&LatencySummary) -> f64| {
        r.latency
            .as_ref()
            .map_or_else(|| "-".to_string(), |l| format!("{:.0}", f(l)))
    };
    format!(
        "{:<16} {:>10.1} {:>10.1} {:>10.0} {:>10} {:>10} {:>10}\n",
        r.name,
        r.mb_per_s,
        r.mib_per_s,
        r.iops,
        lat(|l| l.p50_us),
        lat(|l| l.p99_us),
        lat(|l| l.p99_9_us)
    )
}
