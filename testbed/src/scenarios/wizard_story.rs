//! The whole story, unattended, as `scripts/demo.sh` shows it: a Pi on an
//! `sd-a1` card with a USB flash drive and a USB SSD plugged in.
//!
//! 1. The wizard (`--yes --quick --trial`) benchmarks, recommends the SSD
//!    (the flash drive is warned against: slower than the SD card at random
//!    writes), plans, migrates, and the agent reboots with `"0 tryboot"`.
//! 2. The trial boot comes up on the SSD; `verify --commit` makes it
//!    permanent, and `verify` benchmarks the new root against the SD card's
//!    "before" report.
//! 3. A normal boot is on the SSD; `verify --json` passes and shows the SSD
//!    faster than the SD card at random 4K writes.
//!
//! The recommendation and the before/after table, as a person reads them,
//! are kept in the log folder (`recommendation.txt`, `before-after.txt`).

use super::{Lane, Scenario};
use crate::host::fat;
use crate::host::mbr::Partition;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS, ROOT_PARTUUID, TRIAL_SYSROOT};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Boot, Bus, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use serde_json::Value;
use std::fs;
use std::path::Path;

pub const NAME: &str = "wizard-story";

/// The random-write test both quick suites (bench and verify) run.
const RND_WRITE: &str = "RND4K Q32 write";

/// Boot 1. The flash drive is set up as a user's stick is: one ext4 with
/// files on it, mounted (a desktop auto-mounts it), so `recommend` measures
/// its writes with a test file there; unmounted, it would get read tests
/// only, and the warning that matters (slower random writes than the SD
/// card) could not be given. The SSD is new and blank, as a first-time
/// user's is: the wizard itself measures its writes on the raw device,
/// because `--yes --target` names it and it is about to be erased anyway
/// (no `bench --destructive` beforehand: that is the path being tested).
fn wizard_job() -> String {
    format!(
        r#"set -o pipefail
{flash}flash=$target
{ssd}ssd=$target
echo "flash=$flash"
echo "ssd=$ssd"
echo "== the flash drive as a user's: ext4 with files, mounted at /media/stick"
echo 'type=83' | sfdisk -q --wipe always "$flash"
udevadm settle
part=/dev/$(lsblk -lno NAME "$flash" | sed -n 2p)
mkfs.ext4 -q -F -L STICK "$part"
mkdir -p /media/stick
mount "$part" /media/stick
cp -r /etc/skel /media/stick/
echo "shopping list" > /media/stick/notes.txt
echo "== pimigrate wizard --yes --target $ssd --layout root-only --quick --trial"
pimigrate wizard --yes --target "$ssd" --layout root-only --quick --trial | tee "$TESTBED/out/wizard.txt"
{JOURNAL_FACTS}
echo "plan_trial_cmdline=$(jq -r '.plan.trial_boot.cmdline_file // ""' "$journal")"
echo "plan_tryboot=$(jq -r '.plan.trial_boot.tryboot_file // ""' "$journal")"
# The same ranking as JSON, from the reports the wizard saved (no new runs;
# --quick: only reports of the suite the wizard ran count as fresh).
pimigrate recommend --reuse --quick --json > "$TESTBED/out/recommend.json"
"#,
        flash = pimigrate_bin::find_disk("TB-FLASH"),
        ssd = pimigrate_bin::find_disk("TB-SSD"),
    )
}

/// Boot 2, the trial: commit through the `--sysroot` trick (the only way
/// the x86 guest can show the trial flag), then benchmark the running root
/// with a live `verify` (an inspected tree cannot be benchmarked). After the
/// commit the trial-boot check passes as "made permanent".
fn trial_job() -> String {
    format!(
        r#"set -o pipefail
{PROBE}{ROOT_PARTUUID}{TRIAL_SYSROOT}
echo "== pimigrate verify --commit (the trial flag through --sysroot)"
pimigrate verify --commit --no-bench --sysroot "$sysroot"
echo "== pimigrate verify --quick: the before/after benchmark"
pimigrate verify --quick | tee "$TESTBED/out/before-after.txt"
"#
    )
}

