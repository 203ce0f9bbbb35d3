//! The before/after comparison on real reports: the real benchmark runs
//! twice on a directory (short runtime), and verify's comparison of the
//! two saved reports is checked figure by figure.

use crate::common;

use common::*;
use pimigrate::bench::report;
use pimigrate::verify::compare::{compare, find_before};

#[test]
fn compares_two_real_runs_test_by_test() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let state = work.path().join("state");
    for _ in 0..2 {
        let output = pimigrate()
            .arg("--state-dir")
            .arg(&state)
            .args([
                "bench",
                "--quick",
                "--runtime",
                "0.2",
                "--size",
                "32M",
                "-q",
            ])
            .arg(work.path())
            .output()
            .unwrap();
        assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    }
    let reports = report::list(&state.join("reports")).unwrap();
    assert_eq!(reports.len(), 2);
    let (before, after) = (&reports[0].report, &reports[1].report);
    let rows = compare(before, after);
    assert_eq!(rows.len(), after.results.len());
    for row in &rows {
        let old = before.result(&row.test).unwrap();
        let new = after.result(&row.test).unwrap();
        let (b, a) = if row.unit == "MB/s" {
            (old.mb_per_s, new.mb_per_s)
        } else {
            assert_eq!(row.unit, "IOPS");
            (old.iops, new.iops)
        };
        assert_eq!((row.before, row.after), (b, a));
        // A 0.2 s job on a slow machine (an emulated CPU under load) can
        // finish no I/O at all: then there is no ratio to give.
        if b > 0.0 {
            assert!((row.speedup.unwrap() - a / b).abs() < 1e-9);
        } else {
            assert_eq!(row.speedup, None, "{}: no speedup from a zero", row.test);
        }
    }
    // "Before" is the newest report of the old drive. Without one, a
    // report of `/` taken before the migration began, and never one of the
    // target drive itself.
    assert!(find_before(&reports, None, None, 0).is_none());
    if let Some(device) = before.target.device.clone() {
        let found = find_before(&reports, Some(&device), None, 0).unwrap();
        assert_eq!(found.report.id, after.id);
        assert!(find_before(&reports, None, Some(&device), u64::MAX).is_none());
    }
}
