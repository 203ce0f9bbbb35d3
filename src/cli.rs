//! Command-line types (clap). Only subcommands that work are registered.

use crate::bench::engine::EngineKind;
use crate::bench::suite::{Preset, SuiteParams};
use crate::bench::times::{self, SuiteTime};
use crate::plan::{BootOrderChoice, HandoverChoice, Layout, Options, TableChoice, TrialChoice};
use crate::wizard::{Benchmarks, Settings};
use clap::builder::PossibleValue;
use clap::ValueEnum;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "pimigrate",
    // "0.1.0 (abc1234)": build.rs adds the git commit, so a report names the build.
    version = env!("PIMIGRATE_VERSION"),
    about = "Move a Raspberry Pi's system from its SD card to a USB SSD or NVMe drive",
    long_about = "Move a Raspberry Pi's system from its SD card to a USB SSD or NVMe drive, \
                  measurably and provably bootable. `plan` shows every write and makes none. \
                  `migrate` erases the target disk and copies the system onto it; on the SD card it \
                  changes only the boot files (last, after a backup that `rollback` restores) and \
                  its own journal and log, and with --boot-order apply the bootloader's config.",
    // The one exit-status table (src/exit.rs), also in the man pages and docs/plan.md.
    after_long_help = crate::exit::help_text(None)
)]
pub struct Cli {
    /// Print machine-readable JSON (a versioned schema) instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Say more (repeat for even more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Say only what matters.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// The root filesystem to move, when it is not the running system's `/`
    /// (for example an SD card image mounted on a workstation).
    #[arg(long, global = true, value_name = "DIR")]
    pub source_root: Option<PathBuf>,

    /// The directory holding config.txt and cmdline.txt, when it cannot be
    /// found in the mount table (default: /boot/firmware or /boot).
    #[arg(long, global = true, value_name = "DIR")]
    pub boot_dir: Option<PathBuf>,

    /// Where pimigrate keeps reports and journals.
    #[arg(long, global = true, value_name = "DIR", default_value = crate::host::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,

    /// Where `migrate` writes its full log (a copy also goes to the new root).
    #[arg(long, global = true, value_name = "DIR", default_value = crate::host::DEFAULT_LOG_DIR)]
    pub log_dir: PathBuf,

    /// Read /sys, /proc, /dev and /run from this tree instead of the
    /// running system: the tests' fixture machines and the testbed's
    /// stand-ins, not a Pi owner's flag, so `--help` and the man pages do
    /// not show it.
    #[arg(long, global = true, value_name = "DIR", hide = true)]
    pub sysroot: Option<PathBuf>,

