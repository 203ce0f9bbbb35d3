//! The parts of README.md and docs/ that the code writes, so that their
//! tables and figures cannot drift from it: each sits between
//! `<!-- NAME:begin ... -->` and `<!-- NAME:end -->` in its file.
//! `cargo xtask write-docs` rewrites them; xtask/tests/docs.rs fails
//! when a file's block is not what the code writes now.

use crate::plan_example;
use anyhow::{bail, Context, Result};
use pimigrate::bench::suite::{Preset, SuiteParams};
use pimigrate::bench::times::{self, SuiteTime, A1_WRITE_BYTES_PER_S};
use pimigrate::exit;
use std::path::Path;

/// One generated block: the file (relative to the repository), its name
/// in the markers, and what goes between them.
#[derive(Debug, Clone)]
pub struct Block {
    pub file: &'static str,
    pub name: &'static str,
    pub text: String,
}

/// Every block the code writes; `root` is the repository, whose
/// docs/testbed/times.md holds the time table of the last full test run that
/// scripts/times-doc.sh wrote (README's test-run times come from it). The
/// example plan is the program this crate is built with (its repository,
/// [`crate::repo`]), built and run on that repository's Pi 4 fixture.
pub fn blocks(root: &Path) -> Result<Vec<Block>> {
    let testbed = root.join("docs/testbed/times.md");
    let testbed = std::fs::read_to_string(&testbed)
        .with_context(|| format!("reading {}", testbed.display()))?;
    let pimigrate = plan_example::build(crate::repo())?;
    let plan = plan_example::run(crate::repo(), &pimigrate)?;
    Ok(vec![
        Block {
            file: "docs/plan.md",
            name: "exit-codes",
            text: exit_table(),
        },
        Block {
            file: "README.md",
            name: "times",
            text: readme_times(),
        },
        Block {
            file: "docs/benchmark.md",
            name: "presets",
            text: preset_table(),
        },
        Block {
            file: "README.md",
            name: "test-times",
            text: test_run_times(current(&testbed, "times")?)?,
        },
        Block {
            file: "docs/plan.md",
            name: "plan-example",
            text: plan_example_text(&plan),
        },
        Block {
            file: "docs/plan.md",
            name: "after-move-example",
            text: fenced(plan.section(AFTER_MOVE)?),
        },
    ])
}

/// The plan's section that docs/plan.md shows on its own, under its own
/// heading.
const AFTER_MOVE: &str = "After the move";
/// The plan's section that the example leaves out: the fixture's root is
/// a few small files, no one's system.
const COPY: &str = "Copy";

/// `text` as a fenced block of Markdown.
fn fenced(text: &str) -> String {
    format!("```\n{}\n```\n", text.trim_end_matches('\n'))
}

/// docs/plan.md's example: what `pimigrate plan` prints on the tests' Pi
/// 4, but for the sections shown elsewhere or of no interest there.
fn plan_example_text(plan: &plan_example::PlanOutput) -> String {
    format!(
        "`pimigrate {}` on\n\
         the tests' Pi 4 (whose SD card, SSD and boot files [README](../README.md#what-it-shows)\n\
         shows) with an up-to-date bootloader and rpi-eeprom, a 64-bit kernel and its\n\
         initramfs, `fstrim.timer` enabled and a uas reset in its kernel log; the\n\
         sections {COPY} (the fixture's root is a few small files) and {AFTER_MOVE}\n\
         ([below](#after-the-move)) left out:\n\n{}",
        plan_example::COMMAND.join(" "),
        fenced(&plan.without(&[COPY, AFTER_MOVE]))
    )
}

fn begin(name: &str) -> String {
    format!("<!-- {name}:begin (cargo xtask write-docs writes what follows) -->")
}

fn end(name: &str) -> String {
    format!("<!-- {name}:end -->")
}

/// Where the block's text starts and ends in `doc` (byte offsets), or why
/// its markers are not there once each. The begin line is matched by its
/// start, `<!-- NAME:begin`, so a block another script writes (its line
/// names that script) is read the same way.
fn span(doc: &str, name: &str) -> Result<(usize, usize)> {
    let begin_prefix = format!("<!-- {name}:begin");
    let end = end(name);
    let mut offset = 0;
    let (mut begins, mut ends) = (Vec::new(), Vec::new());
    for line in doc.split_inclusive('\n') {
        if line.starts_with(&begin_prefix) {
            begins.push(offset + line.len());
        }
        if line.trim_end() == end {
            ends.push(offset);
        }
        offset += line.len();
    }
    let ([start], [stop]) = (begins.as_slice(), ends.as_slice()) else {
        bail!(
            "the block {name} needs one line `{}` and one line `{end}`",
            begin(name)
        );
    };
    if stop < start {
        bail!("the block {name} ends before it begins");
    }
    Ok((*start, *stop))
}

