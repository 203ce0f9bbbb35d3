//! How pimigrate asks a person: the [`Ui`] trait, with a terminal
//! implementation ([`TerminalUi`], dialoguer) and a scripted one for tests
//! ([`ScriptedUi`]).
//!
//! Every prompt can be backed out of: Esc or Ctrl-C makes it return
//! [`Aborted`] as the error, so a caller only writes `?` and the top of the
//! flow says that nothing was changed.

pub mod confirm;
pub mod scripted;
pub mod stderr_term;
pub mod terminal;

pub use scripted::{Answer, ScriptedUi};
pub use terminal::TerminalUi;

use anyhow::Result;

/// The person backed out of a prompt (Esc or Ctrl-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stopped at the user's request")]
pub struct Aborted;

/// Is this error (anywhere in its chain) the person backing out?
pub fn is_aborted(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| cause.downcast_ref::<Aborted>().is_some())
}

pub trait Ui {
    /// Shows a paragraph or a table; ends with a newline.
    fn say(&self, text: &str);

    /// One of `items`; `default` is selected at first.
    fn choose(&self, prompt: &str, items: &[String], default: usize) -> Result<usize>;

    /// Yes or no.
    fn confirm(&self, prompt: &str, default: bool) -> Result<bool>;

    /// The person types one of `accepted` (e.g. a disk's name): a slip of
    /// the finger on a prompt with a default must not erase a disk. `false`
    /// when they typed something else.
    fn type_to_confirm(&self, prompt: &str, accepted: &[String]) -> Result<bool>;

    /// Whether live progress bars (benchmarks, the copy) can be drawn.
    fn live_progress(&self) -> bool;

    /// Ctrl-C between prompts (while scanning, benchmarking or copying)
    /// sets this flag instead of killing the process, so the flow can stop
    /// cleanly and say what was (not) done.
    fn interrupted(&self) -> &std::sync::atomic::AtomicBool;
}

/// Whether what was typed matches one of the accepted answers.
pub fn typed_matches(typed: &str, accepted: &[String]) -> bool {
    let typed = typed.trim();
    !typed.is_empty() && accepted.iter().any(|a| a == typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborted_is_found_through_context() {
        let err = anyhow::Error::new(Aborted).context("choosing the target");
        assert!(is_aborted(&err));
        assert!(!is_aborted(&anyhow::anyhow!("disk gone")));
    }

    #[test]
    fn typed_answers_must_match_exactly_after_trimming() {
        let accepted = vec!["sda".to_string(), "/dev/sda".to_string()];
        assert!(typed_matches(" sda\n", &accepted));
        assert!(typed_matches("/dev/sda", &accepted));
        assert!(!typed_matches("sdb", &accepted));
        assert!(!typed_matches("", &accepted));
        assert!(!typed_matches("SDA", &accepted));
    }
}
