//! Power cuts: a boot whose command is held at one of pimigrate's fail
//! points (`PIMIGRATE_FAILPOINT=NAME:stop`), or left running to a random
//! moment, and then loses its power (QEMU killed: the guest's page cache is
//! gone, the disk images keep what the guest had written out). After each
//! cut the harness judges the SD card from the host, as it lies:
//!
//! - `fsck.fat -n` of its boot partition and `e2fsck -fn` of its root
//!   (after replaying the root's journal, as the next mount would) find
//!   nothing to repair;
//! - every backup the SD card's journal names is whole (the file it guards
//!   as it was before the migration) and there wherever that file changed;
//! - cmdline.txt names the SD card's root or the target's, and the journal
//!   agrees: no swap before the journal recorded its backup, the new root
//!   once it says the migration finished;
//! - the next boot comes up on the root cmdline.txt names, never neither.
//!
//! At the end ([`PowerCuts::finish`]) every boot file of every cut is, byte
//! for byte, the original or one of the versions the scenario declared
//! settled ([`PowerCuts::settled`]), and the one-line tally is printed:
//! `power cuts: N cut, N booted, N resumed, 0 repaired by fsck`.
//!
//! ```no_run
//! # use pi_testbed::machine::power::{CutAt, PowerCuts};
//! # fn f(pi: pi_testbed::Pi) -> anyhow::Result<()> {
//! let mut cuts = PowerCuts::new(pi, "my-cuts")?;
//! cuts.cut("mkfs", "", "pimigrate migrate --resume --yes", CutAt::point("after-mkfs"))?;
//! # Ok(()) }
//! ```

use crate::host::attach::Attached;
use crate::host::mbr::{self, Partition};
use crate::host::{cmd, fat, fsck, inspect};
use crate::machine::card_channel;
use crate::{After, Boot, Pi};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What both guest agents print on the console once the job has exited.
const JOB_ENDED: &str = "testbed-agent: job exited with status";
/// Where a boot's command loses its power.
#[derive(Debug, Clone)]
pub enum CutAt {
    /// Held at this fail point of pimigrate's (`name` or `name@N`).
    Point(String),
    /// A random moment within `within` after pimigrate prints the step line
    /// `step`, with its writes in flight. `PI_TESTBED_CUT_MS` chooses the
    /// moment (milliseconds after the step) instead.
    Random {
        step: &'static str,
        within: Duration,
    },
}

impl CutAt {
    /// Held at the fail point `name` (`name@N`: its N-th passing).
    pub fn point(name: &str) -> CutAt {
        CutAt::Point(name.to_string())
    }
}

/// The root a boot came up on, or must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// The SD card's own root (partition 2).
    Sd,
    /// The migration's new root (the plan's root PARTUUID).
    Target,
}

/// A boot that was cut, and where it had come up.
pub struct CutBoot {
    pub boot: Boot,
    /// The device of `/` in that boot (`/dev/mmcblk0p2`).
    pub root: String,
}

/// The SD card's files after one cut.
struct Cut {
    label: String,
    files: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, Default)]
struct Tally {
    cut: u32,
    booted: u32,
    resumed: u32,
    repaired: u32,
}

/// A Pi whose boots end in power cuts, judged after each.
pub struct PowerCuts {
    pub pi: Pi,
    name: String,
    sd: PathBuf,
    sd_boot: Partition,
    sd_root: Partition,
    pristine: BTreeMap<String, Vec<u8>>,
    settled: Vec<(String, BTreeMap<String, Vec<u8>>)>,
    cuts: Vec<Cut>,
    /// The root the next boot must come up on, and the cut it follows.
    next: Option<(String, Root)>,
    tally: Tally,
    /// What fsck or the boot-file checks found, cut by cut.
    findings: Vec<String>,
}

/// What the guest says on its console for the harness: seen live on
/// either machine (the ARM lane's job output only arrives after the boot).
const SAY: &str = "testbed-cut:";

/// The job lines that start every boot: where it came up.
const BOOTED: &str = r#"
cut_say() { echo "testbed-cut: $*" >/dev/console; }
cut_root=$(findmnt -no SOURCE /)
cut_say "booted root=$cut_root partuuid=$(lsblk -no PARTUUID "$cut_root")"
echo "cut_root=$cut_root"
echo "cut_partuuid=$(lsblk -no PARTUUID "$cut_root")"
"#;

