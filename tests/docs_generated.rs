//! Figures that cannot drift: the blocks of README.md and docs/ that the
//! code writes (`cargo run --example write-docs`) are what it writes now,
//! no duration or speed in the pages a Pi owner reads is typed by hand
//! unless it is someone else's (a specification, a published figure) or
//! checked here against the file it comes from, and every duration in
//! `--help` is one the benchmark's definitions give.

use clap::CommandFactory;
use pimigrate::bench::suite::{Preset, SuiteParams};
use pimigrate::bench::times::{self, SuiteTime};
use pimigrate::plan::{bootloader, trial_guard};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn every_generated_block_is_what_the_code_writes() {
    for block in pimigrate::docgen::blocks(root()).unwrap() {
        let doc = read(block.file);
        let now = pimigrate::docgen::current(&doc, block.name)
            .unwrap_or_else(|e| panic!("{}: {e:#}", block.file));
        assert_eq!(
            now, block.text,
            "{}'s block {} is not what the code writes: run `cargo run --example write-docs`",
            block.file, block.name
        );
    }
}

/// Units of time and of speed (Mbit/s is a link's rate, from the USB
/// specification, and not counted).
const UNITS: [&str; 16] = [
    "ms", "s", "sec", "secs", "second", "seconds", "min", "minute", "minutes", "h", "hour",
    "hours", "MB/s", "MiB/s", "KiB/s", "GB/s",
];

/// Every duration or speed in `text`: "14 s", "41-44 MB/s", "10,000 KiB/s".
fn figures(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len()
            && (chars[j].is_ascii_digit()
                || (matches!(chars[j], ',' | '.' | '-')
                    && chars.get(j + 1).is_some_and(|c| c.is_ascii_digit())))
        {
            j += 1;
        }
        let number: String = chars[i..j].iter().collect();
        let mut k = j;
        if chars.get(k) == Some(&' ') {
            k += 1;
        }
        let rest: String = chars[k..chars.len().min(k + 8)].iter().collect();
        let unit = UNITS
            .iter()
            .filter(|u| rest.starts_with(*u))
            .filter(|u| {
                let after = rest[u.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric())
            })
            .max_by_key(|u| u.len());
        if let Some(unit) = unit {
            found.push(format!("{number}{}{unit}", if k > j { " " } else { "" }));
        }
        i = j.max(i + 1);
    }
    found
}

#[test]
fn figures_are_found() {
    assert_eq!(
        figures("takes 14 s, reads 41-44 MB/s; 10,000 KiB/s for 2 h (12 steps, 3 GiB, 5s)"),
        ["14 s", "41-44 MB/s", "10,000 KiB/s", "2 h", "5s"]
    );
    assert!(figures("USB 2 (480 Mbit/s), 1 GiB, x86_64, 100 %, sda1").is_empty());
}

