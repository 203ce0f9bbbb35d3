//! `pi-testbed`: run the testbed's scenarios.
//!
//!   pi-testbed list              scenario names and what they check
//!   pi-testbed image             build or find the cached image, print its folder
//!   pi-testbed run [NAME...]     run scenarios (default: all), print a summary;
//!                                a benchmark (`list` marks them) runs only by name
//!   pi-testbed run --lane shared the scenarios that time nothing (several at once)
//!   pi-testbed run --lane alone  the speed scenarios, one at a time
//!   pi-testbed needs-arm ARGS... whether `run ARGS...` runs an ARM lane scenario (yes/no)

use anyhow::{bail, Result};
use pi_testbed::fault::EmulationFault;
use pi_testbed::image::ArmImage;
use pi_testbed::load::{self, HostLoad};
use pi_testbed::scenarios::{self, Scenario};
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
            for s in scenarios::benchmarks() {
                println!("{:<22} (not in the suite: by name only) {}", s.name, s.about);
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
            let arm = chosen(&args[1..])?.iter().any(|s| s.arm);
            println!("{}", if arm { "yes" } else { "no" });
            Ok(0)
        }
        Some("run") => run(&args[1..]),
        _ => bail!(
            "usage: pi-testbed list | write-docs | image | run [--lane shared|alone | SCENARIO...] | needs-arm [ARGS...]"
        ),
    }
}

/// The scenarios `run ARGS...` runs.
fn chosen(args: &[String]) -> Result<Vec<Scenario>> {
    let lane = match args.first().map(String::as_str) {
        Some("--lane") => match args.get(1).map(String::as_str) {
            Some("shared") => Some(false),
            Some("alone") => Some(true),
            other => bail!("--lane takes shared or alone, not {other:?}"),
        },
        _ => None,
    };
    let names = if lane.is_some() { &[][..] } else { args };
    let skip = std::env::var("PI_TESTBED_SKIP").unwrap_or_default();
    let skipped: Vec<&str> = skip.split(',').map(str::trim).collect();
    let mut all = scenarios::all();
    if let Some(alone) = lane {
        all.retain(|s| s.alone == alone && !skipped.contains(&s.name));
        return Ok(all);
    }
    if names.is_empty() {
        return Ok(all);
    }
    // Benchmarks only when named.
    all.extend(scenarios::benchmarks());
    for n in names {
        if !all.iter().any(|s| s.name == n) {
            bail!("no scenario {n:?}; `pi-testbed list` shows them");
        }
    }
    all.retain(|s| names.iter().any(|n| n == s.name));
    Ok(all)
}

/// Runs the named scenarios (all when none), or one lane of them
/// (`--lane alone`: the speed scenarios; `--lane shared`: the others).
fn run(args: &[String]) -> Result<i32> {
    let chosen = chosen(args)?;
    let times = Times::from_env();
    let suite = Instant::now();
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
    // The ARM lane's image, before its scenarios start: two of them
    // building it at once would wait on each other's lock inside their
    // own time.
    if chosen.iter().any(|s| s.arm) {
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

    // Scenarios that time nothing share the machine, `jobs()` at once;
    // those that measure speed run afterwards with nothing else from the
    // suite beside them, so a neighbour's load never decides a ratio.
    let (alone, shared): (Vec<Scenario>, Vec<Scenario>) = chosen.into_iter().partition(|s| s.alone);
    let jobs = jobs().min(shared.len()).max(1);
    let parallel = jobs > 1;
    let queue = Mutex::new(shared.into_iter());
    let results = Mutex::new(Vec::new());
    let extra_job_after = std::env::var_os("PI_TESTBED_EXTRA_JOB_AFTER").map(PathBuf::from);
    std::thread::scope(|scope| {
        let (queue, results, images, times) = (&queue, &results, &images, &times);
        let worker = move || loop {
            let next = queue.lock().expect("queue lock").next();
            let Some(s) = next else { break };
            let ok = run_one(&s, images, times, parallel);
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
    let mut results = results.into_inner().expect("results lock");
    for s in alone {
        results.push(run_one(&s, &images, &times, false));
    }
    let passed = results.iter().filter(|ok| **ok).count();
    let failed = results.len() - passed;
    eprintln!("testbed: total {:.0?}", suite.elapsed());
    // The failure matrix's line (docs/testbed/scenarios.md, "Unattended").
    if let Some(line) = pi_testbed::unattended::summary(&pi_testbed::unattended::cases()) {
        println!("{line}");
        times.note(&line);
    }
    println!("testbed: {passed} passed, {failed} failed");
    Ok(if failed == 0 { 0 } else { 1 })
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
fn run_one(s: &Scenario, images: &ImageSet, times: &Times, parallel: bool) -> bool {
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
        (Err(e), Some(others)) if s.alone && others > load::TOO_LOADED => Err(e.context(format!(
            "the host was too busy to measure: other work took {:.0} % of its CPUs \
             (more than {:.0} %), so these figures say nothing about pimigrate; \
             run it again on a quieter machine",
            others * 100.0,
            load::TOO_LOADED * 100.0
        ))),
        (result, _) => result,
    };
    match &result {
        Ok(()) => eprintln!("testbed: PASS {} ({:.0?})", s.name, elapsed),
        Err(e) => {
            eprintln!("testbed: FAIL {} ({:.0?}): {e:#}", s.name, elapsed);
            eprintln!(
                "testbed: logs in {}/",
                pi_testbed::pi::target_dir()
                    .join("testbed-logs")
                    .join(s.name)
                    .display()
            );
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
    times.record(
        &format!("  scenario {}{mark}", s.name),
        elapsed,
        Some(load::guest_cpu(s.name)),
        result.is_ok(),
    );
    if let Err(e) = clear_work(s.name) {
        eprintln!("testbed: {e:#}");
    }
    result.is_ok()
}

/// Moves a failed attempt's logs to `testbed-logs/<name>.first-attempt/`
/// before the next attempt starts its own, so that what went wrong the
/// first time can still be read after the run.
fn keep_first_attempts_logs(name: &str) {
    let logs = pi_testbed::pi::target_dir().join("testbed-logs");
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
fn worth_another_run(s: &Scenario, (result, others): &(Result<()>, Option<f64>)) -> Option<String> {
    let e = result.as_ref().err()?;
    // Every fault of the emulation, a boot's included: one that
    // [`Pi::boot_until`] booted past twice and still met says no more
    // about pimigrate than the others.
    if let Some(fault) = EmulationFault::find(e) {
        return Some(format!("because {fault}: {e:#}"));
    }
    match others {
        Some(others) if s.alone && *others > load::TOO_LOADED => Some(format!(
            "while other work took {:.0} % of the host's CPUs: {e:#}",
            others * 100.0
        )),
        _ => None,
    }
}

/// One run of a scenario, with the share of the host other work took
/// meanwhile (for the scenarios run alone; `None` when unmeasured).
fn attempt(s: &Scenario, images: &ImageSet) -> (Result<()>, Option<f64>) {
    eprintln!("testbed: --- {} ---", s.name);
    let load = if s.alone {
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
