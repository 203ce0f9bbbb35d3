//! Prompts on a terminal, with dialoguer.
//!
//! Two ways a person stops a prompt, and both must leave the terminal as it
//! was: Esc, which dialoguer's `interact_*_opt` (and our own line reader
//! for the typed confirmation, as dialoguer's `Input` ignores Esc) report
//! as `None`, and Ctrl-C. For Ctrl-C, the console crate puts the terminal back in its
//! normal mode, raises SIGINT at the process and returns an `Interrupted`
//! I/O error. Without a handler, that SIGINT would kill the process with
//! the cursor still hidden and nothing said; so [`TerminalUi::new`]
//! registers one that only sets a flag, and every prompt turns the error
//! into [`Aborted`] and shows the cursor again.

use super::{typed_matches, Aborted, Ui};
use anyhow::Result;
use dialoguer::console::{Key, Term};
use dialoguer::theme::ColorfulTheme;
use dialoguer::theme::Theme;
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
    /// [`Ui::interrupted`] ([`crate::signals`]): from here on, the flow
    /// decides how to stop.
    pub fn new() -> Result<TerminalUi> {
        Ok(TerminalUi {
            term: Term::stderr(),
            theme: ColorfulTheme::default(),
            interrupted: crate::signals::install(crate::signals::Hangup::Stops)?,
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

/// What one key did to the line being typed.
#[derive(Debug, PartialEq, Eq)]
enum Edit {
    Typed(char),
    Erased,
    /// A key that does nothing here (arrows, Tab, Backspace on nothing).
    Ignored,
    Done,
    Escape,
}

/// The line editing of [`TerminalUi::read_line`], apart from the terminal
/// so it can be tested: printable characters, Backspace, Enter and Esc.
fn edit_line(line: &mut String, key: &Key) -> Edit {
    match key {
        Key::Enter => Edit::Done,
        Key::Escape => Edit::Escape,
        Key::Backspace => match line.pop() {
            Some(_) => Edit::Erased,
            None => Edit::Ignored,
        },
        Key::Char(c) if !c.is_control() => {
            line.push(*c);
            Edit::Typed(*c)
        }
        _ => Edit::Ignored,
    }
}

impl TerminalUi {
    /// One typed line, `None` on Esc. dialoguer's `Input` ignores Esc, and
    /// at the one prompt before a disk is erased backing out must work
    /// like everywhere else. Ctrl-C comes back as console's `Interrupted`
    /// error (after SIGINT set the flag), which [`TerminalUi::settle`]
    /// turns into [`Aborted`]. As in dialoguer, the prompt is drawn once
    /// and only the typed characters are written or erased after it, so a
    /// line that wraps is never drawn twice.
    fn read_line(&self, prompt: &str) -> std::io::Result<Option<String>> {
        let mut text = String::new();
        let _ = self.theme.format_input_prompt(&mut text, prompt, None);
        self.term.write_str(&text)?;
        self.term.flush()?;
        let mut line = String::new();
        loop {
            let key = self.term.read_key()?;
            match edit_line(&mut line, &key) {
                Edit::Ignored => continue,
                Edit::Typed(c) => self.term.write_str(c.encode_utf8(&mut [0; 4]))?,
                Edit::Erased => self.term.clear_chars(1)?,
                Edit::Done => {
                    // As dialoguer leaves an answered prompt: a check mark
                    // and the answer.
                    let mut done = String::new();
                    let _ = self
                        .theme
                        .format_input_prompt_selection(&mut done, prompt, &line);
                    self.term.clear_line()?;
                    self.term.write_line(&done)?;
                    return Ok(Some(line));
                }
                Edit::Escape => {
                    self.term.write_line("")?;
                    return Ok(None);
                }
            }
            self.term.flush()?;
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
        // Never a panic on a terminal that went away mid-migration.
        crate::signals::print(&format!("{text}\n"));
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
        let result = self.read_line(prompt).map_err(dialoguer::Error::IO);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(keys: &[Key]) -> (String, Option<Edit>) {
        let mut line = String::new();
        for key in keys {
            match edit_line(&mut line, key) {
                Edit::Done => return (line, Some(Edit::Done)),
                Edit::Escape => return (line, Some(Edit::Escape)),
                _ => {}
            }
        }
        (line, None)
    }

    #[test]
    fn typing_and_backspace_make_the_line_and_enter_ends_it() {
        let keys = [
            Key::Char('s'),
            Key::Char('d'),
            Key::Char('x'),
            Key::Backspace,
            Key::Char('a'),
            Key::ArrowLeft,
            Key::Tab,
            Key::Enter,
            Key::Char('z'),
        ];
        assert_eq!(typed(&keys), ("sda".into(), Some(Edit::Done)));
    }

    #[test]
    fn escape_ends_the_line_without_an_answer() {
        let keys = [Key::Char('s'), Key::Escape, Key::Enter];
        assert_eq!(typed(&keys), ("s".into(), Some(Edit::Escape)));
    }

    #[test]
    fn backspace_on_an_empty_line_changes_nothing() {
        let mut line = String::new();
        assert_eq!(edit_line(&mut line, &Key::Backspace), Edit::Ignored);
        assert_eq!(
            edit_line(&mut line, &Key::Char('\u{7}')),
            Edit::Ignored,
            "a control character is not typed text"
        );
        assert!(line.is_empty());
        assert_eq!(edit_line(&mut line, &Key::Char('é')), Edit::Typed('é'));
        assert_eq!(edit_line(&mut line, &Key::Backspace), Edit::Erased);
        assert!(line.is_empty());
    }
}