    /// Without one, on a terminal: the guided wizard; otherwise this help.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List disks, say which one holds the running system and which can take it (reads only).
    #[command(after_long_help = crate::exit::help_text(Some("devices")))]
    Devices(DevicesArgs),
    /// Show exactly what a migration would do (a dry run: nothing is written).
    // `--target` is `migrate`'s too, where `--resume` takes it from the
    // journal: required here, where nothing else can name the disk.
    #[command(after_long_help = crate::exit::help_text(Some("plan")),
              mut_arg("target", |target| target.required(true)))]
    Plan(PlanArgs),
    /// Measure a disk, partition or directory (fio-style tests, A1 grade): in a directory
    /// it writes a test file it removes, a device it only reads (--destructive: writes
    /// over it); keeps a report.
    #[command(after_long_help = crate::exit::help_text(Some("bench")))]
    Bench(BenchArgs),
    /// Move the system: the same plan as `plan`, confirmed, then applied: erases the
    /// target disk, and changes the SD card's boot files last, after a backup.
    #[command(after_long_help = crate::exit::help_text(Some("migrate")),
              mut_arg("target", |target| target.required_unless_present("resume")))]
    Migrate(MigrateArgs),
    /// Undo a migration's changes to the SD card's boot files (and to the bootloader's
    /// config), from their backups, so it boots as before; the target is not written.
    #[command(after_long_help = crate::exit::help_text(Some("rollback")))]
    Rollback(RollbackArgs),
    /// Rank the attached drives by random 4K speed against the current root, and pick one
    /// (measuring writes test files it removes; a blank drive's raw device only if allowed).
    #[command(after_long_help = crate::exit::help_text(Some("recommend")))]
    Recommend(RecommendArgs),
    /// After the reboot: check the system runs from the new root and compare
    /// its speed (its benchmark writes a test file it removes, and keeps a
    /// report); --commit writes: it makes a trial boot permanent (and
    /// --apply-quirk changes the command line).
    #[command(after_long_help = crate::exit::help_text(Some("verify")))]
    Verify(VerifyArgs),
    /// A guided migration that explains and asks (what `pimigrate` alone starts on a
    /// terminal); it ends as `migrate` does, erasing the disk you choose.
    #[command(after_long_help = crate::exit::help_text(Some("wizard")))]
    Wizard(WizardArgs),
    /// Bring a standby copy of the running system up to date (the disk it was
    /// migrated from, or --target DEV), overwriting it, and check that it would
    /// boot; a first sync erases the disk.
    #[command(after_long_help = crate::exit::help_text(Some("sync")))]
    Sync(SyncArgs),
    /// Where a migration stands and how it ended: still running, stopped,
    /// waiting for its trial, the trial committed or back on the SD card (and why);
    /// after the commit, what drifted since (--check).
    #[command(after_long_help = crate::exit::help_text(Some("status")))]
    Status(StatusArgs),
    /// What a trial boot's own units run (not for people: see `pimigrate plan`, "Trial boot").
    #[command(hide = true)]
    Trial(TrialCheckArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Say only what is news, prefixed `pimigrate:`, and nothing otherwise:
    /// for a login message (the package's /etc/update-motd.d/60-pimigrate).
    #[arg(long)]
    pub login: bool,

    /// Check what the move set up (what pimigrate-check.timer runs daily):
    /// every check with its fix; exit 0 when nothing drifted or nothing is
    /// committed, 1 on a warning, 2 on a failure.
    #[arg(long, conflicts_with = "login")]
    pub check: bool,

    /// Do not count the findings with this code (repeat for more);
    /// /etc/pimigrate/check.conf mutes codes for good.
    #[arg(
        long,
        value_name = "CODE",
        value_parser = clap::builder::PossibleValuesParser::new(crate::verify::drift::CODES)
    )]
    pub ignore: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TrialCheckArgs {
    #[command(subcommand)]
    pub action: TrialAction,
}

#[derive(Debug, Subcommand)]
pub enum TrialAction {
    /// Check this trial boot with verify's checks: commit when they pass,
    /// else record why and exit 5 (the unit then reboots).
    Check,
    /// Record that the trial stopped in systemd's emergency or rescue mode.
    Failed {
        #[arg(long, value_name = "MODE")]
        why: String,
    },
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The standby disk (whole disk), instead of the recorded standby or the
    /// disk the system was migrated from. A disk that is not a standby yet is
    /// erased and laid out as a migration lays out its target.
    // `--to` is its name from before every command called the disk it
    // writes `--target`: scripts that have it keep working.
    #[arg(long, value_name = "DEV", visible_alias = "to")]
    pub target: Option<PathBuf>,

    /// Erase the --target disk and lay it out anew, even if it is a standby
    /// already (new ids).
    // `--fresh`, its old name, still works for the scripts that have it,
    // but is not taught: `recommend --fresh` means "measure again".
    #[arg(long, requires = "target", alias = "fresh")]
    pub erase: bool,

    /// A first sync's layout (default: what the running system has).
    #[arg(long, value_enum)]
    pub layout: Option<Layout>,

    /// A first sync's partition table.
    #[arg(long, value_enum)]
    pub table: Option<TableChoice>,

    /// Compare every file's contents on both sides, not only size, times,
    /// owner and mode (reads both disks in full; slower).
    #[arg(long)]
    pub checksum: bool,

    /// Leave this path (as on the running system) out of the copy; repeatable.
    #[arg(long, value_name = "PATH")]
    pub exclude: Vec<PathBuf>,

    /// Do not ask (for timers and scripts). A first sync that erases a disk
    /// still needs an explicit --target.
    #[arg(short, long)]
    pub yes: bool,

    /// Show what the sync would do; write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Sync a standby that changed since its last sync (mounted read-write
    /// elsewhere, or booted), overwriting those changes. Without it such a
    /// standby is refused (--yes, the timer) or the sync asks.
    #[arg(long)]
    pub overwrite_changes: bool,

    /// End the sync with an error when the standby shows no progress for
    /// this many seconds (a card that stops answering).
    #[arg(long, value_name = "SECS", default_value_t = crate::sync::DEFAULT_STALL_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stall_timeout: u64,

