//! Words written into a systemd unit file the way systemd reads them back:
//! a command line (`ExecStart=`) word by word, and plain values such as
//! `OnCalendar=` and `ReadWritePaths=`.
//!
//! systemd reads a unit in three passes, and each one needs its escape:
//! specifiers (`%n`, `%h` ...) are expanded in the whole value first, so a
//! literal `%` is written `%%`; a command line is then split into words
//! with shell-like quotes and C escapes (`\\`, `\"`, `\n`, `\xNN`), so a
//! word with a space, a quote or a backslash goes in double quotes with
//! its backslashes and quotes escaped; at the start of the process,
//! `$NAME` and `${NAME}` are replaced from the environment, so a literal
//! `$` is written `$$`. (systemd.service(5), "Command lines";
//! systemd.unit(5), "Specifiers".)

use anyhow::{bail, Result};
use std::ffi::OsStr;

/// One word of a command line, as `ExecStart=` must hold it so that the
/// program gets exactly `word` as one argument.
pub fn exec_word(word: &OsStr) -> Result<String> {
    let Some(word) = word.to_str() else {
        bail!(
            "{word:?} is not UTF-8 text, which a systemd unit must be: give it without such bytes"
        );
    };
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%$".contains(c))
        // A lone `;` would end the command (an older systemd's separator).
        && word != ";";
    let mut out = String::with_capacity(word.len() + 2);
    if !plain {
        out.push('"');
    }
    for c in word.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\0' => bail!("an argument cannot hold a NUL byte"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    if !plain {
        out.push('"');
    }
    Ok(out)
}

/// A whole command line: the program, then its arguments.
pub fn exec_line<I, S>(words: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let words = words
        .into_iter()
        .map(|w| exec_word(w.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    Ok(words.join(" "))
}

/// A value that systemd takes as plain text after expanding specifiers
/// (`OnCalendar=`): one line, its `%` doubled.
pub fn plain_value(what: &str, value: &str) -> Result<String> {
    if value.chars().any(|c| c.is_control()) {
        bail!(
            "{what} {value:?}: a unit file's value is one line of text, without control characters"
        );
    }
    Ok(value.replace('%', "%%"))
}

/// A path for a list setting such as `ReadWritePaths=`, which systemd
/// splits at spaces and unquotes, without C escapes: quoted when it holds
/// a space; a quote or a backslash cannot be written there at all.
pub fn path_value(what: &str, path: &std::path::Path) -> Result<String> {
    let Some(text) = path.to_str() else {
        bail!(
            "{what} {}: not UTF-8 text, which a systemd unit must be",
            path.display()
        );
    };
    if !text.starts_with('/') {
        bail!("{what} {text:?}: the service needs an absolute path");
    }
    if text
        .chars()
        .any(|c| c.is_control() || c == '"' || c == '\'' || c == '\\')
    {
        bail!("{what} {text:?}: a path with quotes, backslashes or control characters cannot be given to the service; choose another directory");
    }
    let text = text.replace('%', "%%");
    Ok(if text.contains([' ', '\t']) {
        format!("\"{text}\"")
    } else {
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(w: &str) -> String {
        exec_word(OsStr::new(w)).unwrap()
    }

    #[test]
    fn plain_words_stay_as_they_are() {
        assert_eq!(word("sync"), "sync");
        assert_eq!(word("--yes"), "--yes");
        assert_eq!(word("--exclude=/srv/cache"), "--exclude=/srv/cache");
        assert_eq!(word("/usr/bin/pimigrate"), "/usr/bin/pimigrate");
    }

    #[test]
    fn specifiers_and_variables_are_escaped_even_unquoted() {
        assert_eq!(word("--exclude=/srv/50%"), "--exclude=/srv/50%%");
        assert_eq!(word("--exclude=/srv/$HOME"), "--exclude=/srv/$$HOME");
        assert_eq!(word("%n"), "%%n");
    }

    #[test]
    fn spaces_quotes_and_backslashes_go_in_double_quotes() {
        assert_eq!(word("--exclude=/srv/a b"), "\"--exclude=/srv/a b\"");
        assert_eq!(word("--exclude=/it's"), "\"--exclude=/it's\"");
        assert_eq!(word("--exclude=/a\"b"), "\"--exclude=/a\\\"b\"");
        assert_eq!(word("--exclude=/a\\b"), "\"--exclude=/a\\\\b\"");
        assert_eq!(word("a\nb\tc"), "\"a\\nb\\tc\"");
        assert_eq!(word("bell\u{7}"), "\"bell\\x07\"");
        assert_eq!(word(""), "\"\"");
        assert_eq!(word(";"), "\";\"");
        assert_eq!(word("a;b"), "\"a;b\"");
        assert_eq!(word("50% of $x y"), "\"50%% of $$x y\"");
    }

    #[test]
    fn a_command_line_joins_its_words_with_spaces() {
        let line = exec_line(["/usr/bin/pimigrate", "sync", "--exclude=/a b"]).unwrap();
        assert_eq!(line, "/usr/bin/pimigrate sync \"--exclude=/a b\"");
    }

    #[test]
    fn bytes_that_are_not_text_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        assert!(exec_word(OsStr::from_bytes(b"/srv/\xff")).is_err());
    }

    #[test]
    fn values_and_paths() {
        assert_eq!(
            plain_value("--install-timer", "*-*-* 03:00").unwrap(),
            "*-*-* 03:00"
        );
        assert_eq!(plain_value("x", "50%").unwrap(), "50%%");
        assert!(plain_value("x", "daily\nExecStart=/bin/sh").is_err());
        let path = |p: &str| path_value("--state-dir", std::path::Path::new(p));
        assert_eq!(path("/srv/state").unwrap(), "/srv/state");
        assert_eq!(path("/srv/my state").unwrap(), "\"/srv/my state\"");
        assert_eq!(path("/srv/100%").unwrap(), "/srv/100%%");
        assert!(path("relative").is_err());
        assert!(path("/srv/a\"b").is_err());
        assert!(path("/srv/a\\b").is_err());
    }
}
