//! The command line as people and scripts type it: one `--trial[=WHEN]`
//! for plan, migrate and the wizard with every old spelling still
//! accepted, `-y` wherever `--yes` is, test-only flags out of `--help` and
//! the man pages, one value name for one kind of value, and the one
//! exit-status table in every command's `--help` and man page.

use crate::common::*;
use clap::{CommandFactory, Parser};
use pimigrate::cli::{Cli, Command};
use pimigrate::plan::TrialChoice;

fn parse(args: &[&str]) -> Cli {
    let mut all = vec!["pimigrate"];
    all.extend_from_slice(args);
    Cli::try_parse_from(&all).unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

/// The trial choice `plan`, `migrate` or `wizard` read from `args`.
fn trial(args: &[&str]) -> Option<TrialChoice> {
    match parse(args).command.unwrap() {
        Command::Plan(plan) => Some(plan.options("plan").unwrap().trial),
        Command::Migrate(migrate) => Some(migrate.plan.options("migrate").unwrap().trial),
        Command::Wizard(wizard) => wizard.settings().trial,
        other => panic!("not plan, migrate or wizard: {other:?}"),
    }
}

/// Every spelling of the trial flags, in each command that has them: the
/// old ones scripts use stay (`--trial always` with a space, as the
/// Ansible role passes it; `--trial=never`; the wizard's bare `--trial`;
/// `--no-trial`), and a bare `--trial` means always everywhere.
#[test]
fn trial_is_one_flag_with_every_old_spelling() {
    use TrialChoice::*;
    let target = ["--target", "/dev/sda"];
    for command in ["plan", "migrate", "wizard"] {
        let cases: [(&[&str], Option<TrialChoice>); 9] = [
            (&["--trial", "always"], Some(Always)),
            (&["--trial", "auto"], Some(Auto)),
            (&["--trial", "never"], Some(Never)),
            (&["--trial", "device"], Some(Device)),
            (&["--trial=always"], Some(Always)),
            (&["--trial=device"], Some(Device)),
            (&["--trial"], Some(Always)),
            (&["--no-trial"], Some(Never)),
            // No flag: plan and migrate decide (auto), the wizard asks.
            (
                &[],
                if command == "wizard" {
                    None
                } else {
                    Some(Auto)
                },
            ),
        ];
        for (flags, want) in cases {
            // Before and after --target: a bare --trial takes no value
            // that starts with a dash.
            let mut before = vec![command];
            before.extend_from_slice(flags);
            before.extend_from_slice(&target);
            let mut after = vec![command];
            after.extend_from_slice(&target);
            after.extend_from_slice(flags);
            for args in [before, after] {
                assert_eq!(trial(&args), want, "{args:?}");
            }
        }
        for wrong in [
            ["pimigrate", command, "--trial=always", "--no-trial"],
            ["pimigrate", command, "--trial", "sometimes"],
        ] {
            assert!(Cli::try_parse_from(wrong).is_err(), "{wrong:?}");
        }
    }
}

/// The Ansible role's argv, end to end on the fixture Pi 3B (no tryboot,
/// so only an explicit trial makes one): `--trial always` with a space
/// plans a trial boot, `--trial auto` and `--no-trial` none.
#[test]
fn the_ansible_roles_trial_spelling_plans_a_trial() {
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "--json", "--target", "/dev/sda"];
        args.extend_from_slice(extra);
        let output = on_fixture("pi3b", &args);
        assert_eq!(exit_code(&output), 0, "{args:?}: {}", stderr(&output));
        json(&output)["trial_boot"].clone()
    };
    assert!(!plan(&["--trial", "always"]).is_null());
    assert!(!plan(&["--trial"]).is_null());
    assert!(plan(&["--trial", "auto"]).is_null());
    assert!(plan(&["--no-trial"]).is_null());
}

/// `-y` is `--yes` in every command that has `--yes`.
#[test]
fn every_yes_has_its_short_y() {
    let command = Cli::command();
    let mut with_yes = Vec::new();
    for sub in command.get_subcommands() {
        if let Some(yes) = sub.get_arguments().find(|a| a.get_id() == "yes") {
            assert_eq!(yes.get_short(), Some('y'), "{} --yes", sub.get_name());
            with_yes.push(sub.get_name().to_string());
        }
    }
    assert_eq!(
        with_yes,
        ["bench", "migrate", "rollback", "wizard", "sync"],
        "the commands with --yes changed: check this test"
    );
    for args in [
        &["migrate", "-y", "--target", "/dev/sda"][..],
        &["wizard", "-y", "--target", "/dev/sda"],
        &["rollback", "-y"],
        &["sync", "-y"],
        &["bench", "--destructive", "-y", "/dev/sdb"],
    ] {
        parse(args);
    }
}

