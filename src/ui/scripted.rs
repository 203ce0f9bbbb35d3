//! A [`Ui`] that answers from a queue and records everything shown, so
//! tests can drive a whole flow and read what a person would have read.

use super::{typed_matches, Aborted, Ui};
use anyhow::{bail, Result};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

/// One scripted answer, used by the next prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// For `choose`: the first item containing this text.
    Pick(String),
    /// For `choose` and `confirm`: press Enter on the default.
    Default,
    /// For `confirm`.
    Yes,
    No,
    /// For `type_to_confirm`.
    Type(String),
    /// Esc or Ctrl-C, at any prompt.
    Abort,
}

/// What one prompt looked like, for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub prompt: String,
    /// The choices offered (`choose` only).
    pub items: Vec<String>,
}

#[derive(Default)]
pub struct ScriptedUi {
    answers: RefCell<VecDeque<Answer>>,
    said: RefCell<Vec<String>>,
    asked: RefCell<Vec<Asked>>,
    interrupted: AtomicBool,
    /// Ctrl-C arrives once this many prompts have been answered.
    interrupt_after: Option<usize>,
}

impl ScriptedUi {
    pub fn new(answers: impl IntoIterator<Item = Answer>) -> ScriptedUi {
        ScriptedUi {
            answers: RefCell::new(answers.into_iter().collect()),
            ..ScriptedUi::default()
        }
    }

    /// Ctrl-C pressed right after the `prompts`-th answer, while the flow
    /// works between prompts (scanning, benchmarking): it sets
    /// [`Ui::interrupted`] as the terminal's signal handler does.
    pub fn interrupt_after(mut self, prompts: usize) -> ScriptedUi {
        self.interrupt_after = Some(prompts);
        self
    }

    /// Everything shown, prompts included, in order, as one text.
    pub fn transcript(&self) -> String {
        self.said.borrow().join("\n")
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked.borrow().clone()
    }

    /// The prompt whose text contains `needle`, if it was asked.
    pub fn prompt_containing(&self, needle: &str) -> Option<Asked> {
        self.asked
            .borrow()
            .iter()
            .find(|a| a.prompt.contains(needle))
            .cloned()
    }

    pub fn unused_answers(&self) -> usize {
        self.answers.borrow().len()
    }

    fn next(&self, prompt: &str, items: &[String]) -> Result<Answer> {
        self.asked.borrow_mut().push(Asked {
            prompt: prompt.to_string(),
            items: items.to_vec(),
        });
        self.said.borrow_mut().push(format!("? {prompt}"));
        let answer = self.answers.borrow_mut().pop_front();
        if self.interrupt_after == Some(self.asked.borrow().len()) {
            self.interrupted.store(true, Ordering::SeqCst);
        }
        match answer {
            Some(Answer::Abort) => Err(Aborted.into()),
            Some(answer) => Ok(answer),
            None => bail!("the script has no answer for the prompt {prompt:?}"),
        }
    }
}

impl Ui for ScriptedUi {
    fn say(&self, text: &str) {
        self.said.borrow_mut().push(text.to_string());
    }

    fn choose(&self, prompt: &str, items: &[String], default: usize) -> Result<usize> {
        match self.next(prompt, items)? {
            Answer::Default => Ok(default),
            Answer::Pick(text) => match items.iter().position(|i| i.contains(&text)) {
                Some(index) => Ok(index),
                None => bail!("no choice containing {text:?} in {items:?} for {prompt:?}"),
            },
            other => bail!("{other:?} does not answer the choice {prompt:?}"),
        }
    }

    fn confirm(&self, prompt: &str, default: bool) -> Result<bool> {
        match self.next(prompt, &[])? {
            Answer::Default => Ok(default),
            Answer::Yes => Ok(true),
            Answer::No => Ok(false),
            other => bail!("{other:?} does not answer the question {prompt:?}"),
        }
    }

    fn type_to_confirm(&self, prompt: &str, accepted: &[String]) -> Result<bool> {
        match self.next(prompt, &[])? {
            Answer::Type(text) => Ok(typed_matches(&text, accepted)),
            other => bail!("{other:?} does not answer {prompt:?}"),
        }
    }

    fn live_progress(&self) -> bool {
        false
    }

    fn interrupted(&self) -> &AtomicBool {
        &self.interrupted
    }
}