/// Boot 3, a normal boot after the commit.
fn normal_job() -> String {
    format!(
        r#"{PROBE}{ROOT_PARTUUID}
echo "== pimigrate verify --json --quick"
pimigrate verify --json --quick > "$TESTBED/out/verify.json"
"#
    )
}

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: NAME,
    lane: Lane::Speed,
    run,
    about: r#"the whole story, what `scripts/demo.sh` shows: SD card (`sd-a1`), USB flash (`usb-flash`, 4 GiB, a mounted ext4 with files, as a user's stick is) and a blank USB SSD (`usb-ssd`, 8 GiB, no table or filesystem, as a new one comes: the wizard measures its writes on the raw device itself, since `--yes --target` names it and it is erased anyway). Boot 1: `pimigrate wizard --yes --target <ssd> --layout root-only --quick --trial` benchmarks, recommends, plans, migrates; `recommend --reuse --json` on the reports it saved picks the SSD, warns `slower-random-writes` for the flash drive (not worth it), every drive with write figures (the SSD's from the raw device); `cmdline.txt` unchanged, `tryboot.txt` and the trial command line on the SD card; the agent reboots with `"0 tryboot"`. Boot 2 reads `tryboot.txt`: root is the SSD's partition 1 with the plan's PARTUUID; `verify --commit --sysroot` commits, then a live `verify --quick` prints the before/after table against the SD card's report (`before-after.txt`); from the host: `cmdline.txt` names the SSD, `cmdline.txt.pimigrate-backup` is the pristine one, the tryboot files are gone. Boot 3 reads `config.txt`: root on the SSD, `verify --json --quick` passes, sees the commit, and its RND4K Q32 write speed-up against the SD card's report is above 1. Kept in the log folder: `recommendation.txt` (the wizard's table and verdict), `before-after.txt`, `recommend.json`, `verify.json`, `wizard.txt`"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new(NAME, &images.bookworm)
        .timed()
        .sd_profile("sd-a1")
        .blank("flash", Bus::UsbStorage, 4 << 30, "usb-flash")
        .usb_ssd()
        .build()?;
    let pristine_cmdline =
        fat::read(&sd, &sd_boot, "cmdline.txt")?.context("the SD card has no cmdline.txt")?;

    step("boot 1/3: the wizard benchmarks the drives, recommends, plans and migrates (several minutes)");
    let plan = wizard_migrates(&mut pi, &sd, &sd_boot, &pristine_cmdline)?;
    step("boot 2/3: the trial boot on the SSD: verify --commit, then the before/after benchmark");
    trial_commits(&mut pi, &sd, &sd_boot, &plan, &pristine_cmdline)?;

    // Boot 3: a normal boot.
    step("boot 3/3: a normal boot: root on the SSD, verify --json with its benchmark");
    let normal = pi.run_past_emergency(&normal_job(), After::PowerOff)?;
    ensure!(
        normal.spec.config_file == "config.txt",
        "the boot after the commit read {}",
        normal.spec.config_file
    );
    let f = facts(&normal.job_ok()?.stdout);
    expect_fact(&f, "root", &format!("{}1", plan.ssd))?;
    expect_fact(&f, "root_partuuid", &plan.root_partuuid)?;
    check_verify(&pi, &normal)?;
    step(&format!(
        "the story passed; the recommendation and the before/after table are in {}",
        pi.logs.display()
    ));
    Ok(())
}

/// What the wizard planned: the SSD it moved to, the new root's PARTUUID
/// (lower case), and the trial boot's two files on the SD card.
struct WizardPlan {
    ssd: String,
    root_partuuid: String,
    trial_cmdline: String,
    tryboot: String,
}

