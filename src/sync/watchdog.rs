//! A card that stops answering must end the sync with an error, not hang
//! it: a thread watches for progress (the copy reports entries and bytes;
//! the standby disk's completed reads and writes in sysfs count too, so a
//! long flush is not mistaken for a stall) and calls the stall handler when
//! nothing advanced for the timeout. The handler decides what ending means
//! (the command records the standby as incomplete, says why and exits:
//! a thread stuck in the kernel on a dead device cannot be unwound).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    last: Mutex<Instant>,
    stop: AtomicBool,
}

impl Watchdog {
    /// Starts watching. `disk_stat` is the standby disk's sysfs `stat`.
    pub fn start(
        timeout: Duration,
        disk_stat: Option<PathBuf>,
        on_stall: Box<dyn FnOnce(Duration) + Send>,
    ) -> Watchdog {
        let shared = Arc::new(Shared {
            last: Mutex::new(Instant::now()),
            stop: AtomicBool::new(false),
        });
        let watched = Arc::clone(&shared);
        let poll = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let thread = std::thread::spawn(move || {
            let mut counters = disk_stat.as_ref().and_then(|p| completed_io(p));
            while !watched.stop.load(Ordering::SeqCst) {
                std::thread::sleep(poll);
                let now = disk_stat.as_ref().and_then(|p| completed_io(p));
                if now != counters {
                    counters = now;
                    watched.advance();
                }
                let quiet = watched.last.lock().map(|l| l.elapsed()).unwrap_or_default();
                if quiet >= timeout && !watched.stop.load(Ordering::SeqCst) {
                    on_stall(quiet);
                    return;
                }
            }
        });
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    /// Something moved on: an entry copied, a step begun.
    pub fn advance(&self) {
        self.shared.advance();
    }
}

impl Shared {
    fn advance(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = Instant::now();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads and writes the disk completed, and sectors moved (fields 1, 3, 5
/// and 7 of sysfs `stat`); not the I/O time, which grows while a request
/// hangs.
fn completed_io(stat: &std::path::Path) -> Option<[u64; 4]> {
    let text = std::fs::read_to_string(stat).ok()?;
    let fields: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    Some([
        *fields.first()?,
        *fields.get(2)?,
        *fields.get(4)?,
        *fields.get(6)?,
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
}
