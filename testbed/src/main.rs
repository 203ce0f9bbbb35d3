//! `pi-testbed`: run the testbed's scenarios.
//!
//!   pi-testbed list              scenario names and what they check
//!   pi-testbed image             build or find the cached image, print its folder
//!   pi-testbed run [NAME...]     run scenarios (default: all), print a summary

use anyhow::{bail, Result};
use pi_testbed::scenarios::{self, Scenario};
use pi_testbed::{clear_work, keep_work, ImageSet};
use std::time::Instant;

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
            Ok(0)
        }
        Some("image") => {
            println!("{}", ImageSet::ensure()?.dir.display());
            Ok(0)
        }
        Some("run") => run(&args[1..]),
        _ => bail!("usage: pi-testbed list | image | run [SCENARIO...]"),
    }
}

fn run(names: &[String]) -> Result<i32> {
    let all = scenarios::all();
    let chosen: Vec<&Scenario> = if names.is_empty() {
        all.iter().collect()
    } else {
        let mut v = Vec::new();
        for n in names {
            match all.iter().find(|s| s.name == n) {
                Some(s) => v.push(s),
                None => bail!("no scenario {n:?}; `pi-testbed list` shows them"),
            }
        }
        v
    };
    let suite = Instant::now();
    let t = Instant::now();
    let images = ImageSet::ensure()?;
    eprintln!(
        "testbed: image {} ready in {:.0?}",
        images.dir.display(),
        t.elapsed()
    );

    let (mut passed, mut failed) = (0, 0);
    for s in chosen {
        let t = Instant::now();
        eprintln!("testbed: --- {} ---", s.name);
        match (s.run)(&images) {
            Ok(()) => {
                passed += 1;
                eprintln!("testbed: PASS {} ({:.0?})", s.name, t.elapsed());
            }
            Err(e) => {
                failed += 1;
                eprintln!("testbed: FAIL {} ({:.0?}): {e:#}", s.name, t.elapsed());
                eprintln!("testbed: logs in target/testbed-logs/{}/", s.name);
                if !keep_work() {
                    eprintln!(
                        "testbed: its disk images are removed; \
                         PI_TESTBED_KEEP_WORK=1 testbed/run.sh {} keeps them",
                        s.name
                    );
                }
            }
        }
        if let Err(e) = clear_work(s.name) {
            eprintln!("testbed: {e:#}");
        }
    }
    eprintln!("testbed: total {:.0?}", suite.elapsed());
    println!("testbed: {passed} passed, {failed} failed");
    Ok(if failed == 0 { 0 } else { 1 })
}
