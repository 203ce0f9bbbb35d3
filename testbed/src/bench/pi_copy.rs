//! `pi-copy-bench`, a benchmark (not in the suite: `scripts/bench-pi-copy.sh`
//! runs it): on the emulated Pi 4, in one boot and on the same tree (the
//! guest's root), `pimigrate migrate`'s copy, a full `pimigrate sync --target
//! --erase` and `rsync -aHAXx --numeric-ids` onto a fresh ext4 of the same
//! blank USB SSD, the guest's caches dropped before each run, the three
//! taking turns; medians, and rsync's time over pimigrate's against the goal.
//!
//! Each run's output goes through a stamp in the guest that prefixes every
//! line with the uptime and `/proc/stat`'s CPU counters (shell builtins
//! only, no process per line), so the copy's window is read from pimigrate's
//! own step lines (`==> copying the root filesystem` up to the step after
//! the copy) and from the lines the job prints around rsync, and where the
//! guest's two CPUs spent it comes with it.

use super::Benchmark;
use crate::machine::load::HostLoad;
use crate::machine::pimigrate_bin;
use crate::machine::rig::{Rig, Setup};
use crate::{After, ImageSet};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

pub const NAME: &str = "pi-copy-bench";

/// The benchmark, in [`super::all`].
pub const BENCHMARK: Benchmark = Benchmark {
    name: NAME,
    run,
    about: "benchmark: pimigrate migrate's copy and a full sync against rsync -aHAXx of the same root onto the same blank USB SSD, one boot, caches dropped, medians (PI_TESTBED_BENCH_RUNS, default 3; PI_TESTBED_BENCH_PROFILE=strace|perf adds a profiled run of each)",
};

/// The goal: rsync's time over pimigrate's, for both of pimigrate's copies.
pub const GOAL: f64 = 1.3;

/// Runs of each tool unless `PI_TESTBED_BENCH_RUNS` says otherwise.
const DEFAULT_RUNS: u32 = 3;

/// The copies of one tool may hold this share more or fewer inodes than
/// rsync's before the comparison is taken as one of different trees (the
/// journal, the record and the logs pimigrate leaves differ by a handful).
const SAME_TREE: f64 = 0.01;

/// The three copies, in the order the first round runs them; each round
/// starts one later, so none is always first after a boot or a mkfs.
const TOOLS: [Tool; 3] = [Tool::Migrate, Tool::Sync, Tool::Rsync];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tool {
    Migrate,
    Sync,
    Rsync,
}

impl Tool {
    fn word(self) -> &'static str {
        match self {
            Tool::Migrate => "migrate",
            Tool::Sync => "sync",
            Tool::Rsync => "rsync",
        }
    }

    /// How the table names it.
    fn label(self) -> &'static str {
        match self {
            Tool::Migrate => "`pimigrate migrate` (root-only, MBR)",
            Tool::Sync => "`pimigrate sync --target <ssd> --erase` (root-only)",
            Tool::Rsync => "`rsync -aHAXx --numeric-ids`, then `sync -f`",
        }
    }
}

pub fn run(images: &ImageSet) -> Result<()> {
    let runs = runs()?;
    let profile = std::env::var("PI_TESTBED_BENCH_PROFILE").unwrap_or_default();
    let load = HostLoad::start()?;
    let Rig { mut pi, .. } = Setup::new(NAME, &images.bookworm).usb_ssd().build()?;
    // Two vCPUs, as its recorded figures were measured with (its output
    // says `guest_cpus`): the copiers' threads run side by side.
    pi.config.cpus = 2;
    // Three copies a round, each a few minutes under emulation.
    pi.boot_limit = Duration::from_secs(20 * 60 + u64::from(runs) * 20 * 60);
    if !profile.is_empty() {
        crate::bench::profilers::place(&pi, &profile)?;
    }
    let boot = pi.run(&job(runs, &profile), After::PowerOff)?;
    let out = boot.job_ok()?;
    let facts = crate::machine::probe::facts(&out.stdout);
    let dir = pi.share().dir.join("out/bench");
    let mut results = Vec::new();
    for round in 1..=runs {
        for tool in TOOLS {
            let log = dir.join(format!("{round}-{}.log", tool.word()));
            let text = std::fs::read_to_string(&log)
                .with_context(|| format!("the job left no {}", log.display()))?;
            let run = Run::parse(tool, &text).with_context(|| {
                format!("{}: run {round} of {}:\n{text}", log.display(), tool.word())
            })?;
            results.push(run);
        }
    }
    // Profiles, when asked for, kept beside the table.
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("profile-") {
            std::fs::copy(&path, pi.logs.join(&*name))?;
        }
    }
    let others = load.others_share()?;
    let table = table(&results, runs, &facts, others)?;
    std::fs::write(pi.logs.join("pi-copy-bench.md"), &table)?;
    let tsv: String = results.iter().map(Run::tsv).collect();
    std::fs::write(pi.logs.join("pi-copy-bench.tsv"), tsv)?;
    eprint!("{table}");
    same_tree(&results)
}

