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
        Command::Plan(plan) => Some(plan.options().trial),
        Command::Migrate(migrate) => Some(migrate.plan.options().trial),
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

/// The test-only flags are in no `--help` and no man page, and they still
/// work (the tests use them).
#[test]
fn test_only_flags_are_hidden_but_work() {
    let mut pages = vec![(
        "pimigrate".to_string(),
        help_of(&[]),
        String::from_utf8(pimigrate::assets::man_page().unwrap()).unwrap(),
    )];
    for (file, page) in pimigrate::assets::subcommand_man_pages().unwrap() {
        let name = file
            .trim_start_matches("pimigrate-")
            .trim_end_matches(".1")
            .to_string();
        let help = help_of(&[name.as_str()]);
        pages.push((name, help, String::from_utf8(page).unwrap()));
    }
    for (name, help, man) in &pages {
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
            let roff = format!("\\-\\-{}", flag.replace('-', "\\-"));
            assert!(
                !man.contains(&format!("{roff}\\fR")) && !man.contains(&format!("{roff} ")),
                "the man page of {name} shows --{flag}"
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
        ("to", "DEV"),
        ("trial", "WHEN"),
    ] {
        assert_eq!(seen.get(flag).map(String::as_str), Some(value), "--{flag}");
    }
}

/// Every command's `--help` and man page end with its rows of the one
/// exit-status table, 130 among them; `pimigrate --help` has all of it.
#[test]
fn every_help_and_man_page_has_the_exit_table() {
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
    let pages = pimigrate::assets::subcommand_man_pages().unwrap();
    for name in &names {
        let help = help_of(&[name.as_str()]);
        let table = pimigrate::exit::help_text(Some(name));
        assert!(
            help.contains(&table),
            "{name} --help lacks\n{table}\nin\n{help}"
        );
        assert!(table.contains("\n  130  "), "{name}: {table}");
        let page = pages
            .iter()
            .find(|(file, _)| file == &format!("pimigrate-{name}.1"))
            .unwrap();
        let page = String::from_utf8_lossy(&page.1);
        assert!(
            page.contains(&pimigrate::exit::roff(Some(name))),
            "{name}(1)"
        );
        assert!(
            !page.contains(".SH EXTRA"),
            "{name}(1) has clap's EXTRA section"
        );
    }
    assert!(help_of(&[]).contains(&pimigrate::exit::help_text(None)));
    let top = String::from_utf8(pimigrate::assets::man_page().unwrap()).unwrap();
    assert!(top.contains(&pimigrate::exit::roff(None)));
    assert_eq!(top.matches(".SH \"EXIT STATUS\"").count(), 1);
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
