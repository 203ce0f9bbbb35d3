//! The state directory's lock, and the one writer of pimigrate's state
//! files ([`crate::state`]): the migration's journal and the standby's
//! record, in the state directory and in their copies on the disk they
//! describe. As bootupd's `StateLockGuard::update_state`, every write is a
//! method of the [`StateLock`]: a write without the lock does not compile.
//! Each file is replaced atomically and flushed before the call returns (a
//! power cut leaves the old or the new, never half of either).

use super::atomic;
use crate::state::journal::{Journal, Step};
use crate::state::standby::{StandbyRecord, SyncState, STANDBY_FILE};
use anyhow::{Context, Result};
use std::path::Path;

/// One pimigrate at a time: an exclusive lock in the state directory, held
/// for as long as this value lives. It is also the permission to write a
/// state file.
pub struct StateLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl StateLock {
    pub fn acquire(state_dir: &Path) -> Result<StateLock> {
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        let path = state_dir.join("lock");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, err)| err)
            .with_context(|| {
                format!("another pimigrate is running (it holds {})", path.display())
            })?;
        Ok(StateLock { _lock: lock })
    }

    /// Writes `journal` into `dir` (the state directory, or its copy on a
    /// new root), with the time it was updated and the boot it was updated
    /// in (the running kernel's: whatever tree pimigrate looks at, this
    /// machine writes).
    pub fn save_journal(&self, journal: &mut Journal, dir: &Path) -> Result<()> {
        journal.updated = crate::clock::now();
        journal.written_in_boot =
            crate::clock::boot_id(&Path::new("/proc").join(crate::clock::BOOT_ID));
        let bytes = serde_json::to_vec_pretty(journal).context("encoding the journal")?;
        write_into(dir, &Journal::path(dir), &bytes)
    }

    /// Records `step` of `journal` as done, durably, before the next begins.
    pub fn mark_step(&self, journal: &mut Journal, step: Step, dir: &Path) -> Result<()> {
        if !journal.done.contains(&step) {
            journal.done.push(step);
        }
        self.save_journal(journal, dir)
    }

    /// Writes the standby's `record` into `dir` (the state directory, or
    /// its directory on the standby).
    pub fn save_standby(&self, record: &StandbyRecord, dir: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(record).context("encoding the standby record")?;
        write_into(dir, &dir.join(STANDBY_FILE), &bytes)
    }

    /// Marks the state directory's standby record failed with `error`, as a
    /// stalled or interrupted sync ends: still incomplete, now with the
    /// reason.
    pub fn mark_standby_failed(&self, state_dir: &Path, error: &str) -> Result<()> {
        if let Some(mut record) = StandbyRecord::load(state_dir)? {
            record.state = SyncState::Failed;
            record.finished = Some(crate::clock::now());
            record.error = Some(error.to_string());
            self.save_standby(&record, state_dir)?;
        }
        Ok(())
    }
}

/// `bytes` as the file at `path` in `dir`, which is made when missing.
fn write_into(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    atomic::replace(path, bytes, atomic::FILE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::standby::tests_support::sample;

    #[test]
    fn a_record_survives_a_round_trip_and_a_failure_keeps_its_last_complete_sync() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StateLock::acquire(dir.path()).unwrap();
        let record = sample();
        lock.save_standby(&record, dir.path()).unwrap();
        assert_eq!(
            StandbyRecord::load(dir.path()).unwrap(),
            Some(record.clone())
        );
        lock.mark_standby_failed(dir.path(), "the disk stopped answering")
            .unwrap();
        let failed = StandbyRecord::load(dir.path()).unwrap().unwrap();
        assert_eq!(failed.state, SyncState::Failed);
        assert_eq!(failed.last_complete, record.last_complete);
        assert!(failed.is_for(Some("6C586E13-02")));
    }

    #[test]
    fn a_second_lock_is_refused_while_the_first_is_held() {
        let state = tempfile::tempdir().unwrap();
        let _first = StateLock::acquire(state.path()).unwrap();
        let second = StateLock::acquire(state.path()).err().unwrap();
        assert!(
            format!("{second:#}").contains("another pimigrate is running"),
            "{second:#}"
        );
    }
}
