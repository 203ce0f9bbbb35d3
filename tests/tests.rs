//! The integration tests, one binary (as ripgrep has them): the crate is
//! linked once instead of once a file. Each module is the file of its name
//! in this folder, whose first lines say more. Modules marked "root" use
//! loop devices and mounts and fail loudly without root under CI=true;
//! "terminal" ones drive the real binary in tmux.
//!
//! One module alone: `cargo test --test tests cli_fixtures::`.

mod common;

// The binary on fixture machines and on files: no privileges.
mod after_move; // the check after the move on the migrated Pi 4 fixture (one test root: a mount)
mod assets; // the .deb's list of files, and --version
mod boot_layouts; // distributions' boot layouts planned (issue #15)
mod bootcfg_realworld; // boot files as real systems ship them
mod cli_fixtures; // devices and plan on fixture sysfs trees
mod cli_spellings; // the flags as people and scripts spell them
mod docs_generated; // --help's durations, the docs' trial words, hidden flags and links
mod full_move_fixture; // a full move's trial, boot order and hand-over planned
mod json_schemas; // every --json document and its schema
mod planner_lib; // planner refusals no fixture machine reaches
mod readme_models; // README's table of Pis and moves, planned on each Pi it names
mod recommend_fixture; // recommend from saved reports
mod replica_refusals; // one refusal, one code and one wording for migrate and both syncs
mod rooms; // src/'s rooms import only downward, in the documented order
mod verify_fixture; // verify on the migrated Pi 4 fixture

// Live on this machine (root).
mod apply_mounts; // mount guards on real mounts
mod bench_host; // bench on directories and loop devices
mod copy_fidelity; // the copier on real ext4
mod live_loop; // devices and plan on real loop devices
mod migrate_faults; // a migration killed at every failure point
mod migrate_host; // migrate and rollback on a loop-device SSD
mod recommend_blank; // the blank-drive question on real loop devices
mod root_first; // the binary as a normal user: sudo said first
mod scan_live; // the source scan across mount points
mod sync_faults; // a first sync killed at every failure point
mod sync_host; // sync: first layout, incremental runs, a kill midway, refusals, changed standbys, planted links
mod sync_timer; // the sync timer's drop-ins as systemd reads them
mod trim_host; // FITRIM on ext4 over a sparse loop disk, a loop disk's TRIM facts
mod verify_bench_host; // before/after on real benchmark runs

// In a terminal (tmux).
mod wizard_pty; // the wizard answered with keys
