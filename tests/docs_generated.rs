//! What the docs say that the code fixes: every duration in `--help` is
//! one the benchmark's definitions give, every word of the trial's command
//! line a page quotes (`rootwait=90`, `panic=10`) is the one the plan
//! writes, so is the trial's deadline wherever a page gives it, no page a
//! Pi owner reads names a flag `--help` hides, and every
//! relative link of README.md and docs/ resolves. The
//! blocks the code writes into the docs (`cargo xtask write-docs`) are
//! checked by the tool crate's tests, xtask/tests/docs.rs.

use clap::CommandFactory;
use pimigrate::bench::suite::{Preset, SuiteParams};
use pimigrate::bench::times::{self, SuiteTime};
use pimigrate::plan::{bootloader, trial_guard};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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

/// The pages a Pi owner or a packager reads: README.md and docs/*.md
/// (not docs/internals/ nor docs/testbed/, which describe the tests and
/// their machinery).
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Every page of docs/, in its subfolders too (docs/internals/,
/// docs/testbed/).
fn all_docs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_docs(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The trial's command line bounds its boot with `panic=SECS` and
/// `rootwait=SECS`: wherever a page quotes one with a number, it is the
/// number the plan writes. Found by the word itself, so a page's sentences
/// can be written any way.
#[test]
fn the_trial_words_a_page_quotes_are_the_plans() {
    let words = [
        ("panic=", bootloader::TRIAL_PANIC_SECONDS),
        ("rootwait=", trial_guard::TRIAL_ROOT_WAIT_SECONDS),
    ];
    let mut seen = [0; 2];
    let mut wrong = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in text.lines().enumerate() {
            for (index, (word, value)) in words.iter().enumerate() {
                for (at, _) in line.match_indices(word) {
                    let digits: String = line[at + word.len()..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    let before = line[..at].chars().next_back();
                    if digits.is_empty() || before.is_some_and(|c| c.is_alphanumeric()) {
                        continue;
                    }
                    seen[index] += 1;
                    if digits != value.to_string() {
                        wrong.push(format!(
                            "{name}:{}: {word}{digits}, but the plan writes {word}{value}",
                            number + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(seen.iter().all(|n| *n > 0), "no page quotes them: {seen:?}");
}

/// The trial's deadline for reaching its default target is a figure of
/// the code (`JobTimeoutSec=` in the trial's generator, the status line of
/// a trial that left no record): wherever a page gives it, next to
/// `JobTimeoutSec=` or as the target the boot did not reach, it is
/// [`trial_guard::TRIAL_BOOT_DEADLINE_SECONDS`].
#[test]
fn the_trial_deadline_a_page_quotes_is_the_guards() {
    let deadline = format!("within {} s", trial_guard::TRIAL_BOOT_DEADLINE_SECONDS);
    let mut seen = 0;
    let mut wrong = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in text.lines().enumerate() {
            if !(line.contains("JobTimeoutSec=") || line.contains("target within")) {
                continue;
            }
            for (at, _) in line.match_indices("within ") {
                let rest = &line[at..];
                let digits: String = rest["within ".len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if digits.is_empty() {
                    continue;
                }
                seen += 1;
                if !rest.starts_with(&deadline) {
                    wrong.push(format!("{name}:{}: within {digits} s", number + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the trial's deadline is {deadline}:\n{}",
        wrong.join("\n")
    );
    // migrate.md, troubleshooting.md and plan.md's example give it.
    assert!(seen >= 3, "{seen}");
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

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a page outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((number + 1, line));
        }
    }
    lines
}

/// A line without its code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// Every anchor a page has: its headings' (a repeated heading gets `-1`,
/// `-2`, ... as on GitHub).
fn anchors(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = anchor(line[hashes..].trim_end_matches('#'));
            let count = seen.entry(base.clone()).or_default();
            found.push(match *count {
                0 => base,
                n => format!("{base}-{n}"),
            });
            *count += 1;
        }
    }
    found
}

/// Every relative link of README.md and docs/ (its subfolders too) names
/// a file that exists, and a heading of that page when it has an anchor;
/// and no link's text runs over a line end, which the package's rewriter
/// of links (xtask/src/package_docs.rs, a line at a time) would not see.
#[test]
fn every_relative_link_resolves() {
    let mut every = vec![root().join("README.md")];
    all_docs(&root().join("docs"), &mut every);
    let mut broken = Vec::new();
    for page in &every {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(page).unwrap();
        let mut open_text = false;
        for (number, line) in prose(&text) {
            let line = without_code(line);
            let rest = line.as_str();
            // A `[` whose `]` is on a later line, followed there by `(`.
            if open_text && rest.contains("](") && !rest[..rest.find("](").unwrap()].contains('[') {
                broken.push(format!(
                    "{name}:{number}: a link's text runs over a line end"
                ));
            }
            open_text = rest.rfind('[') > rest.rfind(']');
            let mut at = 0;
            while let Some(found) = rest[at..].find("](") {
                let start = at + found + 2;
                let Some(len) = rest[start..].find(')') else {
                    break;
                };
                let target = &rest[start..start + len];
                at = start + len;
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(path)
                };
                if !file.exists() {
                    broken.push(format!("{name}:{number}: {target}: no such file"));
                } else if !fragment.is_empty()
                    && file.extension().is_some_and(|e| e == "md")
                    && !anchors(&std::fs::read_to_string(&file).unwrap())
                        .iter()
                        .any(|a| a == fragment)
                {
                    broken.push(format!("{name}:{number}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor("The firmware's contract"), "the-firmwares-contract");
    assert_eq!(
        anchor("What a failing source costs the target: nothing"),
        "what-a-failing-source-costs-the-target-nothing"
    );
    assert_eq!(
        anchor("`/boot` versus `/boot/firmware`"),
        "boot-versus-bootfirmware"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not\n```\n### B #\n"),
        ["a", "a-1", "b"]
    );
}

/// The long flags of `command` and its subcommands, each with the path of
/// the command it belongs to and whether `--help` shows it (a flag of a
/// hidden subcommand counts as hidden), and the hidden subcommands.
fn flags(
    command: &clap::Command,
    path: &str,
    hidden: bool,
    out: &mut Vec<(String, String, bool)>,
    hidden_commands: &mut Vec<String>,
) {
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            out.push((
                format!("--{long}"),
                path.to_string(),
                hidden || arg.is_hide_set(),
            ));
        }
    }
    for sub in command.get_subcommands() {
        let sub_path = format!("{path} {}", sub.get_name());
        let sub_hidden = hidden || sub.is_hide_set();
        if sub.is_hide_set() {
            hidden_commands.push(sub_path.clone());
        }
        flags(sub, &sub_path, sub_hidden, out, hidden_commands);
    }
}

/// Where `word` stands on `line` as a word of its own: not followed by a
/// letter, a digit or `-` (`--all` is not `--all-targets`).
fn names(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// The flags and subcommands `--help` hides are for the tests and the
/// testbed (`hide = true` in the clap definition): no page a Pi owner
/// reads teaches them. A flag hidden on one command and shown on another
/// (`recommend --all`, `devices --all`) may stand only on a line that
/// names a command that shows it.
#[test]
fn no_user_page_names_a_hidden_flag() {
    let mut command = pimigrate::cli::Cli::command();
    command.build();
    let (mut all, mut hidden_commands) = (Vec::new(), Vec::new());
    flags(&command, "pimigrate", false, &mut all, &mut hidden_commands);
    // A flag `pimigrate` itself shows (a global one, `--help`) is shown
    // on every command, whatever a hidden subcommand inherits of it.
    let everywhere: Vec<&str> = all
        .iter()
        .filter(|(_, path, hidden)| path == "pimigrate" && !hidden)
        .map(|(flag, _, _)| flag.as_str())
        .collect();
    let hidden: std::collections::BTreeSet<&str> = all
        .iter()
        .filter(|(flag, _, hidden)| *hidden && !everywhere.contains(&flag.as_str()))
        .map(|(flag, _, _)| flag.as_str())
        .collect();
    assert!(hidden.contains("--sysroot") && hidden.contains("--disk-signature"));
    assert!(hidden_commands.contains(&"pimigrate trial".to_string()));
    let mut wrong = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in text.lines().enumerate() {
            for flag in &hidden {
                if !names(line, flag) {
                    continue;
                }
                let shown_here = all.iter().any(|(f, path, hidden)| {
                    f == flag && !hidden && path != "pimigrate" && {
                        let sub = path.rsplit(' ').next().unwrap();
                        line.contains(&format!("pimigrate {sub}"))
                            || line.contains(&format!("`{sub}"))
                    }
                });
                if !shown_here {
                    wrong.push(format!("{name}:{}: {flag}", number + 1));
                }
            }
            for sub in &hidden_commands {
                if names(line, sub) {
                    wrong.push(format!("{name}:{}: {sub}", number + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "hidden flags named in a user page:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_flag_is_named_as_a_word() {
    assert!(names("use `--all` here", "--all"));
    assert!(names("--all", "--all"));
    assert!(!names("cargo test --all-targets", "--all"));
    assert!(!names("pimigrate trialx", "pimigrate trial"));
}