    /// Write and start a systemd timer that runs `pimigrate sync --yes`:
    /// daily, weekly, hourly or a calendar time such as '*-*-* 03:00'.
    #[arg(long, value_name = "WHEN", conflicts_with_all = ["remove_timer", "target", "erase", "dry_run"])]
    pub install_timer: Option<String>,

    /// Stop and remove that timer.
    #[arg(long, conflicts_with_all = ["target", "erase", "dry_run"])]
    pub remove_timer: bool,

    /// Seed for a first sync's random ids, to make a plan reproducible
    /// (for tests: hidden from --help).
    #[arg(long, value_name = "N", hide = true)]
    pub seed: Option<u64>,
}

impl SyncArgs {
    /// The flags as the sync planner takes them.
    pub fn request(&self) -> crate::sync::plan::SyncRequest {
        crate::sync::plan::SyncRequest {
            target: self.target.clone(),
            erase: self.erase,
            layout: self.layout,
            table: self.table,
            checksum: self.checksum,
            excludes: self.exclude.clone(),
            seed: self.seed,
        }
    }

    /// What the timer's service runs after `sync --yes`: every flag that
    /// changes what a sync does (this command's and the global ones that
    /// are not their defaults), paths made absolute, since the service
    /// starts in `/`. Never a device name (`--target` conflicts with
    /// `--install-timer`): names such as sda change from boot to boot, and
    /// the standby record names the standby by its ids.
    pub fn timer_args(&self, cli: &Cli) -> std::io::Result<crate::sync::timer::ServiceCommand> {
        use std::ffi::OsString;
        let mut command = crate::sync::timer::ServiceCommand::default();
        let flag = |name: &str, value: &std::path::Path| {
            let mut word = OsString::from(format!("--{name}="));
            word.push(value.as_os_str());
            word
        };
        if let Some(root) = &cli.source_root {
            let root = std::path::absolute(root)?;
            if root != std::path::Path::new("/") {
                command.args.push(flag("source-root", &root));
            }
        }
        if let Some(boot) = &cli.boot_dir {
            command
                .args
                .push(flag("boot-dir", &std::path::absolute(boot)?));
        }
        for (name, dir, default) in [
            ("state-dir", &cli.state_dir, crate::host::DEFAULT_STATE_DIR),
            ("log-dir", &cli.log_dir, crate::host::DEFAULT_LOG_DIR),
        ] {
            let dir = std::path::absolute(dir)?;
            if dir != std::path::Path::new(default) {
                command.args.push(flag(name, &dir));
                command.writable.push(dir);
            }
        }
        if self.checksum {
            command.args.push("--checksum".into());
        }
        for path in &self.exclude {
            command.args.push(flag("exclude", path));
        }
        if self.stall_timeout != crate::sync::DEFAULT_STALL_TIMEOUT_SECS {
            command
                .args
                .push(format!("--stall-timeout={}", self.stall_timeout).into());
        }
        Ok(command)
    }
}

/// `--trial[=WHEN]` and `--no-trial`, the same in `plan`, `migrate` and
/// the wizard. Every spelling scripts use keeps working: `--trial always`
/// (a space, as the Ansible role passes it), `--trial=always`, a bare
/// `--trial` (always: the wizard's old flag) and `--no-trial`
/// (tests/cli_fixtures.rs pins each).
#[derive(Debug, Default, Args)]
pub struct TrialArgs {
    /// Boot the new root once on trial before it is permanent. A bare
    /// --trial is --trial=always; without it: auto (the wizard asks).
    // No `require_equals`: `--trial always` with a space must keep working;
    // no subcommand that has it takes a positional argument it could eat.
    #[arg(long, value_enum, value_name = "WHEN", num_args = 0..=1,
          default_missing_value = "always", conflicts_with = "no_trial")]
    pub trial: Option<TrialChoice>,

    /// Change cmdline.txt directly, without a trial boot (= --trial never).
    #[arg(long)]
    pub no_trial: bool,
}

impl TrialArgs {
    /// What the flags say; `None` when neither was given.
    pub fn choice(&self) -> Option<TrialChoice> {
        if self.no_trial {
            Some(TrialChoice::Never)
        } else {
            self.trial
        }
    }
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub plan: PlanArgs,

    /// Show what the migration would do, as `plan` does (the same plan, the
    /// same output), and write nothing.
    #[arg(long, conflicts_with_all = ["resume", "reboot"])]
    pub dry_run: bool,

    /// Do not ask: for scripts and fleets (an explicit --target is still required).
    #[arg(short, long)]
    pub yes: bool,

