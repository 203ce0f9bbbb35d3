//! `pi-testbed`: run the testbed's scenarios.
//!
//!   pi-testbed list              scenario names and what they check, then the benchmarks'
//!   pi-testbed write-docs        the scenario table of docs/testbed/scenarios.md
//!   pi-testbed image             build or find the cached image, print its folder
//!   pi-testbed run [NAME...]     run scenarios (default: all), print a summary;
//!                                a benchmark (`list` shows them apart) runs only by name
//!   pi-testbed run --lane shared the scenarios that time nothing (several at once)
//!   pi-testbed run --lane alone  the speed scenarios, one at a time
//!   pi-testbed needs-arm ARGS... whether `run ARGS...` runs an ARM lane scenario (yes/no)

use anyhow::{bail, Result};
use pi_testbed::bench::{self, Benchmark};
use pi_testbed::host::image::ArmImage;
use pi_testbed::machine::fault::{self, EmulationFault};
use pi_testbed::machine::load::{self, HostLoad};
use pi_testbed::scenarios::unattended::tally;
use pi_testbed::scenarios::{self, Lane, Scenario};
use pi_testbed::{clear_work, keep_work, ImageSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match dispatch(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pi-testbed: error: {e:#}");
            2
        }
    };
    std::process::exit(code);
}

fn dispatch(args: &[String]) -> Result<i32> {
    match args.first().map(String::as_str) {
        Some("list") => {
            for s in scenarios::all() {
                println!("{:<22} {}", s.name, s.about);
            }
            println!("\nbenchmarks (not in the suite: run by name only)");
            for b in bench::all() {
                println!("{:<22} {}", b.name, b.about);
            }
            Ok(0)
        }
        // The scenario table of docs/testbed/scenarios.md, from `about`.
        Some("write-docs") => {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(scenarios::TABLE_DOC);
            let doc = std::fs::read_to_string(&path)?;
            let Some(new) = scenarios::with_table(&doc, &scenarios::markdown_table()) else {
                bail!("{} has no scenarios:begin/end markers", path.display());
            };
            if new != doc {
                std::fs::write(&path, new)?;
                println!("wrote the scenario table into {}", scenarios::TABLE_DOC);
            }
            Ok(0)
        }
        Some("image") => {
            println!("{}", ImageSet::ensure()?.dir.display());
            Ok(0)
        }
        // Whether `run ARGS...` would run an ARM lane scenario: testbed/run.sh
        // then builds pimigrate for arm64 first.
        Some("needs-arm") => {
            let arm = chosen(&args[1..])?.iter().any(|j| j.lane.arm());
            println!("{}", if arm { "yes" } else { "no" });
            Ok(0)
        }
        Some("run") => run(&args[1..]),
        _ => bail!(
            "usage: pi-testbed list | write-docs | image | run [--lane shared|alone | SCENARIO...] | needs-arm [ARGS...]"
        ),
    }
}

/// One thing `run` starts: a scenario, or a benchmark named.
#[derive(Debug, Clone, Copy)]
struct Job {
    name: &'static str,
    run: fn(&ImageSet) -> Result<()>,
    lane: Lane,
}

impl From<Scenario> for Job {
    fn from(s: Scenario) -> Job {
        Job {
            name: s.name,
            run: s.run,
            lane: s.lane,
        }
    }
}

impl From<Benchmark> for Job {
    /// A benchmark measures: it runs alone, as the speed scenarios do.
    fn from(b: Benchmark) -> Job {
        Job {
            name: b.name,
            run: b.run,
            lane: Lane::Speed,
        }
    }
}

/// What `run ARGS...` runs: one lane's scenarios (`--lane shared|alone`,
/// less those `PI_TESTBED_SKIP` names), the named scenarios and
/// benchmarks, or every scenario (never a benchmark) when none is named.
fn chosen(args: &[String]) -> Result<Vec<Job>> {
    chosen_skipping(args, &std::env::var("PI_TESTBED_SKIP").unwrap_or_default())
}

/// [`chosen`], with `skip` for `PI_TESTBED_SKIP`.
fn chosen_skipping(args: &[String], skip: &str) -> Result<Vec<Job>> {
    let scenarios = scenarios::all().into_iter().map(Job::from);
    if args.first().map(String::as_str) == Some("--lane") {
        let word = args.get(1).map(String::as_str);
        let Some(lanes) = word.and_then(Lane::named) else {
            bail!("--lane takes shared or alone, not {word:?}");
        };
        let skipped: Vec<&str> = skip.split(',').map(str::trim).collect();
        return Ok(scenarios
            .filter(|j| lanes.contains(&j.lane) && !skipped.contains(&j.name))
            .collect());
    }
    if args.is_empty() {
        return Ok(scenarios.collect());
    }
    // Benchmarks only when named.
    let mut all: Vec<Job> = scenarios
        .chain(bench::all().into_iter().map(Job::from))
        .collect();
    for n in args {
        if !all.iter().any(|j| j.name == n) {
            bail!("no scenario {n:?}; `pi-testbed list` shows them");
        }
    }
    all.retain(|j| args.iter().any(|n| n == j.name));
    Ok(all)
}

