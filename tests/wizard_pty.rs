//! The wizard as a person meets it: the real binary in a terminal (tmux),
//! answered with keys, including Esc and Ctrl-C at a prompt.

use crate::common;

use common::fixture;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own (its own socket), so tests never touch a
/// developer's sessions; killed when dropped.
struct Terminal {
    socket: String,
}

const SESSION: &str = "wizard";

impl Terminal {
    /// Starts `command` in a 160x50 terminal; `None` (the test passes with
    /// a note) when tmux is missing outside CI.
    fn start(name: &str, command: &str) -> Option<Terminal> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "tmux is needed for the wizard's terminal tests (Debian package: tmux)"
            );
            eprintln!("skipping: tmux is not installed (runs in CI)");
            return None;
        }
        let terminal = Terminal {
            socket: format!("pimigrate-{name}-{}", std::process::id()),
        };
        // The shell reports the exit code and keeps the pane open, so the
        // last screen can be read after pimigrate has gone.
        let shell = format!("{command}; echo \"EXITED rc=$?\"; sleep 120");
        terminal.tmux(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            "160",
            "-y",
            "50",
            &shell,
        ]);
        Some(terminal)
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("running tmux");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The screen and what scrolled off it.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-500", "-t", SESSION])
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited 30 s for {text:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Presses keys as tmux names them: "Enter", "Down", "Escape", "C-c".
    fn press(&self, keys: &[&str]) {
        for key in keys {
            self.tmux(&["send-keys", "-t", SESSION, key]);
            // A person does not type faster than the prompt redraws.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", SESSION, "-l", text]);
    }

    /// The program stopped as a backed-out prompt must: "nothing was
    /// changed", exit 130, the cursor shown again. The last screen.
    fn assert_stopped(&self) -> String {
        let screen = self.wait_for("EXITED rc=");
        assert!(screen.contains("Stopped: nothing was changed."), "{screen}");
        assert!(screen.contains("EXITED rc=130"), "{screen}");
        assert!(self.cursor_visible(), "the cursor stayed hidden");
        screen
    }

    /// The screen with its colours and attributes, as SGR escapes.
    fn styled_screen(&self) -> String {
        self.tmux(&[
            "capture-pane",
            "-p",
            "-e",
            "-J",
            "-S",
            "-500",
            "-t",
            SESSION,
        ])
    }

    fn cursor_visible(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", SESSION, "#{cursor_flag}"])
            .trim()
            == "1"
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.expect("walking the fixture"))
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// The command line for a fixture machine. Its state directory (the
/// default, inside the fixture) holds no journal, so the flow starts fresh.
fn pimigrate_on(machine: &str, args: &str) -> String {
    format!(
        "{} --sysroot {} {args}",
        env!("CARGO_BIN_EXE_pimigrate"),
        fixture(machine).display()
    )
}

#[test]
fn ctrl_c_at_a_prompt_stops_with_nothing_changed() {
    let root = fixture("pi4");
    let before = snapshot(&root);
    // No subcommand: on a terminal, pimigrate starts the wizard.
    let Some(term) = Terminal::start("ctrlc", &pimigrate_on("pi4", "")) else {
        return;
    };
    term.wait_for("What will not happen");
    term.wait_for("Benchmark the drives first?");
    term.press(&["Down", "Down", "Enter"]); // Skip
    term.wait_for("Benchmarks skipped.");
    term.wait_for("Which disk should the system move to?");
    term.press(&["Enter"]); // the only candidate, /dev/sda
    term.wait_for("can boot from USB");
    term.wait_for("What should move?");
    term.press(&["Down"]); // looking at "Full", then thinking better of it
    term.press(&["C-c"]);
    let screen = term.assert_stopped();
    assert!(!screen.contains("Plan:"), "no plan after Ctrl-C:\n{screen}");
    assert_eq!(before, snapshot(&root), "the fixture changed");
}

#[test]
fn escape_at_the_first_question_stops_too() {
    let Some(term) = Terminal::start("esc", &pimigrate_on("pi4", "wizard")) else {
        return;
    };
    term.wait_for("Benchmark the drives first?");
    term.press(&["Escape"]);
    term.assert_stopped();
}

/// The pi4 fixture's wizard, answered with the defaults up to the typed
/// confirmation; the screen at that prompt.
fn up_to_the_confirmation(name: &str) -> Option<(Terminal, String)> {
    let term = Terminal::start(name, &pimigrate_on("pi4", "wizard --no-bench --seed 3"))?;
    term.wait_for("Which disk should the system move to?");
    term.press(&["Enter"]);
    term.wait_for("What should move?");
    term.press(&["Enter"]); // root only
    term.wait_for("Boot the moved system once on trial");
    term.press(&["Enter"]); // yes, the default
    let screen = term.wait_for("Type its name (sda) to go on");
    Some((term, screen))
}

#[test]
fn escape_at_the_typed_confirmation_stops_too() {
    let root = fixture("pi4");
    let before = snapshot(&root);
    let Some((term, _)) = up_to_the_confirmation("confirm-esc") else {
        return;
    };
    term.type_text("sd");
    term.press(&["Escape"]);
    term.assert_stopped();
    assert_eq!(before, snapshot(&root), "the fixture changed");
}

#[test]
fn the_name_typed_with_a_correction_is_accepted() {
    let Some((term, _)) = up_to_the_confirmation("confirm-ok") else {
        return;
    };
    term.type_text("sdb");
    term.press(&["BSpace"]);
    term.type_text("a");
    term.press(&["Enter"]);
    let screen = term.wait_for("EXITED rc=");
    // An inspected fixture is never written: the flow ends where the
    // migration would start.
    assert!(screen.contains("Rehearsal over"), "{screen}");
    assert!(screen.contains("EXITED rc=0"), "{screen}");
}

#[test]
fn the_wrong_name_at_the_confirmation_writes_nothing() {
    let root = fixture("pi4");
    let before = snapshot(&root);
    let Some((term, screen)) = up_to_the_confirmation("confirm") else {
        return;
    };
    for part in [
        "Plan: root-only move",
        "--- a/etc/fstab",
        "+++ b/cmdline.pimigrate.txt",
    ] {
        assert!(screen.contains(part), "missing {part:?}:\n{screen}");
    }
    term.type_text("sdb");
    term.press(&["Enter"]);
    let screen = term.wait_for("EXITED rc=");
    assert!(
        screen
            .to_lowercase()
            .contains("not confirmed; nothing was written"),
        "{screen}"
    );
    assert!(screen.contains("EXITED rc=1"), "{screen}");
    assert_eq!(before, snapshot(&root), "the fixture changed");
}

/// SGR escapes that set a colour or an attribute (not the resets tmux
/// writes between cells).
fn styles(screen: &str) -> usize {
    screen.matches("\x1b[").count()
        - ["\x1b[0m", "\x1b[39m", "\x1b[49m", "\x1b[m"]
            .iter()
            .map(|reset| screen.matches(reset).count())
            .sum::<usize>()
}

#[test]
fn no_color_makes_the_prompts_plain() {
    let screen_of = |name: &str, env: &str| {
        let command = format!("env {env} {}", pimigrate_on("pi4", "wizard"));
        let term = Terminal::start(name, &command)?;
        term.wait_for("Benchmark the drives first?");
        let screen = term.styled_screen();
        term.press(&["Escape"]);
        term.assert_stopped();
        Some(screen)
    };
    let Some(coloured) = screen_of("colour", "TERM=xterm-256color") else {
        return;
    };
    let Some(plain) = screen_of("no-color", "TERM=xterm-256color NO_COLOR=1") else {
        return;
    };
    // The check can fail: the same prompt is styled without NO_COLOR.
    assert!(
        styles(&coloured) > 0,
        "no styles without NO_COLOR:\n{coloured:?}"
    );
    assert_eq!(styles(&plain), 0, "styled despite NO_COLOR:\n{plain:?}");
}