/// Boot 1: the wizard recommends the SSD over the flash drive, migrates,
/// writes the trial's files (cmdline.txt untouched) and reboots into the
/// trial.
fn wizard_migrates(
    pi: &mut Pi,
    sd: &Path,
    sd_boot: &Partition,
    pristine_cmdline: &str,
) -> Result<WizardPlan> {
    let first = pi.run_past_emergency(&wizard_job(), After::Tryboot)?;
    let f = facts(&first.job_ok()?.stdout);
    ensure!(
        first.record.ending == Ending::TrybootReboot,
        "no trial reboot after the wizard: {:?}",
        first.record.ending
    );
    let ssd = fact(&f, "ssd")?;
    let flash = fact(&f, "flash")?;
    let plan = WizardPlan {
        root_partuuid: fact(&f, "plan_root_partuuid")?.to_lowercase(),
        trial_cmdline: f
            .get("plan_trial_cmdline")
            .filter(|v| !v.is_empty())
            .context("the wizard's plan has no trial boot")?
            .clone(),
        tryboot: fact(&f, "plan_tryboot")?,
        ssd,
    };
    check_recommendation(pi, &plan.ssd, &flash)?;
    keep_recommendation_text(pi)?;
    ensure!(
        fat::read(sd, sd_boot, "cmdline.txt")?.as_deref() == Some(pristine_cmdline),
        "the wizard changed cmdline.txt before the trial boot"
    );
    for file in [&plan.tryboot, &plan.trial_cmdline] {
        ensure!(
            fat::read(sd, sd_boot, file)?.is_some(),
            "the trial boot's {file} is not on the SD card"
        );
    }
    Ok(plan)
}

/// Boot 2: the trial, on the SSD; verify commits it and benchmarks. The
/// commit names the SSD's root in cmdline.txt, keeps the pristine one as
/// its backup, and leaves none of the trial's files behind.
fn trial_commits(
    pi: &mut Pi,
    sd: &Path,
    sd_boot: &Partition,
    plan: &WizardPlan,
    pristine_cmdline: &str,
) -> Result<()> {
    let trial = pi.run_past_emergency(&trial_job(), After::Reboot)?;
    ensure!(
        trial.spec.config_file == "tryboot.txt",
        "the boot after the wizard read {}, not tryboot.txt",
        trial.spec.config_file
    );
    let f = facts(&trial.job_ok()?.stdout);
    let root_partuuid = &plan.root_partuuid;
    expect_fact(&f, "root", &format!("{}1", plan.ssd))?;
    expect_fact(&f, "root_partuuid", root_partuuid)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    let table = keep(pi, "before-after.txt")?;
    ensure!(
        table.contains("Benchmark, before and after") && table.contains(RND_WRITE),
        "verify printed no before/after table with {RND_WRITE}:\n{table}"
    );
    let cmdline = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={root_partuuid} ")),
        "after the commit cmdline.txt does not name the SSD's {root_partuuid}: {cmdline:?}"
    );
    let backup = fat::read(sd, sd_boot, "cmdline.txt.pimigrate-backup")?
        .context("the commit left no cmdline.txt.pimigrate-backup")?;
    ensure!(
        backup == pristine_cmdline,
        "cmdline.txt.pimigrate-backup is not the pristine command line: {backup:?}"
    );
    // The commit writes a temporary file and renames it over cmdline.txt.
    let temporary = "cmdline.txt.pimigrate-new";
    for file in [plan.tryboot.as_str(), &plan.trial_cmdline, temporary] {
        ensure!(
            fat::read(sd, sd_boot, file)?.is_none(),
            "{file} is still on the SD card after the commit"
        );
    }
    Ok(())
}

/// What the scenario is doing now, for the console (and the demo).
fn step(what: &str) {
    eprintln!("testbed: {NAME}: {what}");
}