/// What the file holds between the block's markers now.
pub fn current<'a>(doc: &'a str, name: &str) -> Result<&'a str> {
    let (start, stop) = span(doc, name)?;
    Ok(&doc[start..stop])
}

/// `doc` with the block's text replaced by `text`.
pub fn splice(doc: &str, name: &str, text: &str) -> Result<String> {
    let (start, stop) = span(doc, name)?;
    Ok(format!("{}{}{}", &doc[..start], text, &doc[stop..]))
}

/// Text with every generated block taken out (markers kept): what the
/// checks for figures written by hand read.
pub fn without_blocks(doc: &str) -> String {
    let mut kept = String::new();
    let mut inside = false;
    for line in doc.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("<!-- ") && trimmed.contains(":begin") {
            inside = true;
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        if trimmed.starts_with("<!-- ") && trimmed.contains(":end -->") {
            inside = false;
        }
        if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// Writes every block into its file where it differs, and returns the
/// blocks rewritten ("README.md: times"). A block that cannot be written
/// does not keep the others back; the error names each that failed.
pub fn write_all(root: &Path) -> Result<Vec<String>> {
    let mut rewritten = Vec::new();
    let mut failed = Vec::new();
    for block in blocks(root)? {
        let path = root.join(block.file);
        let result = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))
            .and_then(|doc| {
                let new = splice(&doc, block.name, &block.text)
                    .with_context(|| format!("in {}", path.display()))?;
                if new != doc {
                    std::fs::write(&path, new)
                        .with_context(|| format!("writing {}", path.display()))?;
                    rewritten.push(format!("{}: {}", block.file, block.name));
                }
                Ok(())
            });
        if let Err(err) = result {
            failed.push(format!("{err:#}"));
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} block(s) not written:\n{}",
            failed.len(),
            failed.join("\n")
        );
    }
    Ok(rewritten)
}

/// docs/plan.md's exit-status table: every row of [`exit::TABLE`].
fn exit_table() -> String {
    let mut table = String::from("| code | commands | meaning |\n|---|---|---|\n");
    for row in exit::TABLE {
        table.push_str(&format!(
            "| {} | {} | {} |\n",
            row.code,
            exit::who(row, true),
            row.meaning
        ));
    }
    table
}

/// Seconds with at most one decimal, as the preset table gives them.
fn seconds(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    format!("{rounded} s")
}

/// docs/benchmark.md's table of presets.
fn preset_table() -> String {
    let mut table = String::from(
        "| preset | per test | ramp | test file | whole run, each drive |\n|---|---|---|---|---|\n",
    );
    let a1_rate = times::rate(A1_WRITE_BYTES_PER_S);
    for (label, preset) in [("standard", Preset::Standard), ("`--quick`", Preset::Quick)] {
        let params = SuiteParams::new(preset, None, None);
        let time = SuiteTime::of(preset);
        table.push_str(&format!(
            "| {label} | {} | {} | {} | {} of tests + laying out the file: {} on an A1 card ({a1_rate}); a disk measured by reads only: {}, no file |\n",
            seconds(params.runtime_seconds),
            seconds(params.ramp_seconds),
            times::size(time.file_size),
            times::duration(time.tests_seconds),
            times::duration(time.a1_layout_seconds()),
            times::duration(time.read_tests_seconds),
        ));
    }
    let params = SuiteParams::new(Preset::A1, None, None);
    let a1 = SuiteTime::of(Preset::A1);
    let ramp = if params.ramp_seconds == 0.0 {
        "none".to_string()
    } else {
        seconds(params.ramp_seconds)
    };
    table.push_str(&format!(
        "| `--preset a1` | {} (the random tests) | {ramp} | {} | {} of random tests + a write and a read pass over the file + laying it out (each {} written: {} on an A1 card) |\n",
        seconds(params.runtime_seconds),
        times::size(a1.file_size),
        times::duration(a1.tests_seconds),
        times::size(a1.file_size),
        times::duration(a1.a1_layout_seconds()),
    ));
    table
}

/// Used space on the SD card, in GB, for README's table of copy times.
const USED_GB: [u64; 4] = [4, 8, 16, 32];
/// SD card reads, in MB/s, for that table: a card in an older Pi's slower
/// slot, the 41-44 MB/s others published for a Pi 4 (README cites them),
/// and a faster slot. Inputs of the arithmetic, not measurements.
const CARD_READ_MB_S: [u64; 3] = [20, 40, 80];

