//! Settings files in `/etc/default/` (`KEY=value` lines that a shell script
//! sources), read and edited byte for byte. Written for Debian's
//! `/etc/default/raspi-firmware`, whose `ROOTPART=` the raspi-firmware
//! kernel and initramfs hooks write into cmdline.txt as `root=` on every
//! update: editing cmdline.txt alone would be undone by the next upgrade.
//!
//! Only plain assignments are understood: `KEY=value`, `KEY="value"`,
//! `KEY='value'`, optionally after `export `. A value with `$`, a backquote
//! or whitespace outside quotes depends on the shell, and is refused rather
//! than guessed.

use super::text::{decode, join_lines, preferred_ending, split_lines, NotText, RawLine};

/// Why a defaults file cannot be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefaultsError {
    #[error("it is not text (a NUL byte or invalid UTF-8 at byte {offset})")]
    NotText { offset: usize },
    /// The shell would compute the value; pimigrate cannot know it.
    #[error("line {line} sets {key} to {value}, which the shell computes ($, backquotes or spaces); set it to a plain value")]
    NotPlain {
        line: usize,
        key: String,
        value: String,
    },
}

impl From<NotText> for DefaultsError {
    fn from(e: NotText) -> Self {
        match e {
            NotText::Nul { offset } | NotText::InvalidUtf8 { offset } => {
                DefaultsError::NotText { offset }
            }
        }
    }
}

/// One assignment: where its value sits on the line, and how it is quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Assignment {
    index: usize,
    /// Byte range of the value inside the quotes (if any).
    value: std::ops::Range<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    lines: Vec<RawLine>,
}

impl Defaults {
    pub fn parse(bytes: &[u8]) -> Result<Defaults, DefaultsError> {
        Ok(Defaults {
            lines: split_lines(decode(bytes)?),
        })
    }

    /// The value `key` has once the file is sourced: its last assignment's,
    /// unquoted; `None` when no line assigns it (commented-out lines do not).
    pub fn get(&self, key: &str) -> Result<Option<String>, DefaultsError> {
        self.check_plain(key)?;
        match self.last_assignment(key) {
            None => Ok(None),
            Some(a) => {
                let value = &self.lines[a.index].content[a.value.clone()];
                Ok(Some(value.to_string()))
            }
        }
    }