/// Copies `out/<name>` of the last boot into the log folder; its text.
fn keep(pi: &Pi, name: &str) -> Result<String> {
    let from = pi.share().dir.join("out").join(name);
    let text = fs::read_to_string(&from)
        .with_context(|| format!("the guest left no {}", from.display()))?;
    let to = pi.logs.join(name);
    fs::write(&to, &text).with_context(|| format!("cannot write {}", to.display()))?;
    Ok(text)
}

fn read_json(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// The ranking from the wizard's reports: the SSD picked, the flash drive
/// measured with writes and warned against.
fn check_recommendation(pi: &Pi, ssd: &str, flash: &str) -> Result<()> {
    keep(pi, "recommend.json")?;
    let doc = read_json(&pi.logs.join("recommend.json"))?;
    let entry = pimigrate_bin::check_ssd_over_flash(&doc, ssd, flash)?;
    // Both USB drives were judged on measured writes, not read tests only.
    for (what, e) in [
        ("flash drive", entry),
        ("current root", &doc["current_root"]),
    ] {
        ensure!(
            e["figures"]["rnd4k_q32_write_iops"].as_f64().is_some(),
            "the {what} has no random-write figure: {}",
            e["figures"]
        );
    }
    let ssd_entry = doc["ranking"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["path"].as_str() == Some(ssd)))
        .context("the SSD is not ranked")?;
    ensure!(
        ssd_entry["figures"]["rnd4k_q32_write_iops"]
            .as_f64()
            .is_some(),
        "the SSD has no random-write figure: {}",
        ssd_entry["figures"]
    );
    // Measured by the wizard on the raw device: it was blank, and nothing
    // else measured it before.
    ensure!(
        ssd_entry["report"]["target"].as_str() == Some(ssd)
            && ssd_entry["report"]["writes"] == true,
        "the SSD's writes were not measured on the raw device: {}",
        ssd_entry["report"]
    );
    Ok(())
}

/// The wizard's comparison table and its verdict in plain words, as shown.
fn keep_recommendation_text(pi: &Pi) -> Result<()> {
    let wizard = keep(pi, "wizard.txt")?;
    let lines: Vec<&str> = wizard.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("Measuring random 4K"))
        .context("the wizard's output has no benchmark step")?;
    let end = lines[start..]
        .iter()
        .position(|l| l.starts_with("In plain words:"))
        .map(|i| start + i)
        .context("the wizard printed no recommendation in plain words")?;
    // The verdict's line of explanation, for a reader of the log folder.
    let end = match lines.get(end + 1) {
        Some(next) if next.starts_with("(Random 4K") => end + 1,
        _ => end,
    };
    let text = lines[start..=end].join("\n") + "\n";
    let path = pi.logs.join("recommendation.txt");
    fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `verify --json` of the normal boot: passed, committed, and the SSD
/// faster than the SD card's "before" report at random 4K writes.
fn check_verify(pi: &Pi, boot: &Boot) -> Result<()> {
    keep(pi, "verify.json")?;
    let v = read_json(&pi.logs.join("verify.json"))?;
    ensure!(
        v["result"] == "pass",
        "verify --json says {}: {}",
        v["result"],
        v["checks"]
    );
    ensure!(
        v["trial_boot"]["committed_at"].is_string(),
        "verify does not see the trial as committed: {}",
        v["trial_boot"]
    );
    let bench = &v["benchmark"];
    let before = bench["before"]["device"].as_str().unwrap_or_default();
    ensure!(
        before.starts_with("/dev/mmcblk0"),
        "the before report is not the SD card's: {}",
        bench["before"]
    );
    let row = bench["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["test"] == RND_WRITE))
        .with_context(|| {
            format!(
                "verify compared no {RND_WRITE} (boot {}): {bench}",
                boot.number
            )
        })?;
    let speedup = row["speedup"]
        .as_f64()
        .with_context(|| format!("no speed-up for {RND_WRITE}: {row}"))?;
    ensure!(
        speedup > 1.0,
        "the SSD is not faster than the SD card at {RND_WRITE}: {row}"
    );
    Ok(())
}