    /// Carry on with an interrupted migration, from its journal.
    #[arg(long)]
    pub resume: bool,

    /// Reboot when done (into the trial boot, when there is one).
    #[arg(long)]
    pub reboot: bool,
}

/// Every question the wizard asks has a flag, so it also runs unattended:
/// `pimigrate wizard --yes --target /dev/sda --layout root-only --no-bench`.
#[derive(Debug, Default, Args)]
pub struct WizardArgs {
    /// The whole disk to move the system to (instead of choosing it).
    #[arg(long, value_name = "DEV")]
    pub target: Option<PathBuf>,

    /// root-only or full (instead of choosing).
    #[arg(long, value_enum)]
    pub layout: Option<Layout>,

    /// Partition table (asked only for disks over 2 TiB).
    #[arg(long, value_enum)]
    pub table: Option<TableChoice>,

    // Every figure in the help comes from the suites' definitions.
    #[arg(long, conflicts_with = "no_bench",
          help = quick_help("Quick benchmarks, without asking; each drive"))]
    pub quick: bool,

    /// No benchmarks: choose the disk without measuring.
    #[arg(long)]
    pub no_bench: bool,

    /// Measure blank drives' writes on the raw device without asking (test
    /// data is written over them; they hold no partition or filesystem).
    /// With --yes only the --target disk is ever written, and that is the
    /// default there.
    #[arg(long, conflicts_with_all = ["no_bench_blank", "no_bench"])]
    pub bench_blank: bool,

    /// Measure blank drives by reads only (they cannot be recommended then).
    #[arg(long)]
    pub no_bench_blank: bool,

    #[command(flatten)]
    pub trial: TrialArgs,

    /// The trial boot checks itself once it is up and commits when the
    /// checks pass, or reboots to the SD card (as `migrate --auto-commit`).
    #[arg(long, conflicts_with = "no_trial")]
    pub auto_commit: bool,

    /// A full move: change the bootloader's config as the plan shows
    /// (apply), or only show it (instead of asking; unattended: show).
    #[arg(long, value_enum)]
    pub boot_order: Option<BootOrderChoice>,

    /// A full move: after the trial, keep the SD card in as the fallback
    /// (boot-order) or take it out (remove-card), instead of asking.
    #[arg(long, value_enum)]
    pub handover: Option<HandoverChoice>,

    /// Reboot once migrated (into the trial boot, when there is one),
    /// instead of asking.
    #[arg(long)]
    pub reboot: bool,

    #[command(flatten)]
    pub after_move: AfterMoveArgs,

    /// Ask nothing: open questions take their defaults and the target is
    /// erased without typing its name (needs --target).
    #[arg(short, long, requires = "target")]
    pub yes: bool,

    /// Seed for the random ids, to make a plan reproducible (for tests:
    /// hidden from --help).
    #[arg(long, value_name = "N", hide = true)]
    pub seed: Option<u64>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Make the trial boot permanent when every check passes: cmdline.txt is
    /// replaced by the trial's command line (after a backup) and the tryboot
    /// files are removed.
    #[arg(long)]
    pub commit: bool,

    /// Add usb-storage.quirks=VID:PID:u for the target's USB bridge to the
    /// command line the next boot reads (for bridges that reset on uas).
    #[arg(long)]
    pub apply_quirk: bool,

    /// Trim the new root once (FITRIM; never an SD card) and report the
    /// bytes it freed, as `--commit` does.
    #[arg(long)]
    pub trim: bool,

    /// Do not run the before/after benchmark.
    #[arg(long)]
    pub no_bench: bool,

    #[arg(long, conflicts_with = "no_bench",
          help = quick_help("Shorter benchmark on a smaller test file"))]
    pub quick: bool,

    /// Seconds each timed test runs after its ramp.
    #[arg(long, value_name = "SECS", value_parser = crate::bench::suite::parse_runtime, conflicts_with = "no_bench")]
    pub runtime: Option<f64>,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Do not ask.
    #[arg(short, long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Also list loop, ram and zram devices.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The whole disk to move the system to, e.g. /dev/sda or /dev/nvme0n1;
    /// it is erased (`migrate --resume` takes it from the journal).
    #[arg(long, value_name = "DEV")]
    pub target: Option<PathBuf>,

    /// root-only: only / moves, the SD card keeps booting (every Pi).
    /// full: boot and root move, the SD card can come out (Pi 4/5, 3B+).
    #[arg(long, value_enum, default_value_t = Layout::RootOnly)]
    pub layout: Layout,

    /// Partition table for the target.
    #[arg(long, value_enum, default_value_t = TableChoice::Auto)]
    pub table: TableChoice,

    /// Size of the FAT32 boot partition of a full move.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = crate::units::parse_size)]
    pub boot_size: u64,

    /// Size of the root partition (default: the rest of the disk).
    #[arg(long, value_name = "SIZE", value_parser = crate::units::parse_size)]
    pub root_size: Option<u64>,

    /// Leave this path (as on the running system) out of the copy; repeatable.
    #[arg(long, value_name = "PATH")]
    pub exclude: Vec<PathBuf>,

    /// Seed for the random ids, to make a plan reproducible (for tests:
    /// hidden from --help).
    #[arg(long, value_name = "N", hide = true)]
    pub seed: Option<u64>,

    #[command(flatten)]
    pub trial: TrialArgs,

    /// A full move's changes to the bootloader's config (the trial's boot
    /// order, the permanent order, PCIE_PROBE): show them, or apply them
    /// through the system's rpi-eeprom-config.
    #[arg(long, value_enum, default_value_t = BootOrderChoice::Show)]
    pub boot_order: BootOrderChoice,

    /// What `verify --commit` does after a full move's trial: set the boot
    /// order (the new drive first, the SD card as the fallback; needs
    /// --boot-order apply) or say to take the SD card out. auto: the boot
    /// order when it may be changed.
    #[arg(long, value_enum, default_value_t = HandoverChoice::Auto)]
    pub handover: HandoverChoice,

    /// The trial boot checks itself once it is up (verify's checks) and
    /// commits when they pass; when they fail it reboots without
    /// committing, so the SD card starts as before. Either way the outcome
    /// is recorded, and `pimigrate status` says what happened.
    #[arg(long, conflicts_with = "no_trial")]
    pub auto_commit: bool,

    /// Compare file contents in the copy's second pass, not only size and
    /// modification time (slower).
    #[arg(long)]
    pub checksum: bool,

    #[command(flatten)]
    pub after_move: AfterMoveArgs,

    /// Use this MBR disk signature (8 hex digits) instead of a random one
    /// (for tests: hidden from --help).
    #[arg(long, value_name = "HEX", value_parser = parse_hex_u32, hide = true)]
    pub disk_signature: Option<u32>,
}