    /// Sets `key`: replaces the value of its last assignment (keeping its
    /// quotes), or appends `KEY=value` under `comment` when none assigns it.
    pub fn set(&mut self, key: &str, value: &str, comment: &str) -> Result<(), DefaultsError> {
        self.check_plain(key)?;
        match self.last_assignment(key) {
            Some(a) => self.lines[a.index].content.replace_range(a.value, value),
            None => {
                let ending = preferred_ending(&self.lines).to_string();
                if let Some(last) = self.lines.last_mut() {
                    if last.ending.is_empty() {
                        last.ending = ending.clone();
                    }
                }
                for content in [format!("# {comment}"), format!("{key}={value}")] {
                    self.lines.push(RawLine {
                        content,
                        ending: ending.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        join_lines(&self.lines)
    }

    /// Refuses when any assignment of `key` is one the shell computes.
    pub fn check_plain(&self, key: &str) -> Result<(), DefaultsError> {
        for (index, line) in self.lines.iter().enumerate() {
            if let Some((found, raw, _)) = split_assignment(&line.content) {
                if found == key && unquoted_range(raw).is_none() {
                    return Err(DefaultsError::NotPlain {
                        line: index + 1,
                        key: key.to_string(),
                        value: raw.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    fn last_assignment(&self, key: &str) -> Option<Assignment> {
        let mut found = None;
        for (index, line) in self.lines.iter().enumerate() {
            let Some((name, raw, start)) = split_assignment(&line.content) else {
                continue;
            };
            if name != key {
                continue;
            }
            if let Some(inner) = unquoted_range(raw) {
                found = Some(Assignment {
                    index,
                    value: start + inner.start..start + inner.end,
                });
            }
        }
        found
    }
}

/// `KEY=raw` on a line (after optional indentation and `export `): the key,
/// the raw value up to the end of the line, and where the value starts.
fn split_assignment(line: &str) -> Option<(&str, &str, usize)> {
    let trimmed = line.trim_start();
    let mut offset = line.len() - trimmed.len();
    let body = match trimmed.strip_prefix("export ") {
        Some(rest) => {
            let rest_trimmed = rest.trim_start();
            offset += trimmed.len() - rest_trimmed.len();
            rest_trimmed
        }
        None => trimmed,
    };
    let (key, _) = body.split_once('=')?;
    let is_name = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if !is_name {
        return None;
    }
    let start = offset + key.len() + 1;
    let raw = line[start..].trim_end();
    Some((key, raw, start))
}

/// The range of a plain value inside `raw` (inside its quotes, if quoted),
/// or `None` when the shell would compute it. A trailing `# comment` after
/// whitespace is allowed.
fn unquoted_range(raw: &str) -> Option<std::ops::Range<usize>> {
    let computed = |s: &str| s.contains(['$', '`', '\\']);
    let end_ok = |rest: &str| {
        rest.is_empty()
            || rest.trim_start().starts_with('#') && rest.starts_with(char::is_whitespace)
    };
    for quote in ['"', '\''] {
        if let Some(inner) = raw.strip_prefix(quote) {
            let close = inner.find(quote)?;
            let value = &inner[..close];
            if (quote == '"' && computed(value)) || !end_ok(&inner[close + 1..]) {
                return None;
            }
            return Some(1..1 + close);
        }
    }
    let value_end = raw.find(char::is_whitespace).unwrap_or(raw.len());
    let value = &raw[..value_end];
    if computed(value)
        || value.contains(['"', '\'', ';', '(', ')', '&', '|'])
        || !end_ok(&raw[value_end..])
    {
        return None;
    }
    Some(0..value_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file as Debian's raspi-firmware package ships it (its ROOTPART
    /// paragraph), and as Debian's raspi images set it.
    const SHIPPED: &str = "# Filesystem to mount on root. If not specified, find what partition\n# is mounted as the root using 'findmnt -n --output=source /'; if none\n# is reported, fall back to the Raspberry's most usual /dev/mmcblk0p2.\n# but you can specify otherwise, including booting by partition label\n# (i.e. ROOTPART=\"LABEL=root\")\n#\n#ROOTPART=/dev/mmcblk0p2\n\n#KERNEL=\"auto\"\n";

    #[test]
    fn commented_out_is_unset_and_setting_appends() {
        let mut file = Defaults::parse(SHIPPED.as_bytes()).unwrap();
        assert_eq!(file.get("ROOTPART").unwrap(), None);
        file.set("ROOTPART", "PARTUUID=1a2b3c4d-02", "moved")
            .unwrap();
        let text = String::from_utf8(file.to_bytes()).unwrap();
        assert_eq!(
            text,
            format!("{SHIPPED}# moved\nROOTPART=PARTUUID=1a2b3c4d-02\n")
        );
        assert_eq!(
            Defaults::parse(text.as_bytes())
                .unwrap()
                .get("ROOTPART")
                .unwrap()
                .as_deref(),
            Some("PARTUUID=1a2b3c4d-02")
        );
    }

    #[test]
    fn the_last_assignment_is_replaced_inside_its_quotes() {
        for (line, expected) in [
            (
                "ROOTPART=LABEL=RASPIROOT\n",
                "ROOTPART=PARTUUID=1a2b3c4d-02\n",
            ),
            (
                "ROOTPART=\"LABEL=root\"  # mine\r\n",
                "ROOTPART=\"PARTUUID=1a2b3c4d-02\"  # mine\r\n",
            ),
            (
                "export ROOTPART='/dev/mmcblk0p2'",
                "export ROOTPART='PARTUUID=1a2b3c4d-02'",
            ),
        ] {
            let text = format!("CMA=64M\n{line}");
            let mut file = Defaults::parse(text.as_bytes()).unwrap();
            assert!(file.get("ROOTPART").unwrap().is_some());
            file.set("ROOTPART", "PARTUUID=1a2b3c4d-02", "unused")
                .unwrap();
            assert_eq!(
                String::from_utf8(file.to_bytes()).unwrap(),
                format!("CMA=64M\n{expected}")
            );
        }
    }

    #[test]
    fn computed_values_are_refused() {
        for line in [
            "ROOTPART=$(findmnt -n -o source /)\n",
            "ROOTPART=\"UUID=$U\"\n",
            "ROOTPART=a b\n",
        ] {
            let mut file = Defaults::parse(line.as_bytes()).unwrap();
            assert!(
                matches!(
                    file.set("ROOTPART", "x", "c"),
                    Err(DefaultsError::NotPlain { .. })
                ),
                "{line}"
            );
        }
    }
}
