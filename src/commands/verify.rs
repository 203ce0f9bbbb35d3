//! `pimigrate verify`: run after the reboot into the migrated system.
//! Order: read the journal and the system, check, commit (only when every
//! check passed), apply the quirk, benchmark, print.

use super::print_json;
use crate::apply::standing;
use crate::cli::{Cli, VerifyArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOTHING_TO_VERIFY, EXIT_OK};
use crate::host::Host;
use crate::state::journal::Journal;
use crate::verify::expected::Expected;
use crate::verify::run::{verify, Request};
use crate::verify::{render, Verdict, Verification, VERIFY_SCHEMA};
use anyhow::Result;

pub fn run(cli: &Cli, args: &VerifyArgs, host: &Host) -> Result<u8> {
    // Checking alone reads what a normal user can; changing cmdline.txt
    // does not, and is said before anything is checked.
    if args.commit || args.apply_quirk {
        crate::privilege::require_root("verify --commit and --apply-quirk change the boot files")?;
    }
    if args.trim {
        crate::privilege::require_root("verify --trim trims the new root (FITRIM)")?;
    }
    let request = Request {
        commit: args.commit,
        apply_quirk: args.apply_quirk,
        trim: args.trim,
        no_bench: args.no_bench,
        quick: args.quick,
        runtime: args.runtime,
        chatty: !cli.json && !cli.quiet,
    };
    // A commit (or a quirk) writes: its errors end with where the Pi
    // stands and what goes on.
    let writes = args.commit || args.apply_quirk;
    let (v, interrupted) = verify(host, &request).map_err(|err| match writes {
        true => standing::attach(err, |writing| {
            let journal = Journal::load(&host.path(&host.state_dir)).ok().flatten();
            let began = journal
                .as_ref()
                .and_then(|j| Expected::from_journal(j).ok())
                .is_some_and(|e| e.commit_interrupted);
            standing::commit(journal.as_ref(), writing, began, &standing::this_command())
        }),
        false => err,
    })?;
    let standby = crate::system::System::inspect(host)
        .ok()
        .and_then(|system| crate::sync::status::status(&system, &crate::apply::standby::look));
    let code = finish(cli, v, standby)?;
    Ok(exit_code(code, interrupted))
}

/// The verification, and the standby kept by `pimigrate sync` when there
/// is one (a standby is not a check of the migration: it is shown beside).
#[derive(serde::Serialize)]
struct VerifyOutput<'a> {
    #[serde(flatten)]
    verification: &'a Verification,
    #[serde(skip_serializing_if = "Option::is_none")]
    standby: Option<crate::sync::status::StandbyStatus>,
}

/// Ctrl-C wins over the checks' verdict, as for `pimigrate bench`, so a
/// script sees that the run was cut short; a failed benchmark does not
/// change the verdict (it is reported in the comparison).
fn exit_code(checks: u8, interrupted: bool) -> u8 {
    if interrupted {
        EXIT_INTERRUPTED
    } else {
        checks
    }
}

fn finish(
    cli: &Cli,
    v: Verification,
    standby: Option<crate::sync::status::StandbyStatus>,
) -> Result<u8> {
    debug_assert_eq!(v.schema, VERIFY_SCHEMA);
    if cli.json {
        print_json(&VerifyOutput {
            verification: &v,
            standby,
        })?;
    } else {
        print!("{}", render::text(&v));
        if let Some(standby) = standby {
            println!("{}", standby.summary);
            for warning in &standby.warnings {
                println!("  warning: {warning}");
            }
        }
    }
    Ok(match v.result {
        Verdict::Pass => EXIT_OK,
        Verdict::Fail => EXIT_FAILED,
        Verdict::NothingToVerify => EXIT_NOTHING_TO_VERIFY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_c_overrides_the_checks_verdict_and_nothing_else_does() {
        for checks in [EXIT_OK, EXIT_FAILED] {
            assert_eq!(exit_code(checks, true), EXIT_INTERRUPTED);
            assert_eq!(exit_code(checks, false), checks);
        }
    }
}