/// What the new drive gets beyond the copy: TRIM, the USB bridge's
/// driver, the Pi 5's USB current (`migrate`, `plan`, `wizard`).
#[derive(Debug, Default, Args)]
pub struct AfterMoveArgs {
    /// Do not switch TRIM on for the new drive: no udev rule for its USB
    /// bridge, and fstrim.timer left as it is (by default both are set up
    /// where the bridge passes TRIM on).
    #[arg(long)]
    pub no_trim: bool,

    /// Keep the uas driver off the new drive's USB bridge: add
    /// usb-storage.quirks=VID:PID:u to the new command line, so usb-storage
    /// drives it (for bridges that abort and reset on uas; slower, and
    /// usually without TRIM).
    #[arg(long)]
    pub usb_quirk: bool,

    /// A Pi 5 booting from USB on a supply that is good for 5 A without
    /// USB-PD: write PSU_MAX_CURRENT=5000 into the bootloader's config
    /// (through rpi-eeprom-config, as the boot order), so its USB ports are
    /// not held to 600 mA.
    #[arg(long, value_name = "MA")]
    pub psu_max_current: Option<u32>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A disk, a partition or a directory on a mounted filesystem
    /// (default: the running root, with a test file).
    #[arg(value_name = "TARGET")]
    pub targets: Vec<PathBuf>,