/// Runs the named scenarios (all when none), or one lane of them
/// (`--lane alone`: the speed scenarios; `--lane shared`: the others).
/// Those that time nothing share the machine, `jobs()` at once; those that
/// measure speed run afterwards with nothing else from the suite beside
/// them, so a neighbour's load never decides a ratio.
fn run(args: &[String]) -> Result<i32> {
    let chosen = chosen(args)?;
    let times = Times::from_env();
    let suite = Instant::now();
    let images = images(&chosen, &times)?;
    let (alone, shared): (Vec<Job>, Vec<Job>) = chosen.into_iter().partition(|j| j.lane.alone());
    let mut results = run_side_by_side(shared, &images, &times);
    for job in alone {
        results.push(run_one(&job, &images, &times, false));
    }
    let passed = results.iter().filter(|ok| **ok).count();
    let failed = results.len() - passed;
    eprintln!("testbed: total {:.0?}", suite.elapsed());
    // The failure matrix's line (docs/testbed/scenarios.md, "Unattended").
    if let Some(line) = tally::summary(&tally::cases()) {
        println!("{line}");
        times.note(&line);
    }
    println!("testbed: {passed} passed, {failed} failed");
    Ok(if failed == 0 { 0 } else { 1 })
}

/// The x86 guest's images, built or found, and the ARM lane's when a
/// chosen scenario boots it: before the scenarios start, since two of them
/// building it at once would wait on each other's lock inside their own
/// time.
fn images(chosen: &[Job], times: &Times) -> Result<ImageSet> {
    let t = Instant::now();
    let images = ImageSet::ensure()?;
    eprintln!(
        "testbed: image {} ready in {:.0?}",
        images.dir.display(),
        t.elapsed()
    );
    times.record(
        "testbed: image (build, or the cached one)",
        t.elapsed(),
        None,
        true,
    );
    if chosen.iter().any(|j| j.lane.arm()) {
        let t = Instant::now();
        let arm = ArmImage::ensure()?;
        eprintln!(
            "testbed: arm64 image {} ready in {:.0?}",
            arm.dir.display(),
            t.elapsed()
        );
        times.record(
            "testbed: arm64 image (build, or the cached one)",
            t.elapsed(),
            None,
            true,
        );
    }
    Ok(images)
}

/// Runs `shared` `jobs()` at a time (one more once the file
/// `PI_TESTBED_EXTRA_JOB_AFTER` names exists); whether each passed.
fn run_side_by_side(shared: Vec<Job>, images: &ImageSet, times: &Times) -> Vec<bool> {
    let jobs = jobs().min(shared.len()).max(1);
    let parallel = jobs > 1;
    let queue = Mutex::new(shared.into_iter());
    let results = Mutex::new(Vec::new());
    let extra_job_after = std::env::var_os("PI_TESTBED_EXTRA_JOB_AFTER").map(PathBuf::from);
    std::thread::scope(|scope| {
        let (queue, results) = (&queue, &results);
        let worker = move || loop {
            let next = queue.lock().expect("queue lock").next();
            let Some(job) = next else { break };
            let ok = run_one(&job, images, times, parallel);
            results.lock().expect("results lock").push(ok);
        };
        for _ in 0..jobs {
            scope.spawn(worker);
        }
        // One more guest once the work beside the lane is done: the
        // guests alone leave part of the machine idle (docs/testbed/README.md, "Two lanes").
        if let Some(flag) = &extra_job_after {
            scope.spawn(move || {
                while !flag.exists() {
                    if queue.lock().expect("queue lock").len() == 0 {
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(5));
                }
                eprintln!(
                    "testbed: {} exists: one more scenario at a time",
                    flag.display()
                );
                worker();
            });
        }
    });
    results.into_inner().expect("results lock")
}

