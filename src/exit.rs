//! Every exit code pimigrate ends with, in one place (`--help` lists them).

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
/// Stopped by the person (Ctrl-C; Esc in the wizard), as a shell reports a
/// death by SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;
