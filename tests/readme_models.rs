//! README's table "Which Pi, which move" against the planner. Every Pi a
//! row names is planned on a fixture machine set up as the table assumes
//! (an up-to-date bootloader, rpi-eeprom and raspi-utils installed, a Pi 5
//! that flashes its EEPROM with flashrom, its NVMe drive on a HAT+), and
//! the row's trial boot, reboots and SD card are what that plan does, and
//! what keeps happening afterwards is the daily check and TRIM for every
//! move that is made; the notes under the table are checked on machines
//! set up as they say. Every line of the table fits an 80-column terminal.

use crate::common;
use crate::full_move_fixture::{
    pi4, pi5, Machine, OLD_BOOTLOADER, PI4_CONFIG, PI4_IMAGE, PI5_CONFIG,
};

use common::*;
use serde_json::Value;
use std::path::Path;

const HEADER: &str = "| Pi | move | trial boot | reboots | SD card after | afterwards |";

/// A row of the table, its cells as written.
#[derive(Debug)]
struct Row {
    line: String,
    pis: Vec<String>,
    mov: String,
    trial: String,
    reboots: String,
    card: String,
    afterwards: String,
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The table's lines, from its header to the first line that is not a row.
fn table_lines(readme: &str) -> Vec<&str> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == HEADER)
        .unwrap_or_else(|| panic!("README has no table headed {HEADER}"));
    lines[start..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .copied()
        .collect()
}

fn rows(readme: &str) -> Vec<Row> {
    table_lines(readme)
        .into_iter()
        .skip(2)
        .map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            assert_eq!(cells.len(), 6, "{line}");
            Row {
                line: line.to_string(),
                pis: cells[0].split(", ").map(str::to_string).collect(),
                mov: cells[1].clone(),
                trial: cells[2].clone(),
                reboots: cells[3].clone(),
                card: cells[4].clone(),
                afterwards: cells[5].clone(),
            }
        })
        .collect()
}

/// A Pi 5 as the table assumes it: [`pi5`], its NVMe drive on a HAT+.
fn pi5_hat() -> Machine {
    let machine = pi5();
    std::fs::create_dir_all(machine.path("/proc/device-tree/hat")).unwrap();
    machine.file("/proc/device-tree/hat/product", "M.2 HAT+\0")
}

fn model(machine: Machine, model: &str) -> Machine {
    machine.file("/proc/device-tree/model", &format!("{model}\0"))
}

/// The machine a Pi the table names is planned on, and its drive.
fn machine(pi: &str) -> (Machine, &'static str) {
    let pi4_as = |m: &str| (model(pi4(), m), "/dev/sda");
    let pi5_as = |m: &str| (model(pi5_hat(), m), "/dev/nvme0n1");
    let zero_as = |m: &str| (model(Machine::copy_of("pizero"), m), "/dev/sda");
    let pi3_as = |m: &str| (model(Machine::copy_of("pi3b"), m), "/dev/sda");
    match pi {
        "4" => pi4_as("Raspberry Pi 4 Model B Rev 1.4"),
        "400" => pi4_as("Raspberry Pi 400 Rev 1.0"),
        "CM4" => pi4_as("Raspberry Pi Compute Module 4 Rev 1.0"),
        "5" => pi5_as("Raspberry Pi 5 Model B Rev 1.0"),
        "500" => pi5_as("Raspberry Pi 500 Rev 1.0"),
        "CM5" => pi5_as("Raspberry Pi Compute Module 5 Rev 1.0"),
        "1" => zero_as("Raspberry Pi Model B Plus Rev 1.2"),
        "2" => zero_as("Raspberry Pi 2 Model B Rev 1.1"),
        "Zero" => zero_as("Raspberry Pi Zero W Rev 1.1"),
        "Zero 2 W" => zero_as("Raspberry Pi Zero 2 W Rev 1.0"),
        "3" | "3B" => pi3_as("Raspberry Pi 3 Model B Rev 1.2"),
        "3B+" => pi3_as("Raspberry Pi 3 Model B Plus Rev 1.3"),
        other => panic!("README's table names a Pi this test does not know: {other:?}"),
    }
}

/// The plan's arguments for a row's "move".
fn move_args(mov: &str) -> Vec<&'static str> {
    match mov {
        "root only" => vec!["--layout", "root-only"],
        "full" => vec!["--layout", "full"],
        "full, `--boot-order apply`" => vec!["--layout", "full", "--boot-order", "apply"],
        other => panic!("README's table has a move this test does not know: {other:?}"),
    }
}

