//! The blank-drive question of `recommend` (and the wizard) on real loop
//! devices: a blank one gets its writes measured only after a yes, and one
//! with any signature, ours or blkid's, is never written, yes or not.
//! Needs root, losetup, mkfs.ext4 and blkid.
//!
//! The ranking runs through the library on this machine's system reduced
//! to the running root and the test's own loop devices: other loop devices
//! (other tests', running beside these) must never be asked about, let
//! alone written.

use crate::common;

use common::*;
use pimigrate::host::Host;
use pimigrate::recommend::blank::{blank_candidates, decide};
use pimigrate::recommend::rank::{rank_drives, RankOptions, Shown};
use pimigrate::recommend::Recommendation;
use pimigrate::system::disks::Role;
use pimigrate::system::System;
use pimigrate::ui::{Answer, ScriptedUi, Ui};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Larger than this machine's used space, so the planner would take it;
/// sparse, so only what is written takes room.
const SIZE: u64 = 1 << 40;

fn prerequisites() -> bool {
    if !require_root("recommend on blank loop devices") {
        return false;
    }
    for tool in ["losetup", "mkfs.ext4", "blkid"] {
        let found = pimigrate::tools::which(tool).is_some();
        assert!(
            found || std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is needed, and CI must have it"
        );
        if !found {
            eprintln!("skipping: no {tool}");
            return false;
        }
    }
    true
}

/// What a write anywhere would change: the blocks the sparse image holds,
/// and the bytes where the benchmark's writes go (its start).
#[derive(Debug, PartialEq, Eq)]
struct Imprint {
    blocks: u64,
    head: Vec<u8>,
}

fn imprint(image: &Path) -> Imprint {
    // What the loop device wrote may still be in the page cache.
    nix::unistd::sync();
    let mut head = vec![0; 32 << 20];
    std::fs::File::open(image)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    Imprint {
        blocks: std::fs::metadata(image).unwrap().blocks(),
        head,
    }
}

/// A copy of this machine's system with only the running root and `ours`.
fn system_with(host: &Host, ours: &[&LoopDisk]) -> System {
    let mut system = System::inspect(host).expect("reading this machine");
    system.disks.retain(|d| {
        d.role == Role::SourceRoot || ours.iter().any(|l| d.path == Path::new(l.path()))
    });
    assert_eq!(
        system.disks.len(),
        ours.len() + 1,
        "the root and the test's disks: {:?}",
        system.disks.iter().map(|d| &d.path).collect::<Vec<_>>()
    );
    system
}

/// recommend's own steps: the blank drives, the question (answered by
/// `ui`, or by `flag`), the ranking with the shortest benchmarks.
fn recommend(system: &System, host: &Host, flag: Option<bool>, ui: &ScriptedUi) -> Recommendation {
    let blank = blank_candidates(&system.disks, true, true);
    let decision = decide(&blank, flag, Some(ui as &dyn Ui)).unwrap();
    let options = RankOptions {
        quick: true,
        runtime: Some(0.2),
        size: Some(16 << 20),
        reuse: false,
        fresh: true,
        max_age: 30,
        all: true,
        raw_writes_allowed: decision.allowed,
        blank_declined: decision.declined,
    };
    let shown = Shown {
        chatty: false,
        progress_bars: false,
    };
    rank_drives(system, &options, host, shown, &AtomicBool::new(false))
        .expect("ranking")
        .expect("not interrupted")
}

/// The root's test file is named after the process: two rankings in this
/// one test process at once would collide on it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn host(state: &Path) -> Host {
    let mut host = Host::live();
    host.state_dir = state.to_path_buf();
    host
}

fn report_of<'a>(
    rec: &'a Recommendation,
    device: &str,
) -> Option<&'a pimigrate::recommend::ReportRef> {
    rec.ranking
        .iter()
        .find(|e| e.path == Path::new(device))
        .unwrap_or_else(|| panic!("{device} not ranked: {rec:#?}"))
        .report
        .as_ref()
}