impl PowerCuts {
    /// `pi`'s SD card (partition 1 FAT, 2 the root) as it is now is the
    /// original every cut is held against.
    pub fn new(pi: Pi, name: &str) -> Result<PowerCuts> {
        let sd = pi.disk("sd")?.image.clone();
        let sd_boot = mbr::partition_of(&sd, 1)?;
        let sd_root = mbr::partition_of(&sd, 2)?;
        let mut cuts = PowerCuts {
            pi,
            name: name.to_string(),
            sd,
            sd_boot,
            sd_root,
            pristine: BTreeMap::new(),
            settled: Vec::new(),
            cuts: Vec::new(),
            next: None,
            tally: Tally::default(),
            findings: Vec::new(),
        };
        cuts.pristine = cuts.boot_files()?;
        Ok(cuts)
    }

    /// The SD card's boot files, the command channel's left out.
    fn boot_files(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let scratch = self.pi.work.join("power-cut-snapshot");
        Ok(fat::snapshot(&self.sd, &self.sd_boot, &scratch)?
            .into_iter()
            .filter(|(name, _)| !card_channel::is_channel(name))
            .collect())
    }

    /// Boots with `prelude` then `command` (pimigrate's), and cuts the power
    /// at `at`. The boot must come up where the last cut said.
    pub fn cut(&mut self, label: &str, prelude: &str, command: &str, at: CutAt) -> Result<CutBoot> {
        let job = cut_job(prelude, command, &at);
        eprintln!("testbed: {}: power cut \"{label}\" at {at:?}", self.name);
        // A job that ended without getting there (its command failed, or
        // a disk it needs did not come up) will not get there later: cut at
        // once rather than at the boot's time limit, and let the checks
        // below (or the emulation's fault handling) say what happened.
        let boot = self.pi.run_then_cut(&job, |_, console| {
            said(console, "ready").is_some()
                || said(console, "missed").is_some()
                || console.contains(JOB_ENDED)
        })?;
        let console = boot.record.console();
        if let Some(missed) = said(&console, "missed") {
            bail!(
                "{}: power cut \"{label}\": {missed} (see {})",
                self.name,
                boot.record.serial_log.display()
            );
        }
        let ready = said(&console, "ready").with_context(|| {
            format!(
                "{}: power cut \"{label}\": the boot ended ({:?}) before its command got there; see {}",
                self.name,
                boot.record.ending,
                boot.record.serial_log.display()
            )
        })?;
        let booted =
            said(&console, "booted").context("the cut boot never said where it came up")?;
        let (root, partuuid) = parse_booted(&booted)?;
        let followed_cut = self.next.is_some();
        self.came_up(&root, &partuuid)?;
        if followed_cut {
            // The command after the last cut got as far as its own point.
            self.tally.resumed += 1;
        }
        eprintln!("testbed: {}: cut \"{label}\": {ready}", self.name);
        self.judge(label)?;
        Ok(CutBoot { boot, root })
    }

    /// An ordinary boot (after a cut or not): `script` runs after the lines
    /// that say where it came up, which must be where the last cut said.
    /// A job that succeeded after a cut counts as resumed.
    pub fn boot(&mut self, script: &str, after: After) -> Result<Boot> {
        let boot = self.pi.run(&format!("{BOOTED}{script}"), after)?;
        let out = boot.job_ok()?;
        let f = crate::machine::probe::facts(&out.stdout);
        let root = f.get("cut_root").cloned().unwrap_or_default();
        let partuuid = f.get("cut_partuuid").cloned().unwrap_or_default();
        let followed_cut = self.next.is_some();
        self.came_up(&root, &partuuid)?;
        if followed_cut {
            self.tally.resumed += 1;
        }
        Ok(boot)
    }