/// How many scenarios that time nothing run at once
/// (`PI_TESTBED_JOBS`, default 2: each guest's emulated SD card and USB
/// leave a core idle much of the time, measured in docs/testbed/README.md, "Two lanes").
fn jobs() -> usize {
    std::env::var("PI_TESTBED_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(2)
}

/// Runs one scenario, prints its verdict and time, and clears its work
/// folder; true when it passed. A scenario that met a fault of the
/// emulation ([`EmulationFault`]), or a speed scenario (run alone) that failed while other work took much of
/// the host, is run once more; a speed scenario that fails loaded again
/// is reported as a host too busy to measure: its ratios were decided by
/// the neighbours, not by the code under test.
fn run_one(s: &Job, images: &ImageSet, times: &Times, parallel: bool) -> bool {
    let t = Instant::now();
    let mut outcome = attempt(s, images);
    if let Some(why) = worth_another_run(s, &outcome) {
        eprintln!("testbed: {} failed {why}; running it once more", s.name);
        keep_first_attempts_logs(s.name);
        let _ = clear_work(s.name);
        outcome = attempt(s, images);
    }
    let elapsed = t.elapsed();
    let (result, others) = outcome;
    let result = match (result, others) {
        (Err(e), Some(others)) if s.lane.alone() && others > load::TOO_LOADED => {
            Err(e.context(format!(
                "the host was too busy to measure: other work took {:.0} % of its CPUs \
             (more than {:.0} %), so these figures say nothing about pimigrate; \
             run it again on a quieter machine",
                others * 100.0,
                load::TOO_LOADED * 100.0
            )))
        }
        (result, _) => result,
    };
    match &result {
        Ok(()) => eprintln!("testbed: PASS {} ({:.0?})", s.name, elapsed),
        Err(e) => {
            eprintln!("testbed: FAIL {} ({:.0?}): {e:#}", s.name, elapsed);
            eprintln!("testbed: logs in {}/", scenario_logs(s.name).display());
            if !keep_work() {
                eprintln!(
                    "testbed: its disk images are removed; \
                     PI_TESTBED_KEEP_WORK=1 testbed/run.sh {} keeps them",
                    s.name
                );
            }
        }
    }
    let mark = if parallel { " *" } else { "" };
    let guests = load::guest_time(s.name);
    times.record(
        &format!("  scenario {}{mark}", s.name),
        elapsed,
        Some(guests.cpu),
        result.is_ok(),
    );
    times.boots(s.name, &guests);
    if let Err(e) = clear_work(s.name) {
        eprintln!("testbed: {e:#}");
    }
    result.is_ok()
}

/// A scenario's log folder (its boots' consoles, outputs, `boots.tsv`).
fn scenario_logs(name: &str) -> PathBuf {
    pi_testbed::machine::pi::target_dir()
        .join("testbed-logs")
        .join(name)
}

/// Moves a failed attempt's logs to `testbed-logs/<name>.first-attempt/`
/// before the next attempt starts its own, so that what went wrong the
/// first time can still be read after the run.
fn keep_first_attempts_logs(name: &str) {
    let logs = pi_testbed::machine::pi::target_dir().join("testbed-logs");
    let kept = logs.join(format!("{name}.first-attempt"));
    let _ = std::fs::remove_dir_all(&kept);
    match std::fs::rename(logs.join(name), &kept) {
        Ok(()) => eprintln!(
            "testbed: the first attempt's logs are in {}/",
            kept.display()
        ),
        Err(e) => eprintln!(
            "testbed: cannot keep the first attempt's logs in {}: {e}",
            kept.display()
        ),
    }
}

/// Why a failed run says nothing about the code under test, if it does
/// not: the emulator itself stopped running, or (for a speed scenario)
/// other work took more of the host than the figures can bear.
fn worth_another_run(s: &Job, (result, others): &(Result<()>, Option<f64>)) -> Option<String> {
    let e = result.as_ref().err()?;
    // Every fault of the emulation, a boot's included: one that
    // [`Pi::boot_until`] booted past twice and still met says no more
    // about pimigrate than the others.
    if let Some(fault) = EmulationFault::find(e) {
        return Some(format!("because {fault}: {e:#}"));
    }
    // One the harness cannot see as it happens, only the guest: its NVMe
    // commands timed out while the guest ran on.
    if let Some(fault) = fault::nvme_stopped_in(&scenario_logs(s.name)) {
        return Some(format!("because {fault}: {e:#}"));
    }
    match others {
        Some(others) if s.lane.alone() && *others > load::TOO_LOADED => Some(format!(
            "while other work took {:.0} % of the host's CPUs: {e:#}",
            others * 100.0
        )),
        _ => None,
    }
}

/// One run of a scenario, with the share of the host other work took
/// meanwhile (for the scenarios run alone; `None` when unmeasured).
fn attempt(s: &Job, images: &ImageSet) -> (Result<()>, Option<f64>) {
    eprintln!("testbed: --- {} ---", s.name);
    let load = if s.lane.alone() {
        HostLoad::start()
            .map_err(|e| eprintln!("testbed: cannot measure the host's load: {e:#}"))
            .ok()
    } else {
        None
    };
    let result = (s.run)(images);
    let others = load.and_then(|l| l.others_share().ok());
    if let Some(others) = others {
        eprintln!(
            "testbed: {}: other work took {:.0} % of the host's CPUs meanwhile",
            s.name,
            others * 100.0
        );
    }
    (result, others)
}

/// The rows this run adds to the time table of `scripts/test.sh`
/// (`PI_TESTBED_TIMES`: name, seconds, ok or FAILED, and the CPU seconds its
/// guests used, or `-`); nothing when unset.
struct Times(Option<Mutex<std::fs::File>>);

impl Times {
    fn from_env() -> Times {
        let file = std::env::var_os("PI_TESTBED_TIMES").and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| eprintln!("testbed: cannot add to the time table {path:?}: {e}"))
                .ok()
        });
        Times(file.map(Mutex::new))
    }

    /// A row that is a result, not a time (as sync-standby's ratios).
    fn note(&self, text: &str) {
        let Some(file) = &self.0 else { return };
        let row = format!("  unattended failure matrix\t-\t{text}\t-\n");
        if let Err(e) = file
            .lock()
            .expect("time table lock")
            .write_all(row.as_bytes())
        {
            eprintln!("testbed: cannot add to the time table: {e}");
        }
    }

    /// Two rows under a scenario's: how much of its guests' time went to
    /// booting until the job started (the whole boot where no job ran),
    /// and how much to the jobs; the rest is shutting down.
    fn boots(&self, name: &str, guests: &load::GuestTime) {
        if guests.boots == 0 {
            return;
        }
        let rows = [
            (
                format!("    {name}: {} boots, until the job", guests.boots),
                guests.to_job,
            ),
            (format!("    {name}: the jobs"), guests.job),
        ];
        for (row, mark) in rows {
            self.row(&format!(
                "{row}\t{}\t-\t{}\n",
                mark.wall.as_secs(),
                mark.cpu.as_secs()
            ));
        }
    }

    fn row(&self, row: &str) {
        let Some(file) = &self.0 else { return };
        if let Err(e) = file
            .lock()
            .expect("time table lock")
            .write_all(row.as_bytes())
        {
            eprintln!("testbed: cannot add to the time table: {e}");
        }
    }

    fn record(&self, name: &str, elapsed: Duration, cpu: Option<Duration>, ok: bool) {
        let Some(file) = &self.0 else { return };
        let verdict = if ok { "ok" } else { "FAILED" };
        let cpu = cpu.map_or("-".to_string(), |c| c.as_secs().to_string());
        let row = format!("{name}\t{}\t{verdict}\t{cpu}\n", elapsed.as_secs());
        if let Err(e) = file
            .lock()
            .expect("time table lock")
            .write_all(row.as_bytes())
        {
            eprintln!("testbed: cannot add to the time table: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(args: &[&str], skip: &str) -> Vec<&'static str> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        chosen_skipping(&args, skip)
            .unwrap()
            .iter()
            .map(|j| j.name)
            .collect()
    }

    /// The lanes `scripts/test.sh` runs: the speed scenarios alone (less
    /// what `PI_TESTBED_SKIP` names), every other one shared, the ARM
    /// lane's among them; benchmarks only by name.
    #[test]
    fn the_lanes_and_the_names_choose_what_runs() {
        let speed = ["wizard-story", "recommend", "disk-speed"];
        assert_eq!(names(&["--lane", "alone"], ""), speed);
        assert_eq!(
            names(&["--lane", "alone"], "recommend"),
            ["wizard-story", "disk-speed"]
        );
        let shared = names(&["--lane", "shared"], "");
        let all = names(&[], "");
        assert_eq!(
            all.len(),
            scenarios::all().len(),
            "no names: every scenario"
        );
        assert_eq!(shared.len() + speed.len(), all.len());
        assert!(shared.iter().all(|n| !speed.contains(n)));
        assert_eq!(&shared[..2], ["pi3-root-only", "pi4-trial"]);
        assert!(!all.contains(&"pi-copy-bench"));
        assert_eq!(names(&["pi-copy-bench"], ""), ["pi-copy-bench"]);
        assert_eq!(
            names(&["sd-boot", "pi4-trial"], ""),
            ["pi4-trial", "sd-boot"]
        );
        let arm: Vec<&str> = chosen_skipping(&[], "")
            .unwrap()
            .iter()
            .filter(|j| j.lane.arm())
            .map(|j| j.name)
            .collect();
        assert_eq!(arm, ["pi3-root-only", "pi4-trial"]);
        let bench = chosen_skipping(&["pi-copy-bench".to_string()], "").unwrap();
        assert!(bench[0].lane.alone());
        assert!(chosen_skipping(&["--lane".to_string(), "fast".to_string()], "").is_err());
        assert!(chosen_skipping(&["no-such".to_string()], "").is_err());
    }
}
