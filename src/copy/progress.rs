//! Calling the caller's progress callback now and then, not per entry: a
//! root filesystem has hundreds of thousands of entries, and a terminal
//! needs a few updates a second.

use super::stats::{CopyStats, Counters};
use std::time::{Duration, Instant};

const EVERY: Duration = Duration::from_millis(200);

pub struct Progress<'a> {
    callback: &'a dyn Fn(&CopyStats),
    counters: &'a Counters,
    last: Instant,
}

impl<'a> Progress<'a> {
    pub fn new(callback: &'a dyn Fn(&CopyStats), counters: &'a Counters) -> Progress<'a> {
        Progress {
            callback,
            counters,
            last: Instant::now(),
        }
    }

    /// Reports if the last report is old enough.
    pub fn tick(&mut self) {
        if self.last.elapsed() >= EVERY {
            self.report();
        }
    }

    /// Reports now (at the end of a pass).
    pub fn report(&mut self) {
        self.last = Instant::now();
        (self.callback)(&self.counters.snapshot());
    }
}