/// Flags only the tests and the testbed use.
const TEST_ONLY: [&str; 5] = ["sysroot", "seed", "disk-signature", "file", "all"];

fn help_of(path: &[&str]) -> String {
    let mut command = Cli::command();
    command.build();
    let mut sub = &mut command;
    for name in path {
        sub = sub.find_subcommand_mut(name).unwrap();
    }
    sub.render_long_help().to_string()
}

/// The test-only flags are in no `--help` (nor in the man pages, made
/// from the same definition: xtask/tests/) and they still work (the tests
/// use them).
#[test]
fn test_only_flags_are_hidden_but_work() {
    let mut helps = vec![("pimigrate".to_string(), help_of(&[]))];
    for name in pimigrate::exit::COMMANDS {
        helps.push((name.to_string(), help_of(&[name])));
    }
    for (name, help) in &helps {
        for flag in TEST_ONLY {
            // `devices --all` (loop and ram devices) is for people.
            if flag == "all" && name == "devices" {
                assert!(help.contains("--all"), "devices --all is not hidden");
                continue;
            }
            assert!(
                !help.contains(&format!("--{flag} ")),
                "{name} --help shows --{flag}"
            );
            assert!(
                !help.contains(&format!("--{flag}\n")),
                "{name} --help shows --{flag}"
            );
        }
    }
    let output = on_fixture(
        "pi4",
        &[
            "plan",
            "--json",
            "--target",
            "/dev/sda",
            "--seed",
            "1",
            "--disk-signature",
            "1234abcd",
        ],
    );
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(json(&output)["table"]["disk_id"], "1234abcd");
    parse(&["recommend", "--all", "--reuse"]);
    parse(&["bench", "--file", "/tmp/x"]);
    parse(&["sync", "--seed", "3"]);
}

/// One value name for one kind of value: a size is SIZE, seconds are
/// SECS, a device DEV; and a flag has the same value name wherever it is.
#[test]
fn one_value_name_for_one_kind_of_value() {
    let mut command = Cli::command();
    command.build();
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    for sub in std::iter::once(&command).chain(command.get_subcommands()) {
        for arg in sub.get_arguments() {
            let Some(names) = arg.get_value_names() else {
                continue;
            };
            let value = names
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ");
            for wrong in ["BYTES", "S", "SECONDS", "DISK", "DEVICE"] {
                assert_ne!(value, wrong, "{} --{}", sub.get_name(), arg.get_id());
            }
            let id = arg.get_id().to_string();
            if let Some(before) = seen.insert(id.clone(), value.clone()) {
                assert_eq!(before, value, "--{id} is named two ways");
            }
        }
    }
    for (flag, value) in [
        ("size", "SIZE"),
        ("boot_size", "SIZE"),
        ("runtime", "SECS"),
        ("stall_timeout", "SECS"),
        ("target", "DEV"),
        ("trial", "WHEN"),
    ] {
        assert_eq!(seen.get(flag).map(String::as_str), Some(value), "--{flag}");
    }
}

/// Every command's `--help` ends with its rows of the one exit-status
/// table, 130 among them; `pimigrate --help` has all of it. (The man
/// pages' EXIT STATUS: xtask/tests/.)
#[test]
fn every_help_has_the_exit_table() {
    // Hidden subcommands (what a trial boot's own units run) are not for
    // people and have no help page.
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect();
    assert_eq!(
        names,
        pimigrate::exit::COMMANDS,
        "exit::COMMANDS is out of date"
    );
    for name in &names {
        let help = help_of(&[name.as_str()]);
        let table = pimigrate::exit::help_text(Some(name));
        assert!(
            help.contains(&table),
            "{name} --help lacks\n{table}\nin\n{help}"
        );
        assert!(table.contains("\n  130  "), "{name}: {table}");
    }
    assert!(help_of(&[]).contains(&pimigrate::exit::help_text(None)));
    // The binary prints it too, after the options.
    let output = pimigrate().args(["verify", "--help"]).output().unwrap();
    assert!(stdout(&output).contains(&pimigrate::exit::help_text(Some("verify"))));
}

/// `verify` reads, and its about line says that `--commit` writes.
#[test]
fn verify_says_that_commit_writes() {
    let command = Cli::command();
    let verify = command.find_subcommand("verify").unwrap();
    let about = verify.get_about().unwrap().to_string();
    assert!(about.contains("--commit writes"), "{about}");
}

