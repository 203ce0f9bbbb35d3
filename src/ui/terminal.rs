//! Prompts on a terminal, with dialoguer.
//!
//! Two ways a person stops a prompt, and both must leave the terminal as it
//! was: Esc, which dialoguer's `interact_*_opt` report as `None`, and
//! Ctrl-C. For Ctrl-C, the console crate puts the terminal back in its
//! normal mode, raises SIGINT at the process and returns an `Interrupted`
//! I/O error. Without a handler, that SIGINT would kill the process with
//! the cursor still hidden and nothing said; so [`TerminalUi::new`]
//! registers one that only sets a flag, and every prompt turns the error
//! into [`Aborted`] and shows the cursor again.

use super::{typed_matches, Aborted, Ui};
use anyhow::{Context, Result};
use dialoguer::console::Term;
use dialoguer::theme::ColorfulTheme;
use std::io::{ErrorKind, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct TerminalUi {
    term: Term,
    theme: ColorfulTheme,
    interrupted: Arc<AtomicBool>,
}

impl TerminalUi {
    /// Installs the Ctrl-C (and SIGTERM, SIGHUP) handler that only sets
    /// [`Ui::interrupted`]: from here on, the flow decides how to stop.
    pub fn new() -> Result<TerminalUi> {
        let interrupted = Arc::new(AtomicBool::new(false));
        for signal in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(signal, Arc::clone(&interrupted))
                .context("installing the Ctrl-C handler")?;
        }
        Ok(TerminalUi {
            term: Term::stderr(),
            theme: ColorfulTheme::default(),
            interrupted,
        })
    }

    /// A Ctrl-C that came while no prompt was reading (the key went to the
    /// terminal driver, which sent SIGINT) stops the next prompt.
    /// Also refuses to ask where no one can answer (an unattended run).
    fn ready_to_ask(&self, prompt: &str) -> Result<()> {
        if self.interrupted.load(Ordering::SeqCst) {
            return Err(Aborted.into());
        }
        if !self.term.is_term() || !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "no terminal to ask \"{prompt}\" on: give the flag that answers it (pimigrate wizard --help)"
            );
        }
        Ok(())
    }

    /// Turns what dialoguer returned into an answer or [`Aborted`], with
    /// the cursor visible again whatever happened.
    fn settle<T>(&self, result: dialoguer::Result<Option<T>>, what: &str) -> Result<T> {
        // dialoguer hides the cursor while a list is shown and only shows
        // it again on the paths that return normally.
        let _ = self.term.show_cursor();
        match result {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err(Aborted.into()),
            Err(dialoguer::Error::IO(err)) if err.kind() == ErrorKind::Interrupted => {
                // Ctrl-C leaves the prompt line half drawn: end it.
                let _ = self.term.write_line("");
                Err(Aborted.into())
            }
            Err(err) => Err(anyhow::Error::new(err).context(format!("asking {what}"))),
        }
    }
}

impl Drop for TerminalUi {
    fn drop(&mut self) {
        let _ = self.term.show_cursor();
    }
}

impl Ui for TerminalUi {
    fn say(&self, text: &str) {
        println!("{text}");
    }

    fn choose(&self, prompt: &str, items: &[String], default: usize) -> Result<usize> {
        self.ready_to_ask(prompt)?;
        let result = dialoguer::Select::with_theme(&self.theme)
            .with_prompt(prompt)
            .items(items)
            .default(default)
            .interact_on_opt(&self.term);
        self.settle(result, prompt)
    }

    fn confirm(&self, prompt: &str, default: bool) -> Result<bool> {
        self.ready_to_ask(prompt)?;
        let result = dialoguer::Confirm::with_theme(&self.theme)
            .with_prompt(prompt)
            .default(default)
            .wait_for_newline(true)
            .interact_on_opt(&self.term);
        self.settle(result, prompt)
    }

    fn type_to_confirm(&self, prompt: &str, accepted: &[String]) -> Result<bool> {
        self.ready_to_ask(prompt)?;
        let result = dialoguer::Input::<String>::with_theme(&self.theme)
            .with_prompt(prompt)
            .allow_empty(true)
            .interact_text_on(&self.term)
            .map(Some);
        let typed = self.settle(result, prompt)?;
        Ok(typed_matches(&typed, accepted))
    }

    fn live_progress(&self) -> bool {
        std::io::stderr().is_terminal()
    }

    fn interrupted(&self) -> &AtomicBool {
        &self.interrupted
    }
}
