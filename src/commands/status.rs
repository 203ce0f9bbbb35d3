//! `pimigrate status`: where a migration stands and how it ended, for a
//! person who was not watching (see [`crate::status`]); `--login` for the
//! login message, which says nothing unless there is news; `--check` for
//! the check after the move, with the exit status of a monitoring plugin.

use super::print_json;
use crate::cli::{Cli, StatusArgs};
use crate::exit::EXIT_OK;
use crate::host::Host;
use anyhow::Result;

pub fn run(cli: &Cli, args: &StatusArgs, host: &Host) -> Result<u8> {
    let facts = crate::status::gather(host, &args.ignore);
    let status = crate::status::assess(&facts);
    if args.check {
        let report = crate::status::check::report(&facts, &status)?;
        if cli.json {
            print_json(&report)?;
        } else {
            crate::signals::print(&crate::status::check::text(&report));
        }
        return Ok(crate::status::check::exit_code(&report));
    }
    if cli.json {
        print_json(&status)?;
    } else if args.login {
        crate::signals::print(&crate::status::login_text(&status));
    } else {
        crate::signals::print(&crate::status::text(&status));
    }
    Ok(EXIT_OK)
}
