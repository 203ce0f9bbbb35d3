//! The terminal the progress bars draw on: stderr, gone quiet once the
//! terminal hung up. indicatif decides once, when a bar is made, whether
//! stderr is a terminal; after a hang-up [`crate::signals`] points stderr
//! at the log, where a bar's redraws would only be noise.

use dialoguer::console::Term;
use indicatif::{ProgressDrawTarget, TermLike};
use std::io;

#[derive(Debug)]
pub struct StderrTerm {
    term: Term,
}

/// A draw target for a progress bar on stderr that stops drawing when the
/// terminal goes away.
pub fn draw_target() -> ProgressDrawTarget {
    ProgressDrawTarget::term_like_with_hz(
        Box::new(StderrTerm {
            term: Term::stderr(),
        }),
        20,
    )
}

impl StderrTerm {
    /// Runs `write` while the terminal is there; afterwards does nothing.
    fn live(&self, write: impl FnOnce(&Term) -> io::Result<()>) -> io::Result<()> {
        if crate::signals::hung_up() {
            return Ok(());
        }
        write(&self.term)
    }
}

impl TermLike for StderrTerm {
    fn width(&self) -> u16 {
        self.term.size().1
    }

    fn height(&self) -> u16 {
        self.term.size().0
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.live(|t| t.move_cursor_up(n))
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.live(|t| t.move_cursor_down(n))
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.live(|t| t.move_cursor_right(n))
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.live(|t| t.move_cursor_left(n))
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.live(|t| t.write_line(s))
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.live(|t| t.write_str(s))
    }

    fn clear_line(&self) -> io::Result<()> {
        self.live(|t| t.clear_line())
    }

    fn flush(&self) -> io::Result<()> {
        self.live(|t| t.flush())
    }
}
