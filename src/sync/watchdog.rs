//! A card that stops answering must end the sync with an error, not hang
//! it: a thread watches for progress (the copy reports entries and bytes;
//! the standby disk's completed reads, writes and discards in sysfs count
//! too, so a long flush, or mkfs discarding a large card, is not mistaken
//! for a stall) and calls the stall handler when nothing advanced for the
//! timeout. The handler decides what ending means (the command records the
//! standby as incomplete, says why and exits: a thread stuck in the kernel
//! on a dead device cannot be unwound). Dropped, the watchdog stops at
//! once: a sync does not wait out its poll.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Watchdog {
    last: Arc<Mutex<Instant>>,
    /// Dropped to stop the thread: its wait ends at once.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching. `disk_stat` is the standby disk's sysfs `stat`.
    pub fn start(
        timeout: Duration,
        disk_stat: Option<PathBuf>,
        on_stall: Box<dyn FnOnce(Duration) + Send>,
    ) -> Watchdog {
        let last = Arc::new(Mutex::new(Instant::now()));
        let watched = Arc::clone(&last);
        let (stop, stopped) = mpsc::channel::<()>();
        let poll = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let thread = std::thread::spawn(move || {
            let mut counters = disk_stat.as_deref().and_then(completed_io);
            loop {
                match stopped.recv_timeout(poll) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // The watchdog was dropped: the run is over.
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
                let now = disk_stat.as_deref().and_then(completed_io);
                if now != counters {
                    counters = now;
                    advance(&watched);
                }
                let quiet = watched.lock().map(|l| l.elapsed()).unwrap_or_default();
                if quiet >= timeout {
                    on_stall(quiet);
                    return;
                }
            }
        });
        Watchdog {
            last,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Something moved on: an entry copied, a step begun.
    pub fn advance(&self) {
        advance(&self.last);
    }
}

fn advance(last: &Mutex<Instant>) {
    if let Ok(mut last) = last.lock() {
        *last = Instant::now();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the disk completed: reads, sectors read, writes, sectors written
/// (fields 1, 3, 5 and 7 of sysfs `stat`), and on kernels that count them
/// (4.18 and later) discards and sectors discarded (fields 12 and 14).
/// Not the I/O times, nor the requests in flight, which grow while a
/// request hangs.
fn completed_io(stat: &Path) -> Option<[u64; 6]> {
    let text = std::fs::read_to_string(stat).ok()?;
    let fields: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let optional = |i: usize| fields.get(i).copied().unwrap_or(0);
    Some([
        *fields.first()?,
        *fields.get(2)?,
        *fields.get(4)?,
        *fields.get(6)?,
        optional(11),
        optional(13),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn progress_keeps_it_quiet_and_a_stall_calls_the_handler() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            Duration::from_millis(400),
            None,
            Box::new(move |quiet| tx.send(quiet).unwrap()),
        );
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(100));
            dog.advance();
        }
        assert!(rx.try_recv().is_err(), "no stall while advancing");
        let quiet = rx.recv_timeout(Duration::from_secs(3)).expect("a stall");
        assert!(quiet >= Duration::from_millis(400), "{quiet:?}");
    }

    #[test]
    fn a_disk_that_moves_data_is_not_stalled_and_io_time_alone_is_not_progress() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        let line =
            |n: u64, ticks: u64| format!("{n} 0 {n} 0 0 0 0 0 1 {ticks} {ticks} 0 0 0 0 0 0\n");
        std::fs::write(&stat, line(1, 0)).unwrap();
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            Duration::from_millis(400),
            Some(stat.clone()),
            Box::new(move |quiet| tx.send(quiet).unwrap()),
        );
        for n in 2..10 {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(&stat, line(n, 0)).unwrap();
        }
        assert!(rx.try_recv().is_err(), "reads completing are progress");
        for ticks in 1..10 {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(&stat, line(9, ticks * 100)).unwrap();
        }
        rx.recv_timeout(Duration::from_secs(3))
            .expect("a request in flight that never completes is a stall");
        drop(dog);
    }

    /// mkfs on a large card spends its time discarding: only the discard
    /// fields (12 to 15) move, and that is progress; their time alone is
    /// not.
    #[test]
    fn discards_completing_are_progress() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        let line = |discards: u64, ticks: u64| {
            format!(
                "5 0 40 3 7 0 56 9 1 20 30 {discards} 0 {} {ticks} 0 0\n",
                discards * 8192
            )
        };
        std::fs::write(&stat, line(0, 0)).unwrap();
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            Duration::from_millis(400),
            Some(stat.clone()),
            Box::new(move |quiet| tx.send(quiet).unwrap()),
        );
        for n in 1..10 {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(&stat, line(n, 0)).unwrap();
        }
        assert!(rx.try_recv().is_err(), "discards completing are progress");
        for ticks in 1..10 {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(&stat, line(9, ticks * 100)).unwrap();
        }
        rx.recv_timeout(Duration::from_secs(3))
            .expect("a discard that never completes is a stall");
        drop(dog);
    }

    /// A sync used to end on a whole second: dropping the watchdog waited
    /// for its thread's one-second sleep to run out.
    #[test]
    fn dropping_it_stops_it_at_once() {
        let dog = Watchdog::start(
            Duration::from_secs(60),
            None,
            Box::new(|_| panic!("no stall")),
        );
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        drop(dog);
        let took = started.elapsed();
        assert!(took < Duration::from_millis(200), "{took:?}");
    }

    #[test]
    fn an_older_kernels_stat_without_discard_fields_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "1 2 3 4 5 6 7 8 0 9 10\n").unwrap();
        assert_eq!(completed_io(&stat), Some([1, 3, 5, 7, 0, 0]));
        std::fs::write(&stat, "1 2 3\n").unwrap();
        assert_eq!(completed_io(&stat), None);
    }
}