/// Where a figure written by hand comes from.
enum Source {
    /// Somebody else's: a specification, a published measurement, an
    /// example of output; the reason says which.
    Theirs(&'static str),
    /// A value in the code or a script: the file must contain this text,
    /// so a change there fails here until the page follows.
    File(&'static str, &'static str),
    /// The figure as the code computes it now.
    Code(String),
}

/// A line of a page that holds figures, found by a phrase of it (so pages
/// can be rearranged), and where its figures come from.
struct Known {
    phrase: &'static str,
    source: Source,
}

fn known() -> Vec<Known> {
    use Source::*;
    let a1 = SuiteParams::new(Preset::A1, None, None);
    let quick = SuiteParams::new(Preset::Quick, None, None);
    vec![
        Known {
            phrase: "USB SSD also reads 190-325 MB/s in sequence, a microSD card 41-44 MB/s",
            source: Theirs("figures published by others, cited as such"),
        },
        Known {
            phrase: "for 10 s each. A card passes (= A1)",
            source: Theirs("Raspberry Pi's agnostics test, quoted"),
        },
        Known {
            phrase: "with sequential write >= 10,000 KiB/s, random write >= 500 IOPS",
            source: Theirs("the A1 pass marks of Raspberry Pi's agnostics"),
        },
        Known {
            phrase: "read >= 1,500 IOPS at queue depth 32, sequential write >= 10,000 KiB/s",
            source: Theirs("the A1 pass marks of Raspberry Pi's agnostics"),
        },
        Known {
            phrase: "`RND4K Q32 write` and `RND4K Q32 read` for 10 s each",
            source: Code(format!("for {} each", times::duration(a1.runtime_seconds))),
        },
        Known {
            phrase: "(`--runtime` changes the 10 s)",
            source: Code(format!("the {})", times::duration(a1.runtime_seconds))),
        },
        Known {
            phrase: "capped near 35-40 MB/s (USB 2's known limit, not measured here)",
            source: Theirs("USB 2's known limit, said to be not measured"),
        },
        Known {
            phrase: "0.6 s). Only when",
            source: Theirs("arithmetic of an example: 32 I/Os at 50 IOPS"),
        },
        Known {
            phrase: "One run of the script with its defaults (a 512 MiB file, 3 s per test",
            source: File("scripts/bench-vs-fio.sh", "runtime=${RUNTIME:-3}"),
        },
        Known {
            phrase: "after a 0.6 s ramp, 9 rounds, medians)",
            // The script's 3 s runtime gets pimigrate's ramp for it.
            source: Code(format!(
                "after a {} s ramp",
                SuiteParams::new(Preset::Standard, Some(3.0), None).ramp_seconds
            )),
        },
        Known {
            phrase: "How far to trust one run: single 3 s runs",
            source: File("scripts/bench-vs-fio.sh", "runtime=${RUNTIME:-3}"),
        },
        Known {
            phrase: "the best SEQ1M write (84 % in the run above: 1364.9 MB/s against 1616.6)",
            source: Theirs(
                "one run's result, in the table above it that scripts/bench-copy.sh printed",
            ),
        },
        Known {
            phrase: "the benchmark's 1.5 s quick run",
            source: Code(format!("{} s quick run", quick.runtime_seconds)),
        },
        Known {
            phrase: "synced 2 h ago, bootable",
            source: Theirs("an example of what `devices` prints"),
        },
        Known {
            phrase: "a sync started 5 min ago did not finish",
            source: Theirs("an example of what `devices` prints"),
        },
        Known {
            phrase: "it within 45 s whatever happens) ends the sync with the error naming the",
            source: File("tests/sync_host.rs", "sleep 45; fsfreeze --unfreeze"),
        },
        Known {
            phrase: "disk within 40 s, the record `failed`",
            source: File(
                "tests/sync_host.rs",
                "recv_timeout(std::time::Duration::from_secs(40))",
            ),
        },
        Known {
            phrase: "up on its root, which it does after 30 s by itself.",
            source: Code(format!("{} s", trial_guard::INITRAMFS_ROOT_WAIT_SECONDS)),
        },
        Known {
            phrase: "appear within 90 s, and panics. An older kernel takes `rootwait=` for an",
            source: Code(format!("{} s", trial_guard::TRIAL_ROOT_WAIT_SECONDS)),
        },
        Known {
            phrase: "within 600 s (`JobTimeoutSec=`, `JobTimeoutAction=reboot-force`), so a",
            source: Code(format!("{} s", trial_guard::TRIAL_BOOT_DEADLINE_SECONDS)),
        },
        Known {
            phrase: "resets the Pi after 10 s, and so does the initramfs when it gives up",
            source: Code(format!("{} s", bootloader::TRIAL_PANIC_SECONDS)),
        },
        Known {
            phrase: "gives up on a root device that does not appear within 90 s (rootwait=SECONDS",
            source: Code(format!("{} s", trial_guard::TRIAL_ROOT_WAIT_SECONDS)),
        },
        Known {
            phrase: "the initramfs waits for the root device by itself, 30 s with initramfs-tools",
            source: Code(format!("{} s", trial_guard::INITRAMFS_ROOT_WAIT_SECONDS)),
        },
        Known {
            phrase: "the boot must reach its default target within 600 s (JobTimeoutSec=",
            source: Code(format!("{} s", trial_guard::TRIAL_BOOT_DEADLINE_SECONDS)),
        },
        Known {
            phrase: "6.5 and later; an initramfs gives up by itself after 30 s); in the trial",
            source: Code(format!("{} s", trial_guard::INITRAMFS_ROOT_WAIT_SECONDS)),
        },
        Known {
            phrase: "the Pi was back on the SD card 85 s after the trial reboot",
            source: Theirs("an example of what `status` prints"),
        },
        Known {
            phrase: "a boot that did not reach its target within 600 s, or a power cut",
            source: Code(format!("{} s", trial_guard::TRIAL_BOOT_DEADLINE_SECONDS)),
        },
        Known {
            phrase: "`run_watched` looks every 5 seconds for a",
            source: File("scripts/test-arm.sh", "sleep 5"),
        },
        Known {
            phrase: "parent's after 60 seconds)",
            source: File("scripts/test-arm.sh", "stuck_after=60"),
        },
    ]
}

/// The pages a Pi owner or a packager reads. docs/development.md and
/// docs/testbed.md describe the test machinery: their figures are its
/// settings, each named by the constant or script variable it is.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "development.md" && name != "testbed.md"
        })
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn no_page_has_a_figure_typed_by_hand() {
    let known = known();
    let mut used = vec![false; known.len()];
    let mut stray = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = pimigrate::docgen::without_blocks(&std::fs::read_to_string(&page).unwrap());
        for (number, line) in text.lines().enumerate() {
            let found = figures(line);
            if found.is_empty() {
                continue;
            }
            match known.iter().position(|k| line.contains(k.phrase)) {
                Some(index) => used[index] = true,
                None => stray.push(format!("{name}:{}: {found:?} in {line}", number + 1)),
            }
        }
    }
    assert!(
        stray.is_empty(),
        "durations or speeds typed by hand (generate them into a block, see \
         src/docgen.rs, or name their source in tests/docs_generated.rs):\n{}",
        stray.join("\n")
    );
    for (known, used) in known.iter().zip(used) {
        assert!(
            used,
            "no page says {:?} any more: remove it here",
            known.phrase
        );
        match &known.source {
            Source::Theirs(reason) => assert!(!reason.is_empty()),
            Source::File(file, text) => assert!(
                read(file).contains(text),
                "{file} no longer has {text:?}: {:?} is out of date",
                known.phrase
            ),
            Source::Code(figure) => assert!(
                known.phrase.contains(figure.as_str()),
                "{:?} should say {figure:?}",
                known.phrase
            ),
        }
    }
}

/// Every duration `--help` prints (options and their values, every
/// command) comes from the benchmark's definitions.
#[test]
fn every_duration_in_the_help_is_the_codes() {
    let mut command = pimigrate::cli::Cli::command();
    command.build();
    let a1 = SuiteParams::new(Preset::A1, None, None);
    let generated = [
        SuiteTime::of(Preset::Quick).summary(),
        SuiteTime::of(Preset::Standard).summary(),
        format!("4K random for {} each", times::duration(a1.runtime_seconds)),
    ];
    let mut helps = vec![command.render_long_help().to_string()];
    for sub in command.get_subcommands_mut() {
        helps.push(sub.render_long_help().to_string());
    }
    let mut lines_with_figures = 0;
    for help in &helps {
        for line in help.lines().filter(|l| !figures(l).is_empty()) {
            lines_with_figures += 1;
            assert!(
                generated.iter().any(|g| line.contains(g.as_str())),
                "a duration in --help that the code did not compute: {line}"
            );
        }
    }
    // bench, recommend, verify and the wizard's --quick, and the presets.
    assert!(lines_with_figures >= 6, "{lines_with_figures}");
}