    #[arg(long, conflicts_with = "preset",
          help = quick_help("Shorter tests on a smaller test file (= --preset quick)"))]
    pub quick: bool,

    /// standard: SEQ1M Q8/Q1 and RND4K Q32/Q1; a1: Raspberry Pi's SD card test.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,

    /// Seconds each timed test runs after its ramp.
    #[arg(long, value_name = "SECS", value_parser = crate::bench::suite::parse_runtime)]
    pub runtime: Option<f64>,

    /// Size of the test file, or of the part of a device tested (e.g. 1G).
    #[arg(long, value_name = "SIZE", value_parser = crate::units::parse_size)]
    pub size: Option<u64>,

    /// Also write to a raw disk or partition, destroying its contents.
    /// Refused for the source disk and anything mounted.
    #[arg(long)]
    pub destructive: bool,

    /// Confirm --destructive without asking (needed without a terminal).
    #[arg(short, long, requires = "destructive")]
    pub yes: bool,

    /// I/O engine (default: io_uring when the kernel has it, else threads).
    #[arg(long, value_enum)]
    pub engine: Option<EngineKind>,

    /// Do not keep the report under <state-dir>/reports.
    #[arg(long)]
    pub no_save: bool,

    /// Run only this test, e.g. "RND4K Q32 read" or rnd4k-q32-read; repeatable.
    #[arg(long = "test", value_name = "NAME")]
    pub tests: Vec<String>,

    /// Use this existing file (at least 16 MiB) instead of a fresh test file;
    /// write tests overwrite it, and it is kept. For comparisons with fio
    /// (scripts/bench-vs-fio.sh): hidden from --help.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with_all = ["targets", "destructive"])]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RecommendArgs {
    #[arg(long, help = quick_help("Shorter benchmarks on a smaller test file; each drive"))]
    pub quick: bool,

    /// Seconds each timed test runs after its ramp.
    #[arg(long, value_name = "SECS", value_parser = crate::bench::suite::parse_runtime)]
    pub runtime: Option<f64>,

    /// Size of each drive's test file (e.g. 64M): smaller writes less to a
    /// worn SD card and lays out sooner on a slow one, but too small a file
    /// measures the drive's cache.
    #[arg(long, value_name = "SIZE", value_parser = crate::units::parse_size)]
    pub size: Option<u64>,

    /// Only use saved reports, never benchmark: drives without a fresh
    /// report are listed as not measured.
    #[arg(long, conflicts_with = "fresh")]
    pub reuse: bool,

    /// Benchmark every drive again, ignoring saved reports.
    #[arg(long)]
    pub fresh: bool,

    /// Saved reports older than this many days are not reused.
    #[arg(long, value_name = "DAYS", default_value_t = crate::recommend::freshness::DEFAULT_MAX_AGE_DAYS)]
    pub max_age: u32,

    /// Also compare loop devices (for tests: hidden from --help).
    #[arg(long, hide = true)]
    pub all: bool,

    /// Measure blank drives' writes on the raw device without asking (test
    /// data is written over them; they hold no partition table, filesystem
    /// or other signature). Needs root. Without it, a person at a terminal
    /// is asked.
    #[arg(long, conflicts_with_all = ["no_bench_blank", "reuse"])]
    pub bench_blank: bool,

    /// Measure blank drives by reads only (they cannot be recommended then).
    #[arg(long)]
    pub no_bench_blank: bool,
}

impl RecommendArgs {
    /// `--bench-blank` / `--no-bench-blank`: `None` when neither was given.
    pub fn bench_blank(&self) -> Option<bool> {
        match (self.bench_blank, self.no_bench_blank) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// The flags as the ranking takes them; which blank drives may be
    /// written is decided after the disks are read.
    pub fn rank_options(&self) -> crate::recommend::rank::RankOptions {
        crate::recommend::rank::RankOptions {
            quick: self.quick,
            runtime: self.runtime,
            size: self.size,
            reuse: self.reuse,
            fresh: self.fresh,
            max_age: self.max_age,
            all: self.all,
            raw_writes_allowed: Vec::new(),
            blank_declined: Vec::new(),
        }
    }
}

/// The help of a `--quick`: what it is, then how long it takes, from the
/// quick suite's definition.
fn quick_help(what: &str) -> String {
    format!("{what}: {}", SuiteTime::of(Preset::Quick).summary())
}

fn parse_hex_u32(text: &str) -> anyhow::Result<u32> {
    let digits = text.trim_start_matches("0x");
    u32::from_str_radix(digits, 16)
        .map_err(|_| anyhow::anyhow!("'{text}' is not 8 hex digits, like 6c586e13"))
}

impl Cli {
    /// This process's arguments, parsed; a usage error exits 2, as clap
    /// has it, and shows the usage of the command it is in, which clap
    /// leaves out of some (a bad value).
    pub fn parse_args() -> Cli {
        Cli::try_parse().unwrap_or_else(|err| with_usage(err, std::env::args_os()).exit())
    }
}

/// `err` with the usage of the subcommand `args` names (else the
/// top-level one) when clap left it out.
pub fn with_usage(
    mut err: clap::Error,
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    use clap::CommandFactory;
    // Help and --version are not errors; they print as they are.
    if !err.use_stderr() || err.get(ContextKind::Usage).is_some() {
        return err;
    }
    let mut command = Cli::command();
    command.build();
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    let named = args
        .into_iter()
        .skip(1)
        .find_map(|arg| names.iter().find(|name| arg == name.as_str()).cloned());
    let usage = match named.and_then(|name| command.find_subcommand_mut(&name)) {
        Some(sub) => sub.render_usage(),
        None => command.render_usage(),
    };
    err.insert(ContextKind::Usage, ContextValue::StyledStr(usage));
    err
}

/// A usage error of `pimigrate SUBCOMMAND` (exit 2, as clap's own), shown
/// with that command's usage line: for the rules that depend on more than
/// the flags (`migrate` needs `--target` unless it resumes; the wizard has
/// no JSON). `main` prints it as clap does.
pub fn usage_error(
    subcommand: &str,
    kind: clap::error::ErrorKind,
    message: impl std::fmt::Display,
) -> clap::Error {
    use clap::CommandFactory;
    let mut command = Cli::command();
    // Built, so a subcommand's usage says `pimigrate migrate`, not `migrate`.
    command.build();
    match command.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(kind, message),
        None => command.error(kind, message),
    }
}