/// What the table says of a plan: the trial boot, the reboots and the SD
/// card after the move, from what the plan does.
#[derive(Debug, PartialEq)]
struct Facts {
    trial: &'static str,
    reboots: u32,
    card: &'static str,
}

/// The reboots (and power cycles) a plan takes, as migrate.md's "The
/// reboots, Pi by Pi" counts them: the trial's, or the one after a move
/// without a trial; one more before the trial where the migration's
/// change to the bootloader's config is staged for recovery.bin; and after
/// the commit, the power cycle without the card, or the reboot that
/// starts the new drive where the trial did not (the SD card's kernel), or
/// where the hand-over's change is staged.
fn facts(plan: &Value) -> Facts {
    let full = plan["layout"] == "full";
    let trial = !plan["trial_boot"].is_null();
    let b = &plan["bootloader"];
    let device = b["trial"] == "device";
    let staged = b["consent"] == true && b["takes_effect"] == "next-reboot";
    let boot_order = b["handover"] == "boot-order";
    let mut reboots = 1;
    if full && trial {
        if device && staged && !b["at_migrate"].is_null() {
            reboots += 1;
        }
        let commit_staged = staged && !b["at_commit"].is_null();
        reboots += match boot_order {
            true => u32::from(!device || commit_staged),
            // A staged change (a Pi 4's trial order taken out) is written
            // at a reboot with the card still in, before it comes out.
            false => 1 + u32::from(commit_staged),
        };
    }
    Facts {
        trial: match (trial, full, device) {
            (false, _, _) => "none",
            (true, true, true) => "new drive",
            (true, _, _) => "new root",
        },
        reboots,
        card: match (full, boot_order) {
            (false, _) => "stays in",
            (true, true) => "fallback",
            (true, false) => "out",
        },
    }
}

