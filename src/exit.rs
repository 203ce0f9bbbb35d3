//! Every exit code pimigrate ends with, in one place: the constants the
//! commands return and the one table that `--help`, the man pages and
//! docs/plan.md print (each generated from [`TABLE`]; the man pages' and
//! the docs' renderings are the tool crate's, xtask/).

pub const EXIT_OK: u8 = 0;
pub const EXIT_ERROR: u8 = 1;
/// clap's code for bad usage (also `pimigrate` alone, off a terminal).
pub const EXIT_USAGE: u8 = 2;
/// The plan cannot be made (every reason is shown).
pub const EXIT_REFUSED: u8 = 3;
/// `verify`: no migration journal, or no reboot since the migration.
pub const EXIT_NOTHING_TO_VERIFY: u8 = 4;
/// `verify`: a check failed.
pub const EXIT_FAILED: u8 = 5;
/// `status --check`: a warning, as monitoring plugins have it.
pub const EXIT_CHECK_WARNING: u8 = 1;
/// `status --check`: a failure, as monitoring plugins have it.
pub const EXIT_CHECK_FAILURE: u8 = 2;
/// Stopped by the person (Ctrl-C; Esc in the wizard), as a shell reports a
/// death by SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Every subcommand, as `pimigrate <name>` spells it (`wizard` is also
/// `pimigrate` alone).
pub const COMMANDS: [&str; 10] = [
    "devices",
    "plan",
    "bench",
    "migrate",
    "rollback",
    "recommend",
    "verify",
    "wizard",
    "sync",
    "status",
];

/// One row of the table: a code, the commands that end with it (empty:
/// every command) and what it means there.
#[derive(Debug, Clone, Copy)]
pub struct ExitStatus {
    pub code: u8,
    pub commands: &'static [&'static str],
    pub meaning: &'static str,
}

/// The exit-status table. A code whose meaning differs between commands
/// has a row for each; a command reads its own row, else the row for all.
pub const TABLE: &[ExitStatus] = &[
    ExitStatus {
        code: EXIT_OK,
        commands: &[],
        meaning: "success",
    },
    ExitStatus {
        code: EXIT_ERROR,
        commands: &[],
        meaning: "an error: something could not be read or done; the message says what, and a \
                  run that writes ends it with where the Pi stands and the command that goes on",
    },
    ExitStatus {
        code: EXIT_ERROR,
        commands: &["sync"],
        meaning:
            "an error; the message ends with where the standby stands (marked incomplete once \
                  the sync wrote to it) and the command that completes it",
    },
    ExitStatus {
        code: EXIT_CHECK_WARNING,
        commands: &["status"],
        meaning: "`--check`: a warning, nothing failed (as monitoring plugins have it); otherwise an error, the message says what",
    },
    ExitStatus {
        code: EXIT_USAGE,
        commands: &[],
        meaning:
            "bad usage: a wrong or missing flag, said with the command's usage (also `pimigrate` \
                  alone, or a question without --yes, when not on a terminal)",
    },
    ExitStatus {
        code: EXIT_CHECK_FAILURE,
        commands: &["status"],
        meaning: "`--check`: a failure, named with its fix (as monitoring plugins have it); otherwise bad usage",
    },
    ExitStatus {
        code: EXIT_REFUSED,
        commands: &["plan", "migrate", "bench", "wizard", "sync"],
        meaning: "refused, nothing written: every reason is printed with what to do",
    },
    ExitStatus {
        code: EXIT_NOTHING_TO_VERIFY,
        commands: &["verify"],
        meaning: "nothing to verify: no migration journal, or no reboot since the migration",
    },
    ExitStatus {
        code: EXIT_FAILED,
        commands: &["verify"],
        meaning: "a check failed, or --commit was refused; the output says how to roll back",
    },
    ExitStatus {
        code: EXIT_FAILED,
        commands: &["sync"],
        meaning: "synced, but a check says the standby would not boot",
    },
    ExitStatus {
        code: EXIT_INTERRUPTED,
        commands: &[],
        meaning: "interrupted (Ctrl-C); the output says what was cleaned up and how to go on",
    },
    ExitStatus {
        code: EXIT_INTERRUPTED,
        commands: &["wizard"],
        meaning: "stopped (Ctrl-C, or Esc at a question); the output says what was changed",
    },
];

/// The rows that apply to `command` (`None`: the whole table), one per
/// code for a command.
pub fn rows(command: Option<&str>) -> Vec<ExitStatus> {
    let Some(command) = command else {
        return TABLE.to_vec();
    };
    let mut rows: Vec<ExitStatus> = Vec::new();
    for row in TABLE {
        let own = row.commands.contains(&command);
        if !own && !row.commands.is_empty() {
            continue;
        }
        match rows.iter_mut().find(|r| r.code == row.code) {
            // A command's own row replaces the row for all.
            Some(existing) if own => *existing = *row,
            Some(_) => {}
            None => rows.push(*row),
        }
    }
    rows
}

/// Which commands a row applies to, in words (`code` marks the names).
pub fn who(row: &ExitStatus, code: bool) -> String {
    if row.commands.is_empty() {
        let others = TABLE
            .iter()
            .any(|r| r.code == row.code && !r.commands.is_empty());
        if others {
            "every other command".to_string()
        } else {
            "every command".to_string()
        }
    } else if code {
        let names: Vec<String> = row.commands.iter().map(|c| format!("`{c}`")).collect();
        names.join(", ")
    } else {
        row.commands.join(", ")
    }
}

/// The table as `--help` shows it after the options.
pub fn help_text(command: Option<&str>) -> String {
    let mut text = String::from("Exit status:\n");
    for row in rows(command) {
        match command {
            Some(_) => text.push_str(&format!("  {:<4} {}\n", row.code, row.meaning)),
            None => text.push_str(&format!(
                "  {:<4} {} ({})\n",
                row.code,
                row.meaning,
                who(&row, false)
            )),
        }
    }
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_table() {
        for code in [
            EXIT_OK,
            EXIT_ERROR,
            EXIT_USAGE,
            EXIT_REFUSED,
            EXIT_NOTHING_TO_VERIFY,
            EXIT_FAILED,
            EXIT_CHECK_WARNING,
            EXIT_CHECK_FAILURE,
            EXIT_INTERRUPTED,
        ] {
            assert!(TABLE.iter().any(|r| r.code == code), "{code} is missing");
        }
        for row in TABLE {
            for command in row.commands {
                assert!(COMMANDS.contains(command), "{command} is no command");
            }
        }
    }

    #[test]
    fn every_command_can_be_interrupted_and_reads_its_own_rows() {
        for command in COMMANDS {
            let rows = rows(Some(command));
            assert!(rows.iter().any(|r| r.code == EXIT_INTERRUPTED), "{command}");
            let mut codes: Vec<u8> = rows.iter().map(|r| r.code).collect();
            codes.dedup();
            assert_eq!(codes.len(), rows.len(), "{command}: a code twice");
        }
        let sync = rows(Some("sync"));
        let one = sync.iter().find(|r| r.code == EXIT_ERROR).unwrap();
        assert!(one.meaning.contains("incomplete"), "{}", one.meaning);
        assert!(!rows(Some("devices"))
            .iter()
            .any(|r| r.code == EXIT_REFUSED || r.code == EXIT_FAILED));
    }
}
