//! The blocks of README.md and docs/ that the code writes (`cargo xtask
//! write-docs`) are what it writes now: a figure in them cannot drift
//! from the code that fixes it.

use xtask::{docgen, repo};

#[test]
fn every_generated_block_is_what_the_code_writes() {
    let blocks = docgen::blocks(repo()).unwrap();
    assert!(blocks.len() >= 4, "{} blocks", blocks.len());
    for block in blocks {
        let path = repo().join(block.file);
        let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", block.file));
        let now =
            docgen::current(&doc, block.name).unwrap_or_else(|e| panic!("{}: {e:#}", block.file));
        assert_eq!(
            now, block.text,
            "{}'s block {} is not what the code writes: run `cargo xtask write-docs`",
            block.file, block.name
        );
    }
}

/// write-docs rewrites a block that is out of date, and then none.
#[test]
fn write_docs_rewrites_a_stale_block_once() {
    // On a copy of the pages, so the check does not touch the checkout.
    let copy = tempfile::tempdir().unwrap();
    for block in docgen::blocks(repo()).unwrap() {
        let to = copy.path().join(block.file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(block.file), &to).unwrap();
    }
    let times = copy.path().join("docs/testbed/times.md");
    std::fs::create_dir_all(times.parent().unwrap()).unwrap();
    std::fs::copy(repo().join("docs/testbed/times.md"), &times).unwrap();
    let readme = copy.path().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    std::fs::write(&readme, docgen::splice(&text, "times", "stale\n").unwrap()).unwrap();
    let rewritten = docgen::write_all(copy.path()).unwrap();
    assert!(
        rewritten.contains(&"README.md: times".to_string()),
        "{rewritten:?}"
    );
    assert_ne!(
        docgen::current(&std::fs::read_to_string(&readme).unwrap(), "times").unwrap(),
        "stale\n"
    );
    assert_eq!(
        docgen::write_all(copy.path()).unwrap(),
        Vec::<String>::new()
    );
}

/// docs/plan.md's example is a trial the plan bounds end to end: the
/// machine it runs on keeps giving the kernel version, the initramfs and
/// the bootloader the page explains, and its figures are the guard's.
#[test]
fn the_example_plan_shows_a_bounded_trial() {
    use pimigrate::plan::trial_guard;
    let plan =
        xtask::plan_example::run(repo(), &xtask::plan_example::build(repo()).unwrap()).unwrap();
    let trial = plan.section("Trial boot").unwrap();
    for needle in [
        format!(
            "rootwait={}: Linux 6.12.25+rpt-rpi-v8",
            trial_guard::TRIAL_ROOT_WAIT_SECONDS
        ),
        format!(
            "within {} s (JobTimeoutSec=",
            trial_guard::TRIAL_BOOT_DEADLINE_SECONDS
        ),
        "the initramfs waits for the root device".to_string(),
        "s of the trial reboot, end to end".to_string(),
    ] {
        assert!(trial.contains(&needle), "{needle:?} missing from:\n{trial}");
    }
    assert!(!trial.contains("Not bounded"), "{trial}");
    let bootloader = plan.section("Bootloader").unwrap();
    assert!(bootloader.contains(
        "built on /usr/lib/firmware/raspberrypi/bootloader-2711/default/pieeprom-2026-05-17.bin"
    ));
    assert!(plan
        .section("After the move")
        .unwrap()
        .contains("fstrim.timer is enabled here"));
}
