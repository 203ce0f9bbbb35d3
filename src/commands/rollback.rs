//! `pimigrate rollback`: the SD card's boot files as they were before the
//! migration. Works from the SD system and from the migrated system (the
//! journal travels to the new root).

use super::print_json;
use crate::apply::boot_partition::roll_back;
use crate::apply::standing;
use crate::cli::{Cli, RollbackArgs};
use crate::exit::EXIT_OK;
use crate::host::Host;
use crate::state::journal::Journal;
use crate::ui::confirm::{before_writing, Ask};
use anyhow::Result;

pub fn run(cli: &Cli, args: &RollbackArgs, host: &Host) -> Result<u8> {
    // Its errors end with where the Pi stands and what goes on.
    roll_back_with(cli, args, host).map_err(|err| {
        standing::attach(err, |writing| {
            let journal = Journal::load(&host.path(&host.state_dir)).ok().flatten();
            standing::rollback(journal.as_ref(), writing)
        })
    })
}

fn roll_back_with(cli: &Cli, args: &RollbackArgs, host: &Host) -> Result<u8> {
    crate::privilege::require_root("rollback restores the SD card's boot files")?;
    let state_dir = host.path(&host.state_dir);
    let Some(journal) = Journal::load(&state_dir)? else {
        // No journal: no migration got as far as changing anything.
        if cli.json {
            print_json(&serde_json::json!({"schema": "pimigrate.rollback/1", "restored": []}))?;
        } else {
            println!(
                "Nothing to roll back: no migration journal in {}.",
                state_dir.display()
            );
        }
        return Ok(EXIT_OK);
    };
    before_writing(
        Ask::Change {
            question: "Restore the SD card's boot files as they were before the migration?".into(),
            default: false,
        },
        args.yes,
        "rollback",
        "rollback changes the SD card's boot files",
    )?;
    let restored = roll_back(host, &journal, &state_dir)?;
    if cli.json {
        print_json(&serde_json::json!({"schema": "pimigrate.rollback/1", "restored": restored}))?;
    } else {
        for line in &restored {
            println!("{line}");
        }
        println!(
            "The SD card boots as it did before the migration. The target disk was not touched."
        );
    }
    Ok(EXIT_OK)
}