/// `PI_TESTBED_BENCH_RUNS`, or the default.
fn runs() -> Result<u32> {
    match std::env::var("PI_TESTBED_BENCH_RUNS") {
        Ok(text) => {
            let runs: u32 = text
                .parse()
                .with_context(|| format!("PI_TESTBED_BENCH_RUNS={text} is not a number"))?;
            ensure!(runs >= 1, "PI_TESTBED_BENCH_RUNS must be 1 or more");
            Ok(runs)
        }
        Err(_) => Ok(DEFAULT_RUNS),
    }
}

/// The guest's job: `runs` rounds of the three copies, each run's stamped
/// output in `$TESTBED/out/bench/<round>-<tool>.log`; with `profile`, one
/// more run of each under that profiler (`profile-<tool>.txt`).
fn job(runs: u32, profile: &str) -> String {
    let order: Vec<&str> = TOOLS.iter().map(|t| t.word()).collect();
    format!(
        "{find_ssd}\nssd=$target\nruns={runs}\ntools=({order})\nprofile=\"{profile}\"\n\
         {JOB_SETUP}{JOB_FUNCTIONS}{profiler_functions}{JOB_ROUNDS}",
        find_ssd = pimigrate_bin::find_disk("TB-SSD"),
        order = order.join(" "),
        profiler_functions = super::profilers::job_functions(profile),
    )
}

/// The job's set-up: pimigrate copied to a tmpfs of its own, what the
/// table's first line says (versions, the guest's CPUs and memory, the
/// root's size).
const JOB_SETUP: &str = r#"out=$TESTBED/out/bench
mkdir -p "$out" /run/bench
# pimigrate from a tmpfs of its own (the guest's /run is noexec): from the
# share, every drop of the caches would have it read again through 9p.
mount -t tmpfs -o size=128m,mode=0755 pi-copy-bench /run/bench
mkdir -p /run/bench/src /run/bench/dst
cp "$TESTBED/bin/pimigrate" /run/bench/pimigrate
pm=/run/bench/pimigrate
echo "pimigrate_version=$("$pm" --version)"
echo "rsync_version=$(rsync --version | head -1)"
echo "guest_cpus=$(nproc)"
echo "guest_memory_kib=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)"
echo "root_used=$(df --output=iused,used -B1 / | tail -1)"

"#;