fn planned(machine: &Machine, target: &str, args: &[&str]) -> Result<Value, Vec<String>> {
    let mut all = vec!["plan", "--json", "--seed", "42", "--target", target];
    all.extend_from_slice(args);
    let output = machine.run(&all);
    let value = json(&output);
    match exit_code(&output) {
        0 => Ok(value),
        3 => Err(value["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_string())
            .collect()),
        code => panic!("plan exited {code}: {}", stderr(&output)),
    }
}

fn facts_of(machine: &Machine, target: &str, args: &[&str]) -> Facts {
    let plan = planned(machine, target, args)
        .unwrap_or_else(|codes| panic!("refused ({codes:?}) with {args:?}"));
    facts(&plan)
}

#[test]
fn every_row_is_what_the_planner_does_on_each_pi_it_names() {
    let readme = readme();
    let rows = rows(&readme);
    assert!(rows.len() >= 6, "{rows:#?}");
    let mut wrong = Vec::new();
    for row in &rows {
        for pi in &row.pis {
            let (machine, target) = machine(pi);
            let args = move_args(&row.mov);
            let result = planned(&machine, target, &args);
            if row.trial == "refused" {
                match result {
                    Err(codes) if codes == ["compute-module-bootloader"] => {}
                    other => wrong.push(format!(
                        "Pi {pi}, {}: README says refused (compute-module-bootloader), the planner: {other:?}",
                        row.mov
                    )),
                }
                assert!(
                    row.reboots.is_empty() && row.card.is_empty() && row.afterwards.is_empty(),
                    "{}",
                    row.line
                );
                continue;
            }
            // Every move that is made: the daily check after it (its
            // timer ships enabled) and the system's weekly fstrim.timer.
            if row.afterwards != "check, TRIM" {
                wrong.push(format!(
                    "Pi {pi}, {}: README says {:?} happens afterwards, not the check and TRIM",
                    row.mov, row.afterwards
                ));
            }
            let facts = match result {
                Ok(plan) => facts(&plan),
                Err(codes) => {
                    wrong.push(format!("Pi {pi}, {}: refused ({codes:?})", row.mov));
                    continue;
                }
            };
            let said = Facts {
                trial: match row.trial.as_str() {
                    "none" => "none",
                    "new root" => "new root",
                    "new drive" => "new drive",
                    other => panic!("a trial boot this test does not know: {other:?}"),
                },
                reboots: row
                    .reboots
                    .parse()
                    .unwrap_or_else(|_| panic!("{}", row.line)),
                card: match row.card.as_str() {
                    "stays in" => "stays in",
                    "fallback" => "fallback",
                    "out" => "out",
                    other => panic!("an SD card this test does not know: {other:?}"),
                },
            };
            if facts != said {
                wrong.push(format!(
                    "Pi {pi}, {}: README says {said:?}, the planner does {facts:?}",
                    row.mov
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_table_fits_an_80_column_terminal() {
    let readme = readme();
    for line in table_lines(&readme) {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

/// The note under the table that holds `key`.
fn note(readme: &str, key: &str) -> String {
    let start = readme.find(HEADER).unwrap();
    readme[start..]
        .split("\n- ")
        .find(|n| n.contains(key))
        .unwrap_or_else(|| panic!("no note under the table says {key:?}"))
        .split("\n\n")
        .next()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_notes_under_the_table_are_what_the_planner_does() {
    let readme = readme();
    let apply = ["--layout", "full", "--boot-order", "apply"];
    let show = ["--layout", "full"];
    // Bootloaders older than a one-shot boot of the new drive: a trial
    // with the SD card's kernel.
    let note_dates = note(&readme, "2024-05-17");
    assert!(note_dates.contains("2025-01-14") && note_dates.contains("vcmailbox"));
    let old_pi4 = Machine::copy_of("pi4")
        .bootloader_built(OLD_BOOTLOADER)
        .eeprom(PI4_CONFIG)
        .release(PI4_IMAGE);
    assert_eq!(facts_of(&old_pi4, "/dev/sda", &apply).trial, "new root");
    let old_pi5 = pi5_hat().bootloader_built(OLD_BOOTLOADER);
    assert_eq!(facts_of(&old_pi5, "/dev/nvme0n1", &apply).trial, "new root");
    let no_mailbox = pi5_hat();
    std::fs::remove_file(no_mailbox.tools.path().join("vcmailbox")).unwrap();
    assert_eq!(
        facts_of(&no_mailbox, "/dev/nvme0n1", &show).trial,
        "new root"
    );
    // A Pi 5's NVMe drive without a HAT+: the SD card's kernel unless
    // --boot-order apply sets PCIE_PROBE=1, or it is set already.
    assert!(note_dates.contains("HAT+") && note_dates.contains("PCIE_PROBE=1"));
    assert_eq!(facts_of(&pi5(), "/dev/nvme0n1", &show).trial, "new root");
    assert_eq!(facts_of(&pi5(), "/dev/nvme0n1", &apply).trial, "new drive");
    let probed = pi5().eeprom(&format!("{PI5_CONFIG}PCIE_PROBE=1\n"));
    assert_eq!(facts_of(&probed, "/dev/nvme0n1", &show).trial, "new drive");
    // A Pi 5 whose rpi-eeprom-update stages its changes (no flashrom).
    let staged = note(&readme, "flashrom");
    let without_flashrom = |machine: Machine| {
        std::fs::remove_file(machine.tools.path().join("flashrom")).unwrap();
        machine
    };
    let hat = facts_of(&without_flashrom(pi5_hat()), "/dev/nvme0n1", &apply);
    let bare = facts_of(&without_flashrom(pi5()), "/dev/nvme0n1", &apply);
    assert_eq!((hat.trial, bare.trial), ("new drive", "new drive"));
    assert!(
        staged.contains(&format!("takes {} reboots", hat.reboots))
            && staged.contains(&format!(
                "{} for an NVMe drive on an adapter that is not a HAT+",
                bare.reboots
            )),
        "README: {staged}\nthe planner: {} reboots, {} without a HAT+",
        hat.reboots,
        bare.reboots
    );
    // A Pi 1, 2, Zero or Zero 2 W cannot boot from USB: a full move is
    // refused; a 3B boots from USB only after its OTP setting (a warning).
    assert!(note(&readme, "OTP").contains("only root moves there"));
    for pi in ["1", "2", "Zero", "Zero 2 W"] {
        let (machine, target) = machine(pi);
        assert_eq!(
            planned(&machine, target, &show).unwrap_err(),
            ["transport-not-bootable"],
            "Pi {pi}"
        );
    }
    let (pi3b, target) = machine("3B");
    let plan = planned(&pi3b, target, &show).unwrap();
    assert!(
        plan["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("program_usb_boot_mode=1")),
        "{:#}",
        plan["warnings"]
    );
}

/// The note on what happens afterwards names the timers that do it, and
/// the daily check's timer ships enabled.
#[test]
fn the_note_on_what_happens_afterwards_names_its_timers() {
    let readme = readme();
    let afterwards = note(&readme, "**Afterwards**");
    for said in [
        "pimigrate-check.timer",
        "fstrim.timer",
        "sync --install-timer",
        "after-the-move.md",
    ] {
        assert!(afterwards.contains(said), "{said}: {afterwards}");
    }
    assert!(pimigrate::status::timer::timer_unit().contains("\nWantedBy=timers.target\n"));
    let postinst = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deb/postinst"),
    )
    .unwrap();
    assert!(postinst.contains("deb-systemd-helper enable pimigrate-check.timer"));
}
