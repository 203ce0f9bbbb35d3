//! The man pages and shell completions, generated from the clap
//! definition ([`pimigrate::cli::Cli`]) so they always match `--help`,
//! each page ending with its rows of the one exit-status table
//! ([`pimigrate::exit`]). The package installs them ([`crate::assets`]),
//! and so does `install-extras` ([`crate::install`]).

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use pimigrate::cli::Cli;
use pimigrate::exit;
use std::path::{Path, PathBuf};

/// The shells the package ships completions for, with the file name each
/// shell's vendor completion directory expects.
pub const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "pimigrate.bash"),
    (Shell::Zsh, "_pimigrate"),
    (Shell::Fish, "pimigrate.fish"),
];

/// Sections clap knows nothing about, appended to `pimigrate(1)` after its
/// EXIT STATUS (from [`pimigrate::exit`]). Plain roff: every line that starts
/// with a dot is a request on purpose.
const EXTRA_SECTIONS: &str = r#".SH ENVIRONMENT
.TP
\fBNO_COLOR\fR
When set (to anything but the empty string), nothing is printed in colour.
Colour is also off when the output is not a terminal.
.SH FILES
.TP
\fI/var/lib/pimigrate/\fR
the migration journal (migration.json) and saved benchmark reports
(reports/); see \fB\-\-state\-dir\fR
.TP
\fI/var/log/pimigrate/migrate\-*.log\fR
a full log of each migration (the plan, every step with its time, errors),
also copied to the new root filesystem; see \fB\-\-log\-dir\fR
.SH NOTES
Every \fB\-\-json\fR document carries a \fBschema\fR field such as
\fBpimigrate.plan/1\fR; the schemas are documented in
\fI/usr/share/doc/pimigrate/docs/json.md.gz\fR (docs/json.md in
pimigrate's source), and how to use pimigrate in
\fI/usr/share/doc/pimigrate/README.md.gz\fR and the pages it links.
"#;

fn command() -> clap::Command {
    Cli::command()
}

/// The `EXIT STATUS` section of a man page: the rows of the exit-status
/// table that apply to `command` (`None`: all, each saying whose it is).
pub fn exit_status(command: Option<&str>) -> String {
    let mut page = String::from(".SH \"EXIT STATUS\"\n");
    for row in exit::rows(command) {
        let meaning = match command {
            Some(_) => row.meaning.to_string(),
            None => format!("{} ({})", row.meaning, exit::who(&row, false)),
        };
        page.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            row.code,
            roff_escape(&meaning)
        ));
    }
    page
}

/// Text made safe for a roff line: backslashes and dashes escaped, and no
/// line starting with a control character.
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// A command as its man page shows it: without the exit-status text that
/// `--help` prints after the options (clap_mangen would render it as a
/// section called EXTRA); the page gets its own EXIT STATUS section from
/// the same table instead.
fn for_man_page(command: clap::Command) -> clap::Command {
    command
        .after_long_help(None::<&str>)
        .after_help(None::<&str>)
}

/// `pimigrate(1)`: the top-level page, listing every subcommand, with exit
/// codes, environment and files.
pub fn man_page() -> Result<Vec<u8>> {
    let command = command();
    let mut out = Vec::new();
    clap_mangen::Man::new(for_man_page(command.clone()))
        .render(&mut out)
        .context("rendering the man page")?;
    out.extend_from_slice(exit_status(None).as_bytes());
    out.extend_from_slice(EXTRA_SECTIONS.as_bytes());
    out.extend_from_slice(see_also(&command).as_bytes());
    Ok(out)
}

/// `pimigrate-<subcommand>(1)` for every subcommand, with its options in
/// full: (file name, page).
pub fn subcommand_man_pages() -> Result<Vec<(String, Vec<u8>)>> {
    // build() propagates the global options (--json, -v, ...) into the
    // subcommands, as `pimigrate <sub> --help` shows them, and names them
    // "pimigrate-<sub>" (title) and "pimigrate <sub>" (synopsis).
    let mut command = command();
    command.build();
    let source = format!("pimigrate {}", command.get_version().unwrap_or_default());
    let mut pages = Vec::new();
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("pimigrate-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(for_man_page(sub.clone()))
            .source(source.clone())
            .render(&mut page)
            .with_context(|| format!("rendering the man page for {name}"))?;
        page.extend_from_slice(exit_status(Some(sub.get_name())).as_bytes());
        page.extend_from_slice(b".SH \"SEE ALSO\"\n\\fBpimigrate\\fR(1)\n");
        pages.push((format!("{name}.1"), page));
    }
    Ok(pages)
}

fn see_also(command: &clap::Command) -> String {
    let pages: Vec<String> = command
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("\\fBpimigrate\\-{}\\fR(1)", s.get_name()))
        .collect();
    format!(".SH \"SEE ALSO\"\n{}\n", pages.join(",\n"))
}

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut command = command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "pimigrate", &mut out);
    out
}

/// Writes every man page to `<dir>/man/` and every completion script to
/// `<dir>/`, and returns the files written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>> {
    let man_dir = dir.join("man");
    std::fs::create_dir_all(&man_dir).with_context(|| format!("creating {}", man_dir.display()))?;
    let mut files = vec![(man_dir.join("pimigrate.1"), man_page()?)];
    for (name, page) in subcommand_man_pages()? {
        files.push((man_dir.join(name), page));
    }
    for (shell, name) in SHELLS {
        files.push((dir.join(name), completions(shell)));
    }
    files
        .into_iter()
        .map(|(path, bytes)| crate::write(&path, bytes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subcommands() -> Vec<String> {
        command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect()
    }

    #[test]
    fn the_man_page_names_every_subcommand() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH pimigrate 1"),
            "{page}"
        );
        for sub in subcommands() {
            assert!(
                page.contains(&format!("pimigrate\\-{sub}(1)")),
                "pimigrate(1) does not name {sub}"
            );
        }
        assert!(page.contains("EXIT STATUS"));
    }

    #[test]
    fn each_subcommand_has_a_page_with_its_options() {
        let pages = subcommand_man_pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for sub in subcommands() {
            assert!(
                names.contains(&format!("pimigrate-{sub}.1").as_str()),
                "{names:?}"
            );
        }
        let plan = &pages
            .iter()
            .find(|(n, _)| n == "pimigrate-plan.1")
            .unwrap()
            .1;
        let plan = String::from_utf8_lossy(plan);
        assert!(plan.contains("\\-\\-target"), "{plan}");
        assert!(
            plan.contains("\\-\\-json"),
            "global options are missing: {plan}"
        );
    }

    #[test]
    fn exit_status_lines_are_plain_text() {
        let page = exit_status(None);
        for line in page.lines().filter(|l| !l.starts_with('.')) {
            assert!(!line.contains(" -"), "unescaped dash: {line}");
        }
        assert!(page.contains("\\fB130\\fR"));
    }

    #[test]
    fn completions_cover_the_subcommands() {
        for (shell, _) in SHELLS {
            let script = String::from_utf8(completions(shell)).unwrap();
            for sub in subcommands() {
                assert!(script.contains(&sub), "{shell} completions lack {sub}");
            }
        }
    }
}