#[test]
fn a_blank_drive_is_written_only_after_a_yes() {
    if !prerequisites() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let state = tempfile::tempdir().unwrap();
    let host = host(state.path());
    let blank = LoopDisk::new(SIZE);
    let system = system_with(&host, &[&blank]);
    let before = imprint(&blank.image);

    // No: read tests only, not a byte written, and the table says how to
    // measure the writes.
    let no = ScriptedUi::new([Answer::No]);
    let rec = recommend(&system, &host, None, &no);
    let asked = no
        .prompt_containing("Measure the writes of the blank drive(s)")
        .expect("the blank-drive question was not asked");
    assert!(asked.prompt.contains(blank.path()), "{}", asked.prompt);
    assert_eq!(imprint(&blank.image), before, "written without a yes");
    assert!(!report_of(&rec, blank.path()).unwrap().writes);
    assert_eq!(rec.blank_unmeasured, [Path::new(blank.path())]);
    let hint = pimigrate::recommend::render::blank_hint(&rec, "pimigrate recommend --bench-blank")
        .expect("no hint after a no");
    assert!(
        hint.contains(blank.path()) && hint.ends_with("type: pimigrate recommend --bench-blank")
    );

    // Yes: its writes are measured on the device itself.
    let yes = ScriptedUi::new([Answer::Yes]);
    let rec = recommend(&system, &host, None, &yes);
    let report = report_of(&rec, blank.path()).unwrap();
    assert!(report.writes, "the writes were not measured: {report:?}");
    let entry = rec
        .ranking
        .iter()
        .find(|e| e.path == Path::new(blank.path()))
        .unwrap();
    assert!(
        entry.figures.is_some_and(|f| f.has_random_writes()),
        "{entry:#?}"
    );
    assert!(rec.blank_unmeasured.is_empty());
    assert_ne!(imprint(&blank.image), before, "a yes, and nothing written");
    let saved = std::fs::read_dir(state.path().join("reports"))
        .unwrap()
        .count();
    assert!(saved >= 2, "the reports are kept for the next run");
}

#[test]
fn a_drive_with_any_signature_is_never_written_even_with_bench_blank() {
    if !prerequisites() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let state = tempfile::tempdir().unwrap();
    let host = host(state.path());
    // ext4, which pimigrate's own probe reads.
    let ext4 = LoopDisk::with(
        SIZE,
        |image| {
            let status = std::process::Command::new("mkfs.ext4")
                .args(["-q", "-F"])
                .arg(image)
                .status()
                .unwrap();
            assert!(status.success());
        },
        false,
    );
    // A LUKS header, which only blkid (and wipefs) know.
    let luks = LoopDisk::with(
        SIZE,
        |image| {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new().write(true).open(image).unwrap();
            file.write_all(b"LUKS\xba\xbe\x00\x01").unwrap();
        },
        false,
    );
    let system = system_with(&host, &[&ext4, &luks]);
    let luks_disk = system
        .disks
        .iter()
        .find(|d| d.path == Path::new(luks.path()))
        .unwrap();
    assert!(
        pimigrate::recommend::blank::looks_blank(luks_disk),
        "this test wants a signature only blkid sees"
    );
    let before = (imprint(&ext4.image), imprint(&luks.image));
    let ui = ScriptedUi::new([]);
    let rec = recommend(&system, &host, Some(true), &ui);
    assert!(
        ui.asked().is_empty(),
        "nothing to ask about: {:?}",
        ui.asked()
    );
    assert_eq!(
        (imprint(&ext4.image), imprint(&luks.image)),
        before,
        "a drive with a signature was written"
    );
    for disk in [&ext4, &luks] {
        assert!(!report_of(&rec, disk.path()).unwrap().writes);
    }
    assert!(rec.blank_unmeasured.is_empty(), "neither is blank");
}