impl PlanArgs {
    /// `--target`, which clap requires of `plan`, and of `migrate` unless
    /// it resumes (and then it plans nothing): else a usage error of
    /// `command`.
    pub fn required_target(&self, command: &str) -> Result<PathBuf, clap::Error> {
        self.target.clone().ok_or_else(|| {
            usage_error(
                command,
                clap::error::ErrorKind::MissingRequiredArgument,
                "--target <DEV> is required: the whole disk to move the system to",
            )
        })
    }

    /// The flags as the planner takes them; `command` (plan or migrate)
    /// is the one whose usage a missing `--target` shows.
    pub fn options(&self, command: &str) -> Result<Options, clap::Error> {
        Ok(Options {
            target: self.required_target(command)?,
            layout: self.layout,
            table: self.table,
            boot_size: self.boot_size,
            root_size: self.root_size,
            excludes: self.exclude.clone(),
            seed: self.seed,
            disk_signature: self.disk_signature,
            trial: self.trial.choice().unwrap_or(TrialChoice::Auto),
            checksum: self.checksum,
            boot_order: self.boot_order,
            handover: self.handover,
            auto_commit: self.auto_commit,
            trim: !self.after_move.no_trim,
            usb_quirk: self.after_move.usb_quirk,
            psu_max_current: self.after_move.psu_max_current,
        })
    }
}

impl WizardArgs {
    /// The flags as the wizard takes them: what they answer in advance.
    pub fn settings(&self) -> Settings {
        Settings {
            target: self.target.clone(),
            layout: self.layout,
            table: self.table,
            benchmarks: if self.no_bench {
                Benchmarks::Skip
            } else if self.quick {
                Benchmarks::Quick
            } else {
                Benchmarks::Ask
            },
            bench_blank: match (self.bench_blank, self.no_bench_blank) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            trial: self.trial.choice(),
            boot_order: self.boot_order,
            handover: self.handover,
            reboot: self.reboot.then_some(true),
            auto_commit: self.auto_commit,
            no_trim: self.after_move.no_trim,
            usb_quirk: self.after_move.usb_quirk.then_some(true),
            psu_max_current: self.after_move.psu_max_current,
            yes: self.yes,
            seed: self.seed,
        }
    }
}

// The domain's choices as clap sees them: their names and help live here,
// so `plan/` and `bench/` need nothing of clap.

fn value(name: &'static str, help: Option<&'static str>) -> Option<PossibleValue> {
    let value = PossibleValue::new(name);
    Some(match help {
        Some(help) => value.help(help),
        None => value,
    })
}

impl ValueEnum for Layout {
    fn value_variants<'a>() -> &'a [Self] {
        &[Layout::RootOnly, Layout::Full]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            Layout::RootOnly => value(
                "root-only",
                Some(
                    "Only the root filesystem moves; the SD card keeps the boot partition and \
                     must stay in. Works on every Pi",
                ),
            ),
            Layout::Full => value(
                "full",
                Some("Boot and root move; the Pi boots from the target without the SD card"),
            ),
        }
    }
}

impl ValueEnum for TableChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[TableChoice::Auto, TableChoice::Mbr, TableChoice::Gpt]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            TableChoice::Auto => value(
                "auto",
                Some(
                    "MBR unless the disk is over 2 TiB or needs GPT, and never a table the \
                     firmware cannot read in a full move",
                ),
            ),
            TableChoice::Mbr => value("mbr", None),
            TableChoice::Gpt => value("gpt", None),
        }
    }
}