    /// The boot came up on `root`: the one the last cut said, if any.
    fn came_up(&mut self, root: &str, partuuid: &str) -> Result<()> {
        let Some((label, want)) = self.next.take() else {
            return Ok(());
        };
        let on = if root == "/dev/mmcblk0p2" {
            Root::Sd
        } else if Some(partuuid.to_lowercase()) == self.plan_root_partuuid()? {
            Root::Target
        } else {
            bail!(
                "{}: after the cut \"{label}\" the Pi came up on {root} (PARTUUID {partuuid}), \
                 neither the SD card's root nor the target's",
                self.name
            );
        };
        ensure!(
            on == want,
            "{}: after the cut \"{label}\" the Pi came up on {root} ({on:?}), but the SD card's \
             cmdline.txt starts the {want:?} root",
            self.name
        );
        self.tally.booted += 1;
        Ok(())
    }

    /// The SD card's journal (`/var/lib/pimigrate/migration.json` on its
    /// root), if there is one.
    pub fn journal(&self) -> Result<Option<serde_json::Value>> {
        let text = match inspect::ext4_read(&self.sd, 2, "/var/lib/pimigrate/migration.json") {
            Ok(text) => text,
            Err(err) if format!("{err:#}").contains("does not exist") => return Ok(None),
            Err(err) => return Err(err),
        };
        let journal = serde_json::from_str(&text)
            .with_context(|| format!("the SD card's journal is not JSON (torn?): {text:?}"))?;
        Ok(Some(journal))
    }

    /// The target's root PARTUUID in the SD card's journal, lowercase.
    pub fn plan_root_partuuid(&self) -> Result<Option<String>> {
        Ok(self.journal()?.and_then(|j| root_partuuid(&j)))
    }

    /// The host's judgement of the SD card after a cut.
    fn judge(&mut self, label: &str) -> Result<()> {
        self.tally.cut += 1;
        // The root first: its journal replayed, debugfs reads the journal.
        let ext4 = fsck::ext4(&self.sd, &self.sd_root)?;
        let vfat = fsck::fat(&self.sd, &self.sd_boot)?;
        for (what, finding) in [
            ("e2fsck -fn of the SD root", &ext4),
            ("fsck.fat -n of the SD boot partition", &vfat),
        ] {
            if !finding.clean {
                self.findings.push(format!(
                    "cut \"{label}\": {what}:\n{}",
                    finding.output.trim_end()
                ));
            }
        }
        if !(ext4.clean && vfat.clean) {
            self.tally.repaired += 1;
        }
        let files = self.boot_files()?;
        let journal = self.journal()?;
        for problem in backup_problems(journal.as_ref(), &files, &self.pristine) {
            self.findings.push(format!("cut \"{label}\": {problem}"));
        }
        let root = starts(&files, &self.pristine, journal.as_ref())
            .with_context(|| format!("{}: after the cut \"{label}\"", self.name))?;
        self.next = Some((label.to_string(), root));
        self.cuts.push(Cut {
            label: label.to_string(),
            files,
        });
        Ok(())
    }

    /// The next boot must come up on `root` (on top of what cmdline.txt
    /// says): a scenario's claim about the cut it just made, e.g. that a
    /// swap pimigrate had flushed survived it.
    pub fn require(&self, root: Root) -> Result<()> {
        let (label, next) = self
            .next
            .as_ref()
            .context("no cut to require anything of")?;
        ensure!(
            *next == root,
            "{}: after the cut \"{label}\" the SD card starts the {next:?} root, not the {root:?} \
             one",
            self.name
        );
        Ok(())
    }

    /// The SD card's boot files now are a version each cut may have left:
    /// a migration's or a commit's finished state.
    pub fn settled(&mut self, label: &str) -> Result<()> {
        let files = self.boot_files()?;
        self.settled.push((label.to_string(), files));
        Ok(())
    }

    /// Like [`PowerCuts::settled`], a version of the boot files: the
    /// original ones with `changes` (name, contents) made.
    pub fn settled_with(&mut self, label: &str, changes: &[(&str, Vec<u8>)]) {
        let mut files = self.pristine.clone();
        for (name, bytes) in changes {
            files.insert(name.to_string(), bytes.clone());
        }
        self.settled.push((label.to_string(), files));
    }

