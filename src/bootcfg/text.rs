//! Shared checks for turning raw file bytes into text, and for splitting text
//! into lines without losing their endings.

/// Why a file's bytes are not text we may edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotText {
    /// A NUL byte at this offset: the file is binary or corrupted.
    Nul { offset: usize },
    /// The bytes from this offset are not valid UTF-8.
    InvalidUtf8 { offset: usize },
}

/// Checks that `bytes` are UTF-8 text without NUL bytes.
///
/// Boot files are plain ASCII in practice; a NUL byte or broken UTF-8 means a
/// damaged file (or the wrong file), and editing it would only hide that.
pub(crate) fn decode(bytes: &[u8]) -> Result<&str, NotText> {
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(NotText::Nul { offset });
    }
    std::str::from_utf8(bytes).map_err(|e| NotText::InvalidUtf8 {
        offset: e.valid_up_to(),
    })
}

/// One line of a text file: its content and the ending that followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawLine {
    /// The line without its ending.
    pub content: String,
    /// `"\n"`, `"\r\n"`, or `""` for a last line without a final newline.
    pub ending: String,
}

/// Splits text into lines, keeping each line's ending so that joining
/// `content + ending` over all lines gives back the input exactly.
///
/// An empty input gives no lines; a final newline does not start an extra
/// empty line.
pub(crate) fn split_lines(text: &str) -> Vec<RawLine> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, ending, tail) = match rest.find('\n') {
            Some(pos) => {
                let line = &rest[..pos];
                match line.strip_suffix('\r') {
                    Some(stripped) => (stripped, "\r\n", &rest[pos + 1..]),
                    None => (line, "\n", &rest[pos + 1..]),
                }
            }
            None => (rest, "", ""),
        };
        lines.push(RawLine {
            content: line.to_string(),
            ending: ending.to_string(),
        });
        rest = tail;
    }
    lines
}

/// The line ending a file mostly uses, so appended lines match their
/// neighbours: CRLF if any line ends in CRLF, LF otherwise.
pub(crate) fn preferred_ending(lines: &[RawLine]) -> &'static str {
    if lines.iter().any(|l| l.ending == "\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// Joins lines back into bytes.
pub(crate) fn join_lines(lines: &[RawLine]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line.content.as_bytes());
        out.extend_from_slice(line.ending.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_rejects_nul_and_bad_utf8() {
        assert_eq!(decode(b"ab\0c"), Err(NotText::Nul { offset: 2 }));
        assert_eq!(decode(b"ab\xffc"), Err(NotText::InvalidUtf8 { offset: 2 }));
        assert_eq!(decode(b"abc"), Ok("abc"));
    }

    #[test]
    fn split_and_join_round_trip() {
        for text in ["", "a", "a\n", "a\r\nb", "\n\n", "a\r\n\r\nb\n", "x\ry\n"] {
            let lines = split_lines(text);
            assert_eq!(join_lines(&lines), text.as_bytes(), "{text:?}");
        }
    }

    #[test]
    fn split_reports_endings() {
        let lines = split_lines("a\r\nb\nc");
        let endings: Vec<_> = lines.iter().map(|l| l.ending.as_str()).collect();
        assert_eq!(endings, ["\r\n", "\n", ""]);
        assert_eq!(preferred_ending(&lines), "\r\n");
        assert_eq!(preferred_ending(&split_lines("a\n")), "\n");
    }
}