impl ValueEnum for TrialChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            TrialChoice::Auto,
            TrialChoice::Always,
            TrialChoice::Never,
            TrialChoice::Device,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            TrialChoice::Auto => value(
                "auto",
                Some("When the firmware has tryboot (Pi 4, 400, CM4, Pi 5)"),
            ),
            TrialChoice::Always => value(
                "always",
                Some("Always (a firmware pimigrate cannot identify, such as the emulated Pi)"),
            ),
            TrialChoice::Never => value("never", Some("Never: change cmdline.txt directly")),
            TrialChoice::Device => value(
                "device",
                Some("A full move's one-shot boot of the new drive itself (Pi 4 bootloader 2024-05-17+, Pi 5 2025-01-14+)"),
            ),
        }
    }
}

impl ValueEnum for BootOrderChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[BootOrderChoice::Show, BootOrderChoice::Apply]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            BootOrderChoice::Show => value("show", Some("Show the changes as diffs; make none")),
            BootOrderChoice::Apply => value(
                "apply",
                Some("Make them through the system's rpi-eeprom-config (the old config is kept in the journal)"),
            ),
        }
    }
}

impl ValueEnum for HandoverChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            HandoverChoice::Auto,
            HandoverChoice::BootOrder,
            HandoverChoice::RemoveCard,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            HandoverChoice::Auto => value(
                "auto",
                Some("The boot order when --boot-order apply allows it, else taking the card out"),
            ),
            HandoverChoice::BootOrder => value(
                "boot-order",
                Some("BOOT_ORDER with the new drive first, the SD card as the fallback"),
            ),
            HandoverChoice::RemoveCard => value("remove-card", Some("Take the SD card out")),
        }
    }
}

impl ValueEnum for Preset {
    fn value_variants<'a>() -> &'a [Self] {
        &[Preset::Standard, Preset::Quick, Preset::A1]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            Preset::Standard => Some(PossibleValue::new("standard").help(format!(
                "SEQ1M Q8/Q1 and RND4K Q32/Q1, read and write: {}",
                SuiteTime::of(Preset::Standard).summary()
            ))),
            Preset::Quick => Some(PossibleValue::new("quick").help(format!(
                "The standard tests, shorter and on a smaller file: {}",
                SuiteTime::of(Preset::Quick).summary()
            ))),
            Preset::A1 => {
                let a1 = SuiteTime::of(Preset::A1);
                let random = SuiteParams::new(Preset::A1, None, None).runtime_seconds;
                Some(PossibleValue::new("a1").help(format!(
                    "Raspberry Pi's SD card test: a {} file written and read once in 4 MiB \
                     blocks and 4K random for {} each, at queue depth 32; graded A1/A2",
                    times::size(a1.file_size),
                    times::duration(random)
                )))
            }
        }
    }
}

impl ValueEnum for EngineKind {
    fn value_variants<'a>() -> &'a [Self] {
        &[EngineKind::IoUring, EngineKind::Threads]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            EngineKind::IoUring => value("io-uring", None),
            EngineKind::Threads => value("threads", None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// clap leaves the usage out of a bad value's error: it is put back,
    /// the usage of the command the value was given to.
    #[test]
    fn a_bad_values_error_shows_its_commands_usage() {
        let args = ["pimigrate", "-q", "plan", "--layout", "sideways"];
        let err = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = with_usage(err, args.map(Into::into)).to_string();
        assert!(text.contains("'sideways'"), "{text}");
        assert!(text.contains("Usage: pimigrate plan "), "{text}");
        // A missing argument's error has its usage already, once.
        let args = ["pimigrate", "plan"];
        let err = Cli::try_parse_from(args).unwrap_err();
        let text = with_usage(err, args.map(Into::into)).to_string();
        assert_eq!(text.matches("Usage:").count(), 1, "{text}");
        assert!(text.contains("--target <DEV>"), "{text}");
    }

    /// Made here for a rule clap cannot say: the subcommand's usage.
    #[test]
    fn a_usage_error_shows_the_subcommands_usage() {
        let err = usage_error(
            "wizard",
            clap::error::ErrorKind::ArgumentConflict,
            "--json cannot be used with the wizard",
        );
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("Usage: pimigrate wizard "), "{text}");
    }
}
