//! The man pages and shell completions, generated from the clap
//! definition: one page a subcommand a person uses, each ending with its
//! rows of the exit-status table, none showing the flags only the tests
//! use, and every page rendered by groff without a warning.

use clap::CommandFactory;
use pimigrate::cli::Cli;
use std::process::Command;
use xtask::man;

/// The subcommands a person uses (hidden ones, which a trial boot's own
/// units run, have no page).
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn the_generated_files_are_complete() {
    let dir = tempfile::tempdir().unwrap();
    let written = man::write_all(dir.path()).unwrap();
    for path in &written {
        assert!(
            std::fs::metadata(path).unwrap().len() > 0,
            "{path:?} is empty"
        );
    }
    let page = std::fs::read_to_string(dir.path().join("man/pimigrate.1")).unwrap();
    for sub in subcommands() {
        assert!(
            page.contains(&format!("pimigrate\\-{sub}")),
            "pimigrate(1) does not name {sub}"
        );
        assert!(
            dir.path().join(format!("man/pimigrate-{sub}.1")).exists(),
            "no page for {sub}"
        );
    }
    for (_, name) in man::SHELLS {
        assert!(dir.path().join(name).exists(), "no {name}");
    }
    // bash parses its completion script (bash is on every machine the
    // tests run on; the zsh and fish scripts come from the same generator).
    let status = Command::new("bash")
        .arg("-n")
        .arg(dir.path().join("pimigrate.bash"))
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_man_pages_render_without_warnings() {
    // groff renders what `man` shows. It may be missing on a developer's
    // build machine, never in CI (scripts/test.sh installs groff-base).
    let dir = tempfile::tempdir().unwrap();
    let written = man::write_all(dir.path()).unwrap();
    let pages: Vec<_> = written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "1"))
        .collect();
    assert!(pages.len() > subcommands().len(), "{pages:?}");
    for page in pages {
        let output = match Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(page)
            .output()
        {
            Ok(output) => output,
            Err(err) if std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("skipping: cannot run groff ({err}); install groff-base");
                return;
            }
            Err(err) => panic!("CI=true and groff cannot run ({err}): install groff-base"),
        };
        assert!(output.status.success(), "{page:?}");
        let warnings = String::from_utf8_lossy(&output.stderr);
        assert!(warnings.trim().is_empty(), "{page:?}: {warnings}");
    }
}

/// Flags only the tests and the testbed use are on no man page (`devices
/// --all` is for people).
#[test]
fn no_man_page_shows_a_test_only_flag() {
    let mut pages = vec![(
        "pimigrate".to_string(),
        String::from_utf8(man::man_page().unwrap()).unwrap(),
    )];
    for (file, page) in man::subcommand_man_pages().unwrap() {
        pages.push((file, String::from_utf8(page).unwrap()));
    }
    for (name, man) in &pages {
        for flag in ["sysroot", "seed", "disk-signature", "file", "all"] {
            if flag == "all" && name == "pimigrate-devices.1" {
                continue;
            }
            let roff = format!("\\-\\-{}", flag.replace('-', "\\-"));
            assert!(
                !man.contains(&format!("{roff}\\fR")) && !man.contains(&format!("{roff} ")),
                "{name} shows --{flag}"
            );
        }
    }
    let devices = &pages
        .iter()
        .find(|(n, _)| n == "pimigrate-devices.1")
        .unwrap()
        .1;
    assert!(devices.contains("\\-\\-all"), "devices --all is missing");
}

/// Every page ends with its command's rows of the one exit-status table
/// (130 among them), and pimigrate(1) has all of it, once.
#[test]
fn every_man_page_has_the_exit_table() {
    let pages = man::subcommand_man_pages().unwrap();
    for name in pimigrate::exit::COMMANDS {
        let page = pages
            .iter()
            .find(|(file, _)| file == &format!("pimigrate-{name}.1"))
            .unwrap_or_else(|| panic!("no page for {name}"));
        let page = String::from_utf8_lossy(&page.1);
        let table = man::exit_status(Some(name));
        assert!(page.contains(&table), "{name}(1)");
        assert!(table.contains("\\fB130\\fR"), "{name}: {table}");
        for row in pimigrate::exit::rows(Some(name)) {
            assert!(
                table.contains(&format!("\\fB{}\\fR", row.code)),
                "{name}: {}",
                row.code
            );
        }
        assert!(
            !page.contains(".SH EXTRA"),
            "{name}(1) has clap's EXTRA section"
        );
    }
    let top = String::from_utf8(man::man_page().unwrap()).unwrap();
    assert!(top.contains(&man::exit_status(None)));
    assert_eq!(top.matches(".SH \"EXIT STATUS\"").count(), 1);
}