    /// `rsync -naHAXc --numeric-ids` of the SD card's root against the
    /// target's root (partition `number` of `image`, MBR), from the host,
    /// with the machine off: the migration's copy, made across the cuts, is
    /// faithful. What a running system rewrites at every boot (logs,
    /// systemd's state), what the plan left out and what the migration
    /// edits on purpose are not compared.
    pub fn compare_roots(&self, image: &Path, number: u32) -> Result<()> {
        let journal = self.journal()?.context("no journal on the SD card")?;
        let work = self.pi.work.join("compare");
        let source = Attached::new(&self.sd, Some(&self.sd_root), &work.join("sd"), "ro,noload")?;
        let target_part = mbr::partition_of(image, number)?;
        let target = Attached::new(image, Some(&target_part), &work.join("target"), "ro,noload")?;
        let mut excludes: Vec<String> = RUNTIME_FILES.iter().map(|e| e.to_string()).collect();
        for excluded in journal["plan"]["copy"]["exclusions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(path) = excluded["path"].as_str() {
                let contents = excluded["contents_only"].as_bool() == Some(true);
                excludes.push(format!("{path}{}", if contents { "/*" } else { "" }));
            }
        }
        let mut rsync = Command::new("rsync");
        rsync.args(["-naHAXc", "--numeric-ids", "--itemize-changes", "--delete"]);
        for exclude in &excludes {
            rsync.arg(format!("--exclude={exclude}"));
        }
        let itemized = cmd::stdout(
            rsync
                .arg(format!("{}/", source.mountpoint.display()))
                .arg(format!("{}/", target.mountpoint.display())),
        )?;
        // A directory holding what is left out changes its mtime with it.
        let holders = holding_dirs(&excludes);
        let changes: Vec<&str> = itemized
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| {
                !(l.starts_with(".d..t......")
                    && holders.contains(l.get(12..).unwrap_or("").trim()))
            })
            .collect();
        let changes = changes.join("\n");
        ensure!(
            changes.trim().is_empty(),
            "{}: rsync -naHAXc finds differences between the SD card's root and the copy made \
             across the power cuts:\n{changes}",
            self.name
        );
        eprintln!(
            "testbed: {}: the copy made across the power cuts is faithful (rsync -naHAXc)",
            self.name
        );
        Ok(())
    }

    /// Every cut's boot files against the original and the settled
    /// versions, the tally printed, and an error for anything found.
    pub fn finish(self) -> Result<Pi> {
        let mut findings = self.findings;
        let mut versions = vec![("the original", &self.pristine)];
        versions.extend(self.settled.iter().map(|(l, f)| (l.as_str(), f)));
        for cut in &self.cuts {
            findings.extend(
                torn_files(&cut.files, &versions)
                    .into_iter()
                    .map(|problem| format!("cut \"{}\": {problem}", cut.label)),
            );
        }
        let t = &self.tally;
        eprintln!(
            "testbed: {}: power cuts: {} cut, {} booted, {} resumed, {} repaired by fsck",
            self.name, t.cut, t.booted, t.resumed, t.repaired
        );
        ensure!(
            findings.is_empty(),
            "{}: the power cuts left damage:\n{}",
            self.name,
            findings.join("\n")
        );
        ensure!(
            t.booted == t.cut && t.resumed == t.cut,
            "{}: {} cuts, but {} boots after them came up and {} commands carried on",
            self.name,
            t.cut,
            t.booted,
            t.resumed
        );
        Ok(self.pi)
    }
}

/// What a running system rewrites at every boot, so that the SD card's
/// root, booted again after the copy, differs there from the copy; and
/// the files the migration edits on the target on purpose.
const RUNTIME_FILES: &[&str] = &[
    "/etc/fstab",
    "/etc/fstab.pimigrate-backup",
    "/etc/default/raspi-firmware",
    "/etc/default/raspi-firmware.pimigrate-backup",
    "/var/lib/pimigrate/",
    "/var/log/",
    "/var/lib/systemd/",
    "/var/tmp/*",
    "/tmp/*",
    "/root/.bash_history",
];

/// The directories (as rsync itemizes them: `etc/`) whose entries
/// `excludes` leave out, or whose contents (`/tmp/*`): their mtimes change
/// with what a running system writes there.
fn holding_dirs(excludes: &[String]) -> std::collections::BTreeSet<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for exclude in excludes {
        let path = exclude.trim_start_matches('/').trim_end_matches('/');
        let path = path.strip_suffix("/*").unwrap_or(path);
        if exclude.ends_with("/*") {
            dirs.insert(format!("{path}/"));
        }
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(format!("{}/", dir.display()));
            parent = dir.parent();
        }
    }
    dirs
}

