//! Unified diffs of boot-file edits, so a plan can show exactly what it will
//! write before it writes anything.

use similar::TextDiff;

/// Number of unchanged lines shown around each change, as `git diff` does.
const CONTEXT_LINES: usize = 3;

/// A git-style unified diff between two versions of a file, with 3 lines of
/// context and `\ No newline at end of file` where a version lacks a final
/// newline. Returns an empty string when the versions are equal.
///
/// Boot files are validated as UTF-8 before they are edited; should either
/// side not be, invalid bytes are shown as U+FFFD rather than failing.
pub fn unified_diff(old_label: &str, new_label: &str, old: &[u8], new: &[u8]) -> String {
    if old == new {
        return String::new();
    }
    let old_text = String::from_utf8_lossy(old);
    let new_text = String::from_utf8_lossy(new);
    let diff = TextDiff::from_lines(old_text.as_ref(), new_text.as_ref());
    diff.unified_diff()
        .context_radius(CONTEXT_LINES)
        .missing_newline_hint(true)
        .header(old_label, new_label)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_inputs_give_empty_diff() {
        assert_eq!(unified_diff("a", "b", b"x\n", b"x\n"), "");
        assert_eq!(unified_diff("a", "b", b"", b""), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = b"1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = b"1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let diff = unified_diff("a/fstab", "b/fstab", old, new);
        assert_eq!(
            diff,
            "--- a/fstab\n+++ b/fstab\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn marks_missing_final_newline() {
        let diff = unified_diff("a", "b", b"root=/dev/sda2", b"root=/dev/sdb2");
        assert_eq!(
            diff,
            "--- a\n+++ b\n@@ -1 +1 @@\n-root=/dev/sda2\n\\ No newline at end of file\n+root=/dev/sdb2\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn adding_a_final_newline_shows_up() {
        let diff = unified_diff("a", "b", b"x", b"x\n");
        assert_eq!(
            diff,
            "--- a\n+++ b\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+x\n"
        );
    }

    #[test]
    fn crlf_lines_are_diffed_as_lines() {
        let diff = unified_diff("a", "b", b"a\r\nb\r\n", b"a\r\nc\r\n");
        assert_eq!(diff, "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n");
    }
}
