//! Findings the owner has heard enough of: `/etc/pimigrate/check.conf`
//! lists codes to ignore (`ignore power`), and so does `status --check
//! --ignore CODE` for one run. A muted finding is still listed, marked,
//! but changes neither the exit status nor the login message. A line the
//! file cannot mean, or a code no check has, is a warning of its own
//! (`check-conf`): a typo must not mute nothing in silence.

use super::CODES;
use crate::check::Finding;
use crate::host::Host;

/// Where the owner mutes findings (a view path).
pub const CONF: &str = "/etc/pimigrate/check.conf";

const CODE: &str = "check-conf";

/// What check.conf says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conf {
    /// The codes to ignore.
    pub ignore: Vec<String>,
    /// What could not be understood, line by line.
    pub problems: Vec<String>,
}

/// Reads check.conf's text: `ignore CODE...` lines, `#` comments, blank
/// lines.
pub fn parse(text: &str) -> Conf {
    let mut conf = Conf::default();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        match words.next() {
            None => {}
            Some("ignore") => {
                let codes: Vec<&str> = words.collect();
                if codes.is_empty() {
                    conf.problems
                        .push(format!("line {}: `ignore` names no code", number + 1));
                }
                for code in codes {
                    match CODES.contains(&code) {
                        true => conf.ignore.push(code.to_string()),
                        false => conf.problems.push(format!(
                            "line {}: no check has the code {code:?} (the codes: {})",
                            number + 1,
                            CODES.join(", ")
                        )),
                    }
                }
            }
            Some(_) => conf.problems.push(format!(
                "line {}: {line:?} is not understood (a line is `ignore CODE`)",
                number + 1
            )),
        }
    }
    conf
}

/// Marks the findings whose codes check.conf or `ignore` name as muted;
/// what check.conf holds that cannot be meant becomes a finding.
pub fn apply(host: &Host, ignore: &[String], findings: &mut Vec<Finding>) {
    let path = host.path(CONF);
    let conf = match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Conf::default(),
        Err(err) => Conf {
            problems: vec![format!("it cannot be read: {err}")],
            ..Conf::default()
        },
    };
    for problem in &conf.problems {
        findings.push(
            Finding::warning(CODE, format!("{CONF}: {problem}"))
                .fix(format!("edit {CONF}: one `ignore CODE` a line")),
        );
    }
    for finding in findings.iter_mut() {
        let code = finding.code;
        finding.muted = conf.ignore.iter().any(|c| c == code) || ignore.iter().any(|c| c == code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_lines_comments_and_what_is_not_understood() {
        let conf = parse(
            "# the Pi 5 runs on a 3 A supply on purpose\nignore usb-current\n\n\
             ignore power standby-age   # both\nignore pwoer\nmute boot-order\nignore\n",
        );
        assert_eq!(conf.ignore, ["usb-current", "power", "standby-age"]);
        assert_eq!(conf.problems.len(), 3, "{:?}", conf.problems);
        assert!(conf.problems[0].starts_with("line 5: no check has the code \"pwoer\""));
        assert!(conf.problems[1].contains("\"mute boot-order\" is not understood"));
        assert!(conf.problems[2].contains("line 7: `ignore` names no code"));
    }

    #[test]
    fn a_muted_finding_stays_listed_and_a_bad_line_is_said() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/pimigrate")).unwrap();
        std::fs::write(
            dir.path().join("etc/pimigrate/check.conf"),
            "ignore power\nignore nonsense\n",
        )
        .unwrap();
        let host = Host::with_root(dir.path());
        let mut findings = vec![
            Finding::warning("power", "under-voltage since boot".into()),
            Finding::failure("boot-order", "BOOT_ORDER is 0xf41".into()),
            Finding::failure("ids-unique", "duplicate ids".into()),
        ];
        apply(&host, &["ids-unique".to_string()], &mut findings);
        let muted: Vec<(&str, bool)> = findings.iter().map(|f| (f.code, f.muted)).collect();
        assert_eq!(
            muted,
            [
                ("power", true),
                ("boot-order", false),
                ("ids-unique", true),
                ("check-conf", false)
            ]
        );
        assert!(findings[3].message.contains("\"nonsense\""));
    }
}