/// A job function: pimigrate's (`$pid`) state letter in /proc (`T` stopped,
/// `Z` or nothing once it has ended).
const CUT_STATE: &str =
    r#"cut_state() { sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1; }"#;

/// The job of a cut boot: `prelude`, then `command` in the background,
/// and once it is held at its point (or the random moment came) the word
/// for the host to cut. Nothing is written to the disks under test after
/// pimigrate starts but what pimigrate writes (its output goes to /run).
fn cut_job(prelude: &str, command: &str, at: &CutAt) -> String {
    let (env, wait) = match at {
        CutAt::Point(point) => (
            format!("PIMIGRATE_FAILPOINT='{point}:stop' "),
            wait_until_held(point),
        ),
        CutAt::Random { step, within } => (String::new(), wait_a_random_moment(step, *within)),
    };
    format!(
        r#"{BOOTED}{prelude}
{CUT_STATE}
# What the job printed so far is on the disk; from here on only pimigrate writes.
sync
{env}{command} >/run/cut.out 2>/run/cut.err </dev/null &
pid=$!
{wait}
sleep infinity
"#
    )
}

/// Job lines: wait until pimigrate (`$pid`) is stopped at `point`, then
/// say `ready`; say `missed` if it exits first.
fn wait_until_held(point: &str) -> String {
    format!(
        r#"while :; do
    case "$(cut_state)" in
        T|t) cut_say "ready: held at {point}"; break ;;
        ""|Z) wait "$pid"; cut_say "missed: pimigrate exited with status $? before reaching {point}: $(tail -3 /run/cut.err | tr '\n' ' ')"; break ;;
    esac
    sleep 0.1
done"#
    )
}

/// Job lines: wait until pimigrate prints the step line `step`, then a
/// random moment within `within` (or `PI_TESTBED_CUT_MS`), then say
/// `ready`; say `missed` if it ends before its step line.
fn wait_a_random_moment(step: &str, within: Duration) -> String {
    let ms = std::env::var("PI_TESTBED_CUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| random_below(within.as_millis() as u64));
    format!(
        r#"until grep -qF '{step}' /run/cut.err; do
    case "$(cut_state)" in ""|Z) cut_say "missed: pimigrate ended before its step line: $(tail -3 /run/cut.err | tr '\n' ' ')"; sleep infinity ;; esac
    sleep 0.1
done
sleep {secs}
case "$(cut_state)" in ""|Z) still="it had finished" ;; *) still="it was running" ;; esac
cut_say "ready: {ms} ms after its step line, $still""#,
        secs = format_args!("{}.{:03}", ms / 1000, ms % 1000)
    )
}

/// A number below `bound` (at least 1), from the clock: a new moment each
/// run, printed with the cut so that `PI_TESTBED_CUT_MS` can repeat it.
fn random_below(bound: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // A multiplicative hash, so that nearby clocks give far-apart moments.
    nanos.wrapping_mul(0x9E37_79B9_7F4A_7C15) % bound.max(1)
}

/// The text after the last `testbed-cut: WORD` on the console.
fn said(console: &str, word: &str) -> Option<String> {
    let marker = format!("{SAY} {word}");
    console
        .lines()
        .rev()
        .filter_map(|l| {
            l.find(&marker)
                .map(|i| l[i + SAY.len()..].trim().to_string())
        })
        .find(|l| l.starts_with(word))
}

/// `booted root=/dev/sda1 partuuid=...` → (root, partuuid).
fn parse_booted(line: &str) -> Result<(String, String)> {
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let root = field("root=");
    ensure!(!root.is_empty(), "no root in {line:?}");
    Ok((root, field("partuuid=")))
}

fn root_partuuid(journal: &serde_json::Value) -> Option<String> {
    journal["plan"]["table"]["partitions"]
        .as_array()?
        .iter()
        .find(|p| p["role"] == "root")
        .and_then(|p| p["partuuid"].as_str())
        .map(str::to_lowercase)
}

fn name_of(boot_path: &str) -> &str {
    boot_path.trim_start_matches('/')
}