/// The job's shell functions: `stamp`, `blank`, `drop_caches`, `used` and
/// `copy TOOL LOG [WRAP]`, one copy of one tool.
const JOB_FUNCTIONS: &str = r#"# Every line of stdin with the uptime and /proc/stat's CPU counters before
# it: read with builtins, so stamping starts no process.
stamp() {
    local line up rest cpu counters
    while IFS= read -r line; do
        read -r up rest < /proc/uptime
        read -r cpu counters < /proc/stat
        printf '%s %s | %s\n' "$up" "$counters" "$line"
    done
}
# The SSD as it came: no filesystem, no partition table.
blank() {
    local p
    for p in "$ssd"[0-9]*; do
        [ -b "$p" ] || continue
        umount "$p" 2>/dev/null || true
        wipefs -a -q "$p"
    done
    wipefs -a -q "$ssd"
    blockdev --rereadpt "$ssd" || partx -d "$ssd" || true
    udevadm settle
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# Inodes and bytes in use on the copy (the SSD's ext4).
used() {
    local part
    udevadm settle
    part=$(lsblk -lnpo NAME,FSTYPE "$ssd" | awk '$2 == "ext4" { print $1; exit }')
    mount -o ro "$part" /run/bench/dst
    df --output=iused,used -B1 /run/bench/dst | tail -1
    umount /run/bench/dst
}

# One copy of TOOL; its stamped output to LOG, its stdout to LOG.stdout.
# WRAP (a profiler's command line) runs the copying command.
copy() {
    local tool=$1 log=$2 wrap=${3:-} st
    blank
    rm -rf /var/lib/pimigrate
    case $tool in
        migrate)
            drop_caches
            { echo "==> start"
              $wrap "$pm" migrate --target "$ssd" --yes --table mbr --no-trial 2>&1 >"$log.stdout" && st=0 || st=$?
              echo "==> status $st"; } | stamp > "$log"
            # The SD card's cmdline.txt as it was, for the next run.
            "$pm" rollback --yes >> "$log.stdout" 2>&1 ;;
        sync)
            drop_caches
            { echo "==> start"
              $wrap "$pm" sync --target "$ssd" --erase --yes --layout root-only 2>&1 >"$log.stdout" && st=0 || st=$?
              echo "==> status $st"; } | stamp > "$log" ;;
        rsync)
            # The same tree pimigrate reads: the root's filesystem alone,
            # through a read-only bind mount, less pimigrate's default
            # exclusions.
            mount --bind / /run/bench/src
            mount -o remount,bind,ro /run/bench/src
            drop_caches
            { echo "==> start"
              printf 'label: dos\nstart=8192, type=83\n' | sfdisk -q "$ssd"
              udevadm settle
              mkfs.ext4 -q -F "${ssd}1"
              mount "${ssd}1" /run/bench/dst
              echo "==> copying the root filesystem"
              $wrap rsync -aHAXx --numeric-ids --exclude=/lost+found --exclude='/tmp/*' \
                  --exclude=/var/swap --exclude=/swapfile /run/bench/src/ /run/bench/dst/ && st=0 || st=$?
              sync -f /run/bench/dst
              echo "==> copied and flushed"
              umount /run/bench/dst
              echo "==> status $st"; } 2>&1 | stamp > "$log"
            umount /run/bench/src ;;
    esac
    echo "==> used $(used)" | stamp >> "$log"
    rm -rf /var/lib/pimigrate
    echo "done $log"
}

"#;

