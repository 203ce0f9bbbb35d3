//! TRIM on this machine's real block devices: ext4 on a loop device over a
//! sparse image file, where the loop driver turns each discard into a hole
//! punched in the file, so the file's allocated blocks show what reached
//! the "disk". Needs root.

use crate::common;

use common::*;
use pimigrate::host::Host;
use pimigrate::system::disks::Transport;
use pimigrate::system::trim::decision::{decide, TrimDecision};
use pimigrate::system::trim::fitrim::trim_mounted;
use pimigrate::system::trim::sgio::{inquiry_vpd, InquiryError};
use pimigrate::system::trim::{Inquiry, TrimFacts, Vpd};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

/// A filesystem mounted for the test; unmounted on drop.
struct Mounted {
    dir: tempfile::TempDir,
}

impl Mounted {
    fn new(device: &str) -> Mounted {
        let dir = tempfile::Builder::new()
            .prefix("pimigrate-trim-test")
            .tempdir_in("/var/tmp")
            .unwrap();
        tool_output("mount", &[device, dir.path().to_str().unwrap()]);
        Mounted { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Bytes the file really takes on the disk under it.
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn sync_fs(path: &Path) {
    tool_output("sync", &["-f", path.to_str().unwrap()]);
}

#[test]
fn fitrim_gives_the_blocks_of_deleted_files_back_to_the_disk() {
    if !require_root("FITRIM on a loop device") {
        return;
    }
    let disk = LoopDisk::new(256 * MIB);
    // No discard at mkfs: whatever is freed below is FITRIM's doing.
    tool_output("mkfs.ext4", &["-q", "-F", "-E", "nodiscard", disk.path()]);
    let mounted = Mounted::new(disk.path());
    let data = mounted.path().join("data");
    let mut file = std::fs::File::create(&data).unwrap();
    let chunk: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8 + 1).collect();
    for _ in 0..96 {
        file.write_all(&chunk).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    sync_fs(mounted.path());
    let before = allocated(&disk.image);
    assert!(before >= 96 * MIB, "the data is in the image: {before}");
    std::fs::remove_file(&data).unwrap();
    // The blocks are free once the journal has committed the deletion.
    sync_fs(mounted.path());
    let trimmed = trim_mounted(mounted.path(), Transport::Virtual).unwrap();
    let after = allocated(&disk.image);
    assert!(trimmed >= 96 * MIB, "FITRIM reported {trimmed} bytes");
    assert!(
        before - after >= 90 * MIB,
        "the image kept its blocks: {before} before, {after} after"
    );
    // What verify would refuse: the same call for an SD card.
    assert!(trim_mounted(mounted.path(), Transport::Mmc).is_err());
}

#[test]
fn a_loop_disks_facts_say_trim_is_on_and_it_is_no_scsi_disk() {
    if !require_root("TRIM facts of a loop device") {
        return;
    }
    let disk = LoopDisk::new(64 * MIB);
    let host = Host::live();
    let system = pimigrate::system::System::inspect(&host).unwrap();
    let loop_disk = system
        .disks
        .iter()
        .find(|d| d.path == Path::new(disk.path()))
        .expect("the loop device is listed");
    let facts = TrimFacts::read(&host, loop_disk, Inquiry::WhenIdle);
    assert_eq!(facts.vpd, Vpd::NotScsi);
    assert!(
        matches!(decide(&facts), TrimDecision::AlreadyOn { discard_max_bytes } if discard_max_bytes > 0),
        "{facts:?}"
    );
    // SG_IO is a SCSI disk's: a loop device answers that it is none.
    let err = inquiry_vpd(Path::new(disk.path()), 0x00).unwrap_err();
    assert!(matches!(err, InquiryError::NotScsi { .. }), "{err:?}");
}

#[test]
fn the_migrations_trim_step_writes_the_rule_and_enables_the_timer_on_real_ext4() {
    use pimigrate::plan::after_move::TrimPlan;
    use pimigrate::system::trim::rule::TrimRule;
    use pimigrate::system::trim::timer::FstrimTimer;
    use std::os::unix::fs::PermissionsExt;
    if !require_root("the TRIM step on a mounted ext4 loop device") {
        return;
    }
    let disk = LoopDisk::new(64 * MIB);
    tool_output("mkfs.ext4", &["-q", "-F", disk.path()]);
    let mounted = Mounted::new(disk.path());
    let root = mounted.path();
    // A new root as the copy leaves it: bookworm's merged /usr, the timer
    // installed but not enabled.
    std::fs::create_dir_all(root.join("usr/lib/systemd/system")).unwrap();
    std::fs::write(
        root.join("usr/lib/systemd/system/fstrim.timer"),
        "[Timer]\nOnCalendar=weekly\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
    std::fs::create_dir_all(root.join("etc/udev/rules.d")).unwrap();
    let timer = FstrimTimer::of_root(root);
    let rule = TrimRule {
        vendor_id: "46f4".into(),
        product_id: "0001".into(),
        discard_max_bytes: 1 << 30,
        max_unmap_lba_count: 2_097_152,
        logical_block_size: 512,
    };
    let plan = TrimPlan {
        rule: Some(pimigrate::plan::after_move::trim::NewFile {
            path: rule.path(),
            text: rule.text(),
            diff: String::new(),
        }),
        timer_link: timer.enable_link(),
        timer,
        ..TrimPlan::default()
    };
    let done = pimigrate::apply::trim_setup::install(&plan, root).unwrap();
    assert_eq!(done.len(), 2, "{done:?}");
    let written = root.join("etc/udev/rules.d/60-pimigrate-trim-46f4-0001.rules");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), rule.text());
    let mode = std::fs::metadata(&written).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "udev reads it; only root writes it");
    assert_eq!(FstrimTimer::of_root(root), FstrimTimer::Enabled);
    // A resume does it again, to the same end.
    pimigrate::apply::trim_setup::install(&plan, root).unwrap();
    assert_eq!(std::fs::read_to_string(&written).unwrap(), rule.text());
    assert_eq!(FstrimTimer::of_root(root), FstrimTimer::Enabled);
}