/// Backups the journal names that are torn (not the original of the file
/// they guard), or missing while that file has changed.
fn backup_problems(
    journal: Option<&serde_json::Value>,
    files: &BTreeMap<String, Vec<u8>>,
    pristine: &BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let Some(backups) = journal.and_then(|j| j["backups"].as_object()) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for (file, backup) in backups {
        let (file, backup) = (name_of(file), name_of(backup.as_str().unwrap_or_default()));
        let original = pristine.get(file);
        match files.get(backup) {
            Some(bytes) if Some(bytes) != original => problems.push(format!(
                "the backup {backup} is not the original {file} ({} bytes, the original {})",
                bytes.len(),
                original.map_or(0, Vec::len)
            )),
            None if files.get(file) != original => problems.push(format!(
                "{file} has changed and its backup {backup}, which the journal names, is missing"
            )),
            _ => {}
        }
    }
    problems
}

/// The root the SD card's cmdline.txt starts now, checked against what the
/// journal allows: the original root until the journal recorded the
/// backup of cmdline.txt (or its trial's commit began), the target's once
/// a migration without a trial says it finished.
fn starts(
    files: &BTreeMap<String, Vec<u8>>,
    pristine: &BTreeMap<String, Vec<u8>>,
    journal: Option<&serde_json::Value>,
) -> Result<Root> {
    let root_of = |files: &BTreeMap<String, Vec<u8>>| -> Result<String> {
        let bytes = files
            .get("cmdline.txt")
            .context("the SD card has no cmdline.txt")?;
        let text = String::from_utf8_lossy(bytes);
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("root="))
            .map(str::to_lowercase)
            .with_context(|| format!("cmdline.txt has no root=: {text:?}"))
    };
    let now = root_of(files)?;
    if now == root_of(pristine)? {
        if let Some(j) = journal {
            let done = j["done"].as_array().cloned().unwrap_or_default();
            let finished = done.iter().any(|s| s == "source-boot-edited");
            ensure!(
                !(finished && j["plan"]["trial_boot"].is_null() && j["plan"]["layout"] == "root-only"),
                "the journal says the migration finished, yet cmdline.txt still starts the SD card's root"
            );
        }
        return Ok(Root::Sd);
    }
    let planned = journal.and_then(root_partuuid);
    ensure!(
        planned.as_ref().is_some_and(|p| now == format!("partuuid={p}")),
        "cmdline.txt names root={now}, neither the original root nor the journal's target ({planned:?})"
    );
    // A trial's commit runs from the target, whose journal records it; the
    // SD card's knows only of a plain migration's swap.
    let j = journal.context("cmdline.txt changed, and there is no journal")?;
    let recorded = j["backups"]
        .as_object()
        .is_some_and(|b| b.contains_key("/cmdline.txt"));
    ensure!(
        recorded || !j["plan"]["trial_boot"].is_null(),
        "cmdline.txt was replaced before the journal recorded its backup"
    );
    Ok(Root::Target)
}