/// The job's rounds: each tool once a round, each round starting one
/// later; then, with a profiler, one profiled run of each.
const JOB_ROUNDS: &str = r#"
for ((round = 1; round <= runs; round++)); do
    for ((i = 0; i < ${#tools[@]}; i++)); do
        tool=${tools[(i + round - 1) % ${#tools[@]}]}
        copy "$tool" "$out/$round-$tool.log"
    done
done

if [ -n "$profile" ]; then
    for tool in "${tools[@]}"; do
        profiled "$tool" "$out/profile-$tool"
    done
fi
"#;

/// One line of a stamped log: the guest's uptime, its CPU counters (user,
/// nice, system, idle, iowait, irq, softirq, ...), and the text.
#[derive(Debug, Clone)]
struct Line {
    at: f64,
    cpu: Vec<u64>,
    text: String,
}

impl Line {
    fn parse(line: &str) -> Option<Line> {
        let (head, text) = line.split_once(" | ")?;
        let mut words = head.split_whitespace();
        let at = words.next()?.parse().ok()?;
        let cpu = words
            .map(|w| w.parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        (cpu.len() >= 7).then(|| Line {
            at,
            cpu,
            text: text.to_string(),
        })
    }

    /// The step this line starts, if it is a step line.
    fn step(&self) -> Option<&str> {
        self.text.strip_prefix("==> ")
    }
}

/// Where the guest's CPUs spent a stretch of time, as shares of it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuSplit {
    user: f64,
    system: f64,
    iowait: f64,
    idle: f64,
}

impl CpuSplit {
    fn between(a: &Line, b: &Line) -> CpuSplit {
        let d = |i: usize| b.cpu[i].saturating_sub(a.cpu[i]) as f64;
        let user = d(0) + d(1);
        let system = d(2) + d(5) + d(6);
        let (idle, iowait) = (d(3), d(4));
        let total = user + system + idle + iowait;
        if total == 0.0 {
            return CpuSplit::default();
        }
        CpuSplit {
            user: user / total,
            system: system / total,
            iowait: iowait / total,
            idle: idle / total,
        }
    }
}

/// One copy, as its stamped log tells it.
#[derive(Debug, Clone)]
struct Run {
    tool: Tool,
    /// The copy and its flush, seconds.
    copy: f64,
    /// pimigrate's first pass, seconds (rsync has one).
    first_pass: Option<f64>,
    /// The whole command: start to exit (rsync: partition, mkfs, mount,
    /// copy, flush).
    whole: f64,
    /// The guest's CPUs over the copy's window.
    cpu: CpuSplit,
    /// Inodes and bytes in use on the copy.
    inodes: u64,
    bytes: u64,
}

impl Run {
    fn parse(tool: Tool, text: &str) -> Result<Run> {
        let lines: Vec<Line> = text.lines().filter_map(Line::parse).collect();
        let steps: Vec<(usize, &str)> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.step().map(|s| (i, s)))
            .collect();
        let find = |prefix: &str| steps.iter().find(|(_, s)| s.starts_with(prefix)).copied();
        let status = find("status ").context("no status line: the job stopped in the run")?;
        ensure!(status.1 == "status 0", "the copy failed ({})", status.1);
        let start = find("start").context("no start line")?;
        // The step after `from`, a pass of the copy's own not counted.
        let next = |from: usize| {
            steps
                .iter()
                .find(|(i, s)| *i > from && !s.starts_with("second pass"))
                .map(|(i, _)| *i)
                .with_context(|| format!("no step after {:?}", lines[from].text))
        };
        let (copy_at, _) = find("copying the root filesystem").context("no copy step")?;
        let copy_end = next(copy_at)?;
        let mut copy = lines[copy_end].at - lines[copy_at].at;
        // A sync flushes in a step of its own, after the standby's edits.
        if let Some((flush_at, _)) = find("flushing the standby") {
            copy += lines[next(flush_at)?].at - lines[flush_at].at;
        }
        let first_pass = find("second pass").map(|(i, _)| lines[i].at - lines[copy_at].at);
        let (_, used) = find("used ").context("no used line")?;
        let numbers: Vec<u64> = used
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.parse().ok())
            .collect();
        let [inodes, bytes] = numbers[..] else {
            bail!("the used line is {used:?}");
        };
        Ok(Run {
            tool,
            copy,
            first_pass,
            whole: lines[status.0].at - lines[start.0].at,
            cpu: CpuSplit::between(&lines[copy_at], &lines[copy_end]),
            inodes,
            bytes,
        })
    }

    fn tsv(&self) -> String {
        format!(
            "{}\t{:.1}\t{}\t{:.1}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{}\t{}\n",
            self.tool.word(),
            self.copy,
            self.first_pass.map_or("-".into(), |s| format!("{s:.1}")),
            self.whole,
            self.cpu.user,
            self.cpu.system,
            self.cpu.iowait,
            self.cpu.idle,
            self.inodes,
            self.bytes
        )
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The runs of `tool`.
fn of(results: &[Run], tool: Tool) -> Vec<&Run> {
    results.iter().filter(|r| r.tool == tool).collect()
}

/// The table `scripts/bench-pi-copy.sh` prints and writes into docs/internals/sync.md.
fn table(
    results: &[Run],
    runs: u32,
    facts: &BTreeMap<String, String>,
    others: f64,
) -> Result<String> {
    let rsync = median(of(results, Tool::Rsync).iter().map(|r| r.copy).collect());
    ensure!(rsync > 0.0, "rsync's copy took no time: {results:?}");
    let mut t = String::new();
    writeln!(t, "{}", what_was_measured(runs, facts, others))?;
    writeln!(t)?;
    writeln!(
        t,
        "| copy | copy and flush s | rsync / this | first pass s | each run s | whole command s | the guest's CPUs in the copy: user / system / I/O wait / idle | copied: inodes, MiB |"
    )?;
    writeln!(t, "| --- | ---: | ---: | ---: | --- | ---: | --- | --- |")?;
    let mut verdicts = Vec::new();
    for tool in TOOLS {
        let (row, ratio) = table_row(tool, results, rsync);
        writeln!(t, "{row}")?;
        if tool != Tool::Rsync {
            verdicts.push(format!(
                "{} {ratio:.2}x ({})",
                tool.word(),
                if ratio >= GOAL { "met" } else { "not met" }
            ));
        }
    }
    writeln!(t)?;
    writeln!(
        t,
        "The goal: each of pimigrate's copies at least {GOAL}x rsync's speed (rsync's time over \
         pimigrate's): {}.",
        verdicts.join(", ")
    )?;
    Ok(t)
}

/// The table's first paragraph: the machine, the tree, the runs, the
/// versions and the host's load.
fn what_was_measured(runs: u32, facts: &BTreeMap<String, String>, others: f64) -> String {
    let fact = |key: &str| facts.get(key).map(String::as_str).unwrap_or("?");
    let root: Vec<u64> = fact("root_used")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let root = match root[..] {
        [inodes, bytes] => format!("{inodes} inodes, {} MiB", bytes >> 20),
        _ => "?".into(),
    };
    let runs_said = match runs {
        1 => "one run each".to_string(),
        n => format!("medians of {n} runs"),
    };
    format!(
        "The emulated Pi 4 (x86 guest under TCG, {} vCPUs, {} MiB): its root on the SD card \
         (`sd-unthrottled`, {root} in use) copied onto a fresh ext4 of a blank USB SSD \
         (`usb-ssd`, UAS), the guest's caches dropped before each copy, the three taking \
         turns in one boot; {runs_said}. {}; {}. Other work took {:.0} % \
         of the host's CPUs meanwhile.",
        fact("guest_cpus"),
        fact("guest_memory_kib")
            .parse::<u64>()
            .map_or(0, |k| k >> 10),
        fact("pimigrate_version"),
        // `rsync  version 3.2.7  protocol version 32`: its own spacing.
        fact("rsync_version")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches('.'),
        others * 100.0
    )
}

/// `tool`'s row of the table (medians of its runs), and rsync's time over
/// its own.
fn table_row(tool: Tool, results: &[Run], rsync: f64) -> (String, f64) {
    let these = of(results, tool);
    let copy = median(these.iter().map(|r| r.copy).collect());
    let ratio = rsync / copy;
    let first = these
        .iter()
        .filter_map(|r| r.first_pass)
        .collect::<Vec<_>>();
    let first = match first.is_empty() {
        true => "-".to_string(),
        false => format!("{:.1}", median(first)),
    };
    let each: Vec<String> = these.iter().map(|r| format!("{:.1}", r.copy)).collect();
    let whole = median(these.iter().map(|r| r.whole).collect());
    let share = |f: fn(&CpuSplit) -> f64| {
        let m = median(these.iter().map(|r| f(&r.cpu)).collect());
        format!("{:.0} %", m * 100.0)
    };
    let inodes = median(these.iter().map(|r| r.inodes as f64).collect());
    let mib = median(these.iter().map(|r| r.bytes as f64).collect()) / f64::from(1 << 20);
    let row = format!(
        "| {} | {copy:.1} | {ratio:.2}x | {first} | {} | {whole:.1} | {} / {} / {} / {} | {inodes:.0}, {mib:.0} |",
        tool.label(),
        each.join(", "),
        share(|c| c.user),
        share(|c| c.system),
        share(|c| c.iowait),
        share(|c| c.idle),
    );
    (row, ratio)
}

/// Fails when a copy holds a tree other than rsync's: a comparison of
/// different trees says nothing.
fn same_tree(results: &[Run]) -> Result<()> {
    let rsync = median(
        of(results, Tool::Rsync)
            .iter()
            .map(|r| r.inodes as f64)
            .collect(),
    );
    for run in results {
        let off = (run.inodes as f64 - rsync).abs() / rsync;
        ensure!(
            off <= SAME_TREE,
            "{}'s copy holds {} inodes, rsync's {rsync:.0}: not the same tree",
            run.tool.word(),
            run.inodes
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: &str = "100 0 50 1000 10 0 5 0 0 0";

    fn stamped(at: f64, cpu: &str, text: &str) -> String {
        format!("{at} {cpu} | {text}\n")
    }

    #[test]
    fn a_migrate_run_is_its_copy_step_with_both_passes() {
        let log = [
            stamped(10.0, CPU, "==> start"),
            stamped(12.0, CPU, "==> creating ext4 on /dev/sda1"),
            stamped(
                15.0,
                "100 0 50 1000 10 0 5 0 0 0",
                "==> copying the root filesystem",
            ),
            stamped(
                60.0,
                CPU,
                "==> second pass: files that changed during the copy",
            ),
            stamped(
                70.5,
                "250 10 110 1020 20 5 15 0 0 0",
                "==> editing fstab (and cmdline.txt) on the target",
            ),
            stamped(72.0, CPU, "==> status 0"),
            stamped(80.0, CPU, "==> used 30000 700000000"),
        ]
        .concat();
        let run = Run::parse(Tool::Migrate, &log).unwrap();
        assert_eq!(run.copy, 55.5);
        assert_eq!(run.first_pass, Some(45.0));
        assert_eq!(run.whole, 62.0);
        assert_eq!((run.inodes, run.bytes), (30000, 700_000_000));
        // user 160, system 60 + 5 + 10, idle 20, iowait 10: of 265.
        assert!((run.cpu.user - 160.0 / 265.0).abs() < 1e-9);
        assert!((run.cpu.system - 75.0 / 265.0).abs() < 1e-9);
        assert!((run.cpu.idle - 20.0 / 265.0).abs() < 1e-9);
    }

    #[test]
    fn a_sync_run_counts_its_flush_step_too() {
        let log = [
            stamped(1.0, CPU, "==> start"),
            stamped(5.0, CPU, "==> copying the root filesystem to the standby"),
            stamped(
                30.0,
                CPU,
                "==> second pass: files that changed during the copy",
            ),
            stamped(40.0, CPU, "==> the standby's own fstab and boot settings"),
            stamped(40.5, CPU, "==> flushing the standby"),
            stamped(43.0, CPU, "==> checking that the standby would boot"),
            stamped(44.0, CPU, "==> status 0"),
            stamped(45.0, CPU, "==> used 30010 700100000"),
        ]
        .concat();
        let run = Run::parse(Tool::Sync, &log).unwrap();
        assert_eq!(run.copy, 35.0 + 2.5);
        assert_eq!(run.first_pass, Some(25.0));
    }

    #[test]
    fn an_rsync_run_is_rsync_and_its_flush() {
        let log = [
            stamped(1.0, CPU, "==> start"),
            stamped(3.0, CPU, "==> copying the root filesystem"),
            stamped(50.0, CPU, "==> copied and flushed"),
            stamped(50.5, CPU, "==> status 0"),
            stamped(52.0, CPU, "==> used 29990 699000000"),
        ]
        .concat();
        let run = Run::parse(Tool::Rsync, &log).unwrap();
        assert_eq!(run.copy, 47.0);
        assert_eq!(run.first_pass, None);
    }

    #[test]
    fn a_failed_or_cut_run_is_an_error() {
        let failed = [
            stamped(1.0, CPU, "==> start"),
            stamped(2.0, CPU, "error: something"),
            stamped(3.0, CPU, "==> status 1"),
        ]
        .concat();
        let e = Run::parse(Tool::Sync, &failed).unwrap_err();
        assert!(format!("{e:#}").contains("status 1"), "{e:#}");
        let cut = stamped(1.0, CPU, "==> start");
        assert!(Run::parse(Tool::Sync, &cut).is_err());
    }

    #[test]
    fn the_table_has_the_ratios_and_the_goal() {
        let run = |tool, copy, inodes| Run {
            tool,
            copy,
            first_pass: (tool != Tool::Rsync).then_some(copy * 0.8),
            whole: copy + 10.0,
            cpu: CpuSplit {
                user: 0.5,
                system: 0.4,
                iowait: 0.05,
                idle: 0.05,
            },
            inodes,
            bytes: 700 << 20,
        };
        let results = vec![
            run(Tool::Migrate, 40.0, 30000),
            run(Tool::Sync, 30.0, 30010),
            run(Tool::Rsync, 45.0, 29990),
            run(Tool::Migrate, 42.0, 30000),
            run(Tool::Sync, 31.0, 30010),
            run(Tool::Rsync, 44.0, 29990),
        ];
        let facts = BTreeMap::new();
        let t = table(&results, 2, &facts, 0.1).unwrap();
        assert!(t.contains("| 41.0 | 1.09x |"), "{t}");
        assert!(t.contains("| 30.5 | 1.46x |"), "{t}");
        assert!(
            t.contains("migrate 1.09x (not met), sync 1.46x (met)"),
            "{t}"
        );
        assert!(same_tree(&results).is_ok());
        let other = vec![
            run(Tool::Migrate, 40.0, 20000),
            run(Tool::Rsync, 40.0, 30000),
        ];
        assert!(same_tree(&other).is_err());
    }

    /// The job parses as bash, with and without a profiler.
    #[test]
    fn the_job_is_bash() {
        for profile in ["", "strace", "perf"] {
            let script = format!("#!/bin/bash\nset -eu\n{}", job(3, profile));
            let out = std::process::Command::new("bash")
                .args(["-n", "-c", &script])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{profile:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(script.contains("profiled()"), !profile.is_empty());
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