/// README's "how long it takes": the benchmarks per drive and the copy.
fn readme_times() -> String {
    let quick = SuiteTime::of(Preset::Quick);
    let standard = SuiteTime::of(Preset::Standard);
    let a1_rate = times::rate(A1_WRITE_BYTES_PER_S);
    let mut text = String::from("| step | how long |\n|---|---|\n");
    text.push_str(&format!(
        "| quick benchmarks (`--quick`, the wizard's \"Quick\") | {} of tests a drive, plus laying out a {} test file on it: {} on an SD card that writes {a1_rate}, the least an A1 card must |\n",
        times::duration(quick.tests_seconds),
        times::size(quick.file_size),
        times::duration(quick.a1_layout_seconds()),
    ));
    text.push_str(&format!(
        "| standard benchmarks (`recommend`, the wizard's \"Thorough\") | {} of tests a drive ({} for a blank drive measured by reads only), plus laying out a {} test file: {} at {a1_rate} |\n",
        times::duration(standard.tests_seconds),
        times::duration(standard.read_tests_seconds),
        times::size(standard.file_size),
        times::duration(standard.a1_layout_seconds()),
    ));
    text.push_str(
        "| the copy | at least the space used on the SD card over the card's read rate (its \
         `SEQ1M Q8 read` in `pimigrate bench`): every used byte is read once |\n",
    );
    text.push('\n');
    text.push_str("| used on the SD card |");
    for rate in CARD_READ_MB_S {
        text.push_str(&format!(" read at {rate} MB/s |"));
    }
    text.push_str("\n|---|");
    text.push_str(&"---|".repeat(CARD_READ_MB_S.len()));
    text.push('\n');
    for used in USED_GB {
        text.push_str(&format!("| {used} GB |"));
        for rate in CARD_READ_MB_S {
            let seconds = (used * 1000) as f64 / rate as f64;
            text.push_str(&format!(" {} |", times::duration(seconds)));
        }
        text.push('\n');
    }
    text
}

/// The wall seconds of a row of the test run's time table ("| whole run |
/// 2754 | ...").
fn wall_seconds(table: &str, phase: &str) -> Result<f64> {
    table
        .lines()
        .find_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.trim_start_matches("&nbsp;");
            (name.trim_end_matches(" \\*") == phase)
                .then(|| cells.get(2)?.parse::<f64>().ok())
                .flatten()
        })
        .with_context(|| format!("no row `{phase}` with wall seconds in the test run's time table"))
}

/// README's line on how long the demo and the whole test run took, from
/// the last full run's time table in docs/testbed/times.md.
fn test_run_times(table: &str) -> Result<String> {
    let header = table
        .lines()
        .find_map(|l| l.strip_prefix("One run of `scripts/test.sh`: "))
        .context("the test run's time table has no header line")?;
    let when = header.split(',').next().unwrap_or(header).trim();
    let whole = wall_seconds(table, "whole run")?;
    let demo = wall_seconds(table, "scenario wizard-story")?;
    Ok(format!(
        "The last full run recorded in [the testbed's times](docs/testbed/times.md) ({when}, on CI's \
         2-core machine, with the guest images and the build chroot already made) took {} in \
         all; the demo's scenario, `wizard-story`, {} of it. A first run also installs the \
         packages and builds the guest images and the chroot.\n",
        times::duration(whole),
        times::duration(demo)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_replaced_and_read_back() {
        let doc = format!("intro\n{}\nold\n{}\nafter\n", begin("x"), end("x"));
        let new = splice(&doc, "x", "new\n").unwrap();
        assert_eq!(current(&new, "x").unwrap(), "new\n");
        assert!(new.starts_with("intro\n") && new.ends_with("after\n"));
        assert_eq!(without_blocks(&new), without_blocks(&doc));
        assert!(!without_blocks(&new).contains("new"));
        assert!(splice("no markers", "x", "").is_err());
        let twice = format!("{doc}{doc}");
        assert!(current(&twice, "x").is_err());
    }

    #[test]
    fn the_test_run_times_come_from_the_time_table() {
        let table = "One run of `scripts/test.sh`: 2026-12-06 03:19 UTC, commit x, 2 cores.\n\
                     | phase | wall s | CPU s | result |\n\
                     | &nbsp;&nbsp;scenario wizard-story \\* | 288 | 225 | ok |\n\
                     | whole run | 2754 | 4857 | ok |\n";
        let text = test_run_times(table).unwrap();
        assert!(text.contains("(2026-12-06 03:19 UTC, on CI's"), "{text}");
        assert!(text.contains("took 45 min 54 s in all"), "{text}");
        assert!(text.contains("`wizard-story`, 4 min 48 s of it"), "{text}");
        assert!(test_run_times("no table").is_err());
    }

    #[test]
    fn the_copy_table_is_used_space_over_the_read_rate() {
        let text = readme_times();
        // 8 GB at 40 MB/s: 200 s.
        let row = text.lines().find(|l| l.starts_with("| 8 GB |")).unwrap();
        assert!(row.contains("| 3 min 20 s |"), "{row}");
        assert!(text.contains("105 s at 10 MB/s"), "{text}");
    }
}