/// The files of one cut that are none of `versions` (absent counts as a
/// version of its own); pimigrate's temporary files, which the firmware
/// never reads, are left out.
fn torn_files(
    files: &BTreeMap<String, Vec<u8>>,
    versions: &[(&str, &BTreeMap<String, Vec<u8>>)],
) -> Vec<String> {
    let mut names: Vec<&String> = files.keys().collect();
    for (_, version) in versions {
        names.extend(version.keys());
    }
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| !name.ends_with(".pimigrate-new"))
        .filter(|name| {
            let now = files.get(*name);
            !versions.iter().any(|(_, v)| v.get(*name) == now)
        })
        .map(|name| {
            let known: Vec<&str> = versions.iter().map(|(l, _)| *l).collect();
            format!(
                "{name} is {} bytes, none of the versions known ({})",
                files.get(name).map_or(0, Vec::len),
                known.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    fn journal(done: &[&str], backups: &[(&str, &str)]) -> serde_json::Value {
        serde_json::json!({
            "done": done,
            "backups": backups.iter().map(|(f, b)| (f.to_string(), serde_json::json!(b))).collect::<serde_json::Map<_, _>>(),
            "plan": {
                "layout": "root-only",
                "trial_boot": null,
                "table": { "partitions": [ { "role": "root", "partuuid": "AB12CD34-01" } ] }
            }
        })
    }

    #[test]
    fn cmdline_and_journal_say_which_root_boots() {
        let old = files(&[(
            "cmdline.txt",
            "console=tty1 root=PARTUUID=6c586e13-02 rootwait\n",
        )]);
        let new = files(&[(
            "cmdline.txt",
            "console=tty1 root=PARTUUID=ab12cd34-01 rootwait\n",
        )]);
        let before_backup = journal(&["partitioned"], &[]);
        assert_eq!(starts(&old, &old, Some(&before_backup)).unwrap(), Root::Sd);
        assert_eq!(starts(&old, &old, None).unwrap(), Root::Sd);
        let swapping = journal(
            &["copied"],
            &[("/cmdline.txt", "/cmdline.txt.pimigrate-backup")],
        );
        assert_eq!(starts(&new, &old, Some(&swapping)).unwrap(), Root::Target);
        // Swapped before the journal knew of the backup: a broken order.
        assert!(starts(&new, &old, Some(&before_backup)).is_err());
        // Finished, yet the old root: the swap did not last.
        let finished = journal(&["source-boot-edited"], &[("/cmdline.txt", "/b")]);
        assert!(starts(&old, &old, Some(&finished)).is_err());
    }

    #[test]
    fn a_torn_or_missing_backup_is_found() {
        let pristine = files(&[("cmdline.txt", "root=OLD\n")]);
        let j = journal(&[], &[("/cmdline.txt", "/cmdline.txt.pimigrate-backup")]);
        let whole = files(&[
            ("cmdline.txt", "root=NEW\n"),
            ("cmdline.txt.pimigrate-backup", "root=OLD\n"),
        ]);
        assert!(backup_problems(Some(&j), &whole, &pristine).is_empty());
        let torn = files(&[
            ("cmdline.txt", "root=NEW\n"),
            ("cmdline.txt.pimigrate-backup", ""),
        ]);
        assert_eq!(backup_problems(Some(&j), &torn, &pristine).len(), 1);
        let missing = files(&[("cmdline.txt", "root=NEW\n")]);
        assert_eq!(backup_problems(Some(&j), &missing, &pristine).len(), 1);
        // Named in the journal before it is written, the file unchanged: fine.
        assert!(backup_problems(Some(&j), &pristine, &pristine).is_empty());
    }

    #[test]
    fn every_file_is_a_known_version_or_a_temporary_one() {
        let pristine = files(&[("cmdline.txt", "root=OLD\n")]);
        let migrated = files(&[
            ("cmdline.txt", "root=NEW\n"),
            ("cmdline.txt.pimigrate-backup", "root=OLD\n"),
        ]);
        let versions = [("the original", &pristine), ("migrated", &migrated)];
        let mid = files(&[
            ("cmdline.txt", "root=OLD\n"),
            ("cmdline.txt.pimigrate-new", "root=NE"),
        ]);
        assert!(torn_files(&mid, &versions).is_empty());
        let torn = files(&[("cmdline.txt", "root=NE")]);
        assert_eq!(torn_files(&torn, &versions).len(), 1);
    }

    #[test]
    fn the_directories_holding_what_is_left_out() {
        let excludes = ["/etc/fstab", "/tmp/*", "/var/lib/pimigrate/"].map(String::from);
        let dirs: Vec<String> = holding_dirs(&excludes).into_iter().collect();
        assert_eq!(dirs, ["etc/", "tmp/", "var/", "var/lib/"]);
    }

    #[test]
    fn the_console_says_where_a_cut_boot_came_up_and_when_it_is_ready() {
        let console = "[  9.1] systemd[1]: Started x\r\n\
            testbed-cut: booted root=/dev/mmcblk0p2 partuuid=6c586e13-02\r\n\
            testbed-cut: ready: held at after-mkfs\r\n";
        let booted = said(console, "booted").unwrap();
        assert_eq!(
            parse_booted(&booted).unwrap(),
            ("/dev/mmcblk0p2".to_string(), "6c586e13-02".to_string())
        );
        assert_eq!(said(console, "ready").unwrap(), "ready: held at after-mkfs");
        assert!(said(console, "missed").is_none());
        assert!(random_below(1000) < 1000);
    }
}
