//! Why a plan cannot be made: every reason at once, each with what to do.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    /// Stable, for scripts: `target-holds-root`, `target-too-small`, ...
    pub code: &'static str,
    pub message: String,
    /// What the user can do about it.
    pub hint: Option<String>,
}

impl Reason {
    pub fn new(code: &'static str, message: impl Into<String>) -> Reason {
        Reason {
            code,
            message: message.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Reason {
        self.hint = Some(hint.into());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub reasons: Vec<Reason>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "pimigrate will not do this, because:")?;
        for reason in &self.reasons {
            writeln!(f, "  - {}", reason.message)?;
            if let Some(hint) = &reason.hint {
                writeln!(f, "    {hint}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}