/// The disk a command writes is `--target` in every command that writes
/// one; sync's old `--to` is the same flag (shown as its alias), and its
/// old `--fresh` is `--erase`, which `recommend --fresh` (measure again)
/// no longer shares a name with.
#[test]
fn the_disk_to_write_is_target_everywhere_and_old_spellings_still_work() {
    let command = Cli::command();
    for name in ["plan", "migrate", "wizard", "sync"] {
        let sub = command.find_subcommand(name).unwrap();
        let target = sub
            .get_arguments()
            .find(|a| a.get_id() == "target")
            .unwrap_or_else(|| panic!("{name} has no --target"));
        assert_eq!(target.get_long(), Some("target"), "{name}");
        assert!(
            sub.get_arguments().all(|a| a.get_long() != Some("to")),
            "{name}: --to is a flag of its own"
        );
    }
    let sync = |args: &[&str]| match parse(args).command.unwrap() {
        Command::Sync(sync) => sync,
        other => panic!("not sync: {other:?}"),
    };
    for spelling in [
        &["sync", "--target", "/dev/sdb", "--erase"][..],
        &["sync", "--to", "/dev/sdb", "--erase"],
        &["sync", "--to", "/dev/sdb", "--fresh"],
        &["sync", "--target=/dev/sdb", "--fresh"],
    ] {
        let args = sync(spelling);
        assert_eq!(
            args.target.as_deref(),
            Some(std::path::Path::new("/dev/sdb")),
            "{spelling:?}"
        );
        assert!(args.erase, "{spelling:?}");
        let request = args.request();
        assert!(request.erase && request.target.is_some(), "{spelling:?}");
    }
    let help = help_of(&["sync"]);
    assert!(help.contains("[alias: --to]"), "{help}");
    assert!(help.contains("--erase"), "{help}");
    assert!(
        !help.contains("--fresh"),
        "sync --help teaches --fresh:\n{help}"
    );
    // `recommend --fresh` keeps its one meaning.
    assert!(help_of(&["recommend"]).contains("--fresh"));
}

/// Wrong invocations, a few of every command's: each exits 2 (a usage
/// error, not 1), names the argument that is wrong or missing, and shows
/// the command's own usage line, not the top-level one. Run as a normal
/// user would run them, off a terminal (stdin is not one here): no usage
/// error waits for root or reads the system first.
#[test]
fn wrong_invocations_exit_2_name_the_argument_and_show_the_commands_usage() {
    let cases: &[(&[&str], &str)] = &[
        (&["plan"], "--target"),
        (
            &["plan", "--layout", "sideways", "--target", "/dev/sda"],
            "--layout",
        ),
        (&["plan", "--target"], "--target"),
        (&["migrate"], "--target"),
        (&["migrate", "--yes"], "--target"),
        (&["migrate", "--dry-run", "--resume"], "--resume"),
        (
            &[
                "migrate",
                "--target",
                "/dev/sda",
                "--trial=always",
                "--no-trial",
            ],
            "--no-trial",
        ),
        (&["wizard", "--yes"], "--target"),
        (&["wizard"], "--yes"),
        (&["--json", "wizard"], "--json"),
        (
            &["wizard", "--json", "--yes", "--target", "/dev/sda"],
            "--json",
        ),
        (&["wizard", "--quick", "--no-bench"], "--no-bench"),
        (&["sync", "--erase"], "--target"),
        (&["sync", "--fresh"], "--target"),
        (
            &["sync", "--install-timer", "daily", "--target", "/dev/sdb"],
            "--target",
        ),
        (&["sync", "--remove-timer", "--dry-run"], "--dry-run"),
        (&["sync", "--stall-timeout", "0"], "--stall-timeout"),
        (&["recommend", "--reuse", "--fresh"], "--fresh"),
        (&["recommend", "--runtime", "soon"], "--runtime"),
        (&["bench", "--yes"], "--destructive"),
        (&["bench", "--size", "lots"], "--size"),
        (&["verify", "--quick", "--no-bench"], "--no-bench"),
        (&["rollback", "--force"], "--force"),
        (&["devices", "--target", "/dev/sda"], "--target"),
        (&["status", "--login", "extra"], "extra"),
    ];
    for (args, named) in cases {
        let output = pimigrate()
            .args(*args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = stderr(&output);
        assert_eq!(exit_code(&output), 2, "{args:?}:\n{said}");
        assert!(
            said.contains(named),
            "{args:?} does not name {named}:\n{said}"
        );
        let command = args.iter().find(|a| !a.starts_with('-')).unwrap();
        assert!(
            said.contains(&format!("Usage: pimigrate {command} ")),
            "{args:?}: not {command}'s own usage:\n{said}"
        );
        assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
    }
}
